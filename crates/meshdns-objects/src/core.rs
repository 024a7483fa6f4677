//! Kinds of the Kubernetes core and coordination groups meshdns reads or writes. Their
//! shapes are Kubernetes' own, so k8s-openapi's types serve: [`Lease`] (leader election, a
//! Connector's liveness), [`ConfigMap`] (`serve --configmap`), [`Secret`] (member clusters'
//! kubeconfigs), [`KubeNode`] (listed and watched by the mesh controller). Only the Node gets
//! a type of its own, [`Node`]: the fields the mesh planner reads, read leniently, so a
//! `kubectl get nodes -o yaml` file and a listed Node give the planner the same data.
//! Events are recorded through kube-runtime's recorder ([`crate::events`]).

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

pub use k8s_openapi::api::coordination::v1::{Lease, LeaseSpec};
pub use k8s_openapi::api::core::v1::{ConfigMap, Namespace, Node as KubeNode, Secret, Service};
pub use k8s_openapi::api::discovery::v1::EndpointSlice;
pub use k8s_openapi::api::networking::v1::Ingress;
pub use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, Time};

/// The parts of a Kubernetes `Node` the mesh planner reads, deserialised straight from the
/// Node's JSON or YAML (`kubectl get nodes -o yaml` items, or k8s-openapi's [`KubeNode`] as the
/// controller lists it); everything else is ignored.
#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize, Serialize)]
pub struct Node {
    /// `metadata`.
    #[serde(default)]
    pub metadata: NodeMeta,
    /// `spec`.
    #[serde(default)]
    pub spec: NodeSpec,
    /// `status`.
    #[serde(default)]
    pub status: NodeStatus,
}

/// Node `metadata` subset.
#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize, Serialize)]
pub struct NodeMeta {
    /// Node name.
    #[serde(default)]
    pub name: String,
    /// Annotations (Kilo's live under `kilo.squat.ai/`).
    #[serde(default)]
    pub annotations: BTreeMap<String, String>,
}

/// Node `spec` subset.
#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize, Serialize)]
pub struct NodeSpec {
    /// `podCIDRs`; only the first is used (as the reference operator does).
    #[serde(default, rename = "podCIDRs")]
    pub pod_cidrs: Vec<String>,
    /// Legacy single `podCIDR`, used when `podCIDRs` is absent.
    #[serde(default, rename = "podCIDR", skip_serializing_if = "Option::is_none")]
    pub pod_cidr: Option<String>,
}

/// Node `status` subset.
#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize, Serialize)]
pub struct NodeStatus {
    /// `addresses[]`.
    #[serde(default)]
    pub addresses: Vec<NodeAddress>,
}

/// One `status.addresses[]` entry.
#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize, Serialize)]
pub struct NodeAddress {
    /// `InternalIP`, `ExternalIP`, `Hostname`, ...
    #[serde(rename = "type")]
    pub type_: String,
    /// The address text.
    pub address: String,
}

impl Node {
    /// What the planner reads of this Node.
    pub fn to_plan(&self) -> meshdns_mesh::Node {
        meshdns_mesh::Node {
            name: self.metadata.name.clone(),
            annotations: self.metadata.annotations.clone(),
            pod_cidrs: self.spec.pod_cidrs.clone(),
            pod_cidr: self.spec.pod_cidr.clone(),
            addresses: self
                .status
                .addresses
                .iter()
                .map(|a| (a.type_.clone(), a.address.clone()))
                .collect(),
        }
    }

    /// A listed Node, read as a `kubectl get nodes -o yaml` item is.
    pub fn from_kube(node: &KubeNode) -> Result<Node, serde_json::Error> {
        serde_json::to_value(node).and_then(serde_json::from_value)
    }
}
