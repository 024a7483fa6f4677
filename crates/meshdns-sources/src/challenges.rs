//! The TXT records of ACME DNS-01 challenges (`--acme-challenge dns-01`, RFC 8555 §8.4): put
//! into meshdns's own answers while the CA validates, and removed after. Each is placed like a
//! cluster object's name, into the deepest zone served (after every source's zones, which win
//! a name and type they share), so it is transferred and NOTIFYd like any change of the zone.

use std::collections::BTreeSet;
use std::sync::{Mutex, OnceLock};

use meshdns_zone::{Catalog, Name, RData, RType, Record};

/// The TTL of a challenge record: short, so that a resolver in front of the CA does not keep
/// one validation's value into the next.
pub const CHALLENGE_TTL: u32 = 60;

/// How a challenge record is named in refusals.
pub const CHALLENGE_OBJECT: &str = "ACME DNS-01 challenge";

/// The challenge records being served, and a version raised at each change.
#[derive(Default)]
pub struct Dns01Challenges {
    state: Mutex<(u64, BTreeSet<(Name, String)>)>,
    on_change: OnceLock<Box<dyn Fn() + Send + Sync>>,
}

impl std::fmt::Debug for Dns01Challenges {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Dns01Challenges")
    }
}

impl Dns01Challenges {
    /// Calls `hook` after each change (the watcher's poke).
    pub fn on_change(&self, hook: impl Fn() + Send + Sync + 'static) {
        let _ = self.on_change.set(Box::new(hook));
    }

    /// Puts (`present`) or removes the TXT record `value` at `name`.
    pub fn set(&self, name: Name, value: String, present: bool) {
        let changed = {
            let mut state = self.state.lock().unwrap_or_else(|e| e.into_inner());
            let changed = if present {
                state.1.insert((name, value))
            } else {
                state.1.remove(&(name, value))
            };
            if changed {
                state.0 += 1;
            }
            changed
        };
        if changed && let Some(hook) = self.on_change.get() {
            hook();
        }
    }

    /// The current version and every challenge record, when the version differs from `seen`.
    pub fn take_if_newer(&self, seen: u64) -> Option<(u64, Vec<Record>)> {
        let state = self.state.lock().unwrap_or_else(|e| e.into_inner());
        (state.0 != seen).then(|| {
            let records = state
                .1
                .iter()
                .map(|(name, value)| record(name, value))
                .collect();
            (state.0, records)
        })
    }
}

/// The challenge record `value` at `name`.
pub fn record(name: &Name, value: &str) -> Record {
    Record {
        name: name.clone(),
        ttl: CHALLENGE_TTL,
        data: RData::Txt(vec![value.as_bytes().into()]),
    }
}

/// Whether `catalog` answers the TXT record `value` at `name` (in a zone's own records: a
/// challenge is never in a pkarr overlay).
pub fn served(catalog: &Catalog, name: &Name, value: &str) -> bool {
    let mut wanted = Vec::new();
    record(name, value).data.to_wire(&mut wanted);
    catalog
        .find_zone(name.wire())
        .and_then(|zone| zone.node(name.wire()))
        .and_then(|node| node.get(RType::TXT))
        .is_some_and(|set| set.rdatas().any(|rdata| rdata == wanted.as_slice()))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::snapshot::{CompiledSource, Generated, SourceInput, assemble};
    use meshdns_zone::BuildDefaults;

    fn name(s: &str) -> Name {
        s.parse().unwrap()
    }

    #[test]
    fn versions_move_only_on_changes_and_records_come_back() {
        let store = Dns01Challenges::default();
        assert!(store.take_if_newer(0).is_none());
        let at = name("_acme-challenge.example.org.");
        store.set(at.clone(), "one".into(), true);
        store.set(at.clone(), "two".into(), true);
        store.set(at.clone(), "two".into(), true);
        let (v, records) = store.take_if_newer(0).unwrap();
        assert_eq!(v, 2);
        assert_eq!(records.len(), 2);
        assert!(
            records
                .iter()
                .all(|r| r.name == at && r.ttl == CHALLENGE_TTL)
        );
        store.set(at.clone(), "absent".into(), false);
        assert!(store.take_if_newer(2).is_none());
        store.set(at, "one".into(), false);
        assert_eq!(store.take_if_newer(2).unwrap().1.len(), 1);
    }

    #[test]
    fn a_placed_challenge_is_served_in_the_deepest_zone() {
        let at = name("_acme-challenge.www.example.org.");
        let source = CompiledSource {
            placed: std::sync::Arc::new(vec![(
                record(&at, "digest"),
                CHALLENGE_OBJECT.to_string(),
            )]),
            ..CompiledSource::default()
        };
        let inputs = [SourceInput {
            label: "acme",
            compiled: &source,
        }];
        let (catalog, problems) = assemble(
            &inputs,
            &[name("example.org.")],
            &Generated::default(),
            BuildDefaults {
                default_ttl: 300,
                serial: 1,
            },
        );
        assert!(problems.is_empty(), "{problems:?}");
        assert!(served(&catalog, &at, "digest"));
        assert!(!served(&catalog, &at, "other"));
        assert!(!served(
            &catalog,
            &name("_acme-challenge.example.org."),
            "digest"
        ));
    }
}
