//! The Events the controllers record, each built once. The controllers hand them to
//! kube-runtime's `Recorder` (which writes `events.k8s.io/v1` Events about the object;
//! `meshdns_kube` converts an [`Event`] to kube-runtime's, field for field);
//! `meshdns render mesh` prints the skip Events as `v1` Events with the same type, reason,
//! action and message. The type is this crate's own so that reading objects needs no client.

use meshdns_iroh::connector::ConditionPlan;
use meshdns_mesh::Skip;
use serde_json::{Value, json};

use crate::KILO_API_VERSION;

/// An Event about an object: the fields of kube-runtime's `events::Event`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Event {
    /// Normal or Warning.
    pub type_: EventType,
    /// Why (CamelCase, machine-readable).
    pub reason: String,
    /// What happened, for a human.
    pub note: Option<String>,
    /// What was done or failed (CamelCase).
    pub action: String,
}

/// An Event's type.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum EventType {
    /// Nothing is wrong.
    Normal,
    /// Something may need attention.
    Warning,
}

impl EventType {
    /// `Normal` or `Warning`, as Events carry it.
    pub fn as_str(self) -> &'static str {
        match self {
            EventType::Normal => "Normal",
            EventType::Warning => "Warning",
        }
    }
}

/// A node of `cluster` that gets no Peer: a Warning with the skip reason, noted
/// `<cluster>/<node>: <what is wrong>`, on the ClusterMesh.
pub fn node_skipped(cluster: &str, skip: &Skip) -> Event {
    Event {
        type_: EventType::Warning,
        reason: skip.reason.as_str().to_string(),
        note: Some(format!("{cluster}/{}: {}", skip.node, skip.message)),
        action: "SkipNodePeering".into(),
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
    let type_ = event.type_.as_str();
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
    }
}

/// What is at fault in one of the cluster's objects `meshdns serve --kube-source` reads (an
/// address that does not parse, a conflict, a name in no zone served): a Warning with the
/// reason (`InvalidField`, `Unsupported`, `NotAttached`, `Conflict`, `NotServed`), noted
/// `<field>: <what is wrong>`, cut to the 1 kB an Event's note may hold.
pub fn object_problem(reason: &str, field: &str, why: &str) -> Event {
    let mut note = format!("{field}: {why}");
    if note.len() > NOTE_MAX {
        let mut cut = NOTE_MAX - 3;
        while !note.is_char_boundary(cut) {
            cut -= 1;
        }
        note.truncate(cut);
        note.push_str("...");
    }
    Event {
        type_: EventType::Warning,
        reason: reason.to_string(),
        note: Some(note),
        action: "Serve".into(),
    }
}

/// The longest note the API server takes (`events.k8s.io/v1`: 1 kB).
const NOTE_MAX: usize = 1024;
