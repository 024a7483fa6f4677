//! datum's networking objects (`networking.datumapis.com/v1alpha1`): the `Connector`, whose
//! iroh endpoint the iroh controller publishes, and the `ConnectorClass` that routes it. Read
//! into the iroh planner's [`ConnectorInput`]; the condition the planner decides is written
//! back by [`connector_status`] (for `meshdns render iroh`) and by the controller's status
//! patch.

use k8s_openapi::apimachinery::pkg::apis::meta::v1::{Condition, ObjectMeta};
use kube_core::ResourceExt;
use meshdns_iroh::connector::{CONDITION_TYPE, ConditionPlan, ConnectorInput, record_set_name};
use serde::{Deserialize, Serialize};
use serde_json::{Value, json};

use crate::{ClusterScoped, DATUM_API_VERSION, Namespaced, Rest, resource};

/// datum's `Connector`: an agent that tunnels into a project, here the iroh endpoint it runs.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct Connector {
    /// Standard metadata.
    pub metadata: ObjectMeta,
    /// `spec`.
    #[serde(default)]
    pub spec: ConnectorSpec,
    /// `status`, written by the agent and the controllers.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub status: Option<ConnectorStatus>,
    /// Everything else (`apiVersion`, `kind`, ...).
    #[serde(flatten)]
    pub rest: Rest,
}
resource!(
    Connector,
    "networking.datumapis.com",
    "v1alpha1",
    "Connector",
    "connectors",
    Namespaced
);

/// `Connector.spec`.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ConnectorSpec {
    /// The ConnectorClass that decides which controller serves the Connector.
    #[serde(default)]
    pub connector_class_name: String,
    /// `capabilities` and anything newer.
    #[serde(flatten)]
    pub rest: Rest,
}

/// `Connector.status`.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ConnectorStatus {
    /// Conditions; the iroh controller owns `IrohDNSPublished`.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub conditions: Vec<Condition>,
    /// How to reach the agent.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub connection_details: Option<ConnectionDetails>,
    /// The liveness Lease (same namespace).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub lease_ref: Option<NameRef>,
    /// `capabilities` and anything newer.
    #[serde(flatten)]
    pub rest: Rest,
}

/// `status.connectionDetails`.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ConnectionDetails {
    /// `PublicKey`.
    #[serde(default, rename = "type")]
    pub type_: String,
    /// The iroh endpoint.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub public_key: Option<PublicKeyDetails>,
    /// Anything newer.
    #[serde(flatten)]
    pub rest: Rest,
}

/// `status.connectionDetails.publicKey`: the agent's iroh endpoint.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct PublicKeyDetails {
    /// Endpoint id, 64 hex characters.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub id: Option<String>,
    /// Home relay URL.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub home_relay: Option<String>,
    /// Direct addresses.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub addresses: Vec<ConnectorAddress>,
    /// `discoveryMode` and anything newer.
    #[serde(flatten)]
    pub rest: Rest,
}

/// One direct address of an endpoint.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct ConnectorAddress {
    /// IP address text.
    #[serde(default)]
    pub address: String,
    /// UDP port.
    #[serde(default)]
    pub port: i64,
}

/// `{name}` reference to an object in the same namespace.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct NameRef {
    /// Object name.
    #[serde(default)]
    pub name: String,
}

/// datum's `ConnectorClass` (cluster-scoped): which controller serves Connectors of a class.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct ConnectorClass {
    /// Standard metadata.
    pub metadata: ObjectMeta,
    /// `spec`.
    #[serde(default)]
    pub spec: ConnectorClassSpec,
    /// Everything else.
    #[serde(flatten)]
    pub rest: Rest,
}
resource!(
    ConnectorClass,
    "networking.datumapis.com",
    "v1alpha1",
    "ConnectorClass",
    "connectorclasses",
    ClusterScoped
);

/// `ConnectorClass.spec`.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ConnectorClassSpec {
    /// The controller; the CRD defaults it to `networking.datumapis.com/datum-connect`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub controller_name: Option<String>,
    /// Anything newer.
    #[serde(flatten)]
    pub rest: Rest,
}

impl ConnectorClass {
    /// `spec.controllerName` with the CRD's default applied.
    pub fn controller_name(&self) -> &str {
        self.spec
            .controller_name
            .as_deref()
            .filter(|c| !c.is_empty())
            .unwrap_or("networking.datumapis.com/datum-connect")
    }
}

impl Connector {
    /// What the iroh planner sees of this Connector: `class_controller` is its ConnectorClass's
    /// `spec.controllerName` (`None` when the class does not exist), `cluster` the cluster it
    /// lives in.
    pub fn to_input(&self, class_controller: Option<String>, cluster: &str) -> ConnectorInput {
        let key = self.public_key();
        ConnectorInput {
            cluster: cluster.to_string(),
            namespace: self.namespace().unwrap_or_default(),
            name: self.name_any(),
            uid: self.uid().unwrap_or_default(),
            generation: self.metadata.generation.unwrap_or(0),
            class_controller,
            public_key_id: key.and_then(|k| k.id.clone()),
            home_relay: key.and_then(|k| k.home_relay.clone()),
            addresses: key
                .map(|k| {
                    k.addresses
                        .iter()
                        .map(|a| (a.address.clone(), a.port))
                        .collect()
                })
                .unwrap_or_default(),
        }
    }

    /// The name of the DNSRecordSet its endpoint id would be published in, when it has an id
    /// that parses.
    pub fn record_set_name(&self) -> Option<String> {
        record_set_name(self.public_key()?.id.as_deref()?)
    }

    fn public_key(&self) -> Option<&PublicKeyDetails> {
        self.status
            .as_ref()?
            .connection_details
            .as_ref()?
            .public_key
            .as_ref()
    }

    /// Its `status.conditions` (empty without a status).
    pub fn conditions(&self) -> &[Condition] {
        self.status
            .as_ref()
            .map(|s| s.conditions.as_slice())
            .unwrap_or_default()
    }
}

/// A Connector with only its `IrohDNSPublished` condition, as the controller would set it
/// (without the transition time, which only a live write has): what `meshdns render iroh`
/// prints.
pub fn connector_status(c: &ConnectorInput, cond: &ConditionPlan) -> Value {
    json!({
        "apiVersion": DATUM_API_VERSION, "kind": "Connector",
        "metadata": {"name": c.name, "namespace": c.namespace},
        "status": {"conditions": [{
            "type": CONDITION_TYPE,
            "status": cond.status, "reason": cond.reason, "message": cond.message,
            "observedGeneration": c.generation,
        }]},
    })
}
