//! Everything in meshdns that talks to a Kubernetes API server. The objects it reads and
//! writes are typed in `meshdns-objects`; the decisions are the pure planners'. This crate only
//! reads, calls, and writes.
//!
//! - [`controllers`]: the two controllers.
//!   - [`controllers::iroh`] keeps one `iroh-<z32>` DNSRecordSet per iroh endpoint id of datum
//!     Connectors, claimed by the first Connector to create it (datum's
//!     network-services-operator semantics, with its known defects fixed).
//!   - [`controllers::mesh`] keeps Kilo Peers in every member cluster of each ClusterMesh.
//!
//!   Each reconcile reads the current state, asks the planner (`meshdns-iroh`, `meshdns-mesh`)
//!   what should be, and writes only the difference: a steady state costs no API writes.
//! - [`serve`]: what `meshdns serve --kubernetes` reads and writes, none of it a controller:
//!   [`serve::records`] reflects DNSZones and DNSRecordSets into a `ManifestFeed`,
//!   [`serve::configmap`] follows one ConfigMap key, and [`serve::status`] writes
//!   dns-operator's status on those objects.
//! - [`leader`] elects one active replica through a Lease (controllers and the status writer),
//!   and [`metrics`] counts what the controllers do.
//!
//! Shared here: [`Error`], [`set_finalizer`] (the one finalizer patch) and the kubeconfig
//! client for remote clusters.

pub mod controllers;
pub mod leader;
pub mod metrics;
pub mod serve;

/// What went wrong in a reconcile.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// The Kubernetes API refused or failed.
    #[error("kubernetes API: {0}")]
    Kube(#[from] kube::Error),
    /// An object could not be encoded or decoded.
    #[error("object encoding: {0}")]
    Json(#[from] serde_json::Error),
    /// A cluster could not be reached (its kubeconfig is missing or unusable).
    #[error("cluster {cluster}: {reason}")]
    Cluster {
        /// The cluster's name.
        cluster: String,
        /// What is wrong.
        reason: String,
    },
}

impl Error {
    /// A short label for metrics: `conflict`, `not_found`, `api`, `encoding`, `cluster`.
    pub fn kind(&self) -> &'static str {
        match self {
            Error::Kube(kube::Error::Api(s)) if s.code == 409 => "conflict",
            Error::Kube(kube::Error::Api(s)) if s.code == 404 => "not_found",
            Error::Kube(_) => "api",
            Error::Json(_) => "encoding",
            Error::Cluster { .. } => "cluster",
        }
    }
}

/// Adds (`present`) or removes `finalizer` on `obj` with a merge patch guarded by its
/// `resourceVersion`, so a concurrent change fails with a conflict instead of being
/// overwritten. Returns the object as written; writes nothing when it already is as asked.
pub async fn set_finalizer<K>(
    api: &kube::Api<K>,
    obj: &K,
    finalizer: &str,
    present: bool,
) -> Result<K, kube::Error>
where
    K: kube::Resource + Clone + serde::de::DeserializeOwned + std::fmt::Debug,
{
    use kube::ResourceExt;
    let has = obj.finalizers().iter().any(|f| f == finalizer);
    if has == present {
        return Ok(obj.clone());
    }
    let mut finalizers: Vec<&str> = obj
        .finalizers()
        .iter()
        .map(String::as_str)
        .filter(|f| *f != finalizer)
        .collect();
    if present {
        finalizers.push(finalizer);
    }
    let patch = serde_json::json!({"metadata": {
        "finalizers": finalizers, "resourceVersion": obj.resource_version()}});
    api.patch(
        &obj.name_any(),
        &kube::api::PatchParams::default(),
        &kube::api::Patch::Merge(&patch),
    )
    .await
}

/// Whether an API error is `404 Not Found`.
pub fn is_not_found(e: &kube::Error) -> bool {
    matches!(e, kube::Error::Api(s) if s.code == 404)
}

/// Whether an API error is `409` (AlreadyExists or Conflict).
pub fn is_conflict(e: &kube::Error) -> bool {
    matches!(e, kube::Error::Api(s) if s.code == 409)
}

/// A client from kubeconfig text (a Secret's value).
pub async fn client_from_kubeconfig(bytes: &[u8]) -> Result<kube::Client, String> {
    let text = std::str::from_utf8(bytes).map_err(|_| "kubeconfig is not UTF-8".to_string())?;
    let kc =
        kube::config::Kubeconfig::from_yaml(text).map_err(|e| format!("not a kubeconfig: {e}"))?;
    let config = kube::Config::from_custom_kubeconfig(kc, &Default::default())
        .await
        .map_err(|e| e.to_string())?;
    kube::Client::try_from(config).map_err(|e| e.to_string())
}

/// Records `event` (built in `meshdns_objects::events`) about the object `about` through
/// kube-runtime's `Recorder`, logging a failure: an Event is advice, never a reconcile error.
pub(crate) async fn publish_event(
    recorder: &kube::runtime::events::Recorder,
    event: &meshdns_objects::events::Event,
    about: &k8s_openapi::api::core::v1::ObjectReference,
) {
    use kube::runtime::events::{Event, EventType};
    use meshdns_objects::events::EventType as Type;
    let event = Event {
        type_: match event.type_ {
            Type::Normal => EventType::Normal,
            Type::Warning => EventType::Warning,
        },
        reason: event.reason.clone(),
        note: event.note.clone(),
        action: event.action.clone(),
        secondary: None,
    };
    if let Err(e) = recorder.publish(&event, about).await {
        tracing::warn!(error = %e, "event not recorded");
    }
}
