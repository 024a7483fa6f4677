//! Peer names and labels, exactly as kilo-clustermesh-operator makes them, so meshdns can take
//! over Peers that operator wrote (and the other way round).

use std::collections::BTreeMap;

use sha2::{Digest, Sha256};

/// Label naming the ClusterMesh a Peer belongs to.
pub const LABEL_MESH: &str = "kilo-clustermesh.io/mesh";
/// Label naming the cluster whose node a Peer describes.
pub const LABEL_SOURCE_CLUSTER: &str = "kilo-clustermesh.io/source-cluster";

/// Longest Kubernetes object name.
const MAX_NAME: usize = 253;

/// `<mesh>--<source>--<node>`, sanitised to a valid object name: lowercase, every character
/// outside `[a-z0-9.-]` replaced by `-` (runs kept), leading and trailing `-`/`.` trimmed.
/// A result longer than 253 characters keeps its first 236, trimmed again at the end, plus
/// `-` and 16 hex characters of SHA-256 over the unsanitised `<mesh>--<source>--<node>`.
pub fn peer_name(mesh: &str, source: &str, node: &str) -> String {
    object_name(&format!("{mesh}--{source}--{node}"))
}

/// Sanitises (and if needed hash-truncates) any raw name the way [`peer_name`] does.
pub fn object_name(raw: &str) -> String {
    let sanitised: String = raw
        .chars()
        .map(|c| {
            let c = c.to_ascii_lowercase();
            if c.is_ascii_lowercase() || c.is_ascii_digit() || c == '.' || c == '-' {
                c
            } else {
                '-'
            }
        })
        .collect();
    let trimmed = trim_edges(&sanitised);
    if trimmed.len() <= MAX_NAME {
        return trimmed.to_string();
    }
    let digest = Sha256::digest(raw.as_bytes());
    let hash = data_encoding::HEXLOWER.encode(&digest[..8]);
    let head = trim_edges(&trimmed[..MAX_NAME - 17]);
    format!("{head}-{hash}")
}

fn trim_edges(s: &str) -> &str {
    s.trim_matches(|c| c == '-' || c == '.')
}

/// The two labels on every Peer meshdns writes for `(mesh, source)`.
pub fn peer_labels(mesh: &str, source: &str) -> BTreeMap<String, String> {
    BTreeMap::from([
        (LABEL_MESH.to_string(), mesh.to_string()),
        (LABEL_SOURCE_CLUSTER.to_string(), source.to_string()),
    ])
}
