//! What the iroh controller wants for a datum `Connector` (pure; no API calls). The planner
//! takes the fields that decide ([`ConnectorInput`], read from a Connector by
//! `meshdns-objects`) and returns a [`Decision`]; it knows no Kubernetes object.
//!
//! Every identifier matches datum's network-services-operator (iroh DNS controller, PR #147),
//! so meshdns can run beside datum's own operators and dns-operator:
//! - one `DNSRecordSet` named `iroh-<z32>` per endpoint id, in the zone reference's namespace,
//!   shared by every Connector using that key;
//! - the [labels](LABEL_CLAIMED_BY_UID) that record which Connector owns (claims) it;
//! - TXT entries named `<prefix>.<z32>[.<suffix>]` relative to the zone, with `relay=` and one
//!   `addr=` per address (see the crate docs for the format);
//! - the Connector condition `IrohDNSPublished` with reasons `Owner`, `DeferredToOwner`,
//!   `Pending`, and meshdns's own `Invalid` (datum leaves the condition stale for bad input).
//!
//! Fixed here (datum's defects, `schemas.md` §1.6): label values longer than 63 characters are
//! shortened deterministically and the full value kept in an annotation with the same key;
//! addresses are deduplicated; input iroh would mangle is refused with a condition instead of
//! being published.

use std::collections::BTreeMap;
use std::net::IpAddr;

use crate::{EndpointInfo, parse_endpoint_id, txt_strings};

/// Finalizer datum's controller puts on Connectors it publishes.
pub const FINALIZER: &str = "networking.datumapis.com/iroh-dns-cleanup";
/// Server-side apply field manager.
pub const FIELD_MANAGER: &str = "network-services-operator/iroh-dns";
/// The Connector condition type this controller owns.
pub const CONDITION_TYPE: &str = "IrohDNSPublished";
/// `app.kubernetes.io/managed-by` on every DNSRecordSet written.
pub const LABEL_MANAGED_BY: &str = "app.kubernetes.io/managed-by";
/// Value of [`LABEL_MANAGED_BY`].
pub const MANAGED_BY: &str = "networking.datumapis.com";
/// The claim: UID of the Connector that owns the DNSRecordSet.
pub const LABEL_CLAIMED_BY_UID: &str = "networking.datumapis.com/iroh-dns-claimed-by-uid";
/// The owner Connector's cluster, as `cluster-<name>` with `/` written `_`.
pub const LABEL_CLUSTER: &str = "networking.datumapis.com/iroh-dns-connector-cluster";
/// The owner Connector's namespace.
pub const LABEL_NAMESPACE: &str = "networking.datumapis.com/iroh-dns-connector-namespace";
/// The owner Connector's name.
pub const LABEL_NAME: &str = "networking.datumapis.com/iroh-dns-connector-name";
/// ConnectorClass controller names whose Connectors are published.
pub const IROH_CLASSES: [&str; 2] = [
    "networking.datumapis.com/datum-connect",
    "networking.datumapis.com/iroh-quic-tunnel",
];

/// The controller's settings (datum's `connector.iroh` block).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct IrohSettings {
    /// Namespace of the DNSZone, and of every DNSRecordSet written.
    pub zone_namespace: String,
    /// `spec.dnsZoneRef.name` of every DNSRecordSet.
    pub zone_name: String,
    /// First label of record names; must be `_iroh` (iroh queries nothing else).
    pub record_prefix: String,
    /// Labels between the z32 label and the zone origin, if any.
    pub record_suffix: String,
    /// TTL of every entry.
    pub ttl: u32,
}

impl IrohSettings {
    /// Every problem with the settings (empty when usable), each naming the key.
    pub fn problems(&self) -> Vec<String> {
        let mut out = Vec::new();
        if self.zone_namespace.is_empty() {
            out.push("iroh.dnsZoneRef.namespace: required (the namespace of the DNSZone and of the DNSRecordSets)".into());
        }
        if self.zone_name.is_empty() {
            out.push("iroh.dnsZoneRef.name: required (the DNSZone the records go into)".into());
        }
        if self.record_prefix != crate::IROH_LABEL {
            out.push(format!(
                "iroh.recordPrefix: {:?} would never be found: iroh only queries `_iroh`",
                self.record_prefix
            ));
        }
        out
    }
}

/// The fields of a Connector (and its class) that decide what is published.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ConnectorInput {
    /// The cluster the Connector lives in.
    pub cluster: String,
    /// Namespace.
    pub namespace: String,
    /// Name.
    pub name: String,
    /// `metadata.uid`.
    pub uid: String,
    /// `metadata.generation`.
    pub generation: i64,
    /// `spec.controllerName` of its ConnectorClass; `None` when the class does not exist.
    pub class_controller: Option<String>,
    /// `status.connectionDetails.publicKey.id`.
    pub public_key_id: Option<String>,
    /// `status.connectionDetails.publicKey.homeRelay`.
    pub home_relay: Option<String>,
    /// `status.connectionDetails.publicKey.addresses[]` as (address, port).
    pub addresses: Vec<(String, i64)>,
}

/// One TXT entry of the DNSRecordSet (`spec.records[]`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TxtEntry {
    /// Owner name relative to the zone.
    pub name: String,
    /// TTL.
    pub ttl: u32,
    /// `txt.content`.
    pub content: String,
}

/// The DNSRecordSet a Connector should have, as plain data (`meshdns-objects` writes it as
/// the object the controller applies and `meshdns render iroh` prints).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RecordSetPlan {
    /// `iroh-<z32>`.
    pub name: String,
    /// The zone reference's namespace.
    pub namespace: String,
    /// `spec.dnsZoneRef.name`.
    pub zone_name: String,
    /// Labels (claim and owner identity).
    pub labels: BTreeMap<String, String>,
    /// Full values of labels that had to be shortened.
    pub annotations: BTreeMap<String, String>,
    /// `spec.records`, all TXT.
    pub records: Vec<TxtEntry>,
}

/// What to do for a Connector.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Decision {
    /// The class does not route to iroh: publish nothing (and release any claim).
    Ignore,
    /// Not enough to publish yet (no id, or neither relay nor address).
    Pending,
    /// The status cannot be published as it is; nothing is published.
    Invalid(String),
    /// Publish this DNSRecordSet (subject to the claim).
    Publish(RecordSetPlan),
}

/// The claim cluster label value: `cluster-<name>` with `/` written `_`, as datum writes it.
pub fn cluster_label(cluster: &str) -> String {
    format!("cluster-{}", cluster.replace('/', "_"))
}

/// A label value, shortened when longer than 63 characters (the limit for label values):
/// the first 52 characters, `-`, and 10 hex digits of a hash of the whole value. Returns the
/// value and whether it was shortened.
pub fn label_value(value: &str) -> (String, bool) {
    if value.len() <= 63 {
        return (value.to_string(), false);
    }
    // FNV-1a 64: stable across versions and platforms, which `DefaultHasher` is not.
    let hash = value.bytes().fold(0xcbf2_9ce4_8422_2325u64, |h, b| {
        (h ^ u64::from(b)).wrapping_mul(0x0100_0000_01b3)
    });
    let mut head: String = value.chars().take(52).collect();
    while head.ends_with(|c: char| !c.is_ascii_alphanumeric()) {
        head.pop();
    }
    (format!("{head}-{:010x}", hash & 0xFF_FFFF_FFFF), true)
}

/// The DNSRecordSet name for an endpoint id (`iroh-<z32>`), when the id parses.
pub fn record_set_name(id: &str) -> Option<String> {
    let id = parse_endpoint_id(id).ok()?;
    Some(format!("iroh-{}", id.to_z32()))
}

/// The `addr=` strings as datum's controller writes them, so both can run side by side without
/// rewriting each other's records: each address as given (IPv6 bracketed), sorted by address
/// text then port, duplicates kept. Only what iroh's parser would not read back as the same
/// address is refused: text that is not an IP address (a zone suffix, a stray space), or a port
/// outside 0-65535. iroh reads `[2001:DB8::1]` as `2001:db8::1` and drops duplicates itself.
fn datum_addrs(addresses: &[(String, i64)]) -> Result<Vec<String>, String> {
    let mut addrs = Vec::with_capacity(addresses.len());
    for (i, (address, port)) in addresses.iter().enumerate() {
        if address.parse::<IpAddr>().is_err() {
            return Err(format!(
                "status.connectionDetails.publicKey.addresses[{i}].address: {address:?} is not an IP address"
            ));
        }
        let Ok(port) = u16::try_from(*port) else {
            return Err(format!(
                "status.connectionDetails.publicKey.addresses[{i}].port: {port} is not 0-65535"
            ));
        };
        addrs.push((address.as_str(), port));
    }
    addrs.sort();
    Ok(addrs
        .into_iter()
        .map(|(a, port)| match a.contains(':') {
            true => format!("addr=[{a}]:{port}"),
            false => format!("addr={a}:{port}"),
        })
        .collect())
}

/// Decides what a Connector should have published.
pub fn plan(c: &ConnectorInput, settings: &IrohSettings) -> Decision {
    match &c.class_controller {
        Some(controller) if IROH_CLASSES.contains(&controller.as_str()) => {}
        _ => return Decision::Ignore,
    }
    // The id as given: a stray space or newline makes it invalid, not trimmed, and an invalid
    // id is reported even before the Connector has a relay or an address.
    let Some(id_text) = c.public_key_id.as_deref().filter(|s| !s.is_empty()) else {
        return Decision::Pending;
    };
    let id = match parse_endpoint_id(id_text) {
        Ok(id) => id,
        Err(e) => return Decision::Invalid(format!("status.connectionDetails.publicKey.id: {e}")),
    };
    let relay = c
        .home_relay
        .as_deref()
        .map(str::trim)
        .filter(|s| !s.is_empty());
    if relay.is_none() && c.addresses.is_empty() {
        return Decision::Pending;
    }
    let mut strings = match relay {
        None => Vec::new(),
        Some(relay) => {
            let info = EndpointInfo {
                id,
                relay: Some(relay.to_string()),
                addrs: Vec::new(),
                user_data: None,
                suffix: None,
                ttl: settings.ttl,
            };
            match txt_strings(&info) {
                Ok(s) => s,
                Err(e) => {
                    return Decision::Invalid(format!(
                        "status.connectionDetails.publicKey.homeRelay: {e}"
                    ));
                }
            }
        }
    };
    match datum_addrs(&c.addresses) {
        Ok(addrs) => strings.extend(addrs),
        Err(why) => return Decision::Invalid(why),
    }
    let z32 = id.to_z32();
    let mut record_name = format!("{}.{z32}", settings.record_prefix);
    if !settings.record_suffix.trim().is_empty() {
        record_name.push('.');
        record_name.push_str(settings.record_suffix.trim().trim_matches('.'));
    }
    let mut labels = BTreeMap::new();
    let mut annotations = BTreeMap::new();
    let owner = [
        (LABEL_CLAIMED_BY_UID, c.uid.clone()),
        (LABEL_CLUSTER, cluster_label(&c.cluster)),
        (LABEL_NAMESPACE, c.namespace.clone()),
        (LABEL_NAME, c.name.clone()),
    ];
    labels.insert(LABEL_MANAGED_BY.to_string(), MANAGED_BY.to_string());
    for (key, value) in owner {
        let (short, shortened) = label_value(&value);
        if shortened {
            annotations.insert(key.to_string(), value);
        }
        labels.insert(key.to_string(), short);
    }
    Decision::Publish(RecordSetPlan {
        name: format!("iroh-{z32}"),
        namespace: settings.zone_namespace.clone(),
        zone_name: settings.zone_name.clone(),
        labels,
        annotations,
        records: strings
            .into_iter()
            .map(|content| TxtEntry {
                name: record_name.clone(),
                ttl: settings.ttl,
                content,
            })
            .collect(),
    })
}

/// What to do about the DNSRecordSet, given the one that exists (its labels and annotations).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ClaimAction {
    /// None exists: create it (the claim goes to whoever creates it first).
    Create,
    /// Ours: apply the desired state.
    Apply,
    /// Another Connector owns it: write nothing, and say who.
    Defer {
        /// `<cluster>/<namespace>/<name>` of the owner.
        owner: String,
        /// Its UID.
        uid: String,
    },
}

/// Labels or annotations of an object.
pub type Labels = BTreeMap<String, String>;

/// Full value of label `key`: the annotation of the same key when the label was shortened.
fn full_value(
    labels: &BTreeMap<String, String>,
    annotations: &BTreeMap<String, String>,
    key: &str,
) -> String {
    annotations
        .get(key)
        .or_else(|| labels.get(key))
        .cloned()
        .unwrap_or_default()
}

/// Decides the claim for Connector `uid` against the existing DNSRecordSet, if any.
pub fn claim(uid: &str, existing: Option<(&Labels, &Labels)>) -> ClaimAction {
    let Some((labels, annotations)) = existing else {
        return ClaimAction::Create;
    };
    let owner_uid = full_value(labels, annotations, LABEL_CLAIMED_BY_UID);
    if owner_uid == uid {
        return ClaimAction::Apply;
    }
    let cluster = full_value(labels, annotations, LABEL_CLUSTER);
    let cluster = cluster
        .strip_prefix("cluster-")
        .unwrap_or(&cluster)
        .replace('_', "/");
    let cluster = cluster.trim_start_matches('/');
    let owner = format!(
        "{cluster}/{}/{}",
        full_value(labels, annotations, LABEL_NAMESPACE),
        full_value(labels, annotations, LABEL_NAME)
    );
    ClaimAction::Defer {
        owner,
        uid: owner_uid,
    }
}

/// The `IrohDNSPublished` condition: (status, reason, message).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ConditionPlan {
    /// `True` or `False`.
    pub status: &'static str,
    /// Reason.
    pub reason: &'static str,
    /// Message.
    pub message: String,
}

impl ConditionPlan {
    /// This Connector owns the record.
    pub fn owner() -> ConditionPlan {
        ConditionPlan {
            status: "True",
            reason: "Owner",
            message: "Owns iroh DNS record.".into(),
        }
    }

    /// Another Connector owns the record.
    pub fn deferred(owner: &str, uid: &str) -> ConditionPlan {
        ConditionPlan {
            status: "False",
            reason: "DeferredToOwner",
            message: format!("iroh DNS record is owned by Connector {owner} (uid {uid})."),
        }
    }

    /// No connection details yet.
    pub fn pending() -> ConditionPlan {
        ConditionPlan {
            status: "False",
            reason: "Pending",
            message: "Connector status does not yet carry connection details.".into(),
        }
    }

    /// The connection details cannot be published.
    pub fn invalid(why: &str) -> ConditionPlan {
        ConditionPlan {
            status: "False",
            reason: "Invalid",
            message: format!("Not published: {why}"),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The test vector of datum's PR: hex key, its z32, and the record contents.
    const HEX: &str = "f120d52e42bfcee750508baf28900acac85ad3f397ab4bb653b32be505c32d39";
    const Z32: &str = "6ropkm1nz98qqwnotqz1tryk3mrfiw9u16iwzp1usci6kbqdfwho";

    fn settings() -> IrohSettings {
        IrohSettings {
            zone_namespace: "dns".into(),
            zone_name: "connectors-zone".into(),
            record_prefix: "_iroh".into(),
            record_suffix: "connectors".into(),
            ttl: 5,
        }
    }

    fn connector() -> ConnectorInput {
        ConnectorInput {
            cluster: "project-a".into(),
            namespace: "default".into(),
            name: "laptop".into(),
            uid: "uid-1".into(),
            generation: 3,
            class_controller: Some(IROH_CLASSES[0].into()),
            public_key_id: Some(HEX.into()),
            home_relay: Some("https://relay.example.com".into()),
            addresses: vec![
                ("2001:db8::1".into(), 9090),
                ("192.0.2.1".into(), 8080),
                ("192.0.2.1".into(), 8080),
            ],
        }
    }

    #[test]
    fn publishes_the_reference_test_vector() {
        let Decision::Publish(p) = plan(&connector(), &settings()) else {
            panic!("expected a plan")
        };
        assert_eq!(p.name, format!("iroh-{Z32}"));
        assert_eq!(p.namespace, "dns");
        assert_eq!(p.zone_name, "connectors-zone");
        let names: Vec<&str> = p.records.iter().map(|r| r.name.as_str()).collect();
        assert!(
            names
                .iter()
                .all(|n| *n == format!("_iroh.{Z32}.connectors"))
        );
        let contents: Vec<&str> = p.records.iter().map(|r| r.content.as_str()).collect();
        assert_eq!(
            contents,
            [
                "relay=https://relay.example.com",
                "addr=192.0.2.1:8080",
                "addr=192.0.2.1:8080",
                "addr=[2001:db8::1]:9090"
            ],
            "datum's records: sorted by address text, duplicates kept"
        );
        assert_eq!(p.labels[LABEL_CLAIMED_BY_UID], "uid-1");
        assert_eq!(p.labels[LABEL_CLUSTER], "cluster-project-a");
        assert_eq!(p.labels[LABEL_MANAGED_BY], "networking.datumapis.com");
        assert!(p.annotations.is_empty());
    }

    #[test]
    fn classes_status_and_bad_input_decide_the_outcome() {
        let s = settings();
        let with = |f: &dyn Fn(&mut ConnectorInput)| {
            let mut c = connector();
            f(&mut c);
            plan(&c, &s)
        };
        assert_eq!(with(&|c| c.class_controller = None), Decision::Ignore);
        assert_eq!(
            with(&|c| c.class_controller = Some("example.com/other".into())),
            Decision::Ignore
        );
        assert!(matches!(
            with(&|c| c.class_controller = Some(IROH_CLASSES[1].into())),
            Decision::Publish(_)
        ));
        assert_eq!(with(&|c| c.public_key_id = None), Decision::Pending);
        assert_eq!(
            with(&|c| {
                c.home_relay = None;
                c.addresses.clear();
            }),
            Decision::Pending
        );
        let Decision::Invalid(why) = with(&|c| c.public_key_id = Some("abc".into())) else {
            panic!()
        };
        assert!(
            why.contains("publicKey.id") && why.contains("64 hexadecimal"),
            "{why}"
        );
        let Decision::Invalid(why) =
            with(&|c| c.home_relay = Some("https://r.example/?a=b".into()))
        else {
            panic!()
        };
        assert!(why.contains("homeRelay") && why.contains("'='"), "{why}");
        let Decision::Invalid(why) = with(&|c| c.addresses = vec![("192.0.2.1".into(), 65536)])
        else {
            panic!()
        };
        assert!(why.contains("addresses[0].port: 65536"), "{why}");
        let Decision::Invalid(why) = with(&|c| c.addresses = vec![("not-ip".into(), 1)]) else {
            panic!()
        };
        assert!(why.contains("addresses[0].address"), "{why}");
        // A zone suffix: iroh's parser cannot read it back.
        let Decision::Invalid(why) = with(&|c| c.addresses = vec![("fe80::1%eth0".into(), 1)])
        else {
            panic!()
        };
        assert!(
            why.contains("\"fe80::1%eth0\" is not an IP address"),
            "{why}"
        );
    }

    #[test]
    fn ids_are_taken_exactly_and_an_invalid_one_is_invalid_before_pending() {
        let s = settings();
        for id in [format!("{HEX}\n"), format!(" {HEX}"), format!("{Z32} ")] {
            let mut c = connector();
            c.public_key_id = Some(id.clone());
            let Decision::Invalid(why) = plan(&c, &s) else {
                panic!("{id:?} taken")
            };
            assert!(why.contains("publicKey.id"), "{why}");
            // No relay and no address yet: still Invalid, not Pending.
            c.home_relay = None;
            c.addresses.clear();
            assert!(matches!(plan(&c, &s), Decision::Invalid(_)), "{id:?}");
        }
        let mut c = connector();
        c.public_key_id = Some(String::new());
        assert_eq!(plan(&c, &s), Decision::Pending, "no id yet");
        assert_eq!(record_set_name(&format!("{HEX}\n")), None);
    }

    #[test]
    fn addresses_are_written_as_datum_writes_them() {
        let mut c = connector();
        c.addresses = vec![
            ("2001:DB8::1".into(), 443),
            ("10.0.0.2".into(), 1),
            ("10.0.0.10".into(), 1),
            ("2001:0db8::1".into(), 443),
            ("::ffff:192.0.2.13".into(), 0),
        ];
        let Decision::Publish(p) = plan(&c, &settings()) else {
            panic!()
        };
        let contents: Vec<&str> = p.records.iter().map(|r| r.content.as_str()).collect();
        assert_eq!(
            contents,
            [
                "relay=https://relay.example.com",
                "addr=10.0.0.10:1",
                "addr=10.0.0.2:1",
                "addr=[2001:0db8::1]:443",
                "addr=[2001:DB8::1]:443",
                "addr=[::ffff:192.0.2.13]:0",
            ]
        );
        // And iroh reads each back as the address it was given.
        for (text, (address, port)) in contents[1..].iter().zip([
            ("10.0.0.10", 1),
            ("10.0.0.2", 1),
            ("2001:db8::1", 443),
            ("2001:db8::1", 443),
            ("::ffff:192.0.2.13", 0),
        ]) {
            let value = text.strip_prefix("addr=").unwrap();
            let read: std::net::SocketAddr = value.parse().unwrap();
            assert_eq!(
                read,
                std::net::SocketAddr::new(address.parse().unwrap(), port)
            );
        }
    }

    #[test]
    fn long_label_values_are_shortened_and_kept_in_annotations() {
        let mut c = connector();
        c.name = "n".repeat(200);
        c.cluster = format!("/{}", "c".repeat(100));
        let Decision::Publish(p) = plan(&c, &settings()) else {
            panic!()
        };
        for key in [LABEL_NAME, LABEL_CLUSTER] {
            assert!(p.labels[key].len() <= 63, "{key}");
            assert!(p.labels[key].ends_with(|ch: char| ch.is_ascii_alphanumeric()));
        }
        assert_eq!(p.annotations[LABEL_NAME], c.name);
        assert_eq!(
            p.annotations[LABEL_CLUSTER],
            format!("cluster-_{}", "c".repeat(100))
        );
        assert_eq!(label_value(&c.name), label_value(&c.name), "deterministic");
        // The claim reads the full values back from the annotations.
        let action = claim("someone-else", Some((&p.labels, &p.annotations)));
        assert_eq!(
            action,
            ClaimAction::Defer {
                owner: format!("{}/default/{}", "c".repeat(100), c.name),
                uid: "uid-1".into()
            }
        );
    }

    #[test]
    fn claims_create_apply_or_defer() {
        let Decision::Publish(p) = plan(&connector(), &settings()) else {
            panic!()
        };
        assert_eq!(claim("uid-1", None), ClaimAction::Create);
        assert_eq!(
            claim("uid-1", Some((&p.labels, &p.annotations))),
            ClaimAction::Apply
        );
        let ClaimAction::Defer { owner, uid } = claim("uid-2", Some((&p.labels, &p.annotations)))
        else {
            panic!()
        };
        assert_eq!(
            (owner.as_str(), uid.as_str()),
            ("project-a/default/laptop", "uid-1")
        );
        assert_eq!(
            ConditionPlan::deferred(&owner, &uid).message,
            "iroh DNS record is owned by Connector project-a/default/laptop (uid uid-1)."
        );
        // Labels written by datum before cluster names lost their leading '/'.
        let mut old = p.labels.clone();
        old.insert(LABEL_CLUSTER.into(), "cluster-_test-project-staging".into());
        let ClaimAction::Defer { owner, .. } = claim("x", Some((&old, &BTreeMap::new()))) else {
            panic!()
        };
        assert_eq!(owner, "test-project-staging/default/laptop");
    }

    #[test]
    fn settings_are_validated_with_the_key_named() {
        let mut s = settings();
        assert!(s.problems().is_empty());
        s.zone_name.clear();
        s.record_prefix = "_other".into();
        let p = s.problems();
        assert_eq!(p.len(), 2);
        assert!(p[0].starts_with("iroh.dnsZoneRef.name: required"));
        assert!(p[1].starts_with("iroh.recordPrefix: \"_other\" would never be found"));
    }
}
