//! The planner's own data: what it reads (a mesh's member clusters, their Nodes, the Peers a
//! target holds) and what it returns (Peers, the mesh's status), as plain structs. They are
//! not the Kubernetes objects: `meshdns-objects` holds those (ClusterMesh, Peer, Node) and
//! converts them to and from these, so the controller, `meshdns render mesh` and the tests
//! feed the planner the same data.

use std::collections::BTreeMap;

/// A mesh's member clusters: what the planner reads of a ClusterMesh's `spec`.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct MeshSpec {
    /// The member clusters, in spec order.
    pub clusters: Vec<ClusterEntry>,
}

/// One member cluster of a mesh.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ClusterEntry {
    /// The cluster's name in this mesh: the status key and the source-cluster label value.
    pub name: String,
    /// Every CIDR the cluster contributes (pods, WireGuard, services, host ranges).
    pub allowed_networks: Vec<String>,
    /// Port used when an endpoint is made from a Node's ExternalIP (default 51820).
    pub wireguard_port: Option<i64>,
    /// WireGuard persistent keepalive for Peers of this cluster's nodes, seconds (0 = off).
    pub persistent_keepalive: Option<i64>,
}

/// Where a mesh's node names are published: the DNSZone the record sets reference and their
/// TTL.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct NodeNames {
    /// The DNSZone (in the mesh's namespace) the DNSRecordSets reference.
    pub zone_name: String,
    /// TTL of the node records (default [`crate::dns::DEFAULT_NODE_TTL`]).
    pub ttl_seconds: Option<u32>,
}

/// A mesh's status as planned: counts per source cluster and the `Ready` and
/// `NetworksOverlap` conditions (without transition times: the object layer keeps those).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct MeshStatus {
    /// One entry per source cluster.
    pub clusters: Vec<ClusterStatus>,
    /// `Ready` and `NetworksOverlap`.
    pub conditions: Vec<Condition>,
}

/// Per-cluster counts in a mesh's status.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ClusterStatus {
    /// Cluster name.
    pub name: String,
    /// Peers built for this cluster's nodes.
    pub registered_peers: i64,
    /// Nodes skipped, every reason together.
    pub skipped_nodes: i64,
}

/// A planned condition.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Condition {
    /// Condition type.
    pub type_: String,
    /// `True` / `False` / `Unknown`.
    pub status: String,
    /// CamelCase reason.
    pub reason: String,
    /// Human-readable message.
    pub message: String,
    /// Generation of the mesh the condition was computed from.
    pub observed_generation: Option<i64>,
}

/// What a WireGuard peer is: its key, where it is reached, and what is routed to it.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct PeerSpec {
    /// CIDRs routed to this peer.
    pub allowed_ips: Vec<String>,
    /// Where to reach the peer; absent for a roaming peer (learned from its first handshake).
    pub endpoint: Option<PeerEndpoint>,
    /// Keepalive in seconds; absent or 0 = off.
    pub persistent_keepalive: Option<i64>,
    /// Optional preshared key (never set by meshdns; kept when present).
    pub preshared_key: Option<String>,
    /// WireGuard public key, standard base64 of 32 bytes.
    pub public_key: String,
}

/// Where a peer is reached.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct PeerEndpoint {
    /// Host, as a DNS name or an IP.
    pub dns_or_ip: DnsOrIp,
    /// UDP port, 1..65535.
    pub port: u32,
}

/// One of a DNS name or an IP address (as Kilo has it: a Peer read from a cluster may carry
/// both, or neither).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct DnsOrIp {
    /// DNS name.
    pub dns: Option<String>,
    /// IP address text.
    pub ip: Option<String>,
}

/// A Peer: one the planner wants in a target cluster, or one a target holds.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Peer {
    /// Object name (`<mesh>--<source>--<node>`, sanitised).
    pub name: String,
    /// `kilo-clustermesh.io/mesh` and `kilo-clustermesh.io/source-cluster`.
    pub labels: BTreeMap<String, String>,
    /// Desired spec.
    pub spec: PeerSpec,
}

/// What the planner reads of a Node.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Node {
    /// Node name.
    pub name: String,
    /// Annotations (Kilo's live under `kilo.squat.ai/`).
    pub annotations: BTreeMap<String, String>,
    /// `spec.podCIDRs`; only the first is used (as the reference operator does).
    pub pod_cidrs: Vec<String>,
    /// Legacy single `spec.podCIDR`, used when `podCIDRs` is absent.
    pub pod_cidr: Option<String>,
    /// `status.addresses[]` as (type, address): `InternalIP`, `ExternalIP`, `Hostname`, ...
    pub addresses: Vec<(String, String)>,
}

impl Node {
    /// The node's name.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// An annotation's value, `None` when absent.
    pub fn annotation(&self, key: &str) -> Option<&str> {
        self.annotations.get(key).map(String::as_str)
    }

    /// The first pod CIDR (`spec.podCIDRs[0]`, else `spec.podCIDR`).
    pub fn first_pod_cidr(&self) -> Option<&str> {
        self.pod_cidrs
            .first()
            .or(self.pod_cidr.as_ref())
            .map(String::as_str)
            .filter(|s| !s.is_empty())
    }

    /// Addresses of one type, in status order.
    pub fn addresses_of(&self, type_: &str) -> impl Iterator<Item = &str> {
        self.addresses
            .iter()
            .filter(move |(t, _)| t == type_)
            .map(|(_, a)| a.as_str())
    }
}
