//! `meshdns render`: run a controller's planner on manifest files and print what it would
//! converge to, without a cluster.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use anyhow::{Context, Result, bail};
use kube::ResourceExt;
use meshdns_api::{Connector, ConnectorClass};
use meshdns_controller::iroh::connector_input;
use meshdns_iroh::connector::{
    ClaimAction, ConditionPlan, ConnectorInput, Decision, IrohSettings, RecordSetPlan, claim, plan,
};
use meshdns_zone::Name;
use serde::Deserialize;
use serde_yaml::{Mapping, Value};

/// The controller's `iroh:` block: the keys of datum's `connector.iroh` block, plus meshdns's
/// own (`fieldManager`, `clusterName`, `sourceClusters`, `withdrawExpiredLeases`). Render uses
/// only the zone, prefix, suffix and TTL.
#[derive(Debug, Clone, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct IrohFile {
    /// The DNSZone the records go into (its namespace is where DNSRecordSets are written).
    #[serde(default)]
    pub dns_zone_ref: ZoneRef,
    /// First label of record names (must be `_iroh`).
    #[serde(default = "default_prefix")]
    pub record_prefix: String,
    /// Labels between the z32 label and the zone origin.
    #[serde(default)]
    pub record_suffix: String,
    /// TTL of every entry.
    #[serde(default = "default_ttl")]
    pub ttl_seconds: u32,
    /// Publish at all. Default: true in a meshdns config, false in datum's file (as datum).
    /// When false the controller only releases records and removes its finalizers.
    #[serde(default)]
    pub dns_enabled: Option<bool>,
    /// kubeconfig of the cluster that holds the DNSRecordSets (empty: the local one).
    #[serde(default)]
    pub downstream_kubeconfig_path: Option<PathBuf>,
    /// Server-side apply field manager [default: `network-services-operator/iroh-dns`].
    #[serde(default)]
    pub field_manager: Option<String>,
    /// Name of the local cluster in claim labels [default: `local`].
    #[serde(default)]
    pub cluster_name: Option<String>,
    /// Publish the local cluster's Connectors [default: true].
    #[serde(default)]
    pub include_local: Option<bool>,
    /// Further clusters whose Connectors are published.
    #[serde(default)]
    pub source_clusters: Vec<crate::controller_cmd::ClusterRef>,
    /// Withdraw records while a Connector's Lease is expired.
    #[serde(default)]
    pub withdraw_expired_leases: bool,
}

/// `{namespace, name}` of the DNSZone.
#[derive(Debug, Clone, Default, Deserialize)]
pub struct ZoneRef {
    /// Namespace.
    #[serde(default)]
    pub namespace: String,
    /// Name.
    #[serde(default)]
    pub name: String,
}

fn default_prefix() -> String {
    meshdns_iroh::IROH_LABEL.to_string()
}

fn default_ttl() -> u32 {
    meshdns_iroh::DEFAULT_TTL
}

impl IrohFile {
    /// The planner's settings, or every problem with them.
    pub fn settings(&self) -> Result<IrohSettings> {
        let s = IrohSettings {
            zone_namespace: self.dns_zone_ref.namespace.clone(),
            zone_name: self.dns_zone_ref.name.clone(),
            record_prefix: self.record_prefix.clone(),
            record_suffix: self.record_suffix.clone(),
            ttl: self.ttl_seconds,
        };
        let problems = s.problems();
        if !problems.is_empty() {
            bail!("{}", problems.join("; "));
        }
        Ok(s)
    }
}

/// Reads the iroh block from a meshdns config file (`iroh:`) or from datum's
/// `NetworkServicesOperator` config file as it is (`connector.iroh`).
pub fn load_iroh_config(path: &Path) -> Result<IrohFile> {
    let text =
        std::fs::read_to_string(path).with_context(|| format!("cannot read {}", path.display()))?;
    let doc: Value =
        serde_yaml::from_str(&text).with_context(|| format!("{}: not YAML", path.display()))?;
    let block = if doc.get("kind").and_then(Value::as_str) == Some("NetworkServicesOperator") {
        doc.get("connector").and_then(|c| c.get("iroh"))
    } else {
        doc.get("iroh")
    };
    let Some(block) = block else {
        bail!(
            "{}: no `iroh:` block (or `connector.iroh` in a NetworkServicesOperator config)",
            path.display()
        );
    };
    let nso = doc.get("kind").and_then(Value::as_str) == Some("NetworkServicesOperator");
    let mut file: IrohFile = serde_yaml::from_value(block.clone())
        .with_context(|| format!("{}: iroh block", path.display()))?;
    file.dns_enabled.get_or_insert(!nso);
    Ok(file)
}

/// Every Kubernetes object in the files and directories given (YAML, several documents per
/// file, `List` kinds expanded), in path order.
pub fn load_manifests(paths: &[PathBuf]) -> Result<Vec<Value>> {
    let mut files = Vec::new();
    for p in paths {
        if p.is_dir() {
            let mut entries: Vec<PathBuf> = std::fs::read_dir(p)
                .with_context(|| format!("cannot read directory {}", p.display()))?
                .filter_map(|e| e.ok().map(|e| e.path()))
                .filter(|f| {
                    f.extension()
                        .is_some_and(|e| e == "yaml" || e == "yml" || e == "json")
                })
                .collect();
            entries.sort();
            files.extend(entries);
        } else {
            files.push(p.clone());
        }
    }
    let mut objects = Vec::new();
    for f in files {
        let text =
            std::fs::read_to_string(&f).with_context(|| format!("cannot read {}", f.display()))?;
        for (i, doc) in serde_yaml::Deserializer::from_str(&text).enumerate() {
            let value = Value::deserialize(doc)
                .with_context(|| format!("{}: document {}: not YAML", f.display(), i + 1))?;
            push_objects(value, &mut objects);
        }
    }
    Ok(objects)
}

fn push_objects(value: Value, out: &mut Vec<Value>) {
    if value.is_null() {
        return;
    }
    if value.get("kind").and_then(Value::as_str) == Some("List") {
        if let Some(Value::Sequence(items)) = value.get("items") {
            for item in items {
                push_objects(item.clone(), out);
            }
        }
        return;
    }
    out.push(value);
}

pub(crate) fn text<'a>(v: &'a Value, path: &[&str]) -> Option<&'a str> {
    path.iter()
        .try_fold(v, |v, k| v.get(*k))
        .and_then(Value::as_str)
}

/// Connectors (with their class's controller) from the objects, each with its creation
/// timestamp as written (RFC 3339 in UTC sorts as text; an absent one sorts last). They are
/// read as the controller reads them (`meshdns_api`), and a Connector without a namespace is
/// in `default`, as `kubectl apply` would put it.
fn connectors(objects: &[Value], cluster: &str) -> Result<Vec<(String, ConnectorInput)>> {
    let of_kind = |kind: &'static str| {
        objects
            .iter()
            .filter(move |o| text(o, &["kind"]) == Some(kind))
    };
    let classes: BTreeMap<String, String> = of_kind("ConnectorClass")
        .map(|o| {
            let class: ConnectorClass = serde_yaml::from_value(o.clone())
                .with_context(|| format!("ConnectorClass {}", object_name(o)))?;
            Ok((class.name_any(), class.controller_name().to_string()))
        })
        .collect::<Result<_>>()?;
    of_kind("Connector")
        .map(|o| {
            let c: Connector = serde_yaml::from_value(o.clone())
                .with_context(|| format!("Connector {}", object_name(o)))?;
            let class = classes.get(&c.spec.connector_class_name).cloned();
            let mut input = connector_input(&c, class, cluster);
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

pub(crate) fn map(entries: Vec<(&str, Value)>) -> Value {
    let mut m = Mapping::new();
    for (k, v) in entries {
        m.insert(Value::from(k), v);
    }
    Value::Mapping(m)
}

pub(crate) fn string_map(m: &BTreeMap<String, String>) -> Value {
    Value::Mapping(
        m.iter()
            .map(|(k, v)| (Value::from(k.as_str()), Value::from(v.as_str())))
            .collect(),
    )
}

fn record_set(p: &RecordSetPlan) -> Value {
    let mut metadata = vec![
        ("name", Value::from(p.name.as_str())),
        ("namespace", Value::from(p.namespace.as_str())),
        ("labels", string_map(&p.labels)),
    ];
    if !p.annotations.is_empty() {
        metadata.push(("annotations", string_map(&p.annotations)));
    }
    let records = p
        .records
        .iter()
        .map(|r| {
            map(vec![
                ("name", Value::from(r.name.as_str())),
                ("ttl", Value::from(r.ttl)),
                (
                    "txt",
                    map(vec![("content", Value::from(r.content.as_str()))]),
                ),
            ])
        })
        .collect();
    map(vec![
        (
            "apiVersion",
            Value::from("dns.networking.miloapis.com/v1alpha1"),
        ),
        ("kind", Value::from("DNSRecordSet")),
        ("metadata", map(metadata)),
        (
            "spec",
            map(vec![
                (
                    "dnsZoneRef",
                    map(vec![("name", Value::from(p.zone_name.as_str()))]),
                ),
                ("recordType", Value::from("TXT")),
                ("records", Value::Sequence(records)),
            ]),
        ),
    ])
}

fn connector_status(c: &ConnectorInput, cond: &ConditionPlan) -> Value {
    let condition = map(vec![
        ("type", Value::from(meshdns_iroh::connector::CONDITION_TYPE)),
        ("status", Value::from(cond.status)),
        ("reason", Value::from(cond.reason)),
        ("message", Value::from(cond.message.as_str())),
        ("observedGeneration", Value::from(c.generation)),
    ]);
    map(vec![
        (
            "apiVersion",
            Value::from("networking.datumapis.com/v1alpha1"),
        ),
        ("kind", Value::from("Connector")),
        (
            "metadata",
            map(vec![
                ("name", Value::from(c.name.as_str())),
                ("namespace", Value::from(c.namespace.as_str())),
            ]),
        ),
        (
            "status",
            map(vec![("conditions", Value::Sequence(vec![condition]))]),
        ),
    ])
}

/// What the iroh controller would converge to, as multi-document YAML: the DNSRecordSets
/// (ordered by name), then each Connector whose class routes to iroh (ordered by namespace and
/// name) with its `IrohDNSPublished` condition. When several Connectors share a key, the
/// oldest (creation timestamp, then UID) owns the record, as on a fresh cluster where it is
/// reconciled first; in a running cluster, whichever created the record first keeps it.
pub fn render_iroh(objects: &[Value], settings: &IrohSettings, cluster: &str) -> Result<String> {
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
    let mut out = String::new();
    for doc in owned
        .values()
        .map(record_set)
        .chain(shown.into_iter().map(|s| s.2))
    {
        out.push_str("---\n");
        out.push_str(&serde_yaml::to_string(&doc)?);
    }
    Ok(out)
}

/// The zones the DNSZones and DNSRecordSets among `objects` make, as RFC 1035 zone-file text
/// (one `$ORIGIN` section per zone, ordered by origin), with the SOA and NS that `serve` would
/// synthesise where the manifests give none. Entries that cannot be served are returned as
/// problems (`FILE: ENTRY: REASON`), not printed.
pub fn render_zone(objects: &[Value], default_ttl: u32) -> Result<(String, Vec<String>)> {
    let json: Vec<serde_json::Value> = objects
        .iter()
        .map(serde_json::to_value)
        .collect::<std::result::Result<_, _>>()?;
    let parsed = meshdns_sources::manifests::zones("manifests", &json);
    let mut problems: Vec<String> = parsed.problems.iter().map(ToString::to_string).collect();
    let contents = parsed.zones;
    // The records each zone was given, by origin: the compiled zones come back in their own
    // order, and each must be printed with its own records.
    let records: BTreeMap<Name, Vec<meshdns_zone::Record>> = contents
        .iter()
        .map(|z| (z.origin.clone(), z.records.to_vec()))
        .collect();
    let defaults = meshdns_zone::BuildDefaults {
        default_ttl,
        serial: 1,
    };
    let (compiled, refused) = meshdns_sources::compile("manifests", contents, defaults);
    problems.extend(refused.iter().map(ToString::to_string));
    let mut zones: Vec<&meshdns_zone::Zone> = compiled.zones.iter().map(|z| &**z).collect();
    zones.sort_by_key(|z| z.origin().to_string());
    let mut out = String::new();
    for zone in zones {
        let origin = zone.origin();
        let recs = records.get(origin).map_or(&[][..], Vec::as_slice);
        out.push_str(&format!("$ORIGIN {origin}\n"));
        let soa = zone.soa_rrset();
        for data in soa.decoded() {
            out.push_str(&format!("@\t{}\tIN\tSOA\t{data}\n", soa.ttl));
        }
        let given_apex_ns = recs
            .iter()
            .any(|r| &r.name == origin && r.data.rtype() == meshdns_zone::RType::NS);
        if !given_apex_ns
            && let Some(ns) = zone
                .node(origin.wire())
                .and_then(|n| n.get(meshdns_zone::RType::NS))
        {
            for data in ns.decoded() {
                out.push_str(&format!("@\t{}\tIN\tNS\t{data}\n", ns.ttl));
            }
        }
        // The apex first, then names in alphabetical order of their relative form.
        let mut lines: Vec<((bool, String), String)> = recs
            .iter()
            .filter(|r| r.data.rtype() != meshdns_zone::RType::SOA)
            // Only what the compiled zone serves (refused records are in `problems`).
            .filter(|r| {
                let mut wire = Vec::new();
                r.data.to_wire(&mut wire);
                zone.node(r.name.wire())
                    .and_then(|n| n.get(r.data.rtype()))
                    .is_some_and(|set| set.rdatas().any(|d| d == wire.as_slice()))
            })
            .map(|r| {
                let rtype = r.data.rtype();
                (
                    (&r.name != origin, r.name.relative_to(origin)),
                    format!(
                        "{}\t{}\tIN\t{rtype}\t{}\n",
                        r.name.relative_to(origin),
                        r.ttl,
                        r.data
                    ),
                )
            })
            .collect();
        lines.sort();
        for (_, line) in lines {
            out.push_str(&line);
        }
    }
    Ok((out, problems))
}
