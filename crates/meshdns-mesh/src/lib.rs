//! Kilo cluster mesh planning: from a mesh's member clusters and the Nodes of each, the
//! WireGuard Peers each member must hold, NAT-aware. Pure functions, no I/O: the controller,
//! `meshdns render mesh` and the tests all call the same code.
//!
//! The planner takes and returns its own plain data ([`types`]); it knows no Kubernetes
//! object. `meshdns-objects` reads ClusterMeshes, Peers and Nodes into that data and writes
//! the planned Peers, record sets and status back as objects.
//!
//! The rules are kilo-clustermesh-operator's (newest, with discovered-endpoint enrichment and
//! per-cluster keepalive), so meshdns can replace it in place: the same Peer names, labels,
//! skip reasons, allowed-IP order and condition texts. Where the reference has known defects
//! meshdns differs, and says so on the function concerned:
//! - a node's public key must be a WireGuard key (`NodePublicKeyInvalid`), and an endpoint
//!   host that is not an IP must be a DNS name Kilo accepts;
//! - a CIDR overlap blocks only the meshes involved, not the whole namespace;
//! - discovered endpoints that are unspecified or multicast are rejected too, and an IPv6
//!   observation equal to the configured endpoint is not a change;
//! - Peers sharing a key are merged in the desired state of all meshes together (so two
//!   meshes never rewrite each other's merge), and a Peer meshdns did not write is never
//!   modified or deleted.

pub mod dns;
pub mod naming;
pub mod net;
pub mod plan;
pub mod types;
pub mod validate;

#[cfg(test)]
mod tests;

pub use naming::{LABEL_MESH, LABEL_SOURCE_CLUSTER, peer_labels, peer_name};
pub use plan::{
    ClusterNodes, DEFAULT_WIREGUARD_PORT, Discovered, MeshPlan, PeerAction, SourcePlan,
    diff_target, discovered_endpoints, enrich, merge_same_key, mesh_keepalive, plan_meshes,
    plan_source,
};
pub use types::{
    ClusterEntry, ClusterStatus, Condition, DnsOrIp, MeshSpec, MeshStatus, Node, NodeNames, Peer,
    PeerEndpoint, PeerSpec,
};
pub use validate::{Skip, SkipReason};

/// The finalizer on every ClusterMesh: its Peers are removed from every cluster before the
/// mesh goes.
pub const FINALIZER: &str = "kilo-clustermesh.io/cleanup";

/// Kilo's node annotations (prefix `kilo.squat.ai/`).
pub mod annotations {
    /// The node's WireGuard public key (agent-written).
    pub const KEY: &str = "kilo.squat.ai/key";
    /// The node's kilo0 address with the Kilo subnet's mask, e.g. `10.4.0.1/16`.
    pub const WIREGUARD_IP: &str = "kilo.squat.ai/wireguard-ip";
    /// Operator-specific endpoint override (`host:port`), first in the chain.
    pub const CLUSTERMESH_ENDPOINT: &str = "kilo.squat.ai/clustermesh-endpoint";
    /// User-set endpoint override (`host:port`), second in the chain.
    pub const FORCE_ENDPOINT: &str = "kilo.squat.ai/force-endpoint";
    /// JSON map of public key -> `{IP, Port, Zone}` seen in handshakes (agent-written).
    pub const DISCOVERED_ENDPOINTS: &str = "kilo.squat.ai/discovered-endpoints";
}
