//! The Events the controllers record, each built once. The controllers hand them to
//! kube-runtime's `Recorder` (which writes `events.k8s.io/v1` Events about the object);
//! `meshdns render mesh` prints the skip Events as `v1` Events with the same type, reason,
//! action and message.

use kube::runtime::events::{Event, EventType};
use meshdns_iroh::connector::ConditionPlan;
use meshdns_mesh::Skip;
use serde_json::{Value, json};

use crate::KILO_API_VERSION;

/// A node of `cluster` that gets no Peer: a Warning with the skip reason, noted
/// `<cluster>/<node>: <what is wrong>`, on the ClusterMesh.
pub fn node_skipped(cluster: &str, skip: &Skip) -> Event {
    Event {
        type_: EventType::Warning,
        reason: skip.reason.as_str().to_string(),
        note: Some(format!("{cluster}/{}: {}", skip.node, skip.message)),
        action: "SkipNodePeering".into(),
        secondary: None,
    }
}

/// [`node_skipped`] as a `v1` Event about ClusterMesh `namespace/mesh`, named
/// deterministically: what `meshdns render mesh` prints.
pub fn node_skipped_object(mesh: &str, namespace: &str, cluster: &str, skip: &Skip) -> Value {
    let event = node_skipped(cluster, skip);
    let name = meshdns_mesh::naming::object_name(&format!(
        "{mesh}.{cluster}.{}.{}",
        skip.node,
        event.reason.to_ascii_lowercase()
    ));
    let type_ = match event.type_ {
        EventType::Warning => "Warning",
        EventType::Normal => "Normal",
    };
    json!({
        "apiVersion": "v1", "kind": "Event",
        "metadata": {"name": name, "namespace": namespace},
        "type": type_, "reason": event.reason, "action": event.action,
        "message": event.note,
        "involvedObject": {"apiVersion": KILO_API_VERSION, "kind": "ClusterMesh",
            "name": mesh, "namespace": namespace},
        "reportingComponent": "meshdns",
    })
}

/// The iroh controller released DNSRecordSet `name` (a Connector let go of it, or its key
/// changed).
pub fn record_released(name: &str) -> Event {
    Event {
        type_: EventType::Normal,
        reason: "Released".into(),
        note: Some(format!("Released iroh DNS record {name}.")),
        action: "Release".into(),
        secondary: None,
    }
}

/// A Connector's `IrohDNSPublished` condition changed to `cond`: a Warning when the Connector
/// cannot be published, Normal otherwise.
pub fn publish_condition(cond: &ConditionPlan) -> Event {
    let type_ = if cond.reason == "Invalid" {
        EventType::Warning
    } else {
        EventType::Normal
    };
    Event {
        type_,
        reason: cond.reason.to_string(),
        note: Some(cond.message.clone()),
        action: "PublishIrohDNS".into(),
        secondary: None,
    }
}
