//! Every Kubernetes object meshdns reads or writes, typed once, and the conversions between
//! those objects and the planners' plain data.
//!
//! - [`datum`]: datum's `Connector` and `ConnectorClass` (`networking.datumapis.com/v1alpha1`),
//!   read by the iroh controller; [`Connector::to_input`] is what the iroh planner sees of
//!   one.
//! - [`dns`]: dns-operator's `DNSZone` and `DNSRecordSet` (`dns.networking.miloapis.com/v1alpha1`),
//!   written by both controllers ([`dns::iroh_record_set`], [`dns::node_record_set`]) and read
//!   by `meshdns serve --kubernetes`.
//! - [`kilo`]: `ClusterMesh` (`kilo.squat.ai/v1alpha1`, owned: its spec read into
//!   [`meshdns_mesh::MeshSpec`], its status written from [`meshdns_mesh::MeshStatus`]) and
//!   Kilo's `Peer` (written from, and read into, [`meshdns_mesh::Peer`]).
//! - [`core`]: the Kubernetes kinds of the core and coordination groups: the fields of a `Node`
//!   the mesh planner reads, typed here; `Lease`, `ConfigMap`, `Secret` and `Namespace` are
//!   k8s-openapi's, re-exported so every user names them from here.
//! - [`gateway`]: Gateway API's `Gateway` and routes (`HTTPRoute`, `GRPCRoute`, `TLSRoute`),
//!   read by `meshdns serve --kube-source`.
//! - [`conditions`]: the one rule for a condition's `lastTransitionTime`.
//! - [`events`]: the Events the controllers record (and `meshdns render mesh` prints).
//!
//! Each API version is declared once, here. The planners (`meshdns-iroh`, `meshdns-mesh`)
//! know nothing of these types; this crate depends on them, never the reverse.
//!
//! Only the fields meshdns uses are typed. Everything else an object carries is kept in a
//! `rest` map, so an object read and written back loses nothing. The types implement
//! [`kube_core::Resource`] by hand rather than through `#[derive(CustomResource)]`. meshdns does not
//! own most of these CRDs and must match them field for field, and the derive would generate
//! a schema from the Rust types instead. This crate depends on `kube-core` (the trait and
//! object types), not on the kube client, so crates that only read objects (`meshdns-sources`,
//! the fuzz targets) build no HTTP client. The CRDs printed by `meshdns crds` ([`crds`]) are
//! written out in YAML, with the reference schemas' validation.

use std::collections::BTreeMap;

use serde_json::Value;

pub mod conditions;
pub mod core;
pub mod datum;
pub mod dns;
pub mod events;
pub mod gateway;
pub mod kilo;

pub use datum::{
    ConnectionDetails, Connector, ConnectorAddress, ConnectorClass, ConnectorClassSpec,
    ConnectorSpec, ConnectorStatus, NameRef, PublicKeyDetails,
};
pub use dns::{
    CaaData, Content, DNSRecordSet, DNSRecordSetSpec, DNSZone, DNSZoneSpec, MxData, RecordEntry,
    SoaData, SrvData, SvcbData, TlsaData,
};
pub use kilo::{
    ClusterEntry, ClusterMesh, ClusterMeshSpec, ClusterMeshStatus, ClusterStatus, DnsOrIp,
    MeshCondition, MeshDns, Peer, PeerEndpoint, PeerSpec, SecretKeyRef,
};

/// `apiVersion` of datum's networking objects (Connector, ConnectorClass).
pub const DATUM_API_VERSION: &str = "networking.datumapis.com/v1alpha1";
/// `apiVersion` of dns-operator's DNSZone and DNSRecordSet.
pub const DNS_API_VERSION: &str = "dns.networking.miloapis.com/v1alpha1";
/// `apiVersion` of Kilo's Peer and of the ClusterMesh.
pub const KILO_API_VERSION: &str = "kilo.squat.ai/v1alpha1";

/// Fields an object carries that meshdns does not model, kept for lossless round trips.
pub type Rest = BTreeMap<String, Value>;

/// `apiVersion` and `kind` of an object meshdns builds, as its `rest`.
fn type_fields(api_version: &str, kind: &str) -> Rest {
    Rest::from([
        ("apiVersion".to_string(), Value::from(api_version)),
        ("kind".to_string(), Value::from(kind)),
    ])
}

macro_rules! resource {
    ($ty:ident, $group:literal, $version:literal, $kind:literal, $plural:literal, $scope:ty) => {
        impl kube_core::Resource for $ty {
            type DynamicType = ();
            type Scope = $scope;
            fn kind(_: &()) -> std::borrow::Cow<'_, str> {
                $kind.into()
            }
            fn group(_: &()) -> std::borrow::Cow<'_, str> {
                $group.into()
            }
            fn version(_: &()) -> std::borrow::Cow<'_, str> {
                $version.into()
            }
            fn plural(_: &()) -> std::borrow::Cow<'_, str> {
                $plural.into()
            }
            fn meta(&self) -> &k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta {
                &self.metadata
            }
            fn meta_mut(
                &mut self,
            ) -> &mut k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta {
                &mut self.metadata
            }
        }
    };
}
pub(crate) use resource;

pub(crate) type Namespaced = k8s_openapi::NamespaceResourceScope;
pub(crate) type ClusterScoped = k8s_openapi::ClusterResourceScope;

/// The CRDs meshdns owns (ClusterMesh) and compatible copies of those it consumes
/// (Connector, ConnectorClass, DNSZone, DNSRecordSet, Peer), as multi-document YAML.
pub fn crds() -> &'static str {
    include_str!("crds.yaml")
}

#[cfg(test)]
mod tests;
