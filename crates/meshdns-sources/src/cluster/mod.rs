//! The cluster's own objects as DNS names (`--kube-source`): Services (with their
//! EndpointSlices), Ingresses and Gateway API routes, read the way external-dns and k8s_gateway read them, decided
//! here, purely, into records and a verdict per object.
//!
//! - **Names.** external-dns's annotations under either prefix ([`names::PREFIXES`]):
//!   `hostname` (comma-separated), `internal-hostname`, `ttl` (seconds or a duration),
//!   `target` (Ingresses only, as external-dns reads it); with `default_names`, also
//!   `<name>.<namespace>.<zone>` for every LoadBalancer and headless Service, as k8s_gateway
//!   answers. `meshdns.io/ignore: "true"` keeps an object out.
//! - **Service.** `LoadBalancer`: `spec.externalIPs` when given, else
//!   `status.loadBalancer.ingress` (an IP as A/AAAA, a hostname as CNAME), at its hostnames; its
//!   ClusterIPs at its internal hostnames. Headless (`clusterIP: None`): the ready addresses of
//!   its EndpointSlices at both, and `<endpoint hostname>.<name>` for endpoints with a hostname.
//!   `ClusterIP` (and `NodePort`): its ClusterIPs at its internal hostnames, and at its hostnames
//!   only with `internal` (external-dns's `--publish-internal-services`). `ExternalName`: a
//!   CNAME to `spec.externalName` at its hostnames.
//! - **Ingress.** Its rules' hosts and its hostname annotation → the `target` annotation, else
//!   `status.loadBalancer.ingress`; only the classes named, when some are.
//! - **Gateway API routes** (HTTPRoute, GRPCRoute, TLSRoute). Its host names (and hostname
//!   annotation), each narrowed to the hostname of every listener it may attach to under each
//!   parent Gateway whose status says `Accepted: True` (`sectionName`, `port`, protocol and
//!   `allowedRoutes` applied) → that Gateway's `target` annotation, else its
//!   `status.addresses`. A route with no host names gives none.
//! - **DNSEndpoint** (external-dns's CRD). Each endpoint's targets as records of its type (any
//!   type served but SOA), at its `recordTTL` (0: the default).
//! - **Conflicts.** Objects naming one name with addresses: every address is served (round
//!   robin), at the oldest object's TTL. A CNAME against anything else from another object: the
//!   older object (creation time, then kind, namespace and name) keeps the name, the other is
//!   reported. An object that gives a name both addresses and a host name keeps the addresses.
//!
//! Where the records go is decided when the catalog is assembled ([`crate::snapshot`]): each
//! into the deepest zone served, after every file and DNSZone, which win a name and type they
//! also give; a name in no served zone is reported.

mod dnsendpoint;
pub mod names;
mod routes;
mod service;

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

use meshdns_objects::core::{ObjectMeta, Time};
use meshdns_zone::{Name, RType, Record};
use serde::Deserialize;
use serde_json::Value;

use crate::content::Problem;
use crate::manifests::Manifest;
pub use names::{Selector, Target};

/// A kind of object `--kube-source` reads.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Kind {
    /// `v1` Service (and `discovery.k8s.io/v1` EndpointSlices for headless ones).
    Service,
    /// `networking.k8s.io/v1` Ingress.
    Ingress,
    /// `gateway.networking.k8s.io/v1` HTTPRoute (and the Gateways it attaches to).
    HttpRoute,
    /// `gateway.networking.k8s.io/v1` GRPCRoute.
    GrpcRoute,
    /// `gateway.networking.k8s.io` TLSRoute: `v1`, and `v1alpha2`/`v1alpha3` from files.
    TlsRoute,
    /// external-dns's `externaldns.k8s.io/v1alpha1` DNSEndpoint.
    DnsEndpoint,
}

impl Kind {
    /// Every kind, as the flag names them.
    pub const ALL: [(&str, Kind); 6] = [
        ("service", Kind::Service),
        ("ingress", Kind::Ingress),
        ("httproute", Kind::HttpRoute),
        ("grpcroute", Kind::GrpcRoute),
        ("tlsroute", Kind::TlsRoute),
        ("dnsendpoint", Kind::DnsEndpoint),
    ];

    /// The kind a `--kube-source` item names.
    pub fn parse(text: &str) -> Result<Kind, String> {
        let t = text.trim().to_ascii_lowercase();
        Kind::ALL
            .iter()
            .find(|(n, _)| *n == t)
            .map(|(_, k)| *k)
            .ok_or_else(|| {
                format!(
                    "{text:?} is not a source kind (service, ingress, httproute, grpcroute, \
                     tlsroute, dnsendpoint)"
                )
            })
    }

    /// The kind's name in objects and messages.
    pub fn object_kind(self) -> &'static str {
        match self {
            Kind::Service => "Service",
            Kind::Ingress => "Ingress",
            Kind::HttpRoute => "HTTPRoute",
            Kind::GrpcRoute => "GRPCRoute",
            Kind::TlsRoute => "TLSRoute",
            Kind::DnsEndpoint => "DNSEndpoint",
        }
    }
}

/// How the cluster's objects are read.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ClusterSettings {
    /// The kinds read (none: the source is off).
    pub kinds: BTreeSet<Kind>,
    /// `<name>.<namespace>.<zone>` for every LoadBalancer and headless Service.
    pub default_names: Option<Name>,
    /// ClusterIP Services' addresses at their `hostname` names too.
    pub internal: bool,
    /// TTL when an object gives none.
    pub default_ttl: u32,
    /// Namespaces read (empty: all).
    pub namespaces: Vec<String>,
    /// Labels an object must carry.
    pub selector: Selector,
    /// Ingress classes read (empty: all).
    pub ingress_classes: Vec<String>,
    /// Gateway classes whose Gateways' routes are read (empty: all).
    pub gateway_classes: Vec<String>,
}

impl ClusterSettings {
    /// Whether any kind is read.
    pub fn enabled(&self) -> bool {
        !self.kinds.is_empty()
    }
}

/// What the objects give: records by owner name (placed into zones when the catalog is
/// assembled), the problems, and a verdict per object read.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct ClusterRecords {
    /// Each record, with the object that gave it (`Service default/web`).
    pub records: Vec<(Record, String)>,
    /// Everything reported, each naming its object and field.
    pub problems: Vec<Problem>,
    /// Every object read, oldest first.
    pub verdicts: Vec<ObjectVerdict>,
}

/// What was decided for one object.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ObjectVerdict {
    /// `Service`, `Ingress`.
    pub kind: &'static str,
    /// Namespace.
    pub namespace: String,
    /// Name.
    pub name: String,
    /// Its `apiVersion`.
    pub api_version: String,
    /// Its `metadata.uid`, when it has one (objects from a cluster do).
    pub uid: Option<String>,
    /// Its `metadata.generation` (a DNSEndpoint's `status.observedGeneration` is written from it).
    pub generation: Option<i64>,
    /// The names it gives records at.
    pub names: Vec<Name>,
    /// Each thing at fault and why (the object's other names are still served).
    pub problems: Vec<ObjectProblem>,
}

/// Why part of an object is not served: an Event's reason, and a metric's label.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Reason {
    /// A value that does not parse (an address, a name, a TTL, a record type).
    InvalidField,
    /// A value meshdns does not serve (a routing policy, a NamedAddress, a ClusterIP at a
    /// hostname without `--kube-source-internal`).
    Unsupported,
    /// A route under no Gateway that accepted it, or whose host names match no listener.
    NotAttached,
    /// A name another object (an older one) already gives.
    Conflict,
    /// A name outside every zone served, or one a source that takes precedence gives (decided
    /// when the catalog is assembled).
    NotServed,
}

impl Reason {
    /// Every reason, in order.
    pub const ALL: [Reason; 5] = [
        Reason::InvalidField,
        Reason::Unsupported,
        Reason::NotAttached,
        Reason::Conflict,
        Reason::NotServed,
    ];

    /// CamelCase, as Events and metrics name it.
    pub fn as_str(self) -> &'static str {
        match self {
            Reason::InvalidField => "InvalidField",
            Reason::Unsupported => "Unsupported",
            Reason::NotAttached => "NotAttached",
            Reason::Conflict => "Conflict",
            Reason::NotServed => "NotServed",
        }
    }
}

/// The most of a problem's text kept: an object's values are echoed in it, and an annotation
/// may be a megabyte (logs, metrics and Events stay bounded whatever an object carries).
const WHY_MAX: usize = 512;

/// `why`, cut to [`WHY_MAX`] bytes (on a character boundary) saying how long it was.
fn clip(mut why: String) -> String {
    if why.len() <= WHY_MAX {
        return why;
    }
    let whole = why.len();
    let mut cut = WHY_MAX;
    while !why.is_char_boundary(cut) {
        cut -= 1;
    }
    why.truncate(cut);
    why.push_str(&format!("... ({whole} bytes)"));
    why
}

/// One thing at fault in an object.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct ObjectProblem {
    /// Why.
    pub reason: Reason,
    /// The field (`spec.rules[0].host`), or the name at fault.
    pub field: String,
    /// What is wrong and what would be accepted.
    pub why: String,
}

impl std::fmt::Display for ObjectProblem {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}: {}", self.field, self.why)
    }
}

impl ObjectVerdict {
    /// `Service default/web`.
    pub fn label(&self) -> String {
        format!("{} {}/{}", self.kind, self.namespace, self.name)
    }
}

/// Each object's reading, kept by (kind, namespace, name) with the versions it was read at, so
/// that a hand-over of tens of thousands of objects of which a few changed reads only those
/// (the objects of a cluster carry a `resourceVersion`; those of files do not, and are read
/// every time). Held by a live source between readings.
#[derive(Debug, Default)]
pub struct ReadCache {
    entries: std::collections::HashMap<(Kind, String, String), Cached>,
}

/// One object's cached reading: the versions it was read at, its facts, its reading.
type Cached = (String, Facts, Arc<Reading>);

/// What the reading takes from an object's `metadata` (parsed only when the object is read
/// again: a cached reading keeps these too).
#[derive(Debug, Clone)]
struct Facts {
    namespace: String,
    name: String,
    created: Option<Time>,
    uid: Option<String>,
    generation: Option<i64>,
    /// It passes the namespace and label filters and is not ignored.
    wanted: bool,
}

impl Facts {
    fn of(meta: &ObjectMeta, settings: &ClusterSettings) -> Facts {
        Facts {
            namespace: meta.namespace.clone().unwrap_or_default(),
            name: meta.name.clone().unwrap_or_default(),
            created: meta.creation_timestamp.clone(),
            uid: meta.uid.clone(),
            generation: meta.generation,
            wanted: wanted(meta, settings),
        }
    }
}

/// What an object's reading depends on: its own `resourceVersion`, and those of its
/// EndpointSlices (a Service) or of every Gateway (a route); `None` without one. Read from the
/// objects as given, without parsing them.
fn fingerprint(
    kind: Kind,
    value: &Value,
    key: &(Kind, String, String),
    slices: &service::Slices<'_>,
    gateways: &str,
) -> Option<String> {
    fn version(v: &Value) -> Option<&str> {
        v["metadata"]["resourceVersion"]
            .as_str()
            .filter(|v| !v.is_empty())
    }
    let mut out = version(value)?.to_string();
    match kind {
        Kind::Service => {
            let (_, ns, name) = key;
            let ns = if ns.is_empty() { "default" } else { ns };
            for s in slices.get(&(ns, name.as_str())).into_iter().flatten() {
                out.push(',');
                out.push_str(version(s)?);
            }
        }
        Kind::HttpRoute | Kind::GrpcRoute | Kind::TlsRoute => {
            out.push(';');
            out.push_str(gateways);
        }
        Kind::Ingress | Kind::DnsEndpoint => {}
    }
    Some(out)
}

/// One name an object gives, pointing at one target.
#[derive(Debug, Clone)]
struct Claim {
    name: Name,
    target: Target,
    ttl: u32,
}

/// What one object's reading gives.
#[derive(Debug, Default, Clone)]
struct Reading {
    claims: Vec<Claim>,
    problems: Vec<ObjectProblem>,
}

impl Reading {
    /// A value that does not parse ([`Reason::InvalidField`]).
    fn problem(&mut self, field: impl Into<String>, why: impl Into<String>) {
        self.report(Reason::InvalidField, field, why);
    }

    fn report(&mut self, reason: Reason, field: impl Into<String>, why: impl Into<String>) {
        self.problems.push(ObjectProblem {
            reason,
            field: field.into(),
            why: clip(why.into()),
        });
    }

    fn claim(&mut self, name: &Name, target: &Target, ttl: u32) {
        self.claims.push(Claim {
            name: name.clone(),
            target: target.clone(),
            ttl,
        });
    }

    /// The TTL annotation, else `default`.
    fn ttl(&mut self, meta: &ObjectMeta, default: u32) -> u32 {
        let annotations = meta.annotations.clone().unwrap_or_default();
        match names::annotation(&annotations, "ttl") {
            Some((key, text)) => names::ttl(text).unwrap_or_else(|why| {
                self.problem(format!("metadata.annotations[{key}]"), why);
                default
            }),
            None => default,
        }
    }

    /// The names of a comma-separated name annotation (`hostname`, `internal-hostname`).
    fn annotated_names(&mut self, meta: &ObjectMeta, suffix: &str) -> Vec<Name> {
        self.annotated_list(meta, suffix, "", names::host_name)
            .unwrap_or_default()
    }

    /// The items of a comma-separated annotation (`None`: no such annotation), each parsed by
    /// `parse`; a bad one is reported (its field after `at`, which names the object when it is
    /// another's: `Gateway infra/edge `) and left out.
    fn annotated_list<T>(
        &mut self,
        meta: &ObjectMeta,
        suffix: &str,
        at: &str,
        parse: fn(&str) -> Result<T, String>,
    ) -> Option<Vec<T>> {
        let annotations = meta.annotations.clone().unwrap_or_default();
        let (key, text) = names::annotation(&annotations, suffix)?;
        let mut out = Vec::new();
        for item in names::split_list(text) {
            match parse(&item) {
                Ok(v) => out.push(v),
                Err(why) => self.problem(format!("{at}metadata.annotations[{key}]"), why),
            }
        }
        Some(out)
    }

    /// Targets read from a `status.loadBalancer.ingress` list.
    fn load_balancer(
        &mut self,
        field: &str,
        ingress: &[(Option<String>, Option<String>)],
    ) -> Vec<Target> {
        let mut out = Vec::new();
        for (i, (ip, hostname)) in ingress.iter().enumerate() {
            if let Some(ip) = ip {
                match ip.parse() {
                    Ok(ip) => out.push(Target::Ip(ip)),
                    Err(_) => self.problem(
                        format!("{field}[{i}].ip"),
                        format!("{ip:?} is not an IP address"),
                    ),
                }
            }
            if let Some(host) = hostname {
                match names::target(host) {
                    Ok(t @ Target::Host(_)) => out.push(t),
                    _ => self.problem(
                        format!("{field}[{i}].hostname"),
                        format!("{host:?} is not a host name"),
                    ),
                }
            }
        }
        out
    }
}

/// An object of a kind read, kept with what identifies it.
struct Object<'a> {
    kind: Kind,
    facts: Facts,
    value: &'a Value,
}

fn text<'a>(v: &'a Value, key: &str) -> &'a str {
    v.get(key).and_then(Value::as_str).unwrap_or("")
}

/// The kind of `o` among those read, by `apiVersion` and `kind`.
fn kind_of(o: &Value) -> Option<Kind> {
    match (text(o, "apiVersion"), text(o, "kind")) {
        ("v1", "Service") => Some(Kind::Service),
        ("networking.k8s.io/v1", "Ingress") => Some(Kind::Ingress),
        ("gateway.networking.k8s.io/v1", "HTTPRoute") => Some(Kind::HttpRoute),
        ("gateway.networking.k8s.io/v1", "GRPCRoute") => Some(Kind::GrpcRoute),
        (
            "gateway.networking.k8s.io/v1"
            | "gateway.networking.k8s.io/v1alpha2"
            | "gateway.networking.k8s.io/v1alpha3",
            "TLSRoute",
        ) => Some(Kind::TlsRoute),
        ("externaldns.k8s.io/v1alpha1", "DNSEndpoint") => Some(Kind::DnsEndpoint),
        _ => None,
    }
}

/// Age order: creation time (absent last), then kind, namespace and name.
fn age<'o>(o: &'o Object<'_>) -> (bool, Option<&'o Time>, Kind, &'o str, &'o str) {
    let f = &o.facts;
    (
        f.created.is_none(),
        f.created.as_ref(),
        o.kind,
        &f.namespace,
        &f.name,
    )
}

/// Reads the objects of the kinds `settings` names among `objects` (`label` names the source
/// in problems).
pub fn read(label: &str, objects: &[Manifest], settings: &ClusterSettings) -> ClusterRecords {
    read_cached(label, objects, settings, &mut ReadCache::default())
}

/// [`read`], each object read again only when it (or what its reading depends on) changed
/// since `cache` last saw it; `cache` is left holding this reading's objects only.
pub fn read_cached(
    label: &str,
    objects: &[Manifest],
    settings: &ClusterSettings,
    cache: &mut ReadCache,
) -> ClusterRecords {
    let mut out = ClusterRecords::default();
    if !settings.enabled() {
        return out;
    }
    let slices = service::slices_by_service(objects);
    let gateways = routes::gateways(objects);
    let gateway_versions: String = gateways
        .values()
        .map(|g| g.metadata.resource_version.clone().unwrap_or_default())
        .collect::<Vec<_>>()
        .join(",");
    let mut kept_cache = std::collections::HashMap::with_capacity(cache.entries.len());
    // Each object read, with its reading: from the cache when neither it nor what it depends
    // on changed (its metadata not even parsed), else read now.
    let mut read: Vec<(Object<'_>, Arc<Reading>)> = Vec::new();
    for o in objects {
        let Some(kind) = kind_of(o).filter(|k| settings.kinds.contains(k)) else {
            continue;
        };
        let meta = &o["metadata"];
        let key = (
            kind,
            meta["namespace"].as_str().unwrap_or_default().to_string(),
            meta["name"].as_str().unwrap_or_default().to_string(),
        );
        let print = fingerprint(kind, o, &key, &slices, &gateway_versions);
        let cached = cache
            .entries
            .remove(&key)
            .filter(|(was, _, _)| print.as_ref() == Some(was));
        let (facts, reading) = match cached {
            Some((_, facts, reading)) => (facts, reading),
            None => {
                let meta: ObjectMeta = o
                    .get("metadata")
                    .and_then(|m| ObjectMeta::deserialize(m).ok())
                    .unwrap_or_default();
                let facts = Facts::of(&meta, settings);
                let reading = if facts.wanted {
                    match kind {
                        Kind::Service => service::read_service(o, &meta, settings, &slices),
                        Kind::Ingress => service::read_ingress(o, &meta, settings),
                        Kind::DnsEndpoint => dnsendpoint::read_dnsendpoint(o, settings),
                        kind => routes::read_route(kind, o, &meta, settings, &gateways),
                    }
                } else {
                    Reading::default()
                };
                (facts, Arc::new(reading))
            }
        };
        if let Some(print) = print {
            kept_cache.insert(key, (print, facts.clone(), reading.clone()));
        }
        if facts.wanted {
            read.push((
                Object {
                    kind,
                    facts,
                    value: o,
                },
                reading,
            ));
        }
    }
    cache.entries = kept_cache;
    read.sort_by(|(a, _), (b, _)| age(a).cmp(&age(b)));
    let (read, readings): (Vec<Object<'_>>, Vec<Arc<Reading>>) = read.into_iter().unzip();
    let Decided {
        kept,
        mut conflicts,
        lost,
    } = decide(&read, &readings);
    let mut labels = Vec::with_capacity(read.len());
    for (i, (o, reading)) in read.iter().zip(&readings).enumerate() {
        let mut problems = reading.problems.clone();
        problems.append(&mut conflicts[i]);
        let mut verdict = ObjectVerdict {
            kind: o.kind.object_kind(),
            namespace: o.facts.namespace.clone(),
            name: o.facts.name.clone(),
            api_version: text(o.value, "apiVersion").to_string(),
            uid: o.facts.uid.clone(),
            generation: o.facts.generation,
            names: Vec::new(),
            problems,
        };
        // A name the object lost entirely is not among its names.
        let mut seen = BTreeSet::new();
        for claim in &reading.claims {
            if !lost.contains(&(i, &claim.name)) && seen.insert(&claim.name) {
                verdict.names.push(claim.name.clone());
            }
        }
        let object = verdict.label();
        for p in &verdict.problems {
            let why = match p.reason {
                Reason::Conflict => format!("Conflict: {}", p.why),
                _ => p.why.clone(),
            };
            out.problems
                .push(Problem::new(label, format!("{object} {}", p.field), why));
        }
        out.verdicts.push(verdict);
        labels.push(object);
    }
    for (name, (target, ttl, owner)) in kept {
        let data = target.rdata();
        out.records.push((
            Record {
                name: name.clone(),
                ttl,
                data,
            },
            labels[owner].clone(),
        ));
    }
    out
}

/// Whether an object passes the namespace and label filters and is not ignored.
fn wanted(meta: &ObjectMeta, settings: &ClusterSettings) -> bool {
    let ns = meta.namespace.as_deref().unwrap_or("");
    let labels = meta.labels.clone().unwrap_or_default();
    let ignored = meta
        .annotations
        .as_ref()
        .and_then(|a| a.get(names::IGNORE))
        .is_some_and(|v| v.eq_ignore_ascii_case("true"));
    (settings.namespaces.is_empty() || settings.namespaces.iter().any(|n| n == ns))
        && settings.selector.matches(&labels)
        && !ignored
}

/// What [`decide`] decided: the records kept, as (name, (target, TTL, object index)); the
/// conflicts reported to each object (by index); and each (object, name) an object lost
/// entirely.
struct Decided<'r> {
    kept: Vec<(&'r Name, (&'r Target, u32, usize))>,
    conflicts: Vec<Vec<ObjectProblem>>,
    lost: BTreeSet<(usize, &'r Name)>,
}

/// Decides every name's records from every object's claims (`read` oldest first).
fn decide<'r>(read: &[Object<'_>], readings: &'r [Arc<Reading>]) -> Decided<'r> {
    // name -> (object index, claim) in age order
    let mut by_name: BTreeMap<&Name, Vec<(usize, &Claim)>> = BTreeMap::new();
    for (i, reading) in readings.iter().enumerate() {
        for claim in &reading.claims {
            by_name.entry(&claim.name).or_default().push((i, claim));
        }
    }
    let label = |i: usize| {
        format!(
            "{} {}/{}",
            read[i].kind.object_kind(),
            read[i].facts.namespace,
            read[i].facts.name
        )
    };
    let mut kept = Vec::new();
    let mut conflicts = vec![Vec::new(); readings.len()];
    // (object, name) refused, each reported once.
    let mut refused: BTreeSet<(usize, &Name)> = BTreeSet::new();
    let mut conflict = |i: usize, name: &'r Name, why: String| {
        if refused.insert((i, name)) {
            conflicts[i].push(ObjectProblem {
                reason: Reason::Conflict,
                field: name.to_string(),
                why: clip(why),
            });
        }
    };
    for (name, claims) in by_name {
        let oldest = claims[0].0;
        let oldest_has_data = claims
            .iter()
            .any(|(i, c)| *i == oldest && !matches!(c.target, Target::Host(_)));
        if oldest_has_data {
            // Data other than a CNAME (addresses, a DNSEndpoint's TXT, MX, ...) from every
            // object, each type at the TTL of the oldest object that gave it; host names
            // refused.
            let mut ttl_of: BTreeMap<RType, u32> = BTreeMap::new();
            // Addresses by set (a headless Service may have thousands); other data is few.
            let mut ips = BTreeSet::new();
            let mut data: Vec<&Target> = Vec::new();
            for (i, c) in &claims {
                match &c.target {
                    Target::Ip(_) | Target::Data(_) => {
                        let new = match &c.target {
                            Target::Ip(ip) => ips.insert(*ip),
                            other => {
                                !data.contains(&other) && {
                                    data.push(other);
                                    true
                                }
                            }
                        };
                        let ttl = *ttl_of.entry(c.target.rtype()).or_insert(c.ttl);
                        if new {
                            kept.push((name, (&c.target, ttl, *i)));
                        }
                    }
                    Target::Host(h) => {
                        let why = if *i == oldest {
                            format!(
                                "{name} has addresses from this object; the CNAME to {h} cannot join them"
                            )
                        } else {
                            format!(
                                "{name} has addresses from {}, which is older; a CNAME to {h} cannot join them",
                                label(oldest)
                            )
                        };
                        conflict(*i, name, why);
                    }
                }
            }
        } else {
            // The oldest object's first host name; everything else refused.
            let (_, first) = claims[0];
            kept.push((name, (&first.target, first.ttl, oldest)));
            for (i, c) in &claims[1..] {
                // The same target from another object (two Ingresses behind one load
                // balancer's host name) is the same record: no conflict.
                if c.target == first.target {
                    continue;
                }
                let Target::Host(h) = &first.target else {
                    continue;
                };
                let why = if *i == oldest {
                    format!("{name} is already a CNAME to {h}; one name has one CNAME")
                } else {
                    format!(
                        "{name} is a CNAME to {h} from {}, which is older",
                        label(oldest)
                    )
                };
                conflict(*i, name, why);
            }
        }
    }
    // A name an object lost entirely: refused, and none of its records there kept.
    let kept_by: BTreeSet<(usize, &Name)> = kept.iter().map(|(n, (_, _, o))| (*o, *n)).collect();
    let lost = refused
        .into_iter()
        .filter(|key| !kept_by.contains(key))
        .collect();
    Decided {
        kept,
        conflicts,
        lost,
    }
}

#[cfg(test)]
mod tests;
