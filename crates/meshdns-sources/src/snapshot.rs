//! From parsed files to the served catalog (pure).
//!
//! Each file is [`compile`]d once, when it changes, into compact zones; its parsed records are
//! then dropped. A snapshot is [`assemble`]d from every file's compiled zones: a zone that one
//! file alone supplies is shared by `Arc` (no copy, so a reload rebuilds only what changed), and
//! a zone that several files supply is merged.
//!
//! Precedence, when two files give the same (name, type): the file listed first (in the order
//! of `--records` flags, then `--zone-file` flags) keeps it; the later one's records for that
//! pair are skipped, reported once, and never mixed into the answer.

use std::collections::BTreeMap;
use std::sync::Arc;

use meshdns_zone::{
    BuildDefaults, Catalog, CatalogBuilder, Cidr, Name, Overlay, RType, Record, Rejection, Zone,
};

use crate::alias::Alias;
use crate::content::{FileKind, ParseSettings, Parsed, Problem, ZoneContent};
use crate::records::parse;

/// One file's content compiled into zones: what a source keeps between reloads.
#[derive(Debug, Clone, Default)]
pub struct CompiledSource {
    /// The file's zones, each with its records (and SOA/NS synthesised where the file gave none).
    pub zones: Vec<Arc<Zone>>,
    /// Records published per key (pkarr), served under each of these zones beside what every
    /// source gives there.
    pub overlay: Option<Arc<Overlay>>,
    /// Records by owner name alone (the cluster's objects, [`crate::cluster`]), each with the
    /// object that gave it: [`assemble`] places each into the deepest zone served, after
    /// every source's zones.
    pub placed: Arc<Vec<(Record, String)>>,
    /// ALIASes, flattened by [`assemble`] into the zones of their names ([`crate::alias`]).
    pub aliases: Arc<Vec<Alias>>,
    /// Zones only some views see, compiled apart, by those views' names (sorted); a view's
    /// catalog takes them ahead of every source's own ([`inputs_for_view`]).
    pub tagged: Arc<Vec<(Vec<String>, CompiledSource)>>,
}

/// Compiles one file's parsed content (consuming its records). Records that break a rule
/// inside the file (CNAME beside other data, CNAME at an apex) are refused and returned as
/// problems.
pub fn compile(
    label: &str,
    zones: Vec<ZoneContent>,
    defaults: BuildDefaults,
) -> (CompiledSource, Vec<Problem>) {
    let mut builder = CatalogBuilder::new(defaults);
    let mut problems = Vec::new();
    for zone in zones {
        // `add_records` makes its own room (taking the RDATA buffer over when it can).
        if let Some(t) = zone.soa {
            // One file, one source: a template cannot be refused here.
            let _ = builder.set_soa_template(&zone.origin, t, 0);
        }
        for (name, rtype, why) in builder.add_records(&zone.origin, zone.records, 0) {
            problems.push(Problem::new(
                label,
                format!("{name} {rtype}"),
                why.to_string(),
            ));
        }
    }
    let (zones, refused) = builder.build_zones();
    problems.extend(
        refused.into_iter().map(|(name, rtype, why)| {
            Problem::new(label, format!("{name} {rtype}"), why.to_string())
        }),
    );
    (
        CompiledSource {
            zones: zones.into_iter().map(Arc::new).collect(),
            overlay: None,
            placed: Arc::default(),
            aliases: Arc::default(),
            tagged: Arc::default(),
        },
        problems,
    )
}

/// A source's content, compiled, and every entry of it that was skipped: what `serve` keeps
/// and `check` prints.
#[derive(Debug, Clone, Default)]
pub struct Loaded {
    /// The zones to serve.
    pub compiled: CompiledSource,
    /// Entries skipped while parsing and compiling, in that order.
    pub problems: Vec<Problem>,
    /// Files of the source that could not be used at all (a manifest directory's broken
    /// files, each named with the line at fault); their objects are not in `compiled`.
    pub unusable: Vec<Problem>,
}

impl Loaded {
    /// Records served, SOA and NS included.
    pub fn records(&self) -> usize {
        self.compiled.zones.iter().map(|z| z.record_count()).sum()
    }
}

/// Compiles a parsed source, keeping the parser's problems ahead of the compiler's.
pub fn load_parsed(label: &str, parsed: Parsed, defaults: BuildDefaults) -> Loaded {
    let (mut compiled, refused) = compile(label, parsed.zones, defaults);
    compiled.placed = Arc::new(parsed.placed);
    let mut problems = parsed.problems;
    problems.extend(refused);
    // What only some views see, by those views: zones, and ALIASes (flattened in those
    // views' catalogs alone).
    type Part = (Vec<ZoneContent>, Vec<Alias>);
    let mut by_views: BTreeMap<Vec<String>, Part> = BTreeMap::new();
    for (views, zone) in parsed.tagged {
        by_views.entry(views).or_default().0.push(zone);
    }
    let (untagged, tagged_aliases): (Vec<Alias>, Vec<Alias>) =
        parsed.aliases.into_iter().partition(|a| a.views.is_empty());
    compiled.aliases = Arc::new(untagged);
    for alias in tagged_aliases {
        by_views
            .entry(alias.views.clone())
            .or_default()
            .1
            .push(alias);
    }
    let mut tagged = Vec::with_capacity(by_views.len());
    for (views, (zones, aliases)) in by_views {
        let (mut part, refused) = compile(label, zones, defaults);
        part.aliases = Arc::new(aliases);
        problems.extend(refused);
        tagged.push((views, part));
    }
    compiled.tagged = Arc::new(tagged);
    Loaded {
        compiled,
        problems,
        unusable: Vec::new(),
    }
}

/// Parses and compiles one source's bytes; `Err` when the source is unusable as a whole.
pub fn load(
    label: &str,
    kind: &FileKind,
    bytes: &[u8],
    settings: &ParseSettings,
    defaults: BuildDefaults,
) -> Result<Loaded, Problem> {
    Ok(load_parsed(
        label,
        parse(label, kind, bytes, settings)?,
        defaults,
    ))
}

/// What view `view` serves: first the parts of `inputs` that view sees (so that a view's
/// records win a name and type over those every view sees), then `inputs` themselves.
pub fn inputs_for_view<'a>(inputs: &[SourceInput<'a>], view: &str) -> Vec<SourceInput<'a>> {
    let tagged = inputs.iter().flat_map(|input| {
        input
            .compiled
            .tagged
            .iter()
            .filter(|(views, _)| views.iter().any(|v| v == view))
            .map(|(_, part)| SourceInput {
                label: input.label,
                compiled: part,
            })
    });
    tagged.chain(inputs.iter().copied()).collect()
}

/// Whether any input has zones only some views see.
pub fn has_tagged(inputs: &[SourceInput<'_>]) -> bool {
    inputs.iter().any(|i| !i.compiled.tagged.is_empty())
}

/// A problem for each view named by `inputs`' data but not configured (`views`): its records
/// are served to no client.
pub fn unconfigured_views(inputs: &[SourceInput<'_>], views: &[String]) -> Vec<Problem> {
    let configured = if views.is_empty() {
        "no --view is given".to_string()
    } else {
        format!("--view gives {}", views.join(", "))
    };
    let mut problems = Vec::new();
    for input in inputs {
        for (tags, part) in input.compiled.tagged.iter() {
            for tag in tags.iter().filter(|t| !views.contains(t)) {
                for zone in &part.zones {
                    problems.push(Problem::new(
                        input.label,
                        format!("zone {}", zone.origin()),
                        format!(
                            "view {tag:?} is not configured ({configured}); no client sees what is given for it"
                        ),
                    ));
                }
            }
        }
    }
    problems
}

/// One source's compiled content, labelled for problems.
#[derive(Debug, Clone, Copy)]
pub struct SourceInput<'a> {
    /// How problems name the source (its path).
    pub label: &'a str,
    /// Its last good content.
    pub compiled: &'a CompiledSource,
}

/// Builds the catalog: `declared` zones always exist (with a synthesised SOA/NS when empty),
/// then every source's zones in order, then the zones of the `reverse` ranges with a PTR for
/// each address served in them ([`crate::reverse`]). Returns the records refused by
/// precedence.
pub fn assemble(
    inputs: &[SourceInput<'_>],
    declared: &[Name],
    generated: &Generated,
    defaults: BuildDefaults,
) -> (Catalog, Vec<Problem>) {
    assemble_with(inputs, 0, declared, generated, defaults)
}

/// View `view`'s catalog ([`inputs_for_view`]): as [`assemble`], but a view's own records
/// winning a name and type over those every view sees is what they are for, not reported.
pub fn assemble_view(
    inputs: &[SourceInput<'_>],
    view: &str,
    declared: &[Name],
    generated: &Generated,
    defaults: BuildDefaults,
) -> (Catalog, Vec<Problem>) {
    let view_inputs = inputs_for_view(inputs, view);
    let overriding = view_inputs.len() - inputs.len();
    assemble_with(&view_inputs, overriding, declared, generated, defaults)
}

/// [`assemble`], where the first `overriding` inputs win over the others by design: their
/// precedence over those is not reported.
fn assemble_with(
    inputs: &[SourceInput<'_>],
    overriding: usize,
    declared: &[Name],
    generated: &Generated,
    defaults: BuildDefaults,
) -> (Catalog, Vec<Problem>) {
    let by_design = |winner: usize, loser: usize| winner < overriding && loser >= overriding;
    let reverse = &generated.reverse[..];
    let mut by_origin: BTreeMap<Name, Vec<(usize, &Arc<Zone>)>> = BTreeMap::new();
    let reverse_zones: std::collections::BTreeSet<Name> =
        reverse.iter().flat_map(crate::reverse::zones_of).collect();
    for origin in declared.iter().chain(&reverse_zones) {
        by_origin.entry(origin.clone()).or_default();
    }
    for (i, input) in inputs.iter().enumerate() {
        for zone in &input.compiled.zones {
            by_origin
                .entry(zone.origin().clone())
                .or_default()
                .push((i, zone));
        }
    }
    let mut problems = Vec::new();
    let placed = place(inputs, &by_origin, &mut problems);
    let mut zones = Vec::with_capacity(by_origin.len());
    for (origin, contributors) in by_origin {
        let here = placed.get(&origin).map_or(&[][..], Vec::as_slice);
        match contributors.as_slice() {
            [(_, only)] if here.is_empty() => zones.push(Arc::clone(only)),
            _ => {
                let mut builder = CatalogBuilder::new(defaults);
                builder.declare(&origin);
                for (i, zone) in &contributors {
                    builder.add_zone(zone, *i);
                }
                // After every zone, so that they win a name and type (and a CNAME) they share.
                for (i, record, object) in here {
                    if let Err(why) = builder.add(&origin, (*record).clone(), inputs.len() + i) {
                        problems.push(Problem::new(
                            inputs[*i].label,
                            format!("{object} {} {}", record.name, record.data.rtype()),
                            why.to_string(),
                        ));
                    }
                }
                let (built, refused) = builder.build_zones();
                for (name, rtype, why) in refused {
                    if let Some((i, _, object)) = here
                        .iter()
                        .find(|(_, r, _)| r.name == name && r.data.rtype() == rtype)
                    {
                        if matches!(why, Rejection::TakenBy { winner, .. } if by_design(winner, *i))
                        {
                            continue;
                        }
                        let reason = match &why {
                            Rejection::TakenBy { winner, .. } => format!(
                                "already provided by {}, which takes precedence over the cluster's objects",
                                inputs.get(*winner).map_or("another source", |w| w.label)
                            ),
                            other => format!(
                                "{other}; the other records come from a source that takes precedence"
                            ),
                        };
                        problems.push(Problem::new(
                            inputs[*i].label,
                            format!("{object} {name} {rtype}"),
                            reason,
                        ));
                        continue;
                    }
                    let loser = match &why {
                        // The refused record came from a later source than the winner's; the
                        // loser is the first contributor other than the winner that has it.
                        Rejection::TakenBy { winner, .. } => contributors
                            .iter()
                            .map(|(i, _)| *i)
                            .find(|i| {
                                i != winner && has_set(inputs[*i].compiled, &origin, &name, rtype)
                            })
                            .unwrap_or(*winner),
                        _ => contributors[0].0,
                    };
                    if matches!(why, Rejection::TakenBy { winner, .. } if by_design(winner, loser))
                    {
                        continue;
                    }
                    problems.push(refusal(inputs, loser, &name, rtype, why));
                }
                zones.extend(built.into_iter().map(Arc::new));
            }
        }
    }
    if !reverse.is_empty() {
        add_reverse(&mut zones, reverse, &reverse_zones, defaults, &mut problems);
    }
    // After the reverse zones: an address's PTR names its host, not each ALIAS of it.
    let aliases: Vec<(&str, &Alias)> = inputs
        .iter()
        .flat_map(|input| input.compiled.aliases.iter().map(|a| (input.label, a)))
        .collect();
    crate::alias::flatten(&mut zones, &aliases, defaults, &mut problems);
    if let Some(origin) = &generated.catalog {
        add_catalog(&mut zones, origin, defaults, &mut problems);
    }
    let mut catalog = Catalog::from_zones(zones);
    for input in inputs {
        if let Some(overlay) = &input.compiled.overlay {
            for zone in &input.compiled.zones {
                catalog.attach(zone.origin(), overlay.clone());
            }
        }
    }
    (catalog, problems)
}

/// The zones meshdns makes itself beside its sources': the reverse zones of ranges
/// (`--reverse-zone`) and the catalog zone (`--catalog-zone`).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Generated {
    /// Ranges whose reverse zones are served, with a PTR for each address served.
    pub reverse: Vec<Cidr>,
    /// The catalog zone's origin (RFC 9432): every other zone served is a member.
    pub catalog: Option<Name>,
}

/// Adds the catalog zone `origin` listing every zone of `zones` (after every other zone: the
/// reverse zones are members too). A source that serves that origin itself keeps it, and
/// that is reported.
fn add_catalog(
    zones: &mut Vec<Arc<Zone>>,
    origin: &Name,
    defaults: BuildDefaults,
    problems: &mut Vec<Problem>,
) {
    if zones.iter().any(|z| z.origin() == origin) {
        problems.push(Problem::new(
            "--catalog-zone",
            origin.to_string(),
            "a source serves this zone: it is not made a catalog (choose an origin no source gives)",
        ));
        return;
    }
    for below in zones
        .iter()
        .map(|z| z.origin())
        .filter(|z| *z != origin && meshdns_zone::name::is_wire_subdomain(z.wire(), origin.wire()))
    {
        problems.push(Problem::new(
            "--catalog-zone",
            below.to_string(),
            format!(
                "a zone below the catalog {origin} is not listed in it (it would hide the catalog's names)"
            ),
        ));
    }
    let records = crate::catalog::records(
        origin,
        zones.iter().map(|z| z.origin()),
        defaults.default_ttl,
    );
    let mut builder = CatalogBuilder::new(defaults);
    builder.declare(origin);
    for record in records {
        // Inside the zone by construction: nothing to refuse.
        let _ = builder.add(origin, record, 0);
    }
    let (built, _) = builder.build_zones();
    zones.extend(built.into_iter().map(Arc::new));
}

/// Rebuilds each reverse zone among `zones` that has addresses to name, with a PTR for each
/// (after the zone's own records: a PTR a source gives at a name leaves the generated ones
/// there out).
fn add_reverse(
    zones: &mut [Arc<Zone>],
    reverse: &[Cidr],
    reverse_zones: &std::collections::BTreeSet<Name>,
    defaults: BuildDefaults,
    problems: &mut Vec<Problem>,
) {
    let mut ptrs = crate::reverse::ptrs(zones, reverse, reverse_zones);
    for zone in zones.iter_mut() {
        let Some(records) = ptrs.remove(zone.origin()) else {
            continue;
        };
        if zone.given_serial().is_some() {
            // Its serial comes from a source: PTRs added here would change it unseen.
            problems.push(Problem::new(
                "--reverse-zone",
                zone.origin().to_string(),
                "its SOA serial comes from a source (a zone file, or a zone transferred in), \
                 which generated PTRs would change without raising it: none are added",
            ));
            continue;
        }
        // Inside the zone by construction, and PTRs a source gives at a name leave the
        // generated ones out: nothing refused is worth reporting.
        let generated = records.into_iter().filter(|record| {
            zone.node(record.name.wire())
                .is_none_or(|n| n.get(RType::PTR).is_none())
        });
        let (built, _) = zone.with_records(generated, defaults);
        *zone = Arc::new(built);
    }
}

/// The records given by owner name alone ([`CompiledSource::placed`]), by the deepest zone
/// served that holds them, each with its source; a record in no zone is reported (once per
/// object and name).
#[allow(clippy::type_complexity)]
fn place<'a>(
    inputs: &[SourceInput<'a>],
    by_origin: &BTreeMap<Name, Vec<(usize, &Arc<Zone>)>>,
    problems: &mut Vec<Problem>,
) -> BTreeMap<Name, Vec<(usize, &'a Record, &'a str)>> {
    let mut out: BTreeMap<Name, Vec<(usize, &'a Record, &'a str)>> = BTreeMap::new();
    let mut reported = std::collections::BTreeSet::new();
    for (i, input) in inputs.iter().enumerate() {
        for (record, object) in input.compiled.placed.iter() {
            let mut deepest = None;
            let mut at = Some(record.name.clone());
            while let Some(name) = at {
                if let Some(contributors) = by_origin.get(&name) {
                    deepest = Some((name, contributors));
                    break;
                }
                at = name.parent();
            }
            let why = match deepest {
                // A zone whose SOA serial a source gives (a zone file's, a transferred zone's)
                // would change without its serial: secondaries would never see these records.
                Some((origin, contributors))
                    if contributors.iter().any(|(_, z)| z.given_serial().is_some()) =>
                {
                    format!(
                        "zone {origin} has its SOA serial from a source (a zone file, or a zone \
                         transferred in), which these records would change without raising it"
                    )
                }
                // A zone's own name servers are its sources'; a delegation from an object may not
                // hide what a source gives at or below it.
                Some((origin, _)) if record.data.rtype() == RType::NS && record.name == origin => {
                    format!(
                        "the name servers of zone {origin} are its own: an object gives no NS at a zone's apex"
                    )
                }
                Some((origin, contributors))
                    if record.data.rtype() == RType::NS
                        && contributors.iter().any(|(_, z)| {
                            z.nodes().any(|n| {
                                meshdns_zone::name::is_wire_subdomain(n.name(), record.name.wire())
                            })
                        }) =>
                {
                    format!(
                        "a delegation at {} would hide what a source of zone {origin} gives at or below it",
                        record.name
                    )
                }
                Some((origin, _)) => {
                    out.entry(origin)
                        .or_default()
                        .push((i, record, object.as_str()));
                    continue;
                }
                None => "not inside a zone served here (names are served in the zones of records \
                         files, zone files, DNSZones and --zone)"
                    .to_string(),
            };
            if reported.insert((object.as_str(), &record.name)) {
                problems.push(Problem::new(
                    input.label,
                    format!("{object} {}", record.name),
                    why,
                ));
            }
        }
    }
    out
}

/// Whether a source's zone `origin` holds (name, rtype).
fn has_set(source: &CompiledSource, origin: &Name, name: &Name, rtype: RType) -> bool {
    source
        .zones
        .iter()
        .filter(|z| z.origin() == origin)
        .any(|z| z.node(name.wire()).is_some_and(|n| n.get(rtype).is_some()))
}

fn refusal(
    inputs: &[SourceInput<'_>],
    loser: usize,
    name: &Name,
    rtype: RType,
    why: Rejection,
) -> Problem {
    let reason = match why {
        Rejection::TakenBy { winner, .. } => format!(
            "already provided by {}, which takes precedence (sources listed first win)",
            inputs.get(winner).map_or("another source", |w| w.label)
        ),
        other => other.to_string(),
    };
    Problem::new(inputs[loser].label, format!("{name} {rtype}"), reason)
}

#[cfg(test)]
mod tests {
    use super::*;

    const DEFAULTS: BuildDefaults = BuildDefaults {
        default_ttl: 5,
        serial: 1,
    };

    fn compiled(label: &str, text: &[u8]) -> CompiledSource {
        let parsed = parse(label, &FileKind::Auto, text, &ParseSettings::default()).unwrap();
        let (c, problems) = compile(label, parsed.zones, DEFAULTS);
        assert!(problems.is_empty(), "{problems:?}");
        c
    }

    #[test]
    fn first_source_wins_and_the_loser_is_reported() {
        let a = compiled(
            "a.json",
            br#"{"version":"v1alpha1","ip4":{"x.ts.net":["100.64.0.1"]}}"#,
        );
        let b = compiled("b.json", br#"{"version":"v1alpha1","ip4":{"x.ts.net":["100.64.0.2","100.64.0.3"],"y.ts.net":["100.64.0.4"]}}"#);
        let inputs = [
            SourceInput {
                label: "a.json",
                compiled: &a,
            },
            SourceInput {
                label: "b.json",
                compiled: &b,
            },
        ];
        let (cat, problems) = assemble(&inputs, &[], &Generated::default(), DEFAULTS);
        assert_eq!(problems.len(), 1);
        assert_eq!(
            problems[0].to_string(),
            "b.json: x.ts.net. A: already provided by a.json, which takes precedence (sources listed first win)"
        );
        let zone = cat.find_zone(b"\x01x\x02ts\x03net\x00").unwrap();
        assert_eq!(zone.record_count(), 4); // x, y, SOA, NS
    }

    #[test]
    fn a_zone_from_one_source_is_shared_not_copied() {
        let a = compiled(
            "a.yaml",
            b"zones: [{origin: example.org, records: [{name: w, type: A, value: 192.0.2.1}]}]",
        );
        let inputs = [SourceInput {
            label: "a.yaml",
            compiled: &a,
        }];
        let (cat, _) = assemble(
            &inputs,
            &["example.net.".parse().unwrap()],
            &Generated::default(),
            DEFAULTS,
        );
        assert!(Arc::ptr_eq(
            cat.zone(&"example.org.".parse().unwrap()).unwrap(),
            &a.zones[0]
        ));
        assert!(
            cat.zone(&"example.net.".parse().unwrap()).is_some(),
            "declared zones exist empty"
        );
    }

    #[test]
    fn rule_breaks_inside_one_file_are_refused_at_compile() {
        let parsed = parse(
            "c.yaml",
            &FileKind::Auto,
            b"zones: [{origin: example.org, records: [{name: a, type: A, value: 192.0.2.1}, {name: a, type: CNAME, value: b}]}]",
            &ParseSettings::default(),
        )
        .unwrap();
        let (_, problems) = compile("c.yaml", parsed.zones, DEFAULTS);
        assert_eq!(problems.len(), 1);
        assert!(
            problems[0]
                .to_string()
                .starts_with("c.yaml: a.example.org. CNAME: "),
            "{}",
            problems[0]
        );
    }

    #[test]
    fn records_by_name_go_to_the_deepest_zone_after_every_zone_of_the_sources() {
        let file = compiled(
            "zones.yaml",
            b"zones: [{origin: example.org, records: [{name: www, type: A, value: 192.0.2.1}, {name: mail, type: A, value: 192.0.2.9}]}, {origin: apps.example.org, records: []}]",
        );
        let record = |name: &str, data: &str| {
            let name = Name::parse(name, None).unwrap();
            let data = if data.contains('.') && data.ends_with('.') {
                meshdns_zone::RData::Cname(Name::parse(data, None).unwrap())
            } else {
                meshdns_zone::RData::A(data.parse().unwrap())
            };
            (
                Record {
                    name,
                    ttl: 60,
                    data,
                },
                "Service x/web".to_string(),
            )
        };
        let cluster = CompiledSource {
            placed: Arc::new(vec![
                record("web.apps.example.org.", "192.0.2.2"),
                record("shop.example.org.", "192.0.2.3"),
                record("www.example.org.", "192.0.2.4"),
                record("mail.example.org.", "lb.example.net."),
                record("web.other.org.", "192.0.2.5"),
            ]),
            ..CompiledSource::default()
        };
        let inputs = [
            SourceInput {
                label: "zones.yaml",
                compiled: &file,
            },
            SourceInput {
                label: "objects",
                compiled: &cluster,
            },
        ];
        let (cat, problems) = assemble(&inputs, &[], &Generated::default(), DEFAULTS);
        let a = |name: &[u8], zone: &[u8]| -> Vec<String> {
            let zone = cat.find_zone(zone).unwrap();
            zone.node(name)
                .and_then(|n| n.get(RType::A))
                .map(|set| set.decoded().iter().map(ToString::to_string).collect())
                .unwrap_or_default()
        };
        // Into the deepest zone served; the file keeps its names and types.
        assert_eq!(
            a(
                b"\x03web\x04apps\x07example\x03org\x00",
                b"\x04apps\x07example\x03org\x00"
            ),
            ["192.0.2.2"]
        );
        assert_eq!(
            a(b"\x04shop\x07example\x03org\x00", b"\x07example\x03org\x00"),
            ["192.0.2.3"]
        );
        assert_eq!(
            a(b"\x03www\x07example\x03org\x00", b"\x07example\x03org\x00"),
            ["192.0.2.1"]
        );
        assert_eq!(
            a(b"\x04mail\x07example\x03org\x00", b"\x07example\x03org\x00"),
            ["192.0.2.9"]
        );
        assert!(cat.find_zone(b"\x03web\x05other\x03org\x00").is_none());
        // A zone whose serial a source gives (a zone file) takes none: its serial would not move.
        let zone_file = compiled(
            "z.zone",
            b"$ORIGIN fixed.org.\n@ 60 IN SOA ns hm 7 1 1 1 1\n@ 60 IN NS ns\n",
        );
        let fixed = CompiledSource {
            placed: Arc::new(vec![record("www.fixed.org.", "192.0.2.7")]),
            ..CompiledSource::default()
        };
        let two = [
            SourceInput {
                label: "z.zone",
                compiled: &zone_file,
            },
            SourceInput {
                label: "objects",
                compiled: &fixed,
            },
        ];
        let (cat2, problems2) = assemble(&two, &[], &Generated::default(), DEFAULTS);
        assert!(
            cat2.find_zone(b"\x03www\x05fixed\x03org\x00")
                .unwrap()
                .node(b"\x03www\x05fixed\x03org\x00")
                .is_none()
        );
        assert_eq!(problems2.len(), 1);
        assert!(problems2[0].to_string().starts_with("objects: Service x/web www.fixed.org.: zone fixed.org. has its SOA serial from a source"), "{}", problems2[0]);
        let text: Vec<String> = problems.iter().map(ToString::to_string).collect();
        assert_eq!(
            text,
            [
                "objects: Service x/web web.other.org.: not inside a zone served here (names are served in the zones of records files, zone files, DNSZones and --zone)",
                "objects: Service x/web www.example.org. A: already provided by zones.yaml, which takes precedence over the cluster's objects",
                "objects: Service x/web mail.example.org. CNAME: mail.example.org. cannot have a CNAME and other records (RFC 1034 §3.6.2); the other records come from a source that takes precedence",
            ]
        );
    }

    #[test]
    fn objects_give_no_apex_ns_and_no_delegation_over_a_sources_names() {
        let file = compiled(
            "zones.yaml",
            b"zones: [{origin: example.org, records: [{name: a.www, type: A, value: 192.0.2.1}]}]",
        );
        let ns = |name: &str| {
            let data = meshdns_zone::RData::Ns(Name::parse("ns.example.net.", None).unwrap());
            let name = Name::parse(name, None).unwrap();
            (
                Record {
                    name,
                    ttl: 60,
                    data,
                },
                "DNSEndpoint x/ns".to_string(),
            )
        };
        let objects = CompiledSource {
            placed: Arc::new(vec![
                ns("example.org."),
                ns("www.example.org."),
                ns("sub.example.org."),
            ]),
            ..CompiledSource::default()
        };
        let inputs = [
            SourceInput {
                label: "zones.yaml",
                compiled: &file,
            },
            SourceInput {
                label: "objects",
                compiled: &objects,
            },
        ];
        let (cat, problems) = assemble(&inputs, &[], &Generated::default(), DEFAULTS);
        let text: Vec<String> = problems.iter().map(ToString::to_string).collect();
        assert_eq!(text.len(), 2, "{text:?}");
        assert!(
            text[0].contains("an object gives no NS at a zone's apex"),
            "{text:?}"
        );
        assert!(
            text[1].contains("a delegation at www.example.org. would hide"),
            "{text:?}"
        );
        let zone = cat.find_zone(b"\x07example\x03org\x00").unwrap();
        let apex_ns = zone
            .node(b"\x07example\x03org\x00")
            .unwrap()
            .get(RType::NS)
            .unwrap();
        assert_eq!(apex_ns.decoded()[0].to_string(), "ns.example.org.");
        assert!(
            zone.node(b"\x03sub\x07example\x03org\x00")
                .unwrap()
                .get(RType::NS)
                .is_some()
        );
    }
}
