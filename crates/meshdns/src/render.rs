//! `meshdns render`: run a controller's planner on manifest files and print what it would
//! converge to, without a cluster.

use std::collections::BTreeMap;

use anyhow::{Context, Result};
use kube::ResourceExt;
use meshdns_iroh::connector::{
    ClaimAction, ConditionPlan, ConnectorInput, Decision, IrohSettings, RecordSetPlan, claim, plan,
};
use meshdns_objects::datum::connector_status;
use meshdns_objects::dns::iroh_record_set;
use meshdns_objects::{Connector, ConnectorClass};
use meshdns_sources::manifests::Manifest;
use meshdns_sources::read_manifests;
use meshdns_zone::Name;
use serde_json::Value;

use crate::cli::{RenderIrohCmd, RenderZoneCmd};
use crate::config::defaults;

/// `meshdns render iroh`: the config's iroh block and the manifests, planned.
pub fn iroh(cmd: &RenderIrohCmd) -> Result<String> {
    let iroh = cmd.resolve()?;
    let at = crate::cli::iroh_origin(cmd.config.as_deref());
    let settings = iroh.settings().with_context(|| at)?;
    let objects = read_manifests(&cmd.files).map_err(anyhow::Error::msg)?;
    render_iroh(&objects, &settings, iroh.cluster_name())
}

/// `meshdns render zone`: the zones of the manifests, with the problems on stderr.
pub fn zone(cmd: &RenderZoneCmd) -> Result<String> {
    let objects = read_manifests(&cmd.files).map_err(anyhow::Error::msg)?;
    let (text, problems) = render_zone(
        &objects,
        cmd.default_ttl.unwrap_or(defaults::TTL),
        &cmd.cluster_settings(),
        &cmd.declared_zones(),
        &cmd.reverse_zones,
    );
    for p in problems {
        eprintln!("{p}");
    }
    Ok(text)
}

/// `meshdns render status`: each DNSZone and DNSRecordSet with the status meshdns would write
/// for it, serving exactly these objects (name servers from the compiled zones).
pub fn status(cmd: &RenderZoneCmd) -> Result<String> {
    use meshdns_sources::status;
    let objects = read_manifests(&cmd.files).map_err(anyhow::Error::msg)?;
    let (parsed, verdicts) =
        meshdns_sources::manifests::read("manifests", &objects, &cmd.cluster_settings());
    let defaults = meshdns_zone::BuildDefaults {
        default_ttl: cmd.default_ttl.unwrap_or(defaults::TTL),
        serial: 1,
    };
    let (compiled, _) = meshdns_sources::compile("manifests", parsed.zones, defaults);
    let nameservers = |origin: &Name| -> Vec<String> {
        let zone = compiled.zones.iter().find(|z| z.origin() == origin);
        zone.map(|z| status::nameservers(z)).unwrap_or_default()
    };
    let now = meshdns_objects::conditions::now();
    let plans = status::plan(&verdicts, &objects, nameservers, &now);
    yaml_documents(plans.iter().map(status::StatusPlan::document))
}

/// Objects as multi-document YAML, each document starting with `---`.
pub(crate) fn yaml_documents(docs: impl IntoIterator<Item = Value>) -> Result<String> {
    let mut out = String::new();
    for doc in docs {
        out.push_str("---\n");
        out.push_str(&serde_yaml::to_string(&doc)?);
    }
    Ok(out)
}

/// The string at `path` in an object.
pub(crate) fn text<'a>(v: &'a Value, path: &[&str]) -> Option<&'a str> {
    path.iter()
        .try_fold(v, |v, k| v.get(*k))
        .and_then(Value::as_str)
}

/// Connectors (with their class's controller) from the objects, each with its creation
/// timestamp as written (RFC 3339 in UTC sorts as text; an absent one sorts last). They are
/// read as the controller reads them (`meshdns_objects`), and a Connector without a namespace is
/// in `default`, as `kubectl apply` would put it.
fn connectors(objects: &[Manifest], cluster: &str) -> Result<Vec<(String, ConnectorInput)>> {
    let of_kind = |kind: &'static str| {
        objects
            .iter()
            .filter(move |o| text(o, &["kind"]) == Some(kind))
    };
    let classes: BTreeMap<String, String> = of_kind("ConnectorClass")
        .map(|o| {
            let class: ConnectorClass = serde_json::from_value((**o).clone())
                .with_context(|| format!("ConnectorClass {}", object_name(o)))?;
            Ok((class.name_any(), class.controller_name().to_string()))
        })
        .collect::<Result<_>>()?;
    of_kind("Connector")
        .map(|o| {
            let c: Connector = serde_json::from_value((**o).clone())
                .with_context(|| format!("Connector {}", object_name(o)))?;
            let class = classes.get(&c.spec.connector_class_name).cloned();
            let mut input = c.to_input(class, cluster);
            if input.namespace.is_empty() {
                input.namespace = "default".into();
            }
            let created = text(o, &["metadata", "creationTimestamp"]).unwrap_or("~");
            Ok((created.to_string(), input))
        })
        .collect()
}

/// `namespace/name` of an object, for errors.
fn object_name(o: &Value) -> String {
    let namespace = text(o, &["metadata", "namespace"]).unwrap_or("default");
    let name = text(o, &["metadata", "name"]).unwrap_or("(unnamed)");
    format!("{namespace}/{name}")
}

/// What the iroh controller would converge to, as multi-document YAML: the DNSRecordSets
/// (ordered by name), then each Connector whose class routes to iroh (ordered by namespace and
/// name) with its `IrohDNSPublished` condition. When several Connectors share a key, the
/// oldest (creation timestamp, then UID) owns the record, as on a fresh cluster where it is
/// reconciled first; in a running cluster, whichever created the record first keeps it.
pub fn render_iroh(objects: &[Manifest], settings: &IrohSettings, cluster: &str) -> Result<String> {
    let mut owned: BTreeMap<String, RecordSetPlan> = BTreeMap::new();
    let mut shown = Vec::new();
    // Claims are decided as on a fresh cluster: the oldest Connector (by creation timestamp,
    // then UID) creates the record first.
    let mut by_age: Vec<(String, ConnectorInput)> = connectors(objects, cluster)?;
    by_age.sort_by(|a, b| (&a.0, &a.1.uid).cmp(&(&b.0, &b.1.uid)));
    for (_, c) in by_age {
        let cond = match plan(&c, settings) {
            Decision::Ignore => continue,
            Decision::Pending => ConditionPlan::pending(),
            Decision::Invalid(why) => ConditionPlan::invalid(&why),
            Decision::Publish(p) => {
                let existing = owned.get(&p.name).map(|o| (&o.labels, &o.annotations));
                match claim(&c.uid, existing) {
                    ClaimAction::Create => {
                        owned.insert(p.name.clone(), p);
                        ConditionPlan::owner()
                    }
                    ClaimAction::Apply => ConditionPlan::owner(),
                    ClaimAction::Defer { owner, uid } => ConditionPlan::deferred(&owner, &uid),
                }
            }
        };
        shown.push((
            c.namespace.clone(),
            c.name.clone(),
            connector_status(&c, &cond),
        ));
    }
    shown.sort_by(|a: &(String, String, Value), b| (&a.0, &a.1).cmp(&(&b.0, &b.1)));
    let docs = owned
        .values()
        .map(|p| serde_json::to_value(iroh_record_set(p)))
        .collect::<Result<Vec<_>, _>>()?;
    yaml_documents(docs.into_iter().chain(shown.into_iter().map(|s| s.2)))
}

/// The zones the DNSZones and DNSRecordSets among `objects` make, and the `declared` ones,
/// with the names of the cluster's objects `cluster` reads placed in them, as RFC 1035
/// zone-file text (one `$ORIGIN` section per zone, ordered by origin), with the SOA and NS that
/// `serve` would synthesise where the manifests give none. Entries that cannot be served are
/// returned as problems (`FILE: ENTRY: REASON`), not printed.
///
/// What is printed is what the assembled catalog holds, built from the same objects with the
/// same [`meshdns_sources::load_parsed`] and [`meshdns_sources::assemble`] as `serve`: each
/// record once (a repeated entry is one record), each RRset with the TTL it is served with.
pub fn render_zone(
    objects: &[Manifest],
    default_ttl: u32,
    cluster: &meshdns_sources::cluster::ClusterSettings,
    declared: &[Name],
    reverse: &[meshdns_zone::Cidr],
) -> (String, Vec<String>) {
    use meshdns_zone::RType;
    let parsed = meshdns_sources::manifests::zones("manifests", objects, cluster);
    // Zones whose manifests give the apex NS: it is printed among the records, in their order;
    // a synthesised one right after the SOA.
    let given_apex_ns: std::collections::BTreeSet<Name> = parsed
        .zones
        .iter()
        .filter(|z| {
            z.records
                .to_vec()
                .iter()
                .any(|r| r.name == z.origin && r.data.rtype() == RType::NS)
        })
        .map(|z| z.origin.clone())
        .collect();
    let defaults = meshdns_zone::BuildDefaults {
        default_ttl,
        serial: 1,
    };
    let loaded = meshdns_sources::load_parsed("manifests", parsed, defaults);
    let mut problems: Vec<String> = loaded.problems.iter().map(ToString::to_string).collect();
    let input = meshdns_sources::SourceInput {
        label: "manifests",
        compiled: &loaded.compiled,
    };
    let generated = meshdns_sources::Generated {
        reverse: reverse.to_vec(),
        catalog: None,
    };
    let (catalog, refused) = meshdns_sources::assemble(&[input], declared, &generated, defaults);
    problems.extend(refused.iter().map(ToString::to_string));
    let mut zones: Vec<&meshdns_zone::Zone> = catalog.zones();
    zones.sort_by_key(|z| z.origin().to_string());
    let mut out = String::new();
    for zone in zones {
        let origin = zone.origin();
        let given_ns = given_apex_ns.contains(origin);
        out.push_str(&format!("$ORIGIN {origin}\n"));
        let soa = zone.soa_rrset();
        for data in soa.decoded() {
            out.push_str(&format!("@\t{}\tIN\tSOA\t{data}\n", soa.ttl));
        }
        if !given_ns && let Some(ns) = zone.node(origin.wire()).and_then(|n| n.get(RType::NS)) {
            for data in ns.decoded() {
                out.push_str(&format!("@\t{}\tIN\tNS\t{data}\n", ns.ttl));
            }
        }
        // The apex first, then names in alphabetical order of their relative form.
        let mut lines: Vec<((bool, String), String)> = Vec::new();
        for node in zone.nodes() {
            let Some(name) = Name::from_wire(node.name()) else {
                continue;
            };
            let apex = &name == origin;
            let relative = name.relative_to(origin);
            for set in node.rrsets() {
                if set.rtype == RType::SOA || (apex && set.rtype == RType::NS && !given_ns) {
                    continue;
                }
                for data in set.decoded() {
                    let line = format!("{relative}\t{}\tIN\t{}\t{data}\n", set.ttl, set.rtype);
                    lines.push(((!apex, relative.clone()), line));
                }
            }
        }
        lines.sort();
        for (_, line) in lines {
            out.push_str(&line);
        }
    }
    (out, problems)
}
