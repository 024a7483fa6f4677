//! Mesh names in DNS: `<node>.<cluster>.<zone>` A/AAAA records at each valid node's WireGuard
//! address, as DNSRecordSets `meshdns serve` (or dns-operator) serves.

use std::collections::BTreeMap;
use std::net::IpAddr;

use serde_json::json;

use crate::naming::{LABEL_MESH, LABEL_SOURCE_CLUSTER, object_name};
use crate::plan::MeshPlan;
use crate::types::MeshDns;

/// Default TTL of node records: short, since addresses move when nodes are replaced.
pub const DEFAULT_NODE_TTL: u32 = 30;

/// One DNSRecordSet of node names.
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

impl NodeRecordSet {
    /// The DNSRecordSet object in `namespace` (the mesh's): what the controller applies and
    /// `meshdns render mesh` prints.
    pub fn to_object(&self, namespace: &str) -> serde_json::Value {
        let key = self.record_type.to_ascii_lowercase();
        let records: Vec<serde_json::Value> = self
            .records
            .iter()
            .map(|(n, ip)| json!({"name": n, "ttl": self.ttl, key.as_str(): {"content": ip.to_string()}}))
            .collect();
        json!({"apiVersion": crate::DNS_API_VERSION, "kind": "DNSRecordSet",
            "metadata": {"name": self.name, "namespace": namespace, "labels": self.labels},
            "spec": {"dnsZoneRef": {"name": self.zone_name}, "recordType": self.record_type, "records": records}})
    }
}

/// The DNSRecordSets for a mesh's node names, one per (source cluster, address family) that
/// has at least one valid node. A source that could not be read, or a blocked mesh, gives
/// none (the controller leaves existing ones alone in that case).
pub fn node_record_sets(plan: &MeshPlan, dns: &MeshDns) -> Vec<NodeRecordSet> {
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
                zone_name: dns.dns_zone_ref.name.clone(),
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
