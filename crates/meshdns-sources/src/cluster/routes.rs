//! One Gateway API route's names and targets: its host names, narrowed to the listeners of
//! the Gateways that accepted it, pointing at those Gateways' addresses.

use std::collections::BTreeMap;

use meshdns_objects::core::ObjectMeta;
use meshdns_objects::gateway::{GATEWAY_GROUP, Gateway, Listener, ParentRef, Route};
use serde::Deserialize;
use serde_json::Value;

use super::names::{self, Target};
use super::{ClusterSettings, Kind, Reading, Reason};
use crate::manifests::Manifest;

/// Every Gateway among `objects`, by (namespace, name).
pub(super) fn gateways(objects: &[Manifest]) -> BTreeMap<(String, String), Gateway> {
    let mut out = BTreeMap::new();
    for o in objects {
        let is_gateway = o.get("kind").and_then(Value::as_str) == Some("Gateway")
            && o.get("apiVersion")
                .and_then(Value::as_str)
                .is_some_and(|v| v.starts_with("gateway.networking.k8s.io/"));
        if !is_gateway {
            continue;
        }
        // A Gateway that does not parse attaches nothing (its routes say so).
        if let Ok(gw) = Gateway::deserialize(&**o) {
            let key = (
                gw.metadata.namespace.clone().unwrap_or_default(),
                gw.metadata.name.clone().unwrap_or_default(),
            );
            out.insert(key, gw);
        }
    }
    out
}

/// The protocols of the listeners a route of `kind` attaches to.
fn protocols(kind: Kind) -> &'static [&'static str] {
    match kind {
        Kind::TlsRoute => &["TLS"],
        _ => &["HTTP", "HTTPS"],
    }
}

/// The host name a route's `host` and a listener's `hostname` have in common, the more specific
/// of the two (Gateway API's rule): a listener without one takes the route's; `*.example.org`
/// covers names strictly below `example.org`.
pub(super) fn intersect(host: &str, listener: Option<&str>) -> Option<String> {
    let host = host.to_ascii_lowercase();
    let Some(l) = listener
        .filter(|l| !l.is_empty())
        .map(str::to_ascii_lowercase)
    else {
        return Some(host);
    };
    if host == l {
        return Some(host);
    }
    if let Some(base) = l.strip_prefix("*.")
        && host.ends_with(&format!(".{base}"))
    {
        return Some(host);
    }
    if let Some(base) = host.strip_prefix("*.")
        && l.ends_with(&format!(".{base}"))
    {
        return Some(l);
    }
    None
}

/// Whether a status entry's parent is one the route names in its spec (group, kind, namespace,
/// name, sectionName and port compared, as the Gateway API's controllers copy them; a status
/// entry the route does not claim is not counted).
fn claimed(spec: &[ParentRef], status: &ParentRef, route_ns: &str) -> bool {
    let key = |p: &ParentRef| {
        (
            p.group.clone().unwrap_or_else(|| GATEWAY_GROUP.into()),
            p.kind.clone().unwrap_or_else(|| "Gateway".into()),
            p.namespace.clone().unwrap_or_else(|| route_ns.into()),
            p.name.clone(),
            p.section_name.clone().filter(|s| !s.is_empty()),
            p.port,
        )
    };
    spec.iter().any(|p| key(p) == key(status))
}

/// The listeners of `gw` a route (of `kind`, in `route_ns`) attached through `parent` may use.
fn listeners<'g>(
    gw: &'g Gateway,
    parent: &ParentRef,
    kind: Kind,
    route_ns: &str,
) -> Vec<&'g Listener> {
    let gw_ns = gw.metadata.namespace.as_deref().unwrap_or("");
    gw.spec
        .listeners
        .iter()
        .filter(|l| parent.section_name.as_ref().is_none_or(|s| *s == l.name))
        .filter(|l| parent.port.is_none_or(|p| p == l.port))
        .filter(|l| protocols(kind).contains(&l.protocol.as_str()))
        .filter(|l| {
            // The kinds the listener names narrow those of its protocol.
            let kinds = l.allowed_routes.as_ref().map_or(&[][..], |a| &a.kinds[..]);
            kinds.is_empty()
                || kinds.iter().any(|k| {
                    k.group.as_deref().unwrap_or(GATEWAY_GROUP) == GATEWAY_GROUP
                        && k.kind == kind.object_kind()
                })
        })
        .filter(|l| {
            let from = l
                .allowed_routes
                .as_ref()
                .and_then(|a| a.namespaces.as_ref())
                .and_then(|n| n.from.as_deref())
                .unwrap_or("Same");
            // `Selector` needs the namespaces' labels, which are not read: allowed.
            from != "Same" || gw_ns == route_ns
        })
        .collect()
}

/// A Gateway's targets: its `target` annotation, else its status addresses (IPAddress as
/// A/AAAA, Hostname as a CNAME).
fn targets(r: &mut Reading, gw: &Gateway, label: &str) -> Vec<Target> {
    if let Some(targets) =
        r.annotated_list(&gw.metadata, "target", &format!("{label} "), names::target)
    {
        return targets;
    }
    let mut out = Vec::new();
    for (i, a) in gw.status.addresses.iter().enumerate() {
        let field = format!("{label} status.addresses[{i}]");
        match a.type_.as_deref().unwrap_or("IPAddress") {
            "IPAddress" => match a.value.parse() {
                Ok(ip) => out.push(Target::Ip(ip)),
                Err(_) => r.problem(field, format!("{:?} is not an IP address", a.value)),
            },
            "Hostname" => match names::target(&a.value) {
                Ok(t @ Target::Host(_)) => out.push(t),
                _ => r.problem(field, format!("{:?} is not a host name", a.value)),
            },
            other => r.report(
                Reason::Unsupported,
                field,
                format!("an address of type {other} is not served (IPAddress and Hostname are)"),
            ),
        }
    }
    out
}

pub(super) fn read_route(
    kind: Kind,
    value: &Value,
    meta: &ObjectMeta,
    settings: &ClusterSettings,
    gateways: &BTreeMap<(String, String), Gateway>,
) -> Reading {
    let mut r = Reading::default();
    let route: Route = match Deserialize::deserialize(value) {
        Ok(route) => route,
        Err(e) => {
            r.problem("spec", format!("not of the kind's shape: {e}"));
            return r;
        }
    };
    let ns = meta.namespace.clone().unwrap_or_default();
    let ttl = r.ttl(meta, settings.default_ttl);
    // (field, host as written)
    let mut hosts: Vec<(String, String)> = Vec::new();
    for (i, h) in route.spec.hostnames.iter().enumerate() {
        match names::host_name(h) {
            Ok(_) => hosts.push((
                format!("spec.hostnames[{i}]"),
                h.trim_end_matches('.').to_string(),
            )),
            Err(why) => r.problem(format!("spec.hostnames[{i}]"), why),
        }
    }
    for n in r.annotated_names(meta, "hostname") {
        let text = n.to_string();
        hosts.push((
            "metadata.annotations".into(),
            text.trim_end_matches('.').to_string(),
        ));
    }
    if hosts.is_empty() {
        return r;
    }
    let mut matched = vec![false; hosts.len()];
    let mut any_accepted = false;
    for (j, parent) in route.status.parents.iter().enumerate() {
        let pr = &parent.parent_ref;
        let is_gateway = pr.group.as_deref().unwrap_or(GATEWAY_GROUP) == GATEWAY_GROUP
            && pr.kind.as_deref().unwrap_or("Gateway") == "Gateway";
        if !is_gateway || !claimed(&route.spec.parent_refs, pr, &ns) {
            continue;
        }
        let accepted = parent
            .conditions
            .iter()
            .any(|c| c.type_ == "Accepted" && c.status == "True");
        let gw_ns = pr.namespace.clone().unwrap_or_else(|| ns.clone());
        let label = format!("Gateway {gw_ns}/{}", pr.name);
        let gw = gateways.get(&(gw_ns, pr.name.clone()));
        // A Gateway of a class not read is not this source's: nothing through it, and nothing
        // to report about it (a host name one of its listeners takes is not unmatched).
        if let Some(gw) = gw
            && !settings.gateway_classes.is_empty()
            && !settings
                .gateway_classes
                .contains(&gw.spec.gateway_class_name)
        {
            for listener in listeners(gw, pr, kind, &ns) {
                for (i, (_, host)) in hosts.iter().enumerate() {
                    matched[i] |= intersect(host, listener.hostname.as_deref()).is_some();
                }
            }
            continue;
        }
        if !accepted {
            r.report(
                Reason::NotAttached,
                format!("status.parents[{j}]"),
                format!("{label} has not accepted this route (condition Accepted is not True): no names through it"),
            );
            continue;
        }
        let Some(gw) = gw else {
            r.report(
                Reason::NotAttached,
                format!("status.parents[{j}].parentRef"),
                format!("no {label}"),
            );
            continue;
        };
        any_accepted = true;
        let targets = targets(&mut r, gw, &label);
        for listener in listeners(gw, pr, kind, &ns) {
            for (i, (_, host)) in hosts.iter().enumerate() {
                let Some(name) = intersect(host, listener.hostname.as_deref()) else {
                    continue;
                };
                matched[i] = true;
                let Ok(name) = names::host_name(&name) else {
                    continue;
                };
                for t in &targets {
                    r.claim(&name, t, ttl);
                }
            }
        }
    }
    if any_accepted {
        for (i, (field, host)) in hosts.iter().enumerate() {
            if !matched[i] {
                r.report(
                    Reason::NotAttached,
                    field.clone(),
                    format!("{host} matches no listener of the Gateways that accepted this route (hostname, protocol, sectionName, port, allowedRoutes)"),
                );
            }
        }
    }
    r
}

#[cfg(test)]
mod tests {
    use super::intersect;

    #[test]
    fn route_and_listener_host_names_meet_at_the_more_specific() {
        assert_eq!(
            intersect("a.example.org", None).as_deref(),
            Some("a.example.org")
        );
        assert_eq!(
            intersect("a.example.org", Some("*.example.org")).as_deref(),
            Some("a.example.org")
        );
        assert_eq!(
            intersect("a.b.example.org", Some("*.example.org")).as_deref(),
            Some("a.b.example.org")
        );
        assert_eq!(intersect("example.org", Some("*.example.org")), None);
        assert_eq!(
            intersect("*.example.org", Some("a.example.org")).as_deref(),
            Some("a.example.org")
        );
        assert_eq!(
            intersect("*.example.org", Some("*.example.org")).as_deref(),
            Some("*.example.org")
        );
        assert_eq!(
            intersect("*.a.example.org", Some("*.example.org")).as_deref(),
            Some("*.a.example.org")
        );
        assert_eq!(
            intersect("A.Example.org", Some("a.example.org")).as_deref(),
            Some("a.example.org")
        );
        assert_eq!(intersect("a.example.net", Some("*.example.org")), None);
    }
}
