//! What a transfer sends: the records of a zone and of the keys published under it, each once,
//! with the precedence the answers use, and the differences between two versions.

use std::borrow::Cow;
use std::collections::HashMap;
use std::sync::Arc;

use meshdns_zone::{Key, Published, RType, Zone, label_of_key};

/// One resource record in transfer form: owner (lower-cased wire format, absolute), type, TTL
/// and uncompressed RDATA. Class is IN.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Rr<'a> {
    /// Owner name.
    pub owner: Cow<'a, [u8]>,
    /// Type.
    pub rtype: RType,
    /// Uncompressed RDATA.
    pub rdata: Cow<'a, [u8]>,
    /// TTL (last in the order: a TTL change is a removal and an addition of the same data).
    pub ttl: u32,
}

impl Rr<'_> {
    /// An owned copy.
    pub fn to_owned(&self) -> Rr<'static> {
        Rr {
            owner: Cow::Owned(self.owner.to_vec()),
            rtype: self.rtype,
            rdata: Cow::Owned(self.rdata.to_vec()),
            ttl: self.ttl,
        }
    }
}

/// The keys published under a pkarr origin as of one serial (shared: a transfer holds it while
/// newer publishes go on).
pub type PublishedSet = HashMap<Key, Published>;

/// One version of a zone, as transfers send it.
#[derive(Clone)]
pub struct Version {
    /// The serial.
    pub serial: u32,
    /// The zone's own records.
    pub zone: Arc<Zone>,
    /// The keys published under it (pkarr origins only).
    pub published: Option<Arc<PublishedSet>>,
}

impl std::fmt::Debug for Version {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Version")
            .field("origin", self.zone.origin())
            .field("serial", &self.serial)
            .field("keys", &self.published.as_ref().map(|p| p.len()))
            .finish()
    }
}

impl Version {
    /// The apex SOA RDATA with this version's serial.
    pub fn soa_rdata(&self) -> Vec<u8> {
        let mut rd = self
            .zone
            .soa_rrset()
            .first()
            .expect("every zone has an SOA")
            .to_vec();
        set_serial(&mut rd, self.serial);
        rd
    }

    /// The apex SOA TTL.
    pub fn soa_ttl(&self) -> u32 {
        self.zone.soa_rrset().ttl
    }

    /// Calls `f` with every record but the apex SOA: the zone's, then each key's (what the zone
    /// does not hide). Plain loops: a transfer of millions of records pays for nested iterator
    /// adapters.
    pub fn for_each_record(&self, mut f: impl FnMut(&Rr<'_>)) {
        let origin = self.zone.origin().wire();
        for node in self.zone.nodes() {
            for set in node.rrsets() {
                if set.rtype == RType::SOA && node.name() == origin {
                    continue;
                }
                for rd in set.rdatas() {
                    f(&Rr {
                        owner: Cow::Borrowed(node.name()),
                        rtype: set.rtype,
                        rdata: Cow::Borrowed(rd),
                        ttl: set.ttl,
                    });
                }
            }
        }
        if let Some(set) = &self.published {
            for (key, p) in set.iter() {
                for rr in published_records(&self.zone, origin, key, p) {
                    f(&rr);
                }
            }
        }
    }

    /// Number of records, the SOA included.
    pub fn record_count(&self) -> usize {
        self.zone.record_count()
            + self
                .published
                .as_ref()
                .map_or(0, |s| s.values().map(Published::record_count).sum())
    }
}

/// Sets the serial in SOA RDATA (uncompressed: it ends with the five 32-bit numbers).
pub fn set_serial(soa_rdata: &mut [u8], serial: u32) {
    let at = soa_rdata.len() - 20;
    soa_rdata[at..at + 4].copy_from_slice(&serial.to_be_bytes());
}

/// The zone's records, the apex SOA left out.
pub fn zone_records(zone: &Zone) -> impl Iterator<Item = Rr<'_>> + '_ {
    let apex = zone.origin().wire();
    zone.nodes().flat_map(move |node| {
        node.rrsets()
            .filter(move |set| !(set.rtype == RType::SOA && node.name() == apex))
            .flat_map(move |set| {
                set.rdatas().map(move |rd| Rr {
                    owner: Cow::Borrowed(node.name()),
                    rtype: set.rtype,
                    rdata: Cow::Borrowed(rd),
                    ttl: set.ttl,
                })
            })
    })
}

/// What `key` published, under `origin`, less what the zone hides: a (name, type) the zone has
/// itself, and everything at a name where the zone has a CNAME.
pub fn published_records<'a>(
    zone: &'a Zone,
    origin: &'a [u8],
    key: &Key,
    published: &'a Published,
) -> impl Iterator<Item = Rr<'a>> + 'a {
    let label = label_of_key(key);
    published.rrsets().flat_map(move |(prefix, sets)| {
        let mut owner = Vec::with_capacity(prefix.len() + 53 + origin.len());
        owner.extend_from_slice(prefix);
        owner.push(52);
        owner.extend_from_slice(&label);
        owner.extend_from_slice(origin);
        let own = zone.node(&owner);
        let hidden_all = own.is_some_and(|n| n.get(RType::CNAME).is_some());
        let owner: Cow<'a, [u8]> = Cow::Owned(owner);
        sets.filter(move |set| !hidden_all && own.is_none_or(|n| n.get(set.rtype).is_none()))
            .flat_map(move |set| {
                let owner = owner.clone();
                set.rdatas().map(move |rd| Rr {
                    owner: owner.clone(),
                    rtype: set.rtype,
                    rdata: Cow::Borrowed(rd),
                    ttl: set.ttl,
                })
            })
    })
}

/// The records only in `old` and only in `new` (each list sorted, duplicates dropped).
pub fn diff<'a>(
    old: impl IntoIterator<Item = Rr<'a>>,
    new: impl IntoIterator<Item = Rr<'a>>,
) -> (Vec<Rr<'a>>, Vec<Rr<'a>>) {
    let mut old: Vec<Rr<'a>> = old.into_iter().collect();
    let mut new: Vec<Rr<'a>> = new.into_iter().collect();
    old.sort_unstable();
    old.dedup();
    new.sort_unstable();
    new.dedup();
    let (mut removed, mut added) = (Vec::new(), Vec::new());
    let (mut i, mut j) = (0, 0);
    while i < old.len() || j < new.len() {
        match (old.get(i), new.get(j)) {
            (Some(a), Some(b)) if a == b => {
                i += 1;
                j += 1;
            }
            (Some(a), Some(b)) if a < b => {
                removed.push(a.clone());
                i += 1;
            }
            (Some(_), Some(b)) => {
                added.push(b.clone());
                j += 1;
            }
            (Some(a), None) => {
                removed.push(a.clone());
                i += 1;
            }
            (None, Some(b)) => {
                added.push(b.clone());
                j += 1;
            }
            (None, None) => unreachable!("the loop condition"),
        }
    }
    (removed, added)
}

#[cfg(test)]
mod tests {
    use meshdns_zone::{BuildDefaults, CatalogBuilder, Name, RData, Record, label_of_key};

    use super::*;

    /// A pkarr origin whose zone gives a TXT at one key's name and a CNAME at another's.
    #[test]
    fn published_records_yield_to_the_zone_as_answers_do() {
        let origin: Name = "dns.example.".parse().unwrap();
        let (k1, k2) = ([1u8; 32], [2u8; 32]);
        let name = |k: &Key, prefix: &str| -> Name {
            let label = String::from_utf8(label_of_key(k).to_vec()).unwrap();
            format!("{prefix}{label}.dns.example.").parse().unwrap()
        };
        let mut b = CatalogBuilder::new(BuildDefaults {
            default_ttl: 60,
            serial: 1,
        });
        let txt = |t: &str| RData::Txt(vec![t.as_bytes().into()]);
        b.add(
            &origin,
            Record {
                name: name(&k1, "_iroh."),
                ttl: 60,
                data: txt("from-file"),
            },
            0,
        )
        .unwrap();
        let target: Name = "elsewhere.example.".parse().unwrap();
        b.add(
            &origin,
            Record {
                name: name(&k2, "_iroh."),
                ttl: 60,
                data: RData::Cname(target),
            },
            0,
        )
        .unwrap();
        let (catalog, _) = b.build();
        let zone = catalog.zone(&origin).unwrap().clone();
        let iroh = b"\x05_iroh".as_slice();
        let publish = || {
            let mut txt_rd = Vec::new();
            txt("published").to_wire(&mut txt_rd);
            let a = [192, 0, 2, 1];
            Published::build(
                1,
                [
                    (iroh, RType::TXT, 30, &txt_rd[..]),
                    (iroh, RType::A, 30, &a[..]),
                ],
            )
        };
        let (p1, p2) = (publish(), publish());
        let types = |k: &Key, p: &Published| -> Vec<RType> {
            published_records(&zone, origin.wire(), k, p)
                .map(|r| r.rtype)
                .collect()
        };
        // The file's TXT wins the TXT; the published A stays.
        assert_eq!(types(&k1, &p1), [RType::A]);
        // A CNAME in the zone hides everything published at its name.
        assert!(types(&k2, &p2).is_empty());
        // A key the zone says nothing about: everything it published.
        let k3 = [3u8; 32];
        let mut all = types(&k3, &publish());
        all.sort();
        assert_eq!(all, [RType::A, RType::TXT]);
    }
}
