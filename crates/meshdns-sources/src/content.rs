//! What every source format hands over: the zones a file gives ([`Parsed`], [`ZoneContent`]),
//! each entry it skipped ([`Problem`]: `FILE: ENTRY: REASON`), and how to read it
//! ([`FileKind`], [`ParseSettings`]).

use std::fmt;

use meshdns_zone::{Name, Records, SoaTemplate};

/// One thing wrong with a file: `FILE: ENTRY: REASON`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Problem {
    /// The file, as the user named it.
    pub file: String,
    /// The key or value at fault (`ip4.foo.ts.net`, `zones[0].records[2]`, `line 7`), or `file`.
    pub entry: String,
    /// What is wrong and what would be accepted.
    pub reason: String,
}

impl Problem {
    /// A problem with an entry of `file`.
    pub fn new(file: &str, entry: impl Into<String>, reason: impl Into<String>) -> Problem {
        Problem {
            file: file.to_string(),
            entry: entry.into(),
            reason: reason.into(),
        }
    }
}

impl fmt::Display for Problem {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}: {}: {}", self.file, self.entry, self.reason)
    }
}

/// What one file contributes to one zone.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ZoneContent {
    /// The zone's apex.
    pub origin: Name,
    /// SOA settings when the file gives them without an SOA record.
    pub soa: Option<SoaTemplate>,
    /// The records, all at or below `origin`.
    pub records: Records,
}

impl ZoneContent {
    /// A zone with no records.
    pub fn empty(origin: &Name) -> ZoneContent {
        ZoneContent {
            origin: origin.clone(),
            soa: None,
            records: Records::new(),
        }
    }

    /// A zone of records given whole in wire form (owner, type, TTL, uncompressed RDATA), as
    /// a transfer or an UPDATE leaves them.
    pub fn from_wire<'a>(
        origin: &Name,
        rrs: impl Iterator<Item = (&'a [u8], meshdns_zone::RType, u32, &'a [u8])>,
    ) -> ZoneContent {
        let mut records = Records::new();
        for (owner, rtype, ttl, rdata) in rrs {
            // Checked as they were read: names and data within their bounds.
            let _ = records.push_with(owner, rtype, ttl, |buf| {
                // The targets of DNAME, SVCB and HTTPS lower-cased, as every source keeps them.
                match rtype {
                    meshdns_zone::rdata_other::DNAME
                    | meshdns_zone::svcb::SVCB
                    | meshdns_zone::svcb::HTTPS => buf.extend_from_slice(
                        &meshdns_zone::rdata_other::canonical(rtype, rdata.to_vec()),
                    ),
                    _ => buf.extend_from_slice(rdata),
                }
                Ok::<(), ()>(())
            });
        }
        ZoneContent {
            origin: origin.clone(),
            soa: None,
            records,
        }
    }
}

/// A usable file: its zones and the entries that were skipped.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Parsed {
    /// Zones, in file order.
    pub zones: Vec<ZoneContent>,
    /// Entries skipped, each with its reason.
    pub problems: Vec<Problem>,
    /// Records by owner name alone, each with the object that gave it (the cluster's objects:
    /// placed into the zones served when the catalog is assembled).
    pub placed: Vec<(meshdns_zone::Record, String)>,
    /// ALIASes (DNSRecordSets), flattened when the catalog is assembled ([`crate::alias`]).
    pub aliases: Vec<crate::alias::Alias>,
    /// Zones seen only by clients of some views (split horizon), each with those views'
    /// names: a records-file zone or entry with `view:`, a DNSZone or DNSRecordSet with the
    /// `meshdns.io/views` annotation, a zone file given with `@VIEW`.
    pub tagged: Vec<(Vec<String>, ZoneContent)>,
}

/// The views a tag names (`a`, `a,b`, or a list of them), sorted, each once. Whether each is
/// configured is checked when the catalog is assembled ([`crate::snapshot::unconfigured_views`]).
pub fn view_tags(tags: &[&str]) -> Result<Vec<String>, String> {
    let mut out: Vec<String> = tags
        .iter()
        .flat_map(|t| t.split(','))
        .map(|t| t.trim().to_string())
        .filter(|t| !t.is_empty())
        .collect();
    if out.is_empty() {
        return Err("names no view".into());
    }
    if let Some(bad) = out.iter().find(|t| !is_view_name(t)) {
        return Err(format!(
            "{bad:?} is not a view name (letters, digits, '-' and '_')"
        ));
    }
    out.sort();
    out.dedup();
    Ok(out)
}

/// Whether `name` can name a view: letters, digits, `-` and `_`, at most 63 of them.
pub fn is_view_name(name: &str) -> bool {
    !name.is_empty()
        && name.len() <= 63
        && name
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_')
}

/// How a file should be read.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum FileKind {
    /// Decide from the name and content: `.zone`/`.db` files and text starting with a `$`
    /// directive or `;` comment are zone files, everything else JSON/YAML.
    Auto,
    /// An RFC 1035 zone file; `origin` is the initial `$ORIGIN` when given.
    ZoneFile {
        /// Initial origin (and zone apex unless the file's SOA says otherwise).
        origin: Option<Name>,
        /// The views that see the zone (`--zone-file ORIGIN=FILE@VIEW`); empty: every view.
        views: Vec<String>,
    },
    /// Kubernetes manifests: the zones their DNSZones and DNSRecordSets make
    /// ([`crate::manifests`]). The path may be a directory: every `.yaml`, `.yml` and
    /// `.json` file in it, in name order.
    Manifests,
}

/// What parsing needs besides the bytes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ParseSettings {
    /// TTL for records that do not give one.
    pub default_ttl: u32,
    /// Zones that Tailscale-format names are placed in.
    pub tailscale_zones: Vec<Name>,
    /// Which of the cluster's own objects manifests give names from (none by default).
    pub cluster: crate::cluster::ClusterSettings,
}

impl Default for ParseSettings {
    fn default() -> Self {
        ParseSettings {
            default_ttl: 5,
            tailscale_zones: vec![Name::parse("ts.net.", None).expect("valid name")],
            cluster: crate::cluster::ClusterSettings::default(),
        }
    }
}
