//! Table tests of the mesh planner: every case of kilo-clustermesh-operator's own tests
//! (peer building, residue networks, endpoint chain, discovered endpoints, keepalive, naming,
//! CIDR utilities, node validation, overlap), adapted to the flat `allowedNetworks` model, plus
//! one test per reference defect meshdns fixes.

use crate::annotations::*;
use crate::net::*;
use crate::plan::*;
use crate::types::*;
use crate::validate::*;
use crate::*;

mod discovered;
mod endpoints;
mod meshes;
mod naming;
mod net;
mod overlap;
mod peers;
mod validate;
mod writes;

pub(super) const KEY_A: &str = "AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA=";
pub(super) const KEY_B: &str = "BBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBA=";
pub(super) const KEY_C: &str = "CCCCCCCCCCCCCCCCCCCCCCCCCCCCCCCCCCCCCCCCCCA=";

pub(super) fn node(
    name: &str,
    pod: &[&str],
    annotations: &[(&str, &str)],
    addrs: &[(&str, &str)],
) -> Node {
    Node {
        name: name.into(),
        annotations: annotations
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect(),
        pod_cidrs: pod.iter().map(|s| s.to_string()).collect(),
        pod_cidr: None,
        addresses: addrs
            .iter()
            .map(|(t, a)| (t.to_string(), a.to_string()))
            .collect(),
    }
}

/// A node that passes validation in [`entry`]: pod 10.244.<i>.0/24, WireGuard 10.4.0.<i>.
pub(super) fn good(name: &str, i: u8, key: &str, extra: &[(&str, &str)]) -> Node {
    let pod = format!("10.244.{i}.0/24");
    let wg = format!("10.4.0.{i}/16");
    let mut ann = vec![(KEY, key), (WIREGUARD_IP, wg.as_str())];
    ann.extend_from_slice(extra);
    node(name, &[&pod], &ann, &[])
}

pub(super) fn entry(name: &str, networks: &[&str]) -> ClusterEntry {
    ClusterEntry {
        name: name.into(),
        allowed_networks: networks.iter().map(|s| s.to_string()).collect(),
        ..Default::default()
    }
}

pub(super) fn std_entry(name: &str) -> ClusterEntry {
    entry(name, &["10.244.0.0/16", "10.4.0.0/16"])
}

pub(super) fn peer_with_endpoint(
    name: &str,
    key: &str,
    ip: Option<&str>,
    dns: Option<&str>,
    port: u32,
) -> Peer {
    Peer {
        name: name.into(),
        labels: peer_labels("m", "src"),
        spec: PeerSpec {
            allowed_ips: vec!["10.1.0.0/24".into()],
            endpoint: Some(PeerEndpoint {
                dns_or_ip: DnsOrIp {
                    ip: ip.map(Into::into),
                    dns: dns.map(Into::into),
                },
                port,
            }),
            persistent_keepalive: None,
            preshared_key: None,
            public_key: key.into(),
        },
    }
}

pub(super) fn mesh_spec(clusters: Vec<ClusterEntry>) -> MeshSpec {
    MeshSpec { clusters }
}
