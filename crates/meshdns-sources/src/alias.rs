//! ALIAS, as dns-operator programs it (pure): a name answered with the A and AAAA records of
//! another, "flattened" when the catalog is assembled, so that an apex (where a CNAME cannot
//! be) can follow a host.
//!
//! Each ALIAS is resolved against the zones just built, from every source: its target's A and
//! AAAA, through CNAMEs and other ALIASes (at most [`MAX_HOPS`] names), are added at the alias
//! name with the ALIAS's TTL, and its zone is rebuilt. The target's changes follow because
//! every change of a source assembles the catalog again. A target outside every zone served
//! is reported and not followed: an authoritative server does not recurse. Records a source
//! gives at the alias name itself win over the flattened ones (reported), as a CNAME there
//! refuses them.
//!
//! Why at assembly and not at query time: a secondary fed by transfer and `render zone` see
//! the same A and AAAA as the answers, and the query path does nothing new.

use std::collections::BTreeMap;
use std::sync::Arc;

use meshdns_zone::{BuildDefaults, Catalog, Lookup, Name, RData, RType, Record, Rejection, Zone};

use crate::content::Problem;

/// Names followed from an ALIAS to the addresses (CNAMEs and ALIASes on the way).
pub const MAX_HOPS: usize = 8;

/// One ALIAS: `owner` answers `target`'s A and AAAA.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Alias {
    /// The alias name.
    pub owner: Name,
    /// The name whose addresses it answers.
    pub target: Name,
    /// The TTL of the flattened records.
    pub ttl: u32,
    /// What gave it, for problems (`DNSRecordSet ns/name records[i]`).
    pub object: String,
    /// The views that see it (`meshdns.io/views`, sorted); empty: every view.
    pub views: Vec<String>,
}

/// Flattens `aliases` (each with the label of its source) into `zones`: every zone holding an
/// alias name is rebuilt with the addresses added. Problems name the alias's object.
pub fn flatten(
    zones: &mut [Arc<Zone>],
    aliases: &[(&str, &Alias)],
    defaults: BuildDefaults,
    problems: &mut Vec<Problem>,
) {
    if aliases.is_empty() {
        return;
    }
    let catalog = Catalog::from_zones(zones.iter().cloned());
    let by_owner: BTreeMap<&Name, &Alias> = aliases.iter().map(|(_, a)| (&a.owner, *a)).collect();
    // Per zone (by origin): the flattened records and who gave each.
    let mut added: BTreeMap<Name, Vec<(Record, usize)>> = BTreeMap::new();
    for (i, (label, alias)) in aliases.iter().enumerate() {
        let Some(origin) = catalog
            .find_zone(alias.owner.wire())
            .map(|z| z.origin().clone())
        else {
            continue;
        };
        match addresses(&catalog, &by_owner, &alias.target) {
            Ok(found) if found.is_empty() => problems.push(Problem::new(
                label,
                format!("{} {}", alias.object, alias.owner),
                format!(
                    "ALIAS target {} has no A or AAAA records; {} answers none until it has",
                    alias.target, alias.owner
                ),
            )),
            Ok(found) => added
                .entry(origin)
                .or_default()
                .extend(found.into_iter().map(|data| {
                    let record = Record {
                        name: alias.owner.clone(),
                        ttl: alias.ttl,
                        data,
                    };
                    (record, i)
                })),
            Err(why) => problems.push(Problem::new(
                label,
                format!("{} {}", alias.object, alias.owner),
                why,
            )),
        }
    }
    for zone in zones.iter_mut() {
        let Some(records) = added.remove(zone.origin()) else {
            continue;
        };
        // Outside the zone cannot be: the zone was found for the name.
        let (rebuilt, refused) =
            zone.with_records(records.iter().map(|(r, _)| r.clone()), defaults);
        for (name, rtype, why) in refused {
            let Some((_, i)) = records
                .iter()
                .find(|(r, _)| r.name == name && r.data.rtype() == rtype)
            else {
                continue;
            };
            let (label, alias) = aliases[*i];
            let reason = match why {
                Rejection::TakenBy { .. } => format!(
                    "{name} has {rtype} records of its own, which take precedence over the ALIAS"
                ),
                other => other.to_string(),
            };
            problems.push(Problem::new(
                label,
                format!("{} {}", alias.object, alias.owner),
                reason,
            ));
        }
        *zone = Arc::new(rebuilt);
    }
}

/// The A and AAAA records `target` answers, following CNAMEs and ALIASes in the zones served
/// (a name's own records first: an ALIAS there is refused beside them).
fn addresses(
    catalog: &Catalog,
    aliases: &BTreeMap<&Name, &Alias>,
    target: &Name,
) -> Result<Vec<RData>, String> {
    let mut name = target.clone();
    for _ in 0..MAX_HOPS {
        let Some(zone) = catalog.find_zone(name.wire()) else {
            return Err(format!(
                "ALIAS target {name} is not in a zone meshdns serves; it is not followed (an \
                 authoritative server does not recurse): serve its zone here, or use a CNAME \
                 below the apex"
            ));
        };
        let node = match zone.lookup(name.wire()) {
            Lookup::Found(node) | Lookup::Wildcard(node) => Some(node),
            _ => None,
        };
        let cname = node.and_then(|n| n.get(RType::CNAME));
        let found: Vec<RData> = [RType::A, RType::AAAA]
            .into_iter()
            .filter_map(|t| node.and_then(|n| n.get(t)))
            .flat_map(|set| set.decoded())
            .collect();
        name = match (cname.map(|c| c.decoded()), aliases.get(&name)) {
            (Some(c), _) => match c.into_iter().next() {
                Some(RData::Cname(next)) => next,
                _ => return Ok(Vec::new()),
            },
            (None, Some(next)) if found.is_empty() => next.target.clone(),
            _ => return Ok(found),
        };
    }
    Err(format!(
        "ALIAS target {target} is more than {MAX_HOPS} names (CNAMEs, ALIASes) from an address"
    ))
}
