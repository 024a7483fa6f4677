//! From a ClusterMesh and the Nodes of its clusters, the Peers every member cluster must hold,
//! the mesh's status, and the writes that bring a target cluster there.

use std::collections::{BTreeMap, BTreeSet};
use std::net::{IpAddr, SocketAddr};

use crate::naming::{LABEL_MESH, LABEL_SOURCE_CLUSTER, peer_labels, peer_name};
use crate::net::{host_route, parse_cidr};
use crate::types::{
    ClusterEntry, ClusterStatus, Condition, DnsOrIp, MeshSpec, MeshStatus, Node, Peer,
    PeerEndpoint, PeerSpec,
};
use crate::validate::{Skip, ValidNode, validate_nodes};

/// WireGuard's usual port, used when an entry sets none (or 0).
pub const DEFAULT_WIREGUARD_PORT: u16 = 51820;

impl ClusterEntry {
    /// `wireguardPort`, or 51820 when absent or out of range.
    pub fn effective_wireguard_port(&self) -> u16 {
        self.wireguard_port
            .and_then(|p| u16::try_from(p).ok())
            .filter(|p| *p != 0)
            .unwrap_or(DEFAULT_WIREGUARD_PORT)
    }
}

/// The mesh-wide keepalive floor: the largest `persistentKeepalive` of any entry (clamped to
/// 0..65535). Every Peer of the mesh gets at least this, so the side that is not behind NAT
/// also refreshes the NAT mapping of the side that is.
pub fn mesh_keepalive(spec: &MeshSpec) -> i64 {
    spec.clusters
        .iter()
        .filter_map(|c| c.persistent_keepalive)
        .map(|k| k.clamp(0, 65535))
        .max()
        .unwrap_or(0)
}

/// A member cluster's Nodes, or why they could not be read.
#[derive(Debug, Clone)]
pub enum ClusterNodes {
    /// The cluster's Nodes (any order).
    Listed(Vec<Node>),
    /// The cluster could not be reached; its Peers elsewhere are left as they are.
    Unavailable(String),
}

/// What one source cluster contributes to the other members.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SourcePlan {
    /// The cluster's name in the mesh.
    pub cluster: String,
    /// `Some(why)` when the cluster's Nodes could not be read: no Peers are planned for it and
    /// none of its existing Peers may be deleted.
    pub unavailable: Option<String>,
    /// One Peer per valid node, in node-name order.
    pub peers: Vec<Peer>,
    /// Valid nodes' names and WireGuard addresses (for the mesh's DNS names).
    pub addresses: Vec<(String, IpAddr)>,
    /// Nodes that get no Peer.
    pub skipped: Vec<Skip>,
    /// The cluster is still coming up (no nodes, or no valid node while some skip is
    /// transient): look again soon.
    pub bootstrapping: bool,
}

/// A ClusterMesh's plan: its sources' Peers, or the network problem that blocks it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MeshPlan {
    /// The mesh's name.
    pub mesh: String,
    /// `Some(message)` when overlapping or invalid networks block the mesh: nothing is
    /// written for it.
    pub blocked: Option<String>,
    /// One per member cluster, in spec order (empty when blocked).
    pub sources: Vec<SourcePlan>,
}

/// The Peers for one source cluster's nodes: allowed IPs in the reference order (pod CIDR,
/// WireGuard host route, InternalIP host routes, then on the first valid node every
/// `allowedNetworks` entry no valid node covers), de-duplicated in order; the endpoint chain;
/// keepalive = the larger of the entry's own and the mesh-wide floor.
pub fn plan_source(mesh: &str, entry: &ClusterEntry, nodes: &[Node], floor: i64) -> SourcePlan {
    let (valid, skipped) = validate_nodes(entry, nodes);
    let keepalive = entry
        .persistent_keepalive
        .unwrap_or(0)
        .clamp(0, 65535)
        .max(floor);
    let residue = residue_networks(entry, &valid);
    let peers = valid
        .iter()
        .enumerate()
        .map(|(i, node)| {
            let mut allowed = vec![node.pod_cidr.to_string(), host_route(node.wireguard_ip)];
            allowed.extend(node.internal_ips.iter().map(|ip| host_route(*ip)));
            if i == 0 {
                allowed.extend(residue.iter().cloned());
            }
            let mut seen = BTreeSet::new();
            allowed.retain(|a| seen.insert(a.clone()));
            Peer {
                name: peer_name(mesh, &entry.name, &node.name),
                labels: peer_labels(mesh, &entry.name),
                spec: PeerSpec {
                    allowed_ips: allowed,
                    endpoint: node.endpoint.as_ref().map(|hp| endpoint(&hp.host, hp.port)),
                    persistent_keepalive: (keepalive > 0).then_some(keepalive),
                    preshared_key: None,
                    public_key: node.public_key.clone(),
                },
            }
        })
        .collect();
    let bootstrapping =
        nodes.is_empty() || (valid.is_empty() && skipped.iter().any(|s| s.reason.transient()));
    SourcePlan {
        cluster: entry.name.clone(),
        unavailable: None,
        peers,
        addresses: valid
            .iter()
            .map(|n| (n.name.clone(), n.wireguard_ip))
            .collect(),
        skipped,
        bootstrapping,
    }
}

/// `allowedNetworks` entries that no valid node covers (a node's pod CIDR inside it, or its
/// InternalIP or WireGuard address in it): service ranges, external subnets. They ride on the
/// first valid node's Peer, since WireGuard allows one Peer per key.
fn residue_networks(entry: &ClusterEntry, valid: &[ValidNode]) -> Vec<String> {
    entry
        .allowed_networks
        .iter()
        .filter_map(|text| {
            let Some(net) = parse_cidr(text) else {
                return Some(text.clone());
            };
            let covered = valid.iter().any(|n| {
                net.contains(&n.pod_cidr)
                    || net.contains(&n.wireguard_ip)
                    || n.internal_ips.iter().any(|ip| net.contains(ip))
            });
            (!covered).then(|| net.to_string())
        })
        .collect()
}

fn endpoint(host: &str, port: u16) -> PeerEndpoint {
    let ip = host.parse::<IpAddr>().ok();
    PeerEndpoint {
        dns_or_ip: DnsOrIp {
            dns: ip.is_none().then(|| host.to_string()),
            ip: ip.map(|ip| ip.to_string()),
        },
        port: u32::from(port),
    }
}

/// Plans every mesh of a namespace. `nodes` maps a mesh name and a cluster name to that
/// cluster's Nodes; a cluster missing from it is unavailable. Network problems block only the
/// meshes involved.
pub fn plan_meshes(
    meshes: &[(&str, &MeshSpec)],
    nodes: &dyn Fn(&str, &str) -> ClusterNodes,
) -> Vec<MeshPlan> {
    let problems = crate::validate::network_problems(meshes);
    meshes
        .iter()
        .map(|(mesh, spec)| {
            if let Some(p) = problems.get(*mesh) {
                return MeshPlan {
                    mesh: mesh.to_string(),
                    blocked: Some(p.clone()),
                    sources: Vec::new(),
                };
            }
            let floor = mesh_keepalive(spec);
            let mut seen = BTreeSet::new();
            let sources = spec
                .clusters
                .iter()
                // A repeated cluster name is one cluster (the first entry wins), as in status.
                .filter(|entry| seen.insert(entry.name.as_str()))
                .map(|entry| match nodes(mesh, &entry.name) {
                    ClusterNodes::Listed(list) => plan_source(mesh, entry, &list, floor),
                    ClusterNodes::Unavailable(why) => SourcePlan {
                        cluster: entry.name.clone(),
                        unavailable: Some(why),
                        peers: Vec::new(),
                        addresses: Vec::new(),
                        skipped: Vec::new(),
                        bootstrapping: true,
                    },
                })
                .collect();
            MeshPlan {
                mesh: mesh.to_string(),
                blocked: None,
                sources,
            }
        })
        .collect()
}

impl MeshPlan {
    /// The Peers this mesh wants in `target` (every other source's Peers), before same-key
    /// merging and endpoint enrichment. Empty when the target is not a member or the mesh is
    /// blocked.
    pub fn peers_for(&self, target: &str) -> Vec<Peer> {
        if !self.sources.iter().any(|s| s.cluster == target) {
            return Vec::new();
        }
        self.sources
            .iter()
            .filter(|s| s.cluster != target)
            .flat_map(|s| s.peers.iter().cloned())
            .collect()
    }

    /// Whether a Peer in a target, labelled for this mesh and `source`, may be deleted when no
    /// longer wanted: yes unless its source could not be read this time (then its Peers
    /// stay as they are). Sources that left the spec are swept.
    pub fn may_sweep(&self, source: &str) -> bool {
        self.blocked.is_none()
            && !self
                .sources
                .iter()
                .any(|s| s.cluster == source && s.unavailable.is_some())
    }

    /// Any source still coming up.
    pub fn bootstrapping(&self) -> bool {
        self.sources.iter().any(|s| s.bootstrapping)
    }

    /// The mesh status this plan gives: counts per source cluster, `NetworksOverlap`,
    /// and `Ready` (the reference's reasons, plus `ClusterUnavailable` when a member could not
    /// be read).
    pub fn status(&self, generation: Option<i64>) -> MeshStatus {
        let cond = |type_: &str, status: &str, reason: &str, message: String| Condition {
            type_: type_.to_string(),
            status: status.to_string(),
            reason: reason.to_string(),
            message,
            observed_generation: generation,
        };
        if let Some(problem) = &self.blocked {
            return MeshStatus {
                clusters: Vec::new(),
                conditions: vec![
                    cond(
                        "Ready",
                        "False",
                        "NetworksOverlap",
                        "CIDR overlap detected across meshes".into(),
                    ),
                    cond("NetworksOverlap", "True", "CIDROverlap", problem.clone()),
                ],
            };
        }
        let unavailable: Vec<String> = self
            .sources
            .iter()
            .filter_map(|s| {
                s.unavailable
                    .as_ref()
                    .map(|why| format!("{}: {why}", s.cluster))
            })
            .collect();
        let ready = if unavailable.is_empty() {
            cond(
                "Ready",
                "True",
                "Reconciled",
                "all clusters reconciled successfully".into(),
            )
        } else {
            cond(
                "Ready",
                "False",
                "ClusterUnavailable",
                format!("cannot read nodes of {}", unavailable.join("; ")),
            )
        };
        MeshStatus {
            clusters: self
                .sources
                .iter()
                .map(|s| ClusterStatus {
                    name: s.cluster.clone(),
                    registered_peers: s.peers.len() as i64,
                    skipped_nodes: s.skipped.len() as i64,
                })
                .collect(),
            conditions: vec![
                ready,
                cond(
                    "NetworksOverlap",
                    "False",
                    "NoOverlap",
                    "all CIDRs are disjoint".into(),
                ),
            ],
        }
    }
}

/// Merges Peers that share a public key (WireGuard allows one Peer per key: two would clobber
/// each other's allowed IPs). This happens when a cluster sits in two meshes with a common
/// member, or two nodes carry the same key. The Peer with the lowest name is kept, with the
/// sorted union of the group's allowed IPs and the largest keepalive. Output is sorted by name.
pub fn merge_same_key(peers: Vec<Peer>) -> Vec<Peer> {
    let mut by_key: BTreeMap<String, Vec<Peer>> = BTreeMap::new();
    for p in peers {
        by_key.entry(p.spec.public_key.clone()).or_default().push(p);
    }
    let mut out: Vec<Peer> = by_key
        .into_values()
        .map(|mut group| {
            group.sort_by(|a, b| a.name.cmp(&b.name));
            group.dedup_by(|a, b| a.name == b.name);
            if group.len() == 1 {
                return group.pop().expect("one");
            }
            let keepalive = group
                .iter()
                .filter_map(|p| p.spec.persistent_keepalive)
                .max();
            let ips: BTreeSet<String> = group
                .iter()
                .flat_map(|p| p.spec.allowed_ips.iter().cloned())
                .collect();
            let mut canonical = group.swap_remove(0);
            canonical.spec.allowed_ips = ips.into_iter().collect();
            canonical.spec.persistent_keepalive = keepalive;
            canonical
        })
        .collect();
    out.sort_by(|a, b| a.name.cmp(&b.name));
    out
}

/// Endpoints a target cluster's Kilo observed in WireGuard handshakes
/// (`kilo.squat.ai/discovered-endpoints` on its Nodes), by public key.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Discovered {
    /// Public key -> observed address (first node by name wins).
    pub by_key: BTreeMap<String, SocketAddr>,
    /// Entries that were rejected, as `<node>: <what>` (reported, never fatal).
    pub problems: Vec<String>,
}

/// Reads the discovered endpoints of a target cluster's Nodes. Rejected: annotations that are
/// not a JSON object, entries without a parseable `IP` or with a `Port` outside 1..65535, and
/// addresses no peer can be reached at (loopback, link-local, unspecified, multicast).
pub fn discovered_endpoints(nodes: &[Node]) -> Discovered {
    let mut sorted: Vec<&Node> = nodes.iter().collect();
    sorted.sort_by(|a, b| a.name().cmp(b.name()));
    let mut out = Discovered::default();
    for node in sorted {
        let Some(text) = node
            .annotation(crate::annotations::DISCOVERED_ENDPOINTS)
            .filter(|t| !t.trim().is_empty())
        else {
            continue;
        };
        let map: BTreeMap<String, serde_json::Value> = match serde_json::from_str(text) {
            Ok(m) => m,
            Err(e) => {
                out.problems.push(format!(
                    "{}: annotation {} is not a JSON object: {e}",
                    node.name(),
                    crate::annotations::DISCOVERED_ENDPOINTS
                ));
                continue;
            }
        };
        for (key, value) in map {
            match observed_address(&value) {
                Ok(addr) => {
                    out.by_key.entry(key).or_insert(addr);
                }
                Err(why) => out.problems.push(format!("{}: {key}: {why}", node.name())),
            }
        }
    }
    out
}

fn observed_address(value: &serde_json::Value) -> Result<SocketAddr, String> {
    let ip_text = value.get("IP").and_then(|v| v.as_str()).unwrap_or("");
    let ip: IpAddr = ip_text
        .parse()
        .map_err(|_| format!("IP {ip_text:?} is not an IP address"))?;
    let ip = ip.to_canonical();
    let port = value.get("Port").and_then(|v| v.as_u64()).unwrap_or(0);
    let port = u16::try_from(port)
        .ok()
        .filter(|p| *p != 0)
        .ok_or_else(|| format!("Port {port} is not 1..65535"))?;
    let unusable = ip.is_loopback()
        || ip.is_unspecified()
        || ip.is_multicast()
        || match ip {
            IpAddr::V4(v4) => v4.is_link_local() || v4.is_broadcast(),
            IpAddr::V6(v6) => v6.is_unicast_link_local(),
        };
    if unusable {
        return Err(format!("{ip} cannot be reached from another cluster"));
    }
    Ok(SocketAddr::new(ip, port))
}

/// Replaces the endpoint of every Peer whose key the target observed with the observed
/// address (an endpoint equal to it, compared as addresses, is left alone). Applied per
/// target: one target's observations never reach another's Peers.
pub fn enrich(mut peers: Vec<Peer>, discovered: &Discovered) -> Vec<Peer> {
    for p in &mut peers {
        let Some(seen) = discovered.by_key.get(&p.spec.public_key) else {
            continue;
        };
        let current = p.spec.endpoint.as_ref().and_then(|e| {
            let ip: IpAddr = e.dns_or_ip.ip.as_deref()?.parse().ok()?;
            Some(SocketAddr::new(
                ip.to_canonical(),
                u16::try_from(e.port).ok()?,
            ))
        });
        if current != Some(*seen) {
            p.spec.endpoint = Some(endpoint(&seen.ip().to_string(), seen.port()));
        }
    }
    peers
}

/// A write to a target cluster.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum PeerAction {
    /// Create or update this Peer (server-side apply).
    Apply(Peer),
    /// Delete the Peer of this name.
    Delete(String),
    /// A Peer of this name exists and is not ours (no mesh label); it is left alone and
    /// reported.
    Conflict(String),
}

/// The writes that take a target cluster from `existing` (every Peer in it) to `desired`.
/// Nothing is written for a Peer whose public key, keepalive, endpoint, sorted allowed IPs and
/// labels already match (a preshared key someone added is kept). `may_delete` says whether a
/// Peer that is not desired may be deleted; it is only asked about Peers carrying the mesh
/// label, so a Peer meshdns did not write is never touched.
pub fn diff_target(
    desired: &[Peer],
    existing: &[Peer],
    may_delete: &dyn Fn(&Peer) -> bool,
) -> Vec<PeerAction> {
    let by_name: BTreeMap<&str, &Peer> = existing.iter().map(|p| (p.name.as_str(), p)).collect();
    let mut actions = Vec::new();
    for want in desired {
        match by_name.get(want.name.as_str()) {
            Some(have) if !have.labels.contains_key(LABEL_MESH) => {
                actions.push(PeerAction::Conflict(want.name.clone()));
            }
            Some(have) if same_peer(have, want) => {}
            _ => actions.push(PeerAction::Apply(want.clone())),
        }
    }
    let wanted: BTreeSet<&str> = desired.iter().map(|p| p.name.as_str()).collect();
    for have in existing {
        if !wanted.contains(have.name.as_str())
            && have.labels.contains_key(LABEL_MESH)
            && may_delete(have)
        {
            actions.push(PeerAction::Delete(have.name.clone()));
        }
    }
    actions
}

fn same_peer(have: &Peer, want: &Peer) -> bool {
    let sorted = |p: &Peer| {
        let mut v = p.spec.allowed_ips.clone();
        v.sort();
        v
    };
    let keepalive = |p: &Peer| p.spec.persistent_keepalive.filter(|k| *k != 0);
    have.spec.public_key == want.spec.public_key
        && keepalive(have) == keepalive(want)
        && have.spec.endpoint == want.spec.endpoint
        && sorted(have) == sorted(want)
        && want
            .labels
            .iter()
            .all(|(k, v)| have.labels.get(k) == Some(v))
}

/// The `(mesh, source)` a Peer's labels name, if it has both.
pub fn peer_owner(peer: &Peer) -> Option<(&str, &str)> {
    Some((
        peer.labels.get(LABEL_MESH)?.as_str(),
        peer.labels.get(LABEL_SOURCE_CLUSTER)?.as_str(),
    ))
}
