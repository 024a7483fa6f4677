//! `meshdns render mesh`: the mesh controller's planner on a directory of manifests.
//!
//! Layout: ClusterMesh manifests at the top of the directory, and one directory per member
//! cluster, `clusters/<name>/`, holding its Nodes as `kubectl get nodes -o yaml` prints them.
//! A cluster name denotes one cluster across the meshes of the directory.

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;

use anyhow::{Context, Result, bail};
use meshdns_mesh::dns::node_record_sets;
use meshdns_mesh::{
    ClusterNodes, MeshPlan, MeshSpec, Node, Peer, discovered_endpoints, enrich, merge_same_key,
    plan_meshes,
};
use meshdns_objects::dns::node_record_set;
use meshdns_objects::kilo::cluster_mesh_status;
use meshdns_objects::{ClusterMeshSpec, ClusterMeshStatus, events};
use meshdns_sources::read_manifests;
use serde_json::{Value, json};

use crate::render::{text, yaml_documents};

/// A ClusterMesh read from a manifest.
struct MeshObject {
    name: String,
    namespace: String,
    generation: Option<i64>,
    spec: ClusterMeshSpec,
}

/// Plans the meshes of `dir` and prints, as multi-document YAML: one `v1` `List` of Peers per
/// target cluster (annotated `meshdns.io/target-cluster`), the DNSRecordSets of meshes that
/// publish node names, each ClusterMesh with its computed status, then one Warning Event per
/// skipped node. Deterministic: clusters, meshes, Peers and Events are sorted by name.
pub fn render_mesh(dir: &Path) -> Result<String> {
    if !dir.is_dir() {
        bail!(
            "{}: want a directory with ClusterMesh manifests and clusters/<name>/ Node lists",
            dir.display()
        );
    }
    let meshes = load_meshes(dir)?;
    if meshes.is_empty() {
        bail!(
            "{}: no ClusterMesh manifest at the top of the directory",
            dir.display()
        );
    }
    let mut nodes: BTreeMap<String, std::result::Result<Vec<Node>, String>> = BTreeMap::new();
    for m in &meshes {
        for c in &m.spec.clusters {
            if !nodes.contains_key(&c.name) {
                nodes.insert(
                    c.name.clone(),
                    load_nodes(&dir.join("clusters").join(&c.name)),
                );
            }
        }
    }
    let planned: Vec<MeshSpec> = meshes.iter().map(|m| m.spec.to_plan()).collect();
    let specs: Vec<(&str, &MeshSpec)> = meshes
        .iter()
        .zip(&planned)
        .map(|(m, s)| (m.name.as_str(), s))
        .collect();
    let plans = plan_meshes(&specs, &|_, cluster| match nodes.get(cluster) {
        Some(Ok(list)) => ClusterNodes::Listed(list.clone()),
        Some(Err(why)) => ClusterNodes::Unavailable(why.clone()),
        None => ClusterNodes::Unavailable("not listed".into()),
    });

    let mut docs = Vec::new();
    let targets: BTreeSet<&str> = plans
        .iter()
        .filter(|p| p.blocked.is_none())
        .flat_map(|p| p.sources.iter().map(|s| s.cluster.as_str()))
        .collect();
    for target in targets {
        let wanted = plans.iter().flat_map(|p| p.peers_for(target)).collect();
        let target_nodes = match nodes.get(target) {
            Some(Ok(list)) => list.as_slice(),
            _ => &[],
        };
        let peers = enrich(merge_same_key(wanted), &discovered_endpoints(target_nodes));
        docs.push(peer_list(target, &peers)?);
    }
    for (m, plan) in meshes.iter().zip(&plans) {
        if let Some(dns) = &m.spec.dns {
            for set in node_record_sets(plan, &dns.to_plan()) {
                docs.push(serde_json::to_value(node_record_set(&set, &m.namespace))?);
            }
        }
    }
    for (m, plan) in meshes.iter().zip(&plans) {
        docs.push(mesh_status(m, plan));
    }
    for (m, plan) in meshes.iter().zip(&plans) {
        docs.extend(skip_events(m, plan));
    }
    yaml_documents(docs)
}

fn load_meshes(dir: &Path) -> Result<Vec<MeshObject>> {
    let mut top: Vec<_> = std::fs::read_dir(dir)
        .with_context(|| format!("cannot read directory {}", dir.display()))?
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.is_file())
        .collect();
    top.sort();
    let mut meshes = Vec::new();
    for object in read_manifests(&top).map_err(anyhow::Error::msg)? {
        if text(&object, &["kind"]) != Some("ClusterMesh") {
            continue;
        }
        let name = text(&object, &["metadata", "name"]).unwrap_or_default();
        let namespace = text(&object, &["metadata", "namespace"]).unwrap_or("default");
        let at = format!("ClusterMesh {namespace}/{name}");
        if name.is_empty() {
            bail!("{at}: metadata.name is required");
        }
        let spec: ClusterMeshSpec =
            serde_json::from_value(object.get("spec").cloned().unwrap_or(Value::Null))
                .with_context(|| format!("{at}: spec"))?;
        let problems = spec.problems();
        if !problems.is_empty() {
            bail!("{at}: {}", problems.join("; "));
        }
        meshes.push(MeshObject {
            name: name.to_string(),
            namespace: namespace.to_string(),
            generation: object
                .get("metadata")
                .and_then(|m| m.get("generation"))
                .and_then(Value::as_i64),
            spec,
        });
    }
    meshes.sort_by(|a, b| a.name.cmp(&b.name));
    if let Some(w) = meshes.windows(2).find(|w| w[0].name == w[1].name) {
        bail!("ClusterMesh {:?} is given twice", w[0].name);
    }
    Ok(meshes)
}

/// A cluster's Nodes, or why they cannot be read (the cluster is then unavailable, as an
/// unreachable cluster is to the controller).
fn load_nodes(dir: &Path) -> std::result::Result<Vec<Node>, String> {
    if !dir.is_dir() {
        return Err(format!("{} not found", dir.display()));
    }
    let objects = read_manifests(&[dir.to_path_buf()]).map_err(|e| e.to_string())?;
    objects
        .into_iter()
        .filter(|o| text(o, &["kind"]) == Some("Node"))
        .map(|o| {
            let name = text(&o, &["metadata", "name"])
                .unwrap_or_default()
                .to_string();
            serde_json::from_value::<meshdns_objects::core::Node>(std::sync::Arc::unwrap_or_clone(
                o,
            ))
            .map(|n| n.to_plan())
            .map_err(|e| format!("{}: Node {name}: {e}", dir.display()))
        })
        .collect()
}

/// The Peers a target keeps, as one `List` annotated with the target's name.
fn peer_list(target: &str, peers: &[Peer]) -> Result<Value> {
    let items = peers
        .iter()
        .map(|p| serde_json::to_value(meshdns_objects::Peer::from_plan(p)))
        .collect::<Result<Vec<_>, _>>()?;
    Ok(json!({
        "apiVersion": "v1", "kind": "List",
        "metadata": {"annotations": {"meshdns.io/target-cluster": target}},
        "items": items,
    }))
}

/// A ClusterMesh with only the status the controller would write.
fn mesh_status(m: &MeshObject, plan: &MeshPlan) -> Value {
    let status = ClusterMeshStatus::from_plan(&plan.status(m.generation));
    cluster_mesh_status(&m.name, &m.namespace, &status)
}

/// One Warning Event per skipped node, as the controller records them.
fn skip_events(m: &MeshObject, plan: &MeshPlan) -> Vec<Value> {
    plan.sources
        .iter()
        .flat_map(|source| {
            source.skipped.iter().map(|skip| {
                events::node_skipped_object(&m.name, &m.namespace, &source.cluster, skip)
            })
        })
        .collect()
}
