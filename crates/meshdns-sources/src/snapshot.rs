//! Building one catalog from every source's last good content (pure).
//!
//! Precedence, when two sources give the same (name, type): the source listed first (in the
//! order of `--records`/`--zone-file` flags, then the config file) keeps it; the later one's
//! records for that pair are skipped, reported once, and never mixed into the answer.

use std::collections::HashSet;

use meshdns_zone::{BuildDefaults, Catalog, CatalogBuilder, Name, Rejection};

use crate::records::{Parsed, Problem};

/// One source's content, labelled for problems.
#[derive(Debug, Clone, Copy)]
pub struct SourceInput<'a> {
    /// How problems name the source (its path).
    pub label: &'a str,
    /// Its last good content.
    pub parsed: &'a Parsed,
}

/// Builds the catalog: `declared` zones always exist (with a synthesised SOA/NS when empty),
/// then every source's zones and records in order. Returns the records that were refused.
pub fn assemble(
    inputs: &[SourceInput<'_>],
    declared: &[Name],
    defaults: BuildDefaults,
) -> (Catalog, Vec<Problem>) {
    let mut builder = CatalogBuilder::new(defaults);
    for origin in declared {
        builder.declare(origin);
    }
    let mut problems = Vec::new();
    let mut reported = HashSet::new();
    for (id, input) in inputs.iter().enumerate() {
        let mut refuse = |entry: String, why: Rejection| {
            if !reported.insert((id, entry.clone())) {
                return;
            }
            let reason = match why {
                Rejection::TakenBy { winner, .. } => format!(
                    "already provided by {}, which takes precedence (sources listed first win)",
                    inputs.get(winner).map_or("another source", |w| w.label)
                ),
                other => other.to_string(),
            };
            problems.push(Problem::new(input.label, entry, reason));
        };
        for zone in &input.parsed.zones {
            builder.declare(&zone.origin);
            if let Some(t) = &zone.soa
                && let Err(why) = builder.set_soa_template(&zone.origin, t.clone(), id)
            {
                refuse(format!("{} SOA", zone.origin), why);
            }
            for rec in &zone.records {
                let entry = format!("{} {}", rec.name, rec.data.rtype());
                if let Err(why) = builder.add(&zone.origin, rec.clone(), id) {
                    refuse(entry, why);
                }
            }
        }
    }
    (builder.build(), problems)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::records::{FileKind, ParseSettings, parse};

    #[test]
    fn first_source_wins_and_the_loser_is_reported_once() {
        let s = ParseSettings::default();
        let a = parse(
            "a.json",
            &FileKind::Auto,
            br#"{"version":"v1alpha1","ip4":{"x.ts.net":["100.64.0.1"]}}"#,
            &s,
        )
        .unwrap();
        let b = parse("b.json", &FileKind::Auto, br#"{"version":"v1alpha1","ip4":{"x.ts.net":["100.64.0.2","100.64.0.3"],"y.ts.net":["100.64.0.4"]}}"#, &s).unwrap();
        let inputs = [
            SourceInput {
                label: "a.json",
                parsed: &a,
            },
            SourceInput {
                label: "b.json",
                parsed: &b,
            },
        ];
        let (cat, problems) = assemble(
            &inputs,
            &[],
            BuildDefaults {
                default_ttl: 5,
                serial: 1,
            },
        );
        assert_eq!(problems.len(), 1);
        assert_eq!(
            problems[0].to_string(),
            "b.json: x.ts.net. A: already provided by a.json, which takes precedence (sources listed first win)"
        );
        let zone = cat.find_zone(b"\x01x\x02ts\x03net\x00").unwrap();
        assert_eq!(zone.record_count(), 4); // x, y, SOA, NS
    }
}
