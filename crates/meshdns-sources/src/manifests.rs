//! dns-operator's `DNSZone` and `DNSRecordSet` objects (`dns.networking.miloapis.com/v1alpha1`)
//! as a records source: the zones they make, read the way dns-operator's PowerDNS backend
//! programs them.
//!
//! - A DNSZone gives a zone at `spec.domainName`. When two claim one domain, the older
//!   (creation timestamp, then name) wins and the other is reported.
//! - A DNSRecordSet adds `spec.records[]` of `spec.recordType` to the DNSZone named by
//!   `spec.dnsZoneRef.name` in its own namespace.
//! - Names: `@` or empty is the apex, a name ending in `.` is absolute (it must lie in the zone),
//!   and anything else is relative to the zone.
//! - TTL: the entry's own `ttl`, else 300 (dns-operator's default). Per owner name and type the
//!   first entry's TTL wins. A `ttl` that is not an integer from 0 to 4294967295 (a string,
//!   even `"60"`, a negative number, a unit such as `5m`, a fraction) refuses that entry
//!   (`InvalidDNSRecordSet`, naming `records[i].ttl`), as the API server refuses a value its
//!   schema (`type: integer`) does not allow.
//! - Several DNSRecordSets of one type with the same owner name compete as in dns-operator: the
//!   oldest set (creation timestamp, then name) is served, and the others' entries are reported
//!   as `NotOwner`.
//! - TXT content is trimmed and empty content dropped. Already-quoted content is read as
//!   presentation text; anything else becomes one record, split into 255-byte strings.
//! - CNAME keeps the first entry per owner.
//! - Host names in content are absolute with or without the trailing dot.
//! - TLSA is served from its `tlsa{usage, selector, matchingType, certData}` object (the data in
//!   hexadecimal, checked as a zone file's); HTTPS and SVCB from `https`/`svcb{priority, target,
//!   params}`, each param `key: value` read as the presentation `key="value"` (an empty value
//!   as the bare key), with RFC 9460's rules. `ALIAS` (`alias.content`, a host name) answers
//!   its target's A and AAAA at its name, flattened when the catalog is assembled
//!   ([`crate::alias`]); it is a CNAME's rival as any other type is.
//!
//! The objects come from YAML or JSON documents (several per file, `List` kinds expanded);
//! other kinds are ignored. Each DNSZone and DNSRecordSet is read through its typed shape in
//! `meshdns_objects` ([`DNSZone`], [`DNSRecordSet`], [`RecordEntry`]); a DNSRecordSet's
//! entries are read one at a time (the `ttl` as written, the type object as its typed shape),
//! so a bad field refuses its entry alone. A document of those kinds that does not have the
//! typed shape is read leniently (its strings where they are strings) and gets the verdict it
//! got before the typed reading.

use std::collections::BTreeMap;

use meshdns_objects::core::{ObjectMeta, Time};
use meshdns_objects::{Content, DNSRecordSet, DNSZone, RecordEntry};
use meshdns_zone::{Name, RData, RType, Record};
use serde::Deserialize;
use serde::de::DeserializeOwned;
use serde_json::{Value, json};

use crate::cluster::ClusterSettings;
use crate::content::{Parsed, Problem, ZoneContent};

/// One object of a manifest, shared: a live reader hands over tens of thousands of them
/// several times a second under churn, each unchanged one the same allocation as before.
pub type Manifest = std::sync::Arc<Value>;

/// Objects handed over by a live reader (the Kubernetes reflector of `serve --kubernetes`):
/// the watcher thread compiles them like a file when their version moves, and hands back what
/// it served from them ([`Served`]) once the snapshot holding them is live.
pub struct ManifestFeed {
    label: String,
    state: std::sync::Mutex<(u64, Option<std::sync::Arc<Vec<Manifest>>>)>,
    served: std::sync::Mutex<Option<std::sync::Arc<Served>>>,
    on_served: std::sync::Mutex<Option<Box<dyn Fn() + Send + Sync>>>,
}

/// What a live snapshot serves from a feed's objects: the objects as read, the verdicts on
/// each, and the name servers of each zone they make (for their status).
#[derive(Debug, Clone, Default)]
pub struct Served {
    /// The objects, with the status they carried when read.
    pub objects: std::sync::Arc<Vec<Manifest>>,
    /// The verdicts on each.
    pub verdicts: std::sync::Arc<Verdicts>,
    /// The NS names at each zone's apex, as served.
    pub nameservers: BTreeMap<Name, Vec<String>>,
}

impl ManifestFeed {
    /// A feed named `label` in logs, metrics and problems; not synced until the first
    /// [`ManifestFeed::set`].
    pub fn new(label: &str) -> std::sync::Arc<ManifestFeed> {
        std::sync::Arc::new(ManifestFeed {
            label: label.to_string(),
            state: std::sync::Mutex::new((0, None)),
            served: std::sync::Mutex::new(None),
            on_served: std::sync::Mutex::new(None),
        })
    }

    /// Calls `hook` (from the watcher thread) each time a snapshot serving new objects of this
    /// feed goes live.
    pub fn on_served(&self, hook: impl Fn() + Send + Sync + 'static) {
        *self.on_served.lock().unwrap_or_else(|e| e.into_inner()) = Some(Box::new(hook));
    }

    /// Records what the live snapshot serves from this feed (the watcher thread calls it after
    /// the swap).
    pub fn mark_served(&self, served: Served) {
        *self.served.lock().unwrap_or_else(|e| e.into_inner()) = Some(std::sync::Arc::new(served));
        if let Some(hook) = &*self.on_served.lock().unwrap_or_else(|e| e.into_inner()) {
            hook();
        }
    }

    /// What the live snapshot serves from this feed, once one does.
    pub fn served(&self) -> Option<std::sync::Arc<Served>> {
        self.served
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .clone()
    }

    /// The feed's name.
    pub fn label(&self) -> &str {
        &self.label
    }

    /// Replaces the objects (the whole current set).
    pub fn set(&self, objects: Vec<Manifest>) {
        let mut st = self.state.lock().unwrap_or_else(|e| e.into_inner());
        st.0 += 1;
        st.1 = Some(std::sync::Arc::new(objects));
    }

    /// The version (0 until the first set) and the objects when it differs from `seen`
    /// (shared, not copied: tens of thousands of objects are handed over several times a
    /// second under churn).
    pub fn take_if_newer(&self, seen: u64) -> Option<(u64, std::sync::Arc<Vec<Manifest>>)> {
        let st = self.state.lock().unwrap_or_else(|e| e.into_inner());
        match &st.1 {
            Some(objects) if st.0 != seen => Some((st.0, objects.clone())),
            _ => None,
        }
    }
}

/// dns-operator's TTL for entries that give none.
pub const DEFAULT_RECORD_TTL: u32 = 300;

/// Whether `text` holds Kubernetes objects (a document with `apiVersion` and `kind`).
pub fn looks_like_manifests(text: &str) -> bool {
    let mut saw_api = false;
    let mut saw_kind = false;
    for line in text.lines().take(200) {
        let t = line.trim_start_matches([' ', '-']);
        saw_api |= t.starts_with("apiVersion:") || t.contains("\"apiVersion\"");
        saw_kind |= t.starts_with("kind:") || t.contains("\"kind\"");
    }
    saw_api && saw_kind
}

/// Every object in the documents of `text`, `List`s expanded.
pub fn objects(file: &str, text: &str) -> Result<Vec<Manifest>, Problem> {
    crate::limits::check_yaml(file, text)?;
    let mut out = Vec::new();
    for (i, doc) in serde_yaml::Deserializer::from_str(text).enumerate() {
        let value = Value::deserialize(doc).map_err(|e| {
            Problem::new(
                file,
                format!("document {}", i + 1),
                format!("not YAML or JSON: {e}"),
            )
        })?;
        push(value, &mut out);
    }
    Ok(out)
}

fn push(value: Value, out: &mut Vec<Manifest>) {
    if value.get("kind").and_then(Value::as_str) == Some("List") {
        if let Some(Value::Array(items)) = value.get("items") {
            for item in items {
                push(item.clone(), out);
            }
        }
    } else if value.is_object() {
        out.push(Manifest::new(value));
    }
}

fn text<'a>(v: &'a Value, path: &[&str]) -> &'a str {
    path.iter()
        .try_fold(v, |v, k| v.get(*k))
        .and_then(Value::as_str)
        .unwrap_or("")
}

fn is_dns_object(o: &Value, kind: &str) -> bool {
    text(o, &["kind"]) == kind
        && text(o, &["apiVersion"]).starts_with("dns.networking.miloapis.com/")
}

/// Age order: creation timestamp (absent sorts last), then name.
fn age_key(meta: &ObjectMeta) -> (bool, Option<Time>, String) {
    let created = meta.creation_timestamp.clone();
    (created.is_none(), created, name_of(meta).to_string())
}

fn name_of(meta: &ObjectMeta) -> &str {
    meta.name.as_deref().unwrap_or("")
}

fn namespace_of(meta: &ObjectMeta) -> &str {
    meta.namespace.as_deref().unwrap_or("")
}

/// `o` as the typed object `T` (a [`DNSZone`], or a [`DNSRecordSet`] without its entries,
/// which are read one at a time). A document of that kind without the typed shape (a field of
/// another JSON type) is read as it always was: its strings where they are strings, anything
/// else empty, so it gets the verdict it got before.
fn typed<T: DeserializeOwned>(o: &Value) -> T {
    let mut shell = o.clone();
    if let Some(spec) = shell.get_mut("spec").and_then(Value::as_object_mut) {
        spec.remove("records");
    }
    if let Ok(t) = serde_json::from_value(shell) {
        return t;
    }
    let mut lenient = json!({
        "metadata": {
            "name": text(o, &["metadata", "name"]),
            "namespace": text(o, &["metadata", "namespace"]),
            "creationTimestamp": text(o, &["metadata", "creationTimestamp"]),
        },
        "spec": {
            "domainName": text(o, &["spec", "domainName"]),
            "dnsZoneRef": {"name": text(o, &["spec", "dnsZoneRef", "name"])},
            "recordType": text(o, &["spec", "recordType"]),
        },
    });
    serde_json::from_value(lenient.clone()).unwrap_or_else(|_| {
        lenient["metadata"]
            .as_object_mut()
            .map(|m| m.remove("creationTimestamp"));
        serde_json::from_value(lenient).expect("strings and empty objects fit the typed shape")
    })
}

/// Why an object, or one owner name of a DNSRecordSet, is not served: dns-operator's condition
/// reason (`Pending`, `InvalidDNSRecordSet`, `NotOwner`, `Conflict`, `DNSZoneInUse`) and a
/// message.
pub type Refusal = (&'static str, String);

/// What the reading decided about each object: the verdicts a status is written from.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Verdicts {
    /// Every DNSZone, oldest first.
    pub zones: Vec<ZoneVerdict>,
    /// Every DNSRecordSet, oldest first.
    pub sets: Vec<SetVerdict>,
    /// Every object of the cluster's read by `--kube-source`, oldest first; once served, with
    /// what the catalog's assembly refused of them too ([`Reason::NotServed`]).
    ///
    /// [`Reason::NotServed`]: crate::cluster::Reason::NotServed
    pub objects: Vec<crate::cluster::ObjectVerdict>,
}

/// One DNSZone.
#[derive(Debug, Clone, PartialEq)]
pub struct ZoneVerdict {
    /// Namespace and name.
    pub namespace: String,
    /// Name.
    pub name: String,
    /// The zone it serves, when accepted.
    pub origin: Option<Name>,
    /// Why it serves nothing.
    pub refused: Option<Refusal>,
}

/// One DNSRecordSet.
#[derive(Debug, Clone, PartialEq)]
pub struct SetVerdict {
    /// Namespace.
    pub namespace: String,
    /// Name.
    pub name: String,
    /// The zone its records go to, when its DNSZone was found.
    pub origin: Option<Name>,
    /// Why the whole set is not accepted (no such DNSZone, a type not served).
    pub refused: Option<Refusal>,
    /// Each owner name as written, in order of first appearance, and why it is not served
    /// (`None`: every entry of that name is served).
    pub names: Vec<(String, Option<Refusal>)>,
}

impl SetVerdict {
    fn refuse_name(&mut self, written: &str, why: Refusal) {
        match self.names.iter_mut().find(|(n, _)| n == written) {
            Some((_, slot @ None)) => *slot = Some(why),
            Some(_) => {}
            None => self.names.push((written.to_string(), Some(why))),
        }
    }

    fn serve_name(&mut self, written: &str) {
        if !self.names.iter().any(|(n, _)| n == written) {
            self.names.push((written.to_string(), None));
        }
    }
}

/// The zones that the DNSZones and DNSRecordSets among `objects` make, and the names of the
/// cluster's objects `cluster` reads.
pub fn zones(file: &str, objects: &[Manifest], cluster: &ClusterSettings) -> Parsed {
    read(file, objects, cluster).0
}

/// The zones that the DNSZones and DNSRecordSets among `objects` make, and the verdicts on
/// each object (for their status); with the names of the cluster's objects `cluster` reads
/// ([`crate::cluster`]), placed when the catalog is assembled.
pub fn read(file: &str, objects: &[Manifest], cluster: &ClusterSettings) -> (Parsed, Verdicts) {
    read_cached(
        file,
        objects,
        cluster,
        &mut crate::cluster::ReadCache::default(),
    )
}

/// [`read`], the cluster's objects read again only when they changed since `cache` saw them
/// (a live source's reading of a cluster).
pub fn read_cached(
    file: &str,
    objects: &[Manifest],
    cluster: &ClusterSettings,
    cache: &mut crate::cluster::ReadCache,
) -> (Parsed, Verdicts) {
    let (mut parsed, mut verdicts) = read_dns(file, objects);
    let names = crate::cluster::read_cached(file, objects, cluster, cache);
    parsed.placed = names.records;
    parsed.problems.extend(names.problems);
    verdicts.objects = names.verdicts;
    (parsed, verdicts)
}

/// The DNSZones and DNSRecordSets among `objects`: their zones and verdicts.
fn read_dns(file: &str, objects: &[Manifest]) -> (Parsed, Verdicts) {
    let mut problems = Vec::new();
    let mut verdicts = Verdicts::default();
    let mut zone_objects: Vec<DNSZone> = objects
        .iter()
        .filter(|o| is_dns_object(o, "DNSZone"))
        .map(|o| typed(o))
        .collect();
    zone_objects.sort_by_cached_key(|z| age_key(&z.metadata));
    // (namespace, name) -> index into `contents`
    let mut by_ref: BTreeMap<(String, String), usize> = BTreeMap::new();
    let mut contents: Vec<ZoneContent> = Vec::new();
    // Per entry of `contents`: the views it is seen in (`None`: every view). A DNSRecordSet
    // with views of its own adds its records to a part of its own (same origin), appended.
    let mut part_views: Vec<Option<Vec<String>>> = Vec::new();
    let mut parts: BTreeMap<(usize, Vec<String>), usize> = BTreeMap::new();
    for z in &zone_objects {
        let (ns, name) = (namespace_of(&z.metadata), name_of(&z.metadata));
        let mut verdict = ZoneVerdict {
            namespace: ns.to_string(),
            name: name.to_string(),
            origin: None,
            refused: None,
        };
        let entry = format!("DNSZone {ns}/{name}");
        let domain = z.spec.domain_name.as_str();
        let origin = match Name::parse(&format!("{}.", domain.trim_end_matches('.')), None) {
            Ok(o) if !domain.is_empty() => o,
            _ => {
                let why = format!("{domain:?} is not a domain name");
                problems.push(Problem::new(
                    file,
                    format!("{entry} spec.domainName"),
                    why.clone(),
                ));
                verdict.refused = Some(("InvalidDNSZone", why));
                verdicts.zones.push(verdict);
                continue;
            }
        };
        if let Some(i) = contents.iter().position(|c| c.origin == origin) {
            let older = verdicts
                .zones
                .iter()
                .find(|v| v.origin.as_ref() == Some(&contents[i].origin))
                .map(|v| format!("{}/{}", v.namespace, v.name))
                .unwrap_or_default();
            problems.push(Problem::new(
                file,
                entry,
                format!("DNSZoneInUse: {domain} is already served from an older DNSZone ({older})"),
            ));
            verdict.refused = Some((
                "DNSZoneInUse",
                format!("{domain} is already claimed by DNSZone {older}"),
            ));
            verdicts.zones.push(verdict);
            continue;
        }
        // A DNSZone whose views cannot be read is refused: never served to every client.
        let views = match views_annotation(&z.metadata) {
            Ok(v) => v,
            Err(why) => {
                problems.push(Problem::new(
                    file,
                    format!("{entry} metadata.annotations[{VIEWS_ANNOTATION}]"),
                    why.clone(),
                ));
                verdict.refused = Some(("InvalidDNSZone", why));
                verdicts.zones.push(verdict);
                continue;
            }
        };
        verdict.origin = Some(origin.clone());
        verdicts.zones.push(verdict);
        by_ref.insert((ns.to_string(), name.to_string()), contents.len());
        contents.push(ZoneContent::empty(&origin));
        part_views.push(views);
    }

    // Each set typed, with its entries as written: each entry is read on its own, so one
    // entry's bad field refuses that entry alone.
    let mut sets: Vec<(DNSRecordSet, &[Value])> = objects
        .iter()
        .filter(|o| is_dns_object(o, "DNSRecordSet"))
        .map(|o| {
            let entries = o["spec"]["records"]
                .as_array()
                .map_or(&[][..], Vec::as_slice);
            (typed(o), entries)
        })
        .collect();
    sets.sort_by_cached_key(|(s, _)| age_key(&s.metadata));
    // (zone index, type, owner) -> the set that owns it
    let mut owners: BTreeMap<(usize, RType, Name), String> = BTreeMap::new();
    let mut aliases = Vec::new();
    // (zone index, owner) -> the types served there, for CNAME coexistence
    let mut types_at: BTreeMap<(usize, Name), Vec<RType>> = BTreeMap::new();
    for (set, entries) in &sets {
        let (ns, name) = (namespace_of(&set.metadata), name_of(&set.metadata));
        let mut verdict = SetVerdict {
            namespace: ns.to_string(),
            name: name.to_string(),
            origin: None,
            refused: None,
            names: Vec::new(),
        };
        let entry = format!("DNSRecordSet {ns}/{name}");
        let zone_name = set.spec.dns_zone_ref.name.as_str();
        let Some(&zi) = by_ref.get(&(ns.to_string(), zone_name.to_string())) else {
            let why = format!("no DNSZone {zone_name:?} in namespace {ns:?}");
            problems.push(Problem::new(
                file,
                format!("{entry} spec.dnsZoneRef.name"),
                why.clone(),
            ));
            verdict.refused = Some(("Pending", why));
            verdicts.sets.push(verdict);
            continue;
        };
        let origin = contents[zi].origin.clone();
        // The set's views, within its zone's: its records go to that part of the zone.
        let views = views_annotation(&set.metadata).and_then(|own| match (own, &part_views[zi]) {
            (None, _) => Ok(None),
            (Some(own), None) => Ok(Some(own)),
            (Some(own), Some(zone)) => {
                let both: Vec<String> = own.into_iter().filter(|v| zone.contains(v)).collect();
                if both.is_empty() {
                    Err(format!(
                        "names none of its DNSZone's views ({})",
                        zone.join(", ")
                    ))
                } else {
                    Ok(Some(both))
                }
            }
        });
        let zi = match views {
            Ok(None) => zi,
            Ok(Some(views)) => *parts.entry((zi, views.clone())).or_insert_with(|| {
                contents.push(ZoneContent::empty(&origin));
                part_views.push(Some(views));
                contents.len() - 1
            }),
            Err(why) => {
                problems.push(Problem::new(
                    file,
                    format!("{entry} metadata.annotations[{VIEWS_ANNOTATION}]"),
                    why.clone(),
                ));
                verdict.refused = Some(("InvalidDNSRecordSet", why));
                verdicts.sets.push(verdict);
                continue;
            }
        };
        verdict.origin = Some(origin.clone());
        let type_text = set.spec.record_type.as_str();
        let rtype = match RType::from_mnemonic(type_text) {
            Some(t) if RType::SERVED.contains(&t) || BEYOND.contains(&t) => t,
            None if type_text == "ALIAS" => ALIAS,
            _ => {
                let why = format!(
                    "{type_text:?} is not served (A, AAAA, ALIAS, CNAME, TXT, MX, SRV, CAA, NS, PTR, SOA, TLSA, HTTPS, SVCB are)"
                );
                problems.push(Problem::new(
                    file,
                    format!("{entry} spec.recordType"),
                    why.clone(),
                ));
                verdict.refused = Some(("InvalidDNSRecordSet", why));
                verdicts.sets.push(verdict);
                continue;
            }
        };
        let key = type_text.to_ascii_lowercase();
        // First TTL per owner within this set.
        let mut ttls: BTreeMap<Name, u32> = BTreeMap::new();
        for (i, e) in entries.iter().enumerate() {
            let at = format!("{entry} records[{i}]");
            let written = text(e, &["name"]);
            let owner = match owner_name(written, &origin) {
                Ok(o) => o,
                Err(why) => {
                    problems.push(Problem::new(file, format!("{at}.name"), why.clone()));
                    verdict.refuse_name(written, ("InvalidDNSRecordSet", why));
                    continue;
                }
            };
            match owners.get(&(zi, rtype, owner.clone())) {
                Some(other) if other != name => {
                    problems.push(Problem::new(
                        file,
                        at,
                        format!("NotOwner: DNSRecordSet {other} owns {rtype} at {owner}"),
                    ));
                    // dns-operator's words; the problem above names the owner.
                    verdict.refuse_name(
                        written,
                        ("NotOwner", "Another DNSRecordSet owns this record".into()),
                    );
                    continue;
                }
                _ => {}
            }
            let Some(obj) = e.get(&key) else {
                let why = format!("no `{key}` object for recordType {type_text}");
                problems.push(Problem::new(file, at, why.clone()));
                verdict.refuse_name(written, ("InvalidDNSRecordSet", why));
                continue;
            };
            // The entry's type object, typed (the other fields are read on their own).
            let typed = match serde_json::from_value::<RecordEntry>(json!({ &key: obj })) {
                Ok(t) => t,
                Err(e) => {
                    let why = format!("not a `{key}` object: {e}");
                    problems.push(Problem::new(file, format!("{at}.{key}"), why.clone()));
                    verdict.refuse_name(written, ("InvalidDNSRecordSet", why));
                    continue;
                }
            };
            let data = match record_data(rtype, &typed, &origin) {
                Ok(Some(d)) => d,
                Ok(None) => {
                    // Empty TXT content: dropped, as dns-operator does.
                    verdict.serve_name(written);
                    continue;
                }
                Err(why) => {
                    problems.push(Problem::new(file, format!("{at}.{key}"), why.clone()));
                    verdict.refuse_name(written, ("InvalidDNSRecordSet", why));
                    continue;
                }
            };
            let own_ttl = match entry_ttl(e.get("ttl")) {
                Ok(t) => t,
                Err(why) => {
                    problems.push(Problem::new(file, format!("{at}.ttl"), why.clone()));
                    verdict.refuse_name(written, ("InvalidDNSRecordSet", why));
                    continue;
                }
            };
            if rtype == RType::CNAME && owners.contains_key(&(zi, rtype, owner.clone())) {
                problems.push(Problem::new(
                    file,
                    at,
                    "a second CNAME for this name is ignored (the first is kept)",
                ));
                verdict.serve_name(written);
                continue;
            }
            // CNAME beside other data (RFC 1034 §3.6.2), or at the apex: the older data stays.
            let present = types_at.entry((zi, owner.clone())).or_default();
            let clash = if rtype == RType::CNAME && owner == origin {
                Some(format!("{owner} is the zone apex, which cannot be a CNAME"))
            } else if rtype == RType::CNAME && present.iter().any(|t| *t != RType::CNAME) {
                Some(format!(
                    "{owner} already has other records; a CNAME cannot join them"
                ))
            } else if rtype != RType::CNAME && present.contains(&RType::CNAME) {
                Some(format!(
                    "{owner} is a CNAME; {rtype} records cannot join it"
                ))
            } else {
                None
            };
            if let Some(why) = clash {
                problems.push(Problem::new(file, at, format!("Conflict: {why}")));
                verdict.refuse_name(written, ("Conflict", why));
                continue;
            }
            if !present.contains(&rtype) {
                present.push(rtype);
            }
            owners.insert((zi, rtype, owner.clone()), name.to_string());
            let ttl = *ttls
                .entry(owner.clone())
                .or_insert(own_ttl.unwrap_or(DEFAULT_RECORD_TTL));
            match (rtype, data) {
                (ALIAS, RData::Cname(target)) => aliases.push(crate::alias::Alias {
                    owner,
                    target,
                    ttl,
                    object: at,
                    views: part_views[zi].clone().unwrap_or_default(),
                }),
                (_, data) => contents[zi].records.push(Record {
                    name: owner,
                    ttl,
                    data,
                }),
            }
            verdict.serve_name(written);
        }
        verdicts.sets.push(verdict);
    }
    let mut zones = Vec::new();
    let mut tagged = Vec::new();
    for (content, views) in contents.into_iter().zip(part_views) {
        match views {
            Some(views) => tagged.push((views, content)),
            None => zones.push(content),
        }
    }
    (
        Parsed {
            zones,
            problems,
            placed: Vec::new(),
            aliases,
            tagged,
        },
        verdicts,
    )
}

/// The annotation that gives a DNSZone's or DNSRecordSet's views (`a,b`).
pub const VIEWS_ANNOTATION: &str = "meshdns.io/views";

/// The views `meta`'s [`VIEWS_ANNOTATION`] names; `None` without it.
fn views_annotation(meta: &ObjectMeta) -> Result<Option<Vec<String>>, String> {
    meta.annotations
        .as_ref()
        .and_then(|a| a.get(VIEWS_ANNOTATION))
        .map(|v| crate::content::view_tags(&[v.as_str()]))
        .transpose()
}

/// An entry's `ttl`: absent (or null, which the API server prunes) is `None`; an integer of
/// seconds a TTL can hold (0 to 4294967295) is taken. Anything else is refused: a string (even
/// `"60"`), a unit such as `5m` or a fraction, as the API server refuses them (the CRD's
/// `type: integer`), and a negative number or one too large for a TTL, which the CRD's
/// `format: int64` lets through but no TTL can hold.
fn entry_ttl(value: Option<&Value>) -> Result<Option<u32>, String> {
    let accepted = "an integer number of seconds from 0 to 4294967295 is accepted";
    match value {
        None | Some(Value::Null) => Ok(None),
        Some(Value::Number(n)) => match n.as_u64().map(u32::try_from) {
            Some(Ok(t)) => Ok(Some(t)),
            _ => Err(format!("{n} is not a TTL: {accepted}")),
        },
        Some(Value::String(s)) => Err(format!(
            "{s:?} is a string, not a TTL: {accepted}, unquoted"
        )),
        Some(other) => Err(format!("{other} is not a TTL: {accepted}")),
    }
}

fn owner_name(name: &str, origin: &Name) -> Result<Name, String> {
    let owner = if name.is_empty() || name == "@" {
        origin.clone()
    } else if name.ends_with('.') {
        Name::parse(name, None).map_err(|e| format!("{name:?}: {e}"))?
    } else {
        Name::parse(name, Some(origin)).map_err(|e| format!("{name:?}: {e}"))?
    };
    if !owner.is_subdomain_of(origin) {
        return Err(format!("{name:?} is outside the zone {origin}"));
    }
    Ok(owner)
}

fn absolute(host: &str) -> String {
    if host.ends_with('.') {
        host.to_string()
    } else {
        format!("{host}.")
    }
}

/// The record data of one entry's type object; `None` for content that is dropped.
fn record_data(rtype: RType, e: &RecordEntry, origin: &Name) -> Result<Option<RData>, String> {
    let content = |c: &Option<Content>| {
        c.as_ref()
            .map_or("", |c| c.content.as_str())
            .trim()
            .to_string()
    };
    let host = |h: &str| absolute(h.trim());
    let parse = |t: &str| {
        RData::parse(rtype, t, origin)
            .map(Some)
            .map_err(|e| format!("{t:?}: {e}"))
    };
    let missing = || format!("no `{}` object", rtype.to_string().to_ascii_lowercase());
    match rtype {
        RType::A => parse(&content(&e.a)),
        RType::AAAA => parse(&content(&e.aaaa)),
        RType::CNAME => parse(&absolute(&content(&e.cname))),
        // Carried as the name it points at (a CNAME's data); never served as a CNAME.
        ALIAS => {
            let target = absolute(&content(&e.alias));
            RData::parse(RType::CNAME, &target, origin)
                .map(Some)
                .map_err(|why| format!("{target:?}: {why}"))
        }
        RType::NS => parse(&absolute(&content(&e.ns))),
        RType::PTR => parse(&absolute(&content(&e.ptr))),
        RType::TXT => {
            let content = content(&e.txt);
            if content.is_empty() {
                Ok(None)
            } else if content.starts_with('"') && content.ends_with('"') && content.len() >= 2 {
                parse(&content)
            } else {
                RData::txt_from_text(content.as_bytes())
                    .map(Some)
                    .map_err(|e| e.to_string())
            }
        }
        RType::MX => {
            let mx = e.mx.as_ref().ok_or_else(missing)?;
            parse(&format!("{} {}", mx.preference, host(&mx.exchange)))
        }
        RType::SRV => {
            let srv = e.srv.as_ref().ok_or_else(missing)?;
            parse(&format!(
                "{} {} {} {}",
                srv.priority,
                srv.weight,
                srv.port,
                host(&srv.target)
            ))
        }
        RType::CAA => {
            let caa = e.caa.as_ref().ok_or_else(missing)?;
            parse(&format!(
                "{} {} \"{}\"",
                caa.flag,
                caa.tag.trim(),
                caa.value.trim().replace('"', "\\\"")
            ))
        }
        RType::SOA => {
            let soa = e.soa.as_ref().ok_or_else(missing)?;
            parse(&format!(
                "{} {} {} {} {} {} {}",
                host(&soa.mname),
                host(&soa.rname),
                soa.serial.unwrap_or(1),
                soa.refresh.unwrap_or(10800),
                soa.retry.unwrap_or(3600),
                soa.expire.unwrap_or(604800),
                soa.ttl.unwrap_or(3600)
            ))
        }
        TLSA => {
            let tlsa = e.tlsa.as_ref().ok_or_else(missing)?;
            parse(&format!(
                "{} {} {} {}",
                tlsa.usage,
                tlsa.selector,
                tlsa.matching_type,
                tlsa.cert_data.trim()
            ))
        }
        SVCB | HTTPS => {
            let svcb = if rtype == HTTPS { &e.https } else { &e.svcb };
            let svcb = svcb.as_ref().ok_or_else(missing)?;
            let target = svcb.target.trim();
            let mut text = format!(
                "{} {}",
                svcb.priority,
                if target == "." {
                    ".".into()
                } else {
                    host(target)
                }
            );
            for (key, value) in &svcb.params {
                if value.is_empty() {
                    text.push_str(&format!(" {}", key.trim()));
                } else {
                    let value = value.replace('\\', "\\\\").replace('"', "\\\"");
                    text.push_str(&format!(" {}=\"{value}\"", key.trim()));
                }
            }
            parse(&text)
        }
        _ => Err(format!("{rtype} is not served")),
    }
}

/// TLSA (RFC 6698).
const TLSA: RType = meshdns_zone::rdata_other::TLSA;
/// SVCB and HTTPS (RFC 9460).
const SVCB: RType = meshdns_zone::svcb::SVCB;
const HTTPS: RType = meshdns_zone::svcb::HTTPS;
/// The types past the RFC 1035 ones a DNSRecordSet gives that meshdns serves.
const BEYOND: [RType; 3] = [TLSA, SVCB, HTTPS];
/// ALIAS while a DNSRecordSet is read (a type of the private-use range, RFC 6895 §3.1; it
/// never reaches a zone: [`crate::alias`]).
const ALIAS: RType = RType(65_401);

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(text: &str) -> Parsed {
        zones(
            "m.yaml",
            &objects("m.yaml", text).unwrap(),
            &Default::default(),
        )
    }

    const ZONES: &str = "
apiVersion: v1
kind: List
items:
- apiVersion: dns.networking.miloapis.com/v1alpha1
  kind: DNSZone
  metadata: {name: a, namespace: dns, creationTimestamp: '2026-01-01T00:00:00Z'}
  spec: {domainName: example.org}
- apiVersion: dns.networking.miloapis.com/v1alpha1
  kind: DNSZone
  metadata: {name: b, namespace: dns, creationTimestamp: '2026-02-01T00:00:00Z'}
  spec: {domainName: example.org}
- apiVersion: v1
  kind: ConfigMap
  metadata: {name: ignored}
";

    fn set(kind: &str, records: &str) -> String {
        format!(
            "---\napiVersion: dns.networking.miloapis.com/v1alpha1\nkind: DNSRecordSet\nmetadata: {{name: s-{}, namespace: dns}}\nspec:\n  dnsZoneRef: {{name: a}}\n  recordType: {kind}\n  records: {records}\n",
            kind.to_ascii_lowercase()
        )
    }

    #[test]
    fn zones_names_types_and_ttls() {
        let text = [
            ZONES.to_string(),
            set("CNAME", "[{name: alias, cname: {content: www.example.org}}, {name: alias, cname: {content: other.example.org.}}]"),
            set("SRV", "[{name: _sip._udp, ttl: 30, srv: {priority: 1, weight: 2, port: 5060, target: sip.example.org}}]"),
            set("CAA", "[{name: '@', caa: {flag: 0, tag: issue, value: letsencrypt.org}}]"),
            set("AAAA", "[{name: host.example.org., aaaa: {content: '2001:db8::1'}}, {name: elsewhere.example.net., aaaa: {content: '2001:db8::2'}}, {name: bad, aaaa: {content: nope}}]"),
            set("TXT", "[{name: t, ttl: 10, txt: {content: '\"quoted\" \"twice\"'}}, {name: t, ttl: 99, txt: {content: plain}}]"),
        ]
        .concat();
        let parsed = parse(&text);
        assert_eq!(
            parsed.zones.len(),
            1,
            "the younger DNSZone for the same domain is refused"
        );
        let got: Vec<String> = parsed.zones[0]
            .records
            .to_vec()
            .iter()
            .map(|r| format!("{} {} {} {}", r.name, r.ttl, r.data.rtype(), r.data))
            .collect();
        assert_eq!(
            got,
            // Sets in age order (no timestamps: by name).
            [
                "host.example.org. 300 AAAA 2001:db8::1",
                "example.org. 300 CAA 0 issue \"letsencrypt.org\"",
                "alias.example.org. 300 CNAME www.example.org.",
                "_sip._udp.example.org. 30 SRV 1 2 5060 sip.example.org.",
                "t.example.org. 10 TXT \"quoted\" \"twice\"",
                "t.example.org. 10 TXT \"plain\"",
            ]
        );
        let problems: Vec<String> = parsed.problems.iter().map(ToString::to_string).collect();
        for want in [
            "m.yaml: DNSZone dns/b: DNSZoneInUse",
            "m.yaml: DNSRecordSet dns/s-cname records[1]: a second CNAME",
            "m.yaml: DNSRecordSet dns/s-aaaa records[1].name: \"elsewhere.example.net.\" is outside the zone example.org.",
            "m.yaml: DNSRecordSet dns/s-aaaa records[2].aaaa:",
        ] {
            assert!(
                problems.iter().any(|p| p.starts_with(want)),
                "{want} missing from {problems:#?}"
            );
        }
    }

    #[test]
    fn manifests_are_recognised_and_other_files_are_not() {
        assert!(looks_like_manifests(ZONES));
        assert!(!looks_like_manifests("zones:\n- origin: example.org\n"));
        assert!(!looks_like_manifests(
            "{\"version\": \"v1alpha1\", \"ip4\": {}}"
        ));
        // A manifests file given as a records file is read as manifests.
        let parsed = crate::parse(
            "m.yaml",
            &crate::FileKind::Auto,
            ZONES.as_bytes(),
            &Default::default(),
        )
        .unwrap();
        assert_eq!(parsed.zones[0].origin.to_string(), "example.org.");
    }

    /// Every `ttl` that is not an integer a TTL can hold refuses its entry, naming the field;
    /// before, each of these was served silently with TTL 300.
    #[test]
    fn a_ttl_that_is_not_an_integer_of_seconds_refuses_its_entry() {
        let refused = [
            ("'60'", "\"60\" is a string, not a TTL"),
            ("'5m'", "\"5m\" is a string, not a TTL"),
            ("-1", "-1 is not a TTL"),
            ("1.5", "1.5 is not a TTL"),
            ("60.0", "60.0 is not a TTL"),
            ("4294967296", "4294967296 is not a TTL"),
            ("true", "true is not a TTL"),
            ("[60]", "[60] is not a TTL"),
        ];
        for (ttl, why) in refused {
            let text = [
                ZONES.to_string(),
                set(
                    "A",
                    &format!("[{{name: www, ttl: {ttl}, a: {{content: 192.0.2.1}}}}, {{name: ok, ttl: 60, a: {{content: 192.0.2.2}}}}]"),
                ),
            ]
            .concat();
            let objects = objects("m.yaml", &text).unwrap();
            let (parsed, verdicts) = read("m.yaml", &objects, &Default::default());
            let served: Vec<String> = parsed.zones[0]
                .records
                .to_vec()
                .iter()
                .map(|r| format!("{} {}", r.name, r.ttl))
                .collect();
            assert_eq!(served, ["ok.example.org. 60"], "ttl {ttl}");
            let problems: Vec<String> = parsed.problems.iter().map(ToString::to_string).collect();
            let want = format!(
                "m.yaml: DNSRecordSet dns/s-a records[0].ttl: {why}: an integer number of seconds from 0 to 4294967295 is accepted"
            );
            assert!(
                problems.iter().any(|p| p.starts_with(&want)),
                "ttl {ttl}: {want} missing from {problems:#?}"
            );
            let set = &verdicts.sets[0];
            let www = set.names.iter().find(|(n, _)| n == "www").unwrap();
            assert_eq!(
                www.1.as_ref().map(|r| r.0),
                Some("InvalidDNSRecordSet"),
                "ttl {ttl}"
            );
        }
        for (ttl, want) in [("0", 0), ("4294967295", 4294967295), ("null", 300)] {
            let text = [
                ZONES.to_string(),
                set(
                    "A",
                    &format!("[{{name: www, ttl: {ttl}, a: {{content: 192.0.2.1}}}}]"),
                ),
            ]
            .concat();
            let parsed = parse(&text);
            assert!(
                parsed.problems.iter().all(|p| !p.entry.ends_with(".ttl")),
                "{ttl}"
            );
            assert_eq!(parsed.zones[0].records.to_vec()[0].ttl, want, "ttl {ttl}");
        }
    }

    /// Entries are read one at a time through the typed shape: a type object of the wrong
    /// shape refuses its entry alone, naming it. A DNSRecordSet document without the typed
    /// shape at all is read leniently and gets the verdict it always got.
    #[test]
    fn a_bad_type_object_refuses_its_entry_and_an_untyped_document_keeps_its_verdict() {
        let text = [
            ZONES.to_string(),
            set(
                "MX",
                "[{name: m, mx: {preference: 70000, exchange: mail}}, {name: ok, mx: {preference: 10, exchange: mail}}]",
            ),
            "---\napiVersion: dns.networking.miloapis.com/v1alpha1\nkind: DNSRecordSet\nmetadata: {name: odd, namespace: dns, generation: many}\nspec: {dnsZoneRef: {name: a}, recordType: A, records: [{name: x, a: {content: 192.0.2.7}}]}\n".to_string(),
            "---\napiVersion: dns.networking.miloapis.com/v1alpha1\nkind: DNSRecordSet\nmetadata: {name: shapeless, namespace: dns}\nspec: oops\n".to_string(),
        ]
        .concat();
        let objects = objects("m.yaml", &text).unwrap();
        let (parsed, verdicts) = read("m.yaml", &objects, &Default::default());
        let served: Vec<String> = parsed.zones[0]
            .records
            .to_vec()
            .iter()
            .map(|r| format!("{} {}", r.name, r.data))
            .collect();
        assert_eq!(
            served,
            ["x.example.org. 192.0.2.7", "ok.example.org. 10 mail."]
        );
        let problems: Vec<String> = parsed.problems.iter().map(ToString::to_string).collect();
        assert!(
            problems
                .iter()
                .any(|p| p.starts_with("m.yaml: DNSRecordSet dns/s-mx records[0].mx: ")),
            "{problems:#?}"
        );
        let verdict = |name: &str| verdicts.sets.iter().find(|v| v.name == name).unwrap();
        let mx = verdict("s-mx");
        assert_eq!(
            mx.names[0].1.as_ref().map(|r| r.0),
            Some("InvalidDNSRecordSet")
        );
        assert_eq!(mx.names[1].1, None);
        assert_eq!(verdict("odd").refused, None);
        assert_eq!(
            verdict("shapeless").refused,
            Some((
                "Pending",
                "no DNSZone \"\" in namespace \"dns\"".to_string()
            ))
        );
    }
}
