//! Gateway API objects (`gateway.networking.k8s.io`) as `meshdns serve --kube-source` reads
//! them: a `Gateway`'s listeners and addresses, and the routes (`HTTPRoute`, `GRPCRoute`,
//! `TLSRoute`) that attach to it; and external-dns's `DNSEndpoint`, the other kind of
//! object that only names endpoints. Only the fields read are typed; they are read, never written.
//! TLSRoute is read as `v1` (Gateway API 1.5 and later) from a cluster, and also as `v1alpha2`
//! and `v1alpha3` from files (the experimental channel's versions, same fields).

use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use serde::{Deserialize, Serialize};

use crate::{Namespaced, resource};

/// The Gateway API group.
pub const GATEWAY_GROUP: &str = "gateway.networking.k8s.io";
/// `apiVersion` of Gateways, HTTPRoutes, GRPCRoutes and (from Gateway API 1.5) TLSRoutes.
pub const GATEWAY_API_VERSION: &str = "gateway.networking.k8s.io/v1";

/// A `Gateway`: its class, listeners and the addresses its controller assigned.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct Gateway {
    /// Standard metadata.
    pub metadata: ObjectMeta,
    /// `spec`.
    #[serde(default)]
    pub spec: GatewaySpec,
    /// `status`.
    #[serde(default)]
    pub status: GatewayStatus,
}
resource!(
    Gateway,
    "gateway.networking.k8s.io",
    "v1",
    "Gateway",
    "gateways",
    Namespaced
);

/// `Gateway.spec`.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct GatewaySpec {
    /// The GatewayClass.
    #[serde(default)]
    pub gateway_class_name: String,
    /// Where routes attach.
    #[serde(default)]
    pub listeners: Vec<Listener>,
}

/// One listener of a Gateway.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Listener {
    /// Its name (a route's `sectionName`).
    #[serde(default)]
    pub name: String,
    /// The host names it accepts (`*.example.org`; absent: any).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub hostname: Option<String>,
    /// Port.
    #[serde(default)]
    pub port: i32,
    /// `HTTP`, `HTTPS`, `TLS`, `TCP`, `UDP`.
    #[serde(default)]
    pub protocol: String,
    /// Which routes may attach.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub allowed_routes: Option<AllowedRoutes>,
}

/// `Listener.allowedRoutes`.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct AllowedRoutes {
    /// The namespaces routes may come from.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub namespaces: Option<RouteNamespaces>,
    /// The kinds of routes that may attach (empty: those of the listener's protocol).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub kinds: Vec<RouteGroupKind>,
}

/// One kind in `allowedRoutes.kinds`.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct RouteGroupKind {
    /// API group (default `gateway.networking.k8s.io`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub group: Option<String>,
    /// Kind (`HTTPRoute`).
    #[serde(default)]
    pub kind: String,
}

/// `allowedRoutes.namespaces`.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct RouteNamespaces {
    /// `Same` (the default), `All` or `Selector`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub from: Option<String>,
}

/// `Gateway.status`.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct GatewayStatus {
    /// The addresses the Gateway's controller assigned.
    #[serde(default)]
    pub addresses: Vec<GatewayAddress>,
}

/// One address of a Gateway.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct GatewayAddress {
    /// `IPAddress` (the default), `Hostname` or `NamedAddress`.
    #[serde(default, rename = "type", skip_serializing_if = "Option::is_none")]
    pub type_: Option<String>,
    /// The address.
    #[serde(default)]
    pub value: String,
}

/// What HTTPRoutes, GRPCRoutes and TLSRoutes share and meshdns reads: their host names, the
/// parents they name, and the parents that answered.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct Route {
    /// Standard metadata.
    pub metadata: ObjectMeta,
    /// `spec`.
    #[serde(default)]
    pub spec: RouteSpec,
    /// `status`.
    #[serde(default)]
    pub status: RouteStatus,
}

/// A route's `spec`.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct RouteSpec {
    /// The Gateways (or their listeners) it attaches to.
    #[serde(default)]
    pub parent_refs: Vec<ParentRef>,
    /// The host names it serves.
    #[serde(default)]
    pub hostnames: Vec<String>,
}

/// A reference to a route's parent.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ParentRef {
    /// API group (default `gateway.networking.k8s.io`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub group: Option<String>,
    /// Kind (default `Gateway`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub kind: Option<String>,
    /// Namespace (default: the route's).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub namespace: Option<String>,
    /// Name.
    #[serde(default)]
    pub name: String,
    /// One listener, by name.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub section_name: Option<String>,
    /// One port.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub port: Option<i32>,
}

/// A route's `status`.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct RouteStatus {
    /// What each parent's controller decided.
    #[serde(default)]
    pub parents: Vec<RouteParentStatus>,
}

/// One parent's decision on a route.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct RouteParentStatus {
    /// The parent.
    #[serde(default)]
    pub parent_ref: ParentRef,
    /// Its conditions (`Accepted`, `ResolvedRefs`).
    #[serde(default)]
    pub conditions: Vec<RouteCondition>,
}

/// A condition's type and status.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct RouteCondition {
    /// `Accepted`, ...
    #[serde(default, rename = "type")]
    pub type_: String,
    /// `True`, `False`, `Unknown`.
    #[serde(default)]
    pub status: String,
}

macro_rules! route_kind {
    ($ty:ident, $version:literal, $kind:literal, $plural:literal) => {
        #[doc = concat!("A `", $kind, "` (", $version, "), read as a [`Route`].")]
        #[derive(Debug, Clone, Default, Serialize, Deserialize)]
        pub struct $ty {
            /// Standard metadata.
            pub metadata: ObjectMeta,
            /// `spec`.
            #[serde(default)]
            pub spec: RouteSpec,
            /// `status`.
            #[serde(default)]
            pub status: RouteStatus,
        }
        resource!(
            $ty,
            "gateway.networking.k8s.io",
            $version,
            $kind,
            $plural,
            Namespaced
        );
    };
}

route_kind!(HTTPRoute, "v1", "HTTPRoute", "httproutes");
route_kind!(GRPCRoute, "v1", "GRPCRoute", "grpcroutes");
route_kind!(TLSRoute, "v1", "TLSRoute", "tlsroutes");

/// external-dns's `DNSEndpoint` (`externaldns.k8s.io/v1alpha1`): records of any type, each
/// endpoint a name, a type and its targets. Read by `meshdns serve --kube-source dnsendpoint`.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct DNSEndpoint {
    /// Standard metadata.
    pub metadata: ObjectMeta,
    /// `spec`.
    #[serde(default)]
    pub spec: DNSEndpointSpec,
    /// `status`.
    #[serde(default)]
    pub status: DNSEndpointStatus,
}
resource!(
    DNSEndpoint,
    "externaldns.k8s.io",
    "v1alpha1",
    "DNSEndpoint",
    "dnsendpoints",
    Namespaced
);

/// `apiVersion` of external-dns's DNSEndpoint.
pub const DNSENDPOINT_API_VERSION: &str = "externaldns.k8s.io/v1alpha1";

/// `DNSEndpoint.spec`.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct DNSEndpointSpec {
    /// The records.
    #[serde(default)]
    pub endpoints: Vec<Endpoint>,
}

/// One endpoint of a DNSEndpoint: a name, a type and its targets.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Endpoint {
    /// The owner name.
    #[serde(default)]
    pub dns_name: String,
    /// The data, one record each, in presentation form.
    #[serde(default)]
    pub targets: Vec<String>,
    /// `A`, `AAAA`, `CNAME`, `TXT`, `MX`, `SRV`, ...
    #[serde(default)]
    pub record_type: String,
    /// TTL in seconds (0 or absent: not configured).
    #[serde(default, rename = "recordTTL", skip_serializing_if = "Option::is_none")]
    pub record_ttl: Option<i64>,
    /// A routing policy's identifier (weighted, geo, ...), which a plain DNS server cannot honour.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub set_identifier: Option<String>,
}

/// `DNSEndpoint.status`.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct DNSEndpointStatus {
    /// The generation of the spec last read.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub observed_generation: Option<i64>,
}
