//! The IXFR journal of one zone: the differences between consecutive serials, bounded in
//! records, condensed on the way out (RFC 1995 §5 lets a server send one difference for many).

use std::collections::{HashSet, VecDeque};

use crate::content::Rr;
use crate::serial::serial_gt;

/// The difference between two consecutive versions.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Delta {
    /// Serial before.
    pub from: u32,
    /// Serial after.
    pub to: u32,
    /// Records removed.
    pub removed: Vec<Rr<'static>>,
    /// Records added.
    pub added: Vec<Rr<'static>>,
}

impl Delta {
    fn records(&self) -> usize {
        self.removed.len() + self.added.len()
    }
}

impl Delta {
    /// Appends the binary form kept on disk: `from to removed added` (u32 each), then each
    /// record as `owner_len u8 | owner | type u16 | ttl u32 | rdata_len u16 | rdata`.
    pub fn encode(&self, out: &mut Vec<u8>) {
        for n in [
            self.from,
            self.to,
            self.removed.len() as u32,
            self.added.len() as u32,
        ] {
            out.extend_from_slice(&n.to_be_bytes());
        }
        for rr in self.removed.iter().chain(&self.added) {
            out.push(rr.owner.len() as u8);
            out.extend_from_slice(&rr.owner);
            out.extend_from_slice(&rr.rtype.0.to_be_bytes());
            out.extend_from_slice(&rr.ttl.to_be_bytes());
            out.extend_from_slice(&(rr.rdata.len() as u16).to_be_bytes());
            out.extend_from_slice(&rr.rdata);
        }
    }

    /// Reads one difference from the front of `bytes`, returning it and the rest; `None` for a
    /// truncated or damaged one (a journal cut short by a crash ends there).
    pub fn decode(bytes: &[u8]) -> Option<(Delta, &[u8])> {
        let mut rest = bytes;
        let mut take = |n: usize| -> Option<&[u8]> {
            let (head, tail) = rest.split_at_checked(n)?;
            rest = tail;
            Some(head)
        };
        let mut word = || -> Option<u32> { Some(u32::from_be_bytes(take(4)?.try_into().ok()?)) };
        let (from, to, removed, added) = (word()?, word()?, word()?, word()?);
        let mut rrs = Vec::with_capacity((removed as usize + added as usize).min(1 << 20));
        for _ in 0..u64::from(removed) + u64::from(added) {
            let owner_len = usize::from(take(1)?[0]);
            let owner = take(owner_len)?.to_vec();
            let f = take(8)?;
            let rtype = meshdns_zone::RType(u16::from_be_bytes([f[0], f[1]]));
            let ttl = u32::from_be_bytes([f[2], f[3], f[4], f[5]]);
            let rdata = take(usize::from(u16::from_be_bytes([f[6], f[7]])))?.to_vec();
            rrs.push(Rr {
                owner: owner.into(),
                rtype,
                rdata: rdata.into(),
                ttl,
            });
        }
        let added = rrs.split_off(removed as usize);
        Some((
            Delta {
                from,
                to,
                removed: rrs,
                added,
            },
            rest,
        ))
    }
}

/// Differences, oldest first, holding at most `max_records` records in all.
#[derive(Debug, Clone)]
pub struct Journal {
    deltas: VecDeque<Delta>,
    records: usize,
    max_records: usize,
}

impl Journal {
    /// An empty journal that keeps at most `max_records` records.
    pub fn new(max_records: usize) -> Journal {
        Journal {
            deltas: VecDeque::new(),
            records: 0,
            max_records,
        }
    }

    /// Adds the newest difference, forgetting the oldest ones beyond the bound. A difference
    /// that does not follow the last one (its `from` is not the last `to`) starts the journal
    /// over.
    pub fn push(&mut self, delta: Delta) {
        if self.deltas.back().is_some_and(|last| last.to != delta.from) {
            self.clear();
        }
        self.records += delta.records();
        self.deltas.push_back(delta);
        while self.records > self.max_records {
            let Some(old) = self.deltas.pop_front() else {
                break;
            };
            self.records -= old.records();
        }
    }

    /// The newest serial a difference leads to.
    pub fn last_serial(&self) -> Option<u32> {
        self.deltas.back().map(|d| d.to)
    }

    /// Every difference, oldest first.
    pub fn deltas(&self) -> impl Iterator<Item = &Delta> {
        self.deltas.iter()
    }

    /// Forgets everything (the content changed in a way no difference describes).
    pub fn clear(&mut self) {
        self.deltas.clear();
        self.records = 0;
    }

    /// Number of differences kept.
    pub fn len(&self) -> usize {
        self.deltas.len()
    }

    /// Whether no difference is kept.
    pub fn is_empty(&self) -> bool {
        self.deltas.is_empty()
    }

    /// Records held.
    pub fn records(&self) -> usize {
        self.records
    }

    /// The oldest serial a client can be brought forward from.
    pub fn first_serial(&self) -> Option<u32> {
        self.deltas.front().map(|d| d.from)
    }

    /// The differences from `serial` to the newest, in order, if the journal reaches back that
    /// far.
    pub fn since(&self, serial: u32) -> Option<Vec<&Delta>> {
        let start = self.deltas.iter().position(|d| d.from == serial)?;
        let chain: Vec<&Delta> = self.deltas.range(start..).collect();
        chain
            .windows(2)
            .all(|w| w[0].to == w[1].from && serial_gt(w[1].to, w[0].to))
            .then_some(chain)
    }

    /// One difference from `serial` to the newest: a record removed and added back (or added
    /// and removed again) cancels out.
    pub fn condensed(&self, serial: u32) -> Option<Delta> {
        let chain = self.since(serial)?;
        let mut removed: HashSet<&Rr<'static>> = HashSet::new();
        let mut added: HashSet<&Rr<'static>> = HashSet::new();
        for d in &chain {
            for r in &d.removed {
                if !added.remove(r) {
                    removed.insert(r);
                }
            }
            for r in &d.added {
                if !removed.remove(r) {
                    added.insert(r);
                }
            }
        }
        let mut removed: Vec<Rr<'static>> = removed.into_iter().cloned().collect();
        let mut added: Vec<Rr<'static>> = added.into_iter().cloned().collect();
        removed.sort_unstable();
        added.sort_unstable();
        Some(Delta {
            from: serial,
            to: chain.last().map_or(serial, |d| d.to),
            removed,
            added,
        })
    }
}

#[cfg(test)]
mod tests {
    use std::borrow::Cow;

    use meshdns_zone::RType;

    use super::*;

    fn a(last: u8, ttl: u32) -> Rr<'static> {
        Rr {
            owner: Cow::Owned(b"\x01a\x07example\x00".to_vec()),
            rtype: RType::A,
            rdata: Cow::Owned(vec![192, 0, 2, last]),
            ttl,
        }
    }

    fn delta(from: u32, to: u32, removed: Vec<Rr<'static>>, added: Vec<Rr<'static>>) -> Delta {
        Delta {
            from,
            to,
            removed,
            added,
        }
    }

    #[test]
    fn condenses_a_chain_and_cancels_round_trips() {
        let mut j = Journal::new(100);
        j.push(delta(1, 2, vec![a(1, 60)], vec![a(2, 60)]));
        j.push(delta(2, 3, vec![a(2, 60)], vec![a(3, 60)]));
        j.push(delta(3, 4, vec![], vec![a(1, 60)]));
        let c = j.condensed(1).unwrap();
        assert_eq!((c.from, c.to), (1, 4));
        assert!(c.removed.is_empty(), "1 removed then added back: {c:?}");
        assert_eq!(c.added, vec![a(3, 60)], "2 added then removed");
        assert_eq!(j.condensed(3).unwrap().added, vec![a(1, 60)]);
        assert!(j.condensed(7).is_none(), "not in the journal");
        // A TTL change is a removal and an addition.
        j.push(delta(4, 5, vec![a(3, 60)], vec![a(3, 30)]));
        let c = j.condensed(4).unwrap();
        assert_eq!((c.removed, c.added), (vec![a(3, 60)], vec![a(3, 30)]));
    }

    #[test]
    fn encodes_and_decodes() {
        let d = delta(1, 2, vec![a(1, 60)], vec![a(2, 30), a(3, 30)]);
        let mut bytes = Vec::new();
        d.encode(&mut bytes);
        d.encode(&mut bytes);
        let (back, rest) = Delta::decode(&bytes).unwrap();
        assert_eq!(back, d);
        assert_eq!(Delta::decode(rest).unwrap().0, d);
        assert!(Delta::decode(&bytes[..bytes.len() / 2 - 1]).is_none());
    }

    #[test]
    fn bounded_and_restarted_on_a_gap() {
        let mut j = Journal::new(3);
        j.push(delta(1, 2, vec![a(1, 60)], vec![a(2, 60)]));
        j.push(delta(2, 3, vec![a(2, 60)], vec![a(3, 60)]));
        assert_eq!(j.first_serial(), Some(2), "the oldest went past the bound");
        assert!(j.condensed(1).is_none());
        j.push(delta(9, 10, vec![], vec![a(4, 60)]));
        assert_eq!((j.len(), j.first_serial()), (1, Some(9)));
    }
}
