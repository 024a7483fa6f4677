//! The Kubernetes objects meshdns reads and writes, as kube-rs resources:
//!
//! - datum's `Connector` and `ConnectorClass` (`networking.datumapis.com/v1alpha1`), read;
//! - dns-operator's `DNSZone` and `DNSRecordSet` (`dns.networking.miloapis.com/v1alpha1`),
//!   written by the controllers and read by `meshdns serve --kubernetes`;
//! - `ClusterMesh` (`kilo.squat.ai/v1alpha1`), owned, and Kilo's `Peer`, written.
//!
//! Only the fields meshdns uses are typed. Everything else an object carries is kept in a
//! `rest` map, so an object read and written back loses nothing. The types implement
//! [`kube::Resource`] by hand rather than through `#[derive(CustomResource)]`. meshdns does not
//! own most of these CRDs and must match them field for field, and the derive would generate
//! a schema from the Rust types instead. The CRDs printed by `meshdns crds` ([`crds`]) are
//! written out in YAML, with the reference schemas' validation.

use std::borrow::Cow;
use std::collections::BTreeMap;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::{Condition, ObjectMeta};
use serde::{Deserialize, Serialize};
use serde_json::Value;

pub use meshdns_mesh::types::{ClusterMeshSpec, ClusterMeshStatus, PeerSpec};

/// Fields an object carries that meshdns does not model, kept for lossless round trips.
pub type Rest = BTreeMap<String, Value>;

macro_rules! resource {
    ($ty:ident, $group:literal, $version:literal, $kind:literal, $plural:literal, $scope:ty) => {
        impl kube::Resource for $ty {
            type DynamicType = ();
            type Scope = $scope;
            fn kind(_: &()) -> Cow<'_, str> {
                $kind.into()
            }
            fn group(_: &()) -> Cow<'_, str> {
                $group.into()
            }
            fn version(_: &()) -> Cow<'_, str> {
                $version.into()
            }
            fn plural(_: &()) -> Cow<'_, str> {
                $plural.into()
            }
            fn meta(&self) -> &ObjectMeta {
                &self.metadata
            }
            fn meta_mut(&mut self) -> &mut ObjectMeta {
                &mut self.metadata
            }
        }
    };
}

type Namespaced = k8s_openapi::NamespaceResourceScope;
type ClusterScoped = k8s_openapi::ClusterResourceScope;

/// `apiVersion` of datum's networking objects.
pub const DATUM_API_VERSION: &str = "networking.datumapis.com/v1alpha1";
pub use meshdns_mesh::{DNS_API_VERSION, KILO_API_VERSION};

// ------------------------------------------------------------------ datum

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

// ------------------------------------------------------------------ dns-operator

/// dns-operator's `DNSZone`: a zone and its domain name.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct DNSZone {
    /// Standard metadata.
    pub metadata: ObjectMeta,
    /// `spec`.
    #[serde(default)]
    pub spec: DNSZoneSpec,
    /// `status` and everything else.
    #[serde(flatten)]
    pub rest: Rest,
}
resource!(
    DNSZone,
    "dns.networking.miloapis.com",
    "v1alpha1",
    "DNSZone",
    "dnszones",
    Namespaced
);

/// `DNSZone.spec`.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct DNSZoneSpec {
    /// The zone's origin, lowercase, no trailing dot.
    #[serde(default)]
    pub domain_name: String,
    /// The DNSZoneClass.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub dns_zone_class_name: String,
    /// Anything newer.
    #[serde(flatten)]
    pub rest: Rest,
}

/// dns-operator's `DNSRecordSet`: records of one type in a DNSZone of the same namespace.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct DNSRecordSet {
    /// Standard metadata.
    pub metadata: ObjectMeta,
    /// `spec`.
    #[serde(default)]
    pub spec: DNSRecordSetSpec,
    /// `status` and everything else.
    #[serde(flatten)]
    pub rest: Rest,
}
resource!(
    DNSRecordSet,
    "dns.networking.miloapis.com",
    "v1alpha1",
    "DNSRecordSet",
    "dnsrecordsets",
    Namespaced
);

/// `DNSRecordSet.spec`.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct DNSRecordSetSpec {
    /// The DNSZone (same namespace).
    #[serde(default)]
    pub dns_zone_ref: NameRef,
    /// `A`, `AAAA`, `TXT`, ...
    #[serde(default)]
    pub record_type: String,
    /// The records.
    #[serde(default)]
    pub records: Vec<RecordEntry>,
}

/// One `spec.records[]` entry: an owner name, a TTL, and the object matching the set's
/// `recordType` (dns-operator's shapes).
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct RecordEntry {
    /// `@`, a name relative to the zone, or an absolute name ending in `.`.
    #[serde(default)]
    pub name: String,
    /// TTL in seconds; dns-operator's backend defaults it to 300.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ttl: Option<i64>,
    /// `A`: IPv4 address.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub a: Option<Content>,
    /// `AAAA`: IPv6 address.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub aaaa: Option<Content>,
    /// `CNAME`: target host.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cname: Option<Content>,
    /// `ALIAS`: target host (apex CNAME-like; not served by meshdns).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub alias: Option<Content>,
    /// `NS`: name server host.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ns: Option<Content>,
    /// `PTR`: target.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ptr: Option<Content>,
    /// `TXT`: text.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub txt: Option<Content>,
    /// `MX`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mx: Option<MxData>,
    /// `SRV`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub srv: Option<SrvData>,
    /// `CAA`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub caa: Option<CaaData>,
    /// `TLSA` (not served by meshdns).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tlsa: Option<TlsaData>,
    /// `HTTPS` (not served by meshdns).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub https: Option<SvcbData>,
    /// `SVCB` (not served by meshdns).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub svcb: Option<SvcbData>,
    /// `SOA`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub soa: Option<SoaData>,
    /// Anything newer.
    #[serde(flatten)]
    pub rest: Rest,
}

/// `{content}`.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Content {
    /// The value.
    #[serde(default)]
    pub content: String,
}

/// `mx{preference, exchange}`.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct MxData {
    /// 0..65535, lower preferred.
    #[serde(default)]
    pub preference: u16,
    /// Mail host.
    #[serde(default)]
    pub exchange: String,
}

/// `srv{priority, weight, port, target}`.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct SrvData {
    /// Lower is tried first.
    #[serde(default)]
    pub priority: u16,
    /// Relative weight.
    #[serde(default)]
    pub weight: u16,
    /// Port.
    #[serde(default)]
    pub port: u16,
    /// Host.
    #[serde(default)]
    pub target: String,
}

/// `caa{flag, tag, value}`.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct CaaData {
    /// Flags, 0..255.
    #[serde(default)]
    pub flag: u8,
    /// `issue`, `issuewild`, `iodef`, ...
    #[serde(default)]
    pub tag: String,
    /// Value.
    #[serde(default)]
    pub value: String,
}

/// `tlsa{usage, selector, matchingType, certData}`.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct TlsaData {
    /// Certificate usage.
    #[serde(default)]
    pub usage: u8,
    /// Selector.
    #[serde(default)]
    pub selector: u8,
    /// Matching type.
    #[serde(default)]
    pub matching_type: u8,
    /// Hex certificate data.
    #[serde(default)]
    pub cert_data: String,
}

/// `https` / `svcb{priority, target, params}`.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct SvcbData {
    /// 0 = alias mode.
    #[serde(default)]
    pub priority: u16,
    /// Target.
    #[serde(default)]
    pub target: String,
    /// SvcParams.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub params: BTreeMap<String, String>,
}

/// `soa{mname, rname, serial, refresh, retry, expire, ttl}`.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct SoaData {
    /// Primary name server.
    #[serde(default)]
    pub mname: String,
    /// Responsible mailbox.
    #[serde(default)]
    pub rname: String,
    /// Serial.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub serial: Option<u32>,
    /// Refresh.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub refresh: Option<u32>,
    /// Retry.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub retry: Option<u32>,
    /// Expire.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub expire: Option<u32>,
    /// Negative-caching TTL.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ttl: Option<u32>,
}

// ------------------------------------------------------------------ Kilo

/// A `ClusterMesh` (namespaced): the clusters joined by Kilo WireGuard.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct ClusterMesh {
    /// Standard metadata.
    pub metadata: ObjectMeta,
    /// `spec`.
    #[serde(default)]
    pub spec: ClusterMeshSpec,
    /// `status`, written by the mesh controller.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub status: Option<ClusterMeshStatus>,
    /// Everything else.
    #[serde(flatten)]
    pub rest: Rest,
}
resource!(
    ClusterMesh,
    "kilo.squat.ai",
    "v1alpha1",
    "ClusterMesh",
    "clustermeshes",
    Namespaced
);

/// Kilo's `Peer` (cluster-scoped): a WireGuard peer outside the cluster.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct Peer {
    /// Standard metadata.
    pub metadata: ObjectMeta,
    /// `spec`.
    #[serde(default)]
    pub spec: PeerSpec,
    /// Everything else.
    #[serde(flatten)]
    pub rest: Rest,
}
resource!(
    Peer,
    "kilo.squat.ai",
    "v1alpha1",
    "Peer",
    "peers",
    ClusterScoped
);

impl Peer {
    /// The planner's view of this Peer.
    pub fn to_plan(&self) -> meshdns_mesh::Peer {
        meshdns_mesh::Peer {
            name: self.metadata.name.clone().unwrap_or_default(),
            labels: self.metadata.labels.clone().unwrap_or_default(),
            spec: self.spec.clone(),
        }
    }
}

/// The CRDs meshdns owns (ClusterMesh) and compatible copies of those it consumes
/// (Connector, ConnectorClass, DNSZone, DNSRecordSet, Peer), as multi-document YAML.
pub fn crds() -> &'static str {
    include_str!("crds.yaml")
}

#[cfg(test)]
mod tests;
