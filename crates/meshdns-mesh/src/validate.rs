//! Which nodes can be peered (with the reference operator's skip reasons, in its order) and
//! which meshes have overlapping networks.

use std::collections::{BTreeMap, HashSet};
use std::net::IpAddr;

use ipnet::IpNet;

use crate::annotations;
use crate::net::{HostPort, is_dns1123_subdomain, parse_cidr, parse_host_in_cidr};
use crate::types::{ClusterEntry, MeshSpec, Node};

/// Why a node gets no Peer. The strings are the reference operator's (the Event reason), plus
/// `NodePublicKeyInvalid`, a check it lacks.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum SkipReason {
    /// No `spec.podCIDRs`, or the first one does not parse.
    NodeNoPodCIDR,
    /// The first pod CIDR is not inside any of the cluster's `allowedNetworks`.
    NodePodCIDROutOfRange,
    /// `kilo.squat.ai/wireguard-ip` missing or empty.
    NodeNoWireguardIP,
    /// `kilo.squat.ai/wireguard-ip` is not `<ip>/<len>`.
    WGIPInvalid,
    /// The WireGuard address is not inside any of the cluster's `allowedNetworks`.
    WGIPOutOfRange,
    /// An earlier node (by name) already has this WireGuard address.
    WGIPDuplicate,
    /// `kilo.squat.ai/key` missing or empty.
    NodeNoPublicKey,
    /// `kilo.squat.ai/key` is not standard base64 of 32 bytes (Kilo would reject the Peer).
    NodePublicKeyInvalid,
    /// The endpoint annotation that wins the chain is malformed.
    NodeEndpointInvalid,
}

impl SkipReason {
    /// The reason string (Event reason, log field).
    pub fn as_str(self) -> &'static str {
        match self {
            SkipReason::NodeNoPodCIDR => "NodeNoPodCIDR",
            SkipReason::NodePodCIDROutOfRange => "NodePodCIDROutOfRange",
            SkipReason::NodeNoWireguardIP => "NodeNoWireguardIP",
            SkipReason::WGIPInvalid => "WGIPInvalid",
            SkipReason::WGIPOutOfRange => "WGIPOutOfRange",
            SkipReason::WGIPDuplicate => "WGIPDuplicate",
            SkipReason::NodeNoPublicKey => "NodeNoPublicKey",
            SkipReason::NodePublicKeyInvalid => "NodePublicKeyInvalid",
            SkipReason::NodeEndpointInvalid => "NodeEndpointInvalid",
        }
    }

    /// A node still joining the cluster (Kilo or the node IPAM has not annotated it yet): the
    /// controller looks again soon instead of waiting for the periodic resync.
    pub fn transient(self) -> bool {
        matches!(
            self,
            SkipReason::NodeNoPodCIDR | SkipReason::NodeNoWireguardIP | SkipReason::NodeNoPublicKey
        )
    }
}

impl std::fmt::Display for SkipReason {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// A node that gets no Peer, and why.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Skip {
    /// Node name.
    pub node: String,
    /// Reason.
    pub reason: SkipReason,
    /// What is wrong, naming the annotation or field and what would be accepted.
    pub message: String,
}

/// A node that passed validation, with everything its Peer is made from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ValidNode {
    /// Node name.
    pub name: String,
    /// The first pod CIDR, masked.
    pub pod_cidr: IpNet,
    /// The node's WireGuard (kilo0) address.
    pub wireguard_ip: IpAddr,
    /// The WireGuard public key.
    pub public_key: String,
    /// The endpoint from the resolution chain; `None` = roaming Peer.
    pub endpoint: Option<HostPort>,
    /// Every parseable `InternalIP`, in status order.
    pub internal_ips: Vec<IpAddr>,
}

/// Validates a cluster's nodes in name order: duplicate WireGuard addresses first (the first
/// node by name keeps its address), then per node pod CIDR, WireGuard address, public key and
/// endpoint; the first failure is the node's skip reason.
pub fn validate_nodes(entry: &ClusterEntry, nodes: &[Node]) -> (Vec<ValidNode>, Vec<Skip>) {
    let mut sorted: Vec<&Node> = nodes.iter().collect();
    sorted.sort_by(|a, b| a.name().cmp(b.name()));
    let networks: Vec<IpNet> = entry
        .allowed_networks
        .iter()
        .filter_map(|n| parse_cidr(n))
        .collect();
    let port = entry.effective_wireguard_port();

    let mut seen_wg: HashSet<String> = HashSet::new();
    let mut valid = Vec::new();
    let mut skipped = Vec::new();
    for node in sorted {
        let skip = |reason, message: String| Skip {
            node: node.name().to_string(),
            reason,
            message,
        };
        // Duplicate detection runs over every node before any other check, comparing host
        // addresses (prefix ignored), or the raw text when it does not parse.
        let wg_text = node.annotation(annotations::WIREGUARD_IP).unwrap_or("");
        if !wg_text.is_empty() {
            let key = parse_host_in_cidr(wg_text)
                .map(|(ip, _)| ip.to_string())
                .unwrap_or_else(|| wg_text.to_string());
            if !seen_wg.insert(key) {
                skipped.push(skip(
                    SkipReason::WGIPDuplicate,
                    format!(
                        "{} {wg_text:?} is already used by another node of the cluster",
                        annotations::WIREGUARD_IP
                    ),
                ));
                continue;
            }
        }
        match validate_node(node, &networks, port) {
            Ok(v) => valid.push(v),
            Err((reason, message)) => skipped.push(skip(reason, message)),
        }
    }
    (valid, skipped)
}

fn validate_node(
    node: &Node,
    networks: &[IpNet],
    port: u16,
) -> Result<ValidNode, (SkipReason, String)> {
    let pod_text = node.first_pod_cidr().ok_or((
        SkipReason::NodeNoPodCIDR,
        "spec.podCIDRs is empty (the node has no pod range yet)".to_string(),
    ))?;
    let pod_cidr = parse_cidr(pod_text).ok_or_else(|| {
        (
            SkipReason::NodeNoPodCIDR,
            format!("spec.podCIDRs[0] {pod_text:?} is not a CIDR"),
        )
    })?;
    if !networks.iter().any(|n| n.contains(&pod_cidr)) {
        return Err((
            SkipReason::NodePodCIDROutOfRange,
            format!("pod CIDR {pod_text} is not inside any of the cluster's allowedNetworks"),
        ));
    }
    let wg_text = node
        .annotation(annotations::WIREGUARD_IP)
        .filter(|s| !s.is_empty())
        .ok_or_else(|| {
            (
                SkipReason::NodeNoWireguardIP,
                format!(
                    "annotation {} is missing or empty",
                    annotations::WIREGUARD_IP
                ),
            )
        })?;
    let (wireguard_ip, _) = parse_host_in_cidr(wg_text).ok_or_else(|| {
        (
            SkipReason::WGIPInvalid,
            format!(
                "annotation {} {wg_text:?} is not <ip>/<prefix-length>",
                annotations::WIREGUARD_IP
            ),
        )
    })?;
    if !networks.iter().any(|n| n.contains(&wireguard_ip)) {
        return Err((
            SkipReason::WGIPOutOfRange,
            format!(
                "WireGuard address {wireguard_ip} is not inside any of the cluster's allowedNetworks"
            ),
        ));
    }
    let public_key = node
        .annotation(annotations::KEY)
        .filter(|s| !s.is_empty())
        .ok_or_else(|| {
            (
                SkipReason::NodeNoPublicKey,
                format!("annotation {} is missing or empty", annotations::KEY),
            )
        })?;
    if !valid_public_key(public_key) {
        return Err((
            SkipReason::NodePublicKeyInvalid,
            format!(
                "annotation {} {public_key:?} is not a WireGuard key (standard base64 of 32 bytes, 44 characters)",
                annotations::KEY
            ),
        ));
    }
    let endpoint = resolve_endpoint(node, port)
        .map_err(|message| (SkipReason::NodeEndpointInvalid, message))?;
    Ok(ValidNode {
        name: node.name().to_string(),
        pod_cidr,
        wireguard_ip,
        public_key: public_key.to_string(),
        endpoint,
        internal_ips: node
            .addresses_of("InternalIP")
            .filter_map(|a| a.parse().ok())
            .collect(),
    })
}

/// A WireGuard public key: standard base64 that decodes to exactly 32 bytes.
pub fn valid_public_key(key: &str) -> bool {
    data_encoding::BASE64
        .decode(key.as_bytes())
        .is_ok_and(|k| k.len() == 32)
}

/// The endpoint chain: `kilo.squat.ai/clustermesh-endpoint`, then
/// `kilo.squat.ai/force-endpoint` (each wins when non-empty; malformed is an error, never a
/// fall-through), then the first IPv4 `ExternalIP` (else the first IPv6 one) with the
/// cluster's WireGuard port. `Ok(None)`: no source, the Peer roams.
pub fn resolve_endpoint(node: &Node, port: u16) -> Result<Option<HostPort>, String> {
    for key in [
        annotations::CLUSTERMESH_ENDPOINT,
        annotations::FORCE_ENDPOINT,
    ] {
        let Some(text) = node.annotation(key).filter(|s| !s.is_empty()) else {
            continue;
        };
        let hp = HostPort::parse(text).map_err(|e| format!("annotation {key}: {e}"))?;
        if hp.ip().is_none() && !is_dns1123_subdomain(&hp.host) {
            return Err(format!(
                "annotation {key}: {:?} is neither an IP address nor a lowercase DNS name",
                hp.host
            ));
        }
        return Ok(Some(hp));
    }
    let external: Vec<IpAddr> = node
        .addresses_of("ExternalIP")
        .filter_map(|a| a.parse().ok())
        .collect();
    let ip = external
        .iter()
        .find(|ip| ip.is_ipv4())
        .or_else(|| external.first());
    Ok(ip.map(|ip| HostPort {
        host: ip.to_string(),
        port,
    }))
}

/// For every mesh of a namespace whose networks are unusable, the first problem found. Inside
/// a mesh every pair of CIDRs of all its clusters (a cluster's own included) must be disjoint
/// and parse; across meshes, entries of *different* cluster names must be disjoint (a hub
/// cluster may appear in several meshes with the same networks). The messages are the
/// reference operator's. Unlike the reference, which stops every mesh of the namespace at the
/// first problem, only the meshes involved are named here, so one bad mesh blocks itself and
/// the mesh it collides with, not its neighbours.
pub fn network_problems(meshes: &[(&str, &MeshSpec)]) -> BTreeMap<String, String> {
    let mut out: BTreeMap<String, String> = BTreeMap::new();
    let mut note = |mesh: &str, msg: String| {
        out.entry(mesh.to_string()).or_insert(msg);
    };
    // (mesh index, cluster name, cidr text, network)
    let mut all: Vec<(usize, &str, &str, IpNet)> = Vec::new();
    for (mi, (mesh, spec)) in meshes.iter().enumerate() {
        let mut mine: Vec<(&str, &str, IpNet)> = Vec::new();
        let mut bad = None;
        for entry in &spec.clusters {
            for text in &entry.allowed_networks {
                match parse_cidr(text) {
                    Some(net) => mine.push((&entry.name, text, net)),
                    None => {
                        bad.get_or_insert(format!(
                            "mesh {mesh:?}: cluster {:?}: invalid CIDR {text:?} in allowedNetworks (want <ip>/<prefix-length>)",
                            entry.name
                        ));
                    }
                }
            }
        }
        if let Some(msg) = bad {
            note(mesh, msg);
            continue;
        }
        'pairs: for (i, a) in mine.iter().enumerate() {
            for b in &mine[i + 1..] {
                if crate::net::cidr_overlaps(&a.2, &b.2) {
                    note(
                        mesh,
                        format!(
                            "mesh {mesh:?}: CIDR overlap between cluster {:?} ({}) and cluster {:?} ({})",
                            a.0, a.1, b.0, b.1
                        ),
                    );
                    break 'pairs;
                }
            }
        }
        all.extend(mine.into_iter().map(|(c, t, n)| (mi, c, t, n)));
    }
    for (i, a) in all.iter().enumerate() {
        for b in &all[i + 1..] {
            if a.0 == b.0 || a.1 == b.1 || !crate::net::cidr_overlaps(&a.3, &b.3) {
                continue;
            }
            let (ma, mb) = (meshes[a.0].0, meshes[b.0].0);
            let msg = format!(
                "CIDR overlap between mesh {ma:?} (cluster {:?}, {}) and mesh {mb:?} (cluster {:?}, {})",
                a.1, a.2, b.1, b.2
            );
            note(ma, msg.clone());
            note(mb, msg);
        }
    }
    out
}
