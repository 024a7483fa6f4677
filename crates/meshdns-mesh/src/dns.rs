//! Mesh names in DNS: `<node>.<cluster>.<zone>` A/AAAA records at each valid node's WireGuard
//! address, one record set per (source cluster, address family). `meshdns-objects` writes each
//! as the DNSRecordSet `meshdns serve` (or dns-operator) serves.

use std::collections::BTreeMap;
use std::net::IpAddr;

use crate::naming::{LABEL_MESH, LABEL_SOURCE_CLUSTER, object_name};
use crate::plan::MeshPlan;
use crate::types::NodeNames;

/// Default TTL of node records: short, since addresses move when nodes are replaced.
pub const DEFAULT_NODE_TTL: u32 = 30;

/// One record set of node names.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NodeRecordSet {
    /// Object name, `<mesh>--<cluster>--nodes-a` / `--nodes-aaaa`.
    pub name: String,
    /// The DNSZone it references (same namespace as the mesh).
    pub zone_name: String,
    /// `A` or `AAAA`.
    pub record_type: &'static str,
    /// Mesh and source-cluster labels.
    pub labels: BTreeMap<String, String>,
    /// `(relative owner name, address)`, in node-name order.
    pub records: Vec<(String, IpAddr)>,
    /// TTL of every record.
    pub ttl: u32,
}

/// The record sets for a mesh's node names, one per (source cluster, address family) that
/// has at least one valid node. A source that could not be read, or a blocked mesh, gives
/// none (the controller leaves existing ones alone in that case).
pub fn node_record_sets(plan: &MeshPlan, dns: &NodeNames) -> Vec<NodeRecordSet> {
    let ttl = dns.ttl_seconds.unwrap_or(DEFAULT_NODE_TTL);
    let mut out = Vec::new();
    for source in &plan.sources {
        for (record_type, v6) in [("A", false), ("AAAA", true)] {
            let records: Vec<(String, IpAddr)> = source
                .addresses
                .iter()
                .filter(|(_, ip)| ip.is_ipv6() == v6)
                .map(|(node, ip)| {
                    (
                        format!("{}.{}", node.to_ascii_lowercase(), source.cluster),
                        *ip,
                    )
                })
                .collect();
            if records.is_empty() {
                continue;
            }
            out.push(NodeRecordSet {
                name: object_name(&format!(
                    "{}--{}--nodes-{}",
                    plan.mesh,
                    source.cluster,
                    record_type.to_ascii_lowercase()
                )),
                zone_name: dns.zone_name.clone(),
                record_type,
                labels: BTreeMap::from([
                    (LABEL_MESH.to_string(), plan.mesh.clone()),
                    (LABEL_SOURCE_CLUSTER.to_string(), source.cluster.clone()),
                ]),
                records,
                ttl,
            });
        }
    }
    out
}
