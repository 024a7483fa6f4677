//! dns-operator's objects (`dns.networking.miloapis.com/v1alpha1`): `DNSZone` and
//! `DNSRecordSet`, with every record shape dns-operator defines. The controllers write
//! DNSRecordSets built here from their planners' plans ([`iroh_record_set`],
//! [`node_record_set`]), so a controller and `meshdns render` write the same documents.

use std::collections::BTreeMap;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use meshdns_iroh::connector::RecordSetPlan;
use meshdns_mesh::dns::NodeRecordSet;
use serde::{Deserialize, Serialize};

use crate::datum::NameRef;
use crate::{DNS_API_VERSION, Namespaced, Rest, resource, type_fields};

/// dns-operator's `DNSZone`: a zone and its domain name.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct DNSZone {
    /// Standard metadata.
    pub metadata: ObjectMeta,
    /// `spec`.
    #[serde(default)]
    pub spec: DNSZoneSpec,
    /// `status` and everything else.
    #[serde(flatten)]
    pub rest: Rest,
}
resource!(
    DNSZone,
    "dns.networking.miloapis.com",
    "v1alpha1",
    "DNSZone",
    "dnszones",
    Namespaced
);

/// `DNSZone.spec`.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct DNSZoneSpec {
    /// The zone's origin, lowercase, no trailing dot.
    #[serde(default)]
    pub domain_name: String,
    /// The DNSZoneClass.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub dns_zone_class_name: String,
    /// Anything newer.
    #[serde(flatten)]
    pub rest: Rest,
}

/// dns-operator's `DNSRecordSet`: records of one type in a DNSZone of the same namespace.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct DNSRecordSet {
    /// Standard metadata.
    pub metadata: ObjectMeta,
    /// `spec`.
    #[serde(default)]
    pub spec: DNSRecordSetSpec,
    /// `status` and everything else.
    #[serde(flatten)]
    pub rest: Rest,
}
resource!(
    DNSRecordSet,
    "dns.networking.miloapis.com",
    "v1alpha1",
    "DNSRecordSet",
    "dnsrecordsets",
    Namespaced
);

/// `DNSRecordSet.spec`.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct DNSRecordSetSpec {
    /// The DNSZone (same namespace).
    #[serde(default)]
    pub dns_zone_ref: NameRef,
    /// `A`, `AAAA`, `TXT`, ...
    #[serde(default)]
    pub record_type: String,
    /// The records.
    #[serde(default)]
    pub records: Vec<RecordEntry>,
}

/// One `spec.records[]` entry: an owner name, a TTL, and the object matching the set's
/// `recordType` (dns-operator's shapes).
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct RecordEntry {
    /// `@`, a name relative to the zone, or an absolute name ending in `.`.
    #[serde(default)]
    pub name: String,
    /// TTL in seconds; dns-operator's backend defaults it to 300.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ttl: Option<i64>,
    /// `A`: IPv4 address.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub a: Option<Content>,
    /// `AAAA`: IPv6 address.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub aaaa: Option<Content>,
    /// `CNAME`: target host.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cname: Option<Content>,
    /// `ALIAS`: target host (apex CNAME-like; not served by meshdns).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub alias: Option<Content>,
    /// `NS`: name server host.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ns: Option<Content>,
    /// `PTR`: target.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ptr: Option<Content>,
    /// `TXT`: text.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub txt: Option<Content>,
    /// `MX`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mx: Option<MxData>,
    /// `SRV`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub srv: Option<SrvData>,
    /// `CAA`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub caa: Option<CaaData>,
    /// `TLSA`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tlsa: Option<TlsaData>,
    /// `HTTPS`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub https: Option<SvcbData>,
    /// `SVCB`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub svcb: Option<SvcbData>,
    /// `SOA`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub soa: Option<SoaData>,
    /// Anything newer.
    #[serde(flatten)]
    pub rest: Rest,
}

/// `{content}`.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Content {
    /// The value.
    #[serde(default)]
    pub content: String,
}

/// `mx{preference, exchange}`.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct MxData {
    /// 0..65535, lower preferred.
    #[serde(default)]
    pub preference: u16,
    /// Mail host.
    #[serde(default)]
    pub exchange: String,
}

/// `srv{priority, weight, port, target}`.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct SrvData {
    /// Lower is tried first.
    #[serde(default)]
    pub priority: u16,
    /// Relative weight.
    #[serde(default)]
    pub weight: u16,
    /// Port.
    #[serde(default)]
    pub port: u16,
    /// Host.
    #[serde(default)]
    pub target: String,
}

/// `caa{flag, tag, value}`.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct CaaData {
    /// Flags, 0..255.
    #[serde(default)]
    pub flag: u8,
    /// `issue`, `issuewild`, `iodef`, ...
    #[serde(default)]
    pub tag: String,
    /// Value.
    #[serde(default)]
    pub value: String,
}

/// `tlsa{usage, selector, matchingType, certData}`.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct TlsaData {
    /// Certificate usage.
    #[serde(default)]
    pub usage: u8,
    /// Selector.
    #[serde(default)]
    pub selector: u8,
    /// Matching type.
    #[serde(default)]
    pub matching_type: u8,
    /// Hex certificate data.
    #[serde(default)]
    pub cert_data: String,
}

/// `https` / `svcb{priority, target, params}`.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct SvcbData {
    /// 0 = alias mode.
    #[serde(default)]
    pub priority: u16,
    /// Target.
    #[serde(default)]
    pub target: String,
    /// SvcParams.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub params: BTreeMap<String, String>,
}

/// `soa{mname, rname, serial, refresh, retry, expire, ttl}`.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct SoaData {
    /// Primary name server.
    #[serde(default)]
    pub mname: String,
    /// Responsible mailbox.
    #[serde(default)]
    pub rname: String,
    /// Serial.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub serial: Option<u32>,
    /// Refresh.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub refresh: Option<u32>,
    /// Retry.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub retry: Option<u32>,
    /// Expire.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub expire: Option<u32>,
    /// Negative-caching TTL.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ttl: Option<u32>,
}

impl DNSRecordSet {
    /// A new DNSRecordSet (`apiVersion` and `kind` set) in `namespace`.
    fn new(
        name: &str,
        namespace: &str,
        labels: &BTreeMap<String, String>,
        annotations: &BTreeMap<String, String>,
        spec: DNSRecordSetSpec,
    ) -> DNSRecordSet {
        DNSRecordSet {
            metadata: ObjectMeta {
                name: Some(name.to_string()),
                namespace: Some(namespace.to_string()),
                labels: Some(labels.clone()),
                annotations: (!annotations.is_empty()).then(|| annotations.clone()),
                ..ObjectMeta::default()
            },
            spec,
            rest: type_fields(DNS_API_VERSION, "DNSRecordSet"),
        }
    }
}

/// The `iroh-<z32>` DNSRecordSet of an iroh plan: TXT entries, the claim labels, and the full
/// values of shortened labels as annotations. What the iroh controller applies and
/// `meshdns render iroh` prints.
pub fn iroh_record_set(p: &RecordSetPlan) -> DNSRecordSet {
    let records = p
        .records
        .iter()
        .map(|r| RecordEntry {
            name: r.name.clone(),
            ttl: Some(i64::from(r.ttl)),
            txt: Some(Content {
                content: r.content.clone(),
            }),
            ..RecordEntry::default()
        })
        .collect();
    DNSRecordSet::new(
        &p.name,
        &p.namespace,
        &p.labels,
        &p.annotations,
        DNSRecordSetSpec {
            dns_zone_ref: NameRef {
                name: p.zone_name.clone(),
            },
            record_type: "TXT".into(),
            records,
        },
    )
}

/// The DNSRecordSet of a mesh's node names in `namespace` (the mesh's): A or AAAA entries
/// with the mesh and source-cluster labels. What the mesh controller applies and
/// `meshdns render mesh` prints.
pub fn node_record_set(set: &NodeRecordSet, namespace: &str) -> DNSRecordSet {
    let records = set
        .records
        .iter()
        .map(|(name, ip)| {
            let content = Some(Content {
                content: ip.to_string(),
            });
            let mut entry = RecordEntry {
                name: name.clone(),
                ttl: Some(i64::from(set.ttl)),
                ..RecordEntry::default()
            };
            match set.record_type {
                "AAAA" => entry.aaaa = content,
                _ => entry.a = content,
            }
            entry
        })
        .collect();
    DNSRecordSet::new(
        &set.name,
        namespace,
        &set.labels,
        &BTreeMap::new(),
        DNSRecordSetSpec {
            dns_zone_ref: NameRef {
                name: set.zone_name.clone(),
            },
            record_type: set.record_type.to_string(),
            records,
        },
    )
}
