//! Kilo's objects (`kilo.squat.ai/v1alpha1`): the `ClusterMesh` meshdns owns, and the
//! `Peer`s it writes. Their shapes are kilo-clustermesh-operator's (the flat `allowedNetworks`
//! model, plus meshdns's optional `spec.dns`), camelCase with optional fields omitted.
//!
//! The mesh planner never sees these types: [`ClusterMeshSpec::to_plan`] and [`Peer::to_plan`]
//! read them into its data, and [`Peer::from_plan`] and [`ClusterMeshStatus::stamped`] write
//! its results back.

use std::collections::HashSet;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use meshdns_mesh::net::is_dns1123_subdomain;
use serde::{Deserialize, Serialize};
use serde_json::{Value, json};

use crate::conditions::transition_time;
use crate::{ClusterScoped, KILO_API_VERSION, Namespaced, Rest, resource, type_fields};

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

/// `{name}` reference to an object in the same namespace (`name` required, unlike datum's
/// [`crate::NameRef`]).
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
    pub conditions: Vec<MeshCondition>,
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

/// A ClusterMesh status condition: metav1.Condition's shape, the transition time absent until
/// the controller stamps it ([`ClusterMeshStatus::stamped`]).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct MeshCondition {
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

/// `spec` of a Kilo `Peer`.
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

impl ClusterMeshSpec {
    /// What the ClusterMesh CRD's schema rejects, checked again here for manifests that never
    /// met an API server (`meshdns render mesh`) and for clusters that run an older CRD: at least
    /// two clusters, each name a DNS label of at most 63 characters and unique in the mesh, at
    /// least one allowed network, `wireguardPort` 1..65535, `persistentKeepalive` 0..65535, both
    /// keys of `kubeconfigSecretRef`. Each problem names its field.
    pub fn problems(&self) -> Vec<String> {
        let spec = self;
        let mut out = Vec::new();
        if spec.clusters.len() < 2 {
            out.push(format!(
                "spec.clusters: a mesh needs at least 2 clusters, found {}",
                spec.clusters.len()
            ));
        }
        let mut names = HashSet::new();
        for (i, c) in spec.clusters.iter().enumerate() {
            let at = format!("spec.clusters[{i}]");
            let label_ok =
                c.name.len() <= 63 && is_dns1123_subdomain(&c.name) && !c.name.contains('.');
            if !label_ok {
                out.push(format!(
                "{at}.name: {:?} is not a DNS label (lowercase letters, digits and '-', at most 63)",
                c.name
            ));
            }
            if !names.insert(c.name.as_str()) {
                out.push(format!("{at}.name: {:?} appears twice", c.name));
            }
            if c.allowed_networks.is_empty() {
                out.push(format!(
                    "{at}.allowedNetworks: at least one CIDR is required"
                ));
            }
            if let Some(p) = c.wireguard_port
                && !(1..=65535).contains(&p)
            {
                out.push(format!("{at}.wireguardPort: {p} is not 1..65535"));
            }
            if let Some(k) = c.persistent_keepalive
                && !(0..=65535).contains(&k)
            {
                out.push(format!("{at}.persistentKeepalive: {k} is not 0..65535"));
            }
            if let Some(r) = &c.kubeconfig_secret_ref
                && (r.name.is_empty() || r.key.is_empty())
            {
                out.push(format!(
                    "{at}.kubeconfigSecretRef: both name and key are required"
                ));
            }
        }
        if let Some(dns) = &spec.dns
            && dns.dns_zone_ref.name.is_empty()
        {
            out.push("spec.dns.dnsZoneRef.name: must be set".to_string());
        }
        out
    }
}

impl ClusterEntry {
    /// What the planner reads of this member cluster.
    pub fn to_plan(&self) -> meshdns_mesh::ClusterEntry {
        meshdns_mesh::ClusterEntry {
            name: self.name.clone(),
            allowed_networks: self.allowed_networks.clone(),
            wireguard_port: self.wireguard_port,
            persistent_keepalive: self.persistent_keepalive,
        }
    }
}

impl ClusterMeshSpec {
    /// What the planner reads of this spec: its member clusters.
    pub fn to_plan(&self) -> meshdns_mesh::MeshSpec {
        meshdns_mesh::MeshSpec {
            clusters: self.clusters.iter().map(ClusterEntry::to_plan).collect(),
        }
    }
}

impl MeshDns {
    /// Where the planner's node-name record sets go.
    pub fn to_plan(&self) -> meshdns_mesh::NodeNames {
        meshdns_mesh::NodeNames {
            zone_name: self.dns_zone_ref.name.clone(),
            ttl_seconds: self.ttl_seconds,
        }
    }
}

impl ClusterMeshStatus {
    /// The status a plan gives, without transition times (as `meshdns render mesh` prints it).
    pub fn from_plan(planned: &meshdns_mesh::MeshStatus) -> ClusterMeshStatus {
        ClusterMeshStatus {
            clusters: planned
                .clusters
                .iter()
                .map(|c| ClusterStatus {
                    name: c.name.clone(),
                    registered_peers: c.registered_peers,
                    skipped_nodes: c.skipped_nodes,
                })
                .collect(),
            conditions: planned
                .conditions
                .iter()
                .map(|c| MeshCondition {
                    type_: c.type_.clone(),
                    status: c.status.clone(),
                    reason: c.reason.clone(),
                    message: c.message.clone(),
                    observed_generation: c.observed_generation,
                    last_transition_time: None,
                })
                .collect(),
        }
    }

    /// The status to write for a plan, given the `current` one: each condition's
    /// `lastTransitionTime` by [the one rule](crate::conditions::transition_time), `now` for a
    /// new status. The controller writes it only when it differs from `current`.
    pub fn stamped(
        planned: &meshdns_mesh::MeshStatus,
        current: &ClusterMeshStatus,
        now: &str,
    ) -> ClusterMeshStatus {
        let mut status = ClusterMeshStatus::from_plan(planned);
        let now = now.to_string();
        for c in &mut status.conditions {
            let before = current.conditions.iter().find(|x| x.type_ == c.type_);
            c.last_transition_time = Some(transition_time(
                before.map(|b| (b.status.as_str(), b.last_transition_time.as_ref())),
                &c.status,
                &now,
            ));
        }
        status
    }
}

/// A ClusterMesh with only a status, as the controller would write it: what
/// `meshdns render mesh` prints for each mesh.
pub fn cluster_mesh_status(name: &str, namespace: &str, status: &ClusterMeshStatus) -> Value {
    json!({
        "apiVersion": KILO_API_VERSION, "kind": "ClusterMesh",
        "metadata": {"name": name, "namespace": namespace},
        "status": status,
    })
}

impl From<&PeerSpec> for meshdns_mesh::PeerSpec {
    fn from(s: &PeerSpec) -> meshdns_mesh::PeerSpec {
        meshdns_mesh::PeerSpec {
            allowed_ips: s.allowed_ips.clone(),
            endpoint: s.endpoint.as_ref().map(|e| meshdns_mesh::PeerEndpoint {
                dns_or_ip: meshdns_mesh::DnsOrIp {
                    dns: e.dns_or_ip.dns.clone(),
                    ip: e.dns_or_ip.ip.clone(),
                },
                port: e.port,
            }),
            persistent_keepalive: s.persistent_keepalive,
            preshared_key: s.preshared_key.clone(),
            public_key: s.public_key.clone(),
        }
    }
}

impl From<&meshdns_mesh::PeerSpec> for PeerSpec {
    fn from(s: &meshdns_mesh::PeerSpec) -> PeerSpec {
        PeerSpec {
            allowed_ips: s.allowed_ips.clone(),
            endpoint: s.endpoint.as_ref().map(|e| PeerEndpoint {
                dns_or_ip: DnsOrIp {
                    dns: e.dns_or_ip.dns.clone(),
                    ip: e.dns_or_ip.ip.clone(),
                },
                port: e.port,
            }),
            persistent_keepalive: s.persistent_keepalive,
            preshared_key: s.preshared_key.clone(),
            public_key: s.public_key.clone(),
        }
    }
}

impl Peer {
    /// The planner's view of this Peer.
    pub fn to_plan(&self) -> meshdns_mesh::Peer {
        meshdns_mesh::Peer {
            name: self.metadata.name.clone().unwrap_or_default(),
            labels: self.metadata.labels.clone().unwrap_or_default(),
            spec: meshdns_mesh::PeerSpec::from(&self.spec),
        }
    }

    /// The Peer object for a planned Peer: what the mesh controller applies and
    /// `meshdns render mesh` prints.
    pub fn from_plan(p: &meshdns_mesh::Peer) -> Peer {
        Peer {
            metadata: ObjectMeta {
                name: Some(p.name.clone()),
                labels: Some(p.labels.clone()),
                ..ObjectMeta::default()
            },
            spec: PeerSpec::from(&p.spec),
            rest: type_fields(KILO_API_VERSION, "Peer"),
        }
    }
}
