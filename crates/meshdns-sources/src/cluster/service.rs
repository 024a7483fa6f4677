//! One Service's or Ingress's names and targets (the rules are in the module above).

use std::collections::BTreeMap;

use meshdns_objects::core::{EndpointSlice, Ingress, ObjectMeta, Service};
use meshdns_zone::Name;
use serde::Deserialize;
use serde_json::Value;

use super::names::{self, Target};
use super::{ClusterSettings, Reading, Reason};
use crate::manifests::Manifest;

/// The label an EndpointSlice names its Service with.
const SERVICE_NAME_LABEL: &str = "kubernetes.io/service-name";

/// Every EndpointSlice among `objects`, by (namespace, Service name), as given: a slice is
/// parsed only when its Service is read (most hand-overs read few of them).
pub(super) fn slices_by_service(objects: &[Manifest]) -> Slices<'_> {
    let mut out: Slices<'_> = BTreeMap::new();
    for o in objects {
        if o.get("apiVersion").and_then(Value::as_str) != Some("discovery.k8s.io/v1")
            || o.get("kind").and_then(Value::as_str) != Some("EndpointSlice")
        {
            continue;
        }
        let meta = &o["metadata"];
        let Some(service) = meta["labels"][SERVICE_NAME_LABEL].as_str() else {
            continue;
        };
        // An object of a file without a namespace is in `default`, as for its Service.
        let ns = meta["namespace"]
            .as_str()
            .filter(|n| !n.is_empty())
            .unwrap_or("default");
        out.entry((ns, service)).or_default().push(o);
    }
    out
}

/// The EndpointSlices of each Service, by (namespace, Service name), unparsed.
pub(super) type Slices<'a> = BTreeMap<(&'a str, &'a str), Vec<&'a Manifest>>;

/// A typed object, or the problem with its shape.
fn typed<T: serde::de::DeserializeOwned>(value: &Value, reading: &mut Reading) -> Option<T> {
    match Deserialize::deserialize(value) {
        Ok(t) => Some(t),
        Err(e) => {
            reading.problem("spec", format!("not of the kind's shape: {e}"));
            None
        }
    }
}

pub(super) fn read_service(
    value: &Value,
    meta: &ObjectMeta,
    settings: &ClusterSettings,
    slices: &Slices<'_>,
) -> Reading {
    let mut r = Reading::default();
    let Some(svc) = typed::<Service>(value, &mut r) else {
        return r;
    };
    let spec = svc.spec.unwrap_or_default();
    let ttl = r.ttl(meta, settings.default_ttl);
    let mut hostnames = r.annotated_names(meta, "hostname");
    let internal_names = r.annotated_names(meta, "internal-hostname");
    // An object of a file without a namespace is in `default`, as `kubectl apply` puts it.
    let ns = meta
        .namespace
        .clone()
        .filter(|n| !n.is_empty())
        .unwrap_or_else(|| "default".into());
    let name = meta.name.clone().unwrap_or_default();
    let kind = spec.type_.as_deref().unwrap_or("ClusterIP");
    let headless = spec.cluster_ip.as_deref() == Some("None");
    if let Some(zone) = &settings.default_names
        && (kind == "LoadBalancer" || headless)
    {
        match Name::parse(&format!("{name}.{ns}"), Some(zone)) {
            Ok(n) => hostnames.push(n),
            Err(e) => r.problem(
                "metadata.name",
                format!("{name}.{ns}.{zone} is not a name: {e}"),
            ),
        }
    }
    let cluster_ips: Vec<Target> = if headless {
        Vec::new()
    } else {
        let ips = match &spec.cluster_ips {
            Some(ips) if !ips.is_empty() => ips.clone(),
            _ => spec.cluster_ip.clone().into_iter().collect(),
        };
        addresses(&mut r, "spec.clusterIPs", &ips)
    };
    if headless {
        // A slice that does not parse has no endpoints to give (the API server would not
        // have stored it).
        let parsed: Vec<EndpointSlice> = (slices
            .get(&(ns.as_str(), name.as_str()))
            .into_iter()
            .flatten())
        .filter_map(|o| EndpointSlice::deserialize(&***o).ok())
        .collect();
        let ready = ready_endpoints(&mut r, &parsed, spec.publish_not_ready_addresses);
        let all: Vec<Target> = ready.iter().flat_map(|(_, a)| a.iter().cloned()).collect();
        for n in hostnames.iter().chain(&internal_names) {
            for t in &all {
                r.claim(n, t, ttl);
            }
            // Endpoint names under a wildcard would be literal `*` labels: none.
            let wildcard = n.wire().get(1) == Some(&b'*') && n.wire().first() == Some(&1);
            for (host, addrs) in &ready {
                let Some(host) = host.as_ref().filter(|_| !wildcard) else {
                    continue;
                };
                match n.prepend(host.as_bytes()) {
                    Ok(sub) => {
                        for t in addrs {
                            r.claim(&sub, t, ttl);
                        }
                    }
                    Err(e) => r.problem("endpoints.hostname", format!("{host}.{n}: {e}")),
                }
            }
        }
        return r;
    }
    for n in &internal_names {
        for t in &cluster_ips {
            r.claim(n, t, ttl);
        }
    }
    let external: Vec<Target> = match kind {
        "LoadBalancer" => {
            let external_ips = spec.external_ips.clone().unwrap_or_default();
            if external_ips.is_empty() {
                let ingress: Vec<(Option<String>, Option<String>)> = svc
                    .status
                    .and_then(|s| s.load_balancer)
                    .and_then(|lb| lb.ingress)
                    .unwrap_or_default()
                    .into_iter()
                    .map(|i| (i.ip, i.hostname))
                    .collect();
                r.load_balancer("status.loadBalancer.ingress", &ingress)
            } else {
                addresses(&mut r, "spec.externalIPs", &external_ips)
            }
        }
        "ExternalName" => match spec.external_name.as_deref().map(names::target) {
            Some(Ok(t)) => vec![t],
            Some(Err(why)) => {
                r.problem("spec.externalName", why);
                Vec::new()
            }
            None => Vec::new(),
        },
        _ if settings.internal => cluster_ips,
        _ => {
            if !hostnames.is_empty() {
                r.report(
                    Reason::Unsupported,
                    "spec.type",
                    format!("a {kind} Service's addresses are published at its hostname names only with --kube-source-internal (internal-hostname names always)"),
                );
            }
            Vec::new()
        }
    };
    for n in &hostnames {
        for t in &external {
            r.claim(n, t, ttl);
        }
    }
    r
}

/// The addresses of a list of IP strings, each bad one reported.
fn addresses(r: &mut Reading, field: &str, ips: &[String]) -> Vec<Target> {
    let mut out = Vec::new();
    for (i, ip) in ips.iter().enumerate() {
        match ip.parse() {
            Ok(ip) => out.push(Target::Ip(ip)),
            Err(_) => r.problem(
                format!("{field}[{i}]"),
                format!("{ip:?} is not an IP address"),
            ),
        }
    }
    out
}

/// The ready endpoints of a Service's slices: each one's hostname, if any, and addresses.
/// An endpoint is ready unless `conditions.ready` is false (absent counts as ready, as the
/// API says), or when the Service publishes not-ready addresses; FQDN slices are skipped.
fn ready_endpoints(
    r: &mut Reading,
    slices: &[EndpointSlice],
    publish_not_ready: Option<bool>,
) -> Vec<(Option<String>, Vec<Target>)> {
    let mut out = Vec::new();
    for slice in slices {
        if slice.address_type == "FQDN" {
            continue;
        }
        let slice_name = slice.metadata.name.clone().unwrap_or_default();
        for (i, ep) in slice.endpoints.iter().flatten().enumerate() {
            let ready = ep.conditions.as_ref().and_then(|c| c.ready).unwrap_or(true);
            if !ready && publish_not_ready != Some(true) {
                continue;
            }
            let field = format!("EndpointSlice {slice_name} endpoints[{i}].addresses");
            let addrs = addresses(r, &field, &ep.addresses);
            let host = ep.hostname.clone().filter(|h| {
                let ok = names::host_name(h).is_ok() && !h.contains('.') && h != "*";
                if !ok {
                    r.problem(
                        format!("EndpointSlice {slice_name} endpoints[{i}].hostname"),
                        format!("{h:?} is not one DNS label"),
                    );
                }
                ok
            });
            out.push((host, addrs));
        }
    }
    out
}

pub(super) fn read_ingress(
    value: &Value,
    meta: &ObjectMeta,
    settings: &ClusterSettings,
) -> Reading {
    let mut r = Reading::default();
    let Some(ingress) = typed::<Ingress>(value, &mut r) else {
        return r;
    };
    let spec = ingress.spec.unwrap_or_default();
    if !settings.ingress_classes.is_empty() {
        let class = spec.ingress_class_name.clone().or_else(|| {
            meta.annotations
                .as_ref()
                .and_then(|a| a.get("kubernetes.io/ingress.class"))
                .cloned()
        });
        if !class.is_some_and(|c| settings.ingress_classes.contains(&c)) {
            return Reading::default();
        }
    }
    let ttl = r.ttl(meta, settings.default_ttl);
    let mut hosts = Vec::new();
    for (i, rule) in spec.rules.unwrap_or_default().iter().enumerate() {
        let Some(host) = rule.host.as_deref().filter(|h| !h.is_empty()) else {
            continue;
        };
        match names::host_name(host) {
            Ok(n) => hosts.push(n),
            Err(why) => r.problem(format!("spec.rules[{i}].host"), why),
        }
    }
    hosts.extend(r.annotated_names(meta, "hostname"));
    let targets = match r.annotated_list(meta, "target", "", names::target) {
        Some(targets) => targets,
        None => {
            let ingress: Vec<(Option<String>, Option<String>)> = ingress
                .status
                .and_then(|s| s.load_balancer)
                .and_then(|lb| lb.ingress)
                .unwrap_or_default()
                .into_iter()
                .map(|i| (i.ip, i.hostname))
                .collect();
            r.load_balancer("status.loadBalancer.ingress", &ingress)
        }
    };
    for n in &hosts {
        for t in &targets {
            r.claim(n, t, ttl);
        }
    }
    r
}
