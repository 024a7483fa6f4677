//! The objects the mesh planner reads and writes, in their Kubernetes JSON shape (camelCase,
//! optional fields omitted), so the same structs serve the controller, `meshdns render mesh`
//! and the tests. Fields meshdns does not use are not modelled; the controller writes these
//! objects with server-side apply, which leaves fields it does not send alone.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

/// `spec` of a `kilo.squat.ai/v1alpha1` `ClusterMesh` (kilo-clustermesh-operator's flat model,
/// plus meshdns's optional `dns`).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ClusterMeshSpec {
    /// The member clusters.
    #[serde(default)]
    pub clusters: Vec<ClusterEntry>,
    /// meshdns extension: publish `<node>.<cluster>.<zone>` names for the mesh's nodes.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub dns: Option<MeshDns>,
}

/// One member cluster of a mesh.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ClusterEntry {
    /// The cluster's name in this mesh: the status key and the source-cluster label value.
    pub name: String,
    /// This entry is the cluster the controller runs in (no kubeconfig needed).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub local: bool,
    /// The Secret (in the mesh's namespace) holding a kubeconfig for this cluster.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub kubeconfig_secret_ref: Option<SecretKeyRef>,
    /// Every CIDR the cluster contributes (pods, WireGuard, services, host ranges).
    #[serde(default)]
    pub allowed_networks: Vec<String>,
    /// Port used when an endpoint is made from a Node's ExternalIP (default 51820).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub wireguard_port: Option<i64>,
    /// WireGuard persistent keepalive for Peers of this cluster's nodes, seconds (0 = off).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub persistent_keepalive: Option<i64>,
}

/// A key of a Secret in the mesh's namespace.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct SecretKeyRef {
    /// Secret name.
    pub name: String,
    /// Key inside `data`.
    pub key: String,
}

/// meshdns extension of the ClusterMesh spec: where the mesh's node names are published.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct MeshDns {
    /// The DNSZone (in the mesh's namespace) the DNSRecordSets reference.
    pub dns_zone_ref: NameRef,
    /// TTL of the node records (default 30 s).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ttl_seconds: Option<u32>,
}

/// `{name}` reference to an object in the same namespace.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct NameRef {
    /// Object name.
    pub name: String,
}

/// `status` of a ClusterMesh.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ClusterMeshStatus {
    /// One entry per source cluster.
    #[serde(default)]
    pub clusters: Vec<ClusterStatus>,
    /// `Ready` and `NetworksOverlap`.
    #[serde(default)]
    pub conditions: Vec<Condition>,
}

/// Per-cluster counts in the ClusterMesh status.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ClusterStatus {
    /// Cluster name.
    pub name: String,
    /// Peers built for this cluster's nodes.
    pub registered_peers: i64,
    /// Nodes skipped, every reason together.
    pub skipped_nodes: i64,
}

/// A Kubernetes status condition (metav1.Condition without the timestamp, which the
/// controller adds when the status changes).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Condition {
    /// Condition type.
    #[serde(rename = "type")]
    pub type_: String,
    /// `True` / `False` / `Unknown`.
    pub status: String,
    /// CamelCase reason.
    pub reason: String,
    /// Human-readable message.
    pub message: String,
    /// Generation of the object the condition was computed from.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub observed_generation: Option<i64>,
    /// RFC 3339 time of the last status change.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_transition_time: Option<String>,
}

/// `spec` of a Kilo `Peer` (`kilo.squat.ai/v1alpha1`, cluster-scoped).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct PeerSpec {
    /// CIDRs routed to this peer.
    #[serde(default, rename = "allowedIPs")]
    pub allowed_ips: Vec<String>,
    /// Where to reach the peer; absent for a roaming peer (learned from its first handshake).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub endpoint: Option<PeerEndpoint>,
    /// Keepalive in seconds; absent or 0 = off.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub persistent_keepalive: Option<i64>,
    /// Optional preshared key (never set by meshdns; kept when present).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub preshared_key: Option<String>,
    /// WireGuard public key, standard base64 of 32 bytes.
    pub public_key: String,
}

/// `spec.endpoint` of a Peer.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct PeerEndpoint {
    /// Host, as a DNS name or an IP.
    #[serde(rename = "dnsOrIP")]
    pub dns_or_ip: DnsOrIp,
    /// UDP port, 1..65535.
    pub port: u32,
}

/// One of a DNS name or an IP address.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct DnsOrIp {
    /// DNS name.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub dns: Option<String>,
    /// IP address text.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ip: Option<String>,
}

/// A Peer the planner wants in a target cluster.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Peer {
    /// Object name (`<mesh>--<source>--<node>`, sanitised).
    pub name: String,
    /// `kilo-clustermesh.io/mesh` and `kilo-clustermesh.io/source-cluster`.
    pub labels: BTreeMap<String, String>,
    /// Desired spec.
    pub spec: PeerSpec,
}

impl Peer {
    /// The Peer object: what the controller applies and `meshdns render mesh` prints.
    pub fn to_object(&self) -> serde_json::Value {
        serde_json::json!({
            "apiVersion": crate::KILO_API_VERSION, "kind": "Peer",
            "metadata": {"name": self.name, "labels": self.labels},
            "spec": self.spec,
        })
    }
}

/// The parts of a Kubernetes `Node` the planner reads, deserialised straight from the Node's
/// JSON or YAML (`kubectl get nodes -o yaml` items); everything else is ignored.
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
    /// The node's name.
    pub fn name(&self) -> &str {
        &self.metadata.name
    }

    /// An annotation's value, `None` when absent.
    pub fn annotation(&self, key: &str) -> Option<&str> {
        self.metadata.annotations.get(key).map(String::as_str)
    }

    /// The first pod CIDR (`spec.podCIDRs[0]`, else `spec.podCIDR`).
    pub fn first_pod_cidr(&self) -> Option<&str> {
        self.spec
            .pod_cidrs
            .first()
            .or(self.spec.pod_cidr.as_ref())
            .map(String::as_str)
            .filter(|s| !s.is_empty())
    }

    /// Addresses of one type, in status order.
    pub fn addresses(&self, type_: &str) -> impl Iterator<Item = &str> {
        self.status
            .addresses
            .iter()
            .filter(move |a| a.type_ == type_)
            .map(|a| a.address.as_str())
    }
}
