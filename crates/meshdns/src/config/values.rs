//! Values that flags and the config file spell the same way, each parsed by one function that
//! clap (`value_parser`) and serde (`deserialize_with`) both call, so a bad value is refused
//! with the same words before anything starts, wherever it was written.

use std::fmt;
use std::path::{Path, PathBuf};
use std::str::FromStr;
use std::time::Duration;

use meshdns_sources::{FileKind, FileSource};
use meshdns_zone::Name;
use meshdns_zone::text::parse_ttl;
use serde::{Deserialize, Deserializer};

/// A duration: `250ms`, or seconds with optional units (`10s`, `5m`, `1h`, `7d`, `1w`, `1h30m`).
pub fn duration(text: &str) -> Result<Duration, String> {
    if let Some(ms) = text.strip_suffix("ms") {
        return ms
            .parse()
            .map(Duration::from_millis)
            .map_err(|_| format!("{text:?} is not a duration (such as 250ms, 10s, 5m, 7d)"));
    }
    parse_ttl(text)
        .map(|s| Duration::from_secs(u64::from(s)))
        .map_err(|_| format!("{text:?} is not a duration (such as 250ms, 10s, 5m, 7d)"))
}

/// A TTL: seconds (`30`) or with units (`5m`).
pub fn ttl(text: &str) -> Result<u32, String> {
    parse_ttl(text)
}

/// A domain name; relative names are taken as absolute (`ts.net` is `ts.net.`).
pub fn name(text: &str) -> Result<Name, String> {
    text.parse::<Name>()
        .map_err(|e| format!("{text:?}: {e} (expected a domain name such as ts.net.)"))
}

/// An EDNS UDP payload size: 512 to 65535.
pub fn edns_payload(text: &str) -> Result<u16, String> {
    match text.parse::<u16>() {
        Ok(n) if n >= 512 => Ok(n),
        _ => Err(format!(
            "{text:?}: expected a payload size from 512 to 65535"
        )),
    }
}

/// A count of at least one (sockets, threads, connections).
pub fn at_least_one(text: &str) -> Result<usize, String> {
    match text.parse::<usize>() {
        Ok(n) if n >= 1 => Ok(n),
        _ => Err(format!("{text:?}: expected a whole number of at least 1")),
    }
}

/// A response rate limit: responses a second, 0 (off) to 1,000,000.
pub fn rrl_rate(text: &str) -> Result<u32, String> {
    match text.parse::<u32>() {
        Ok(n) if n <= meshdns_server::rrl::MAX_RATE => Ok(n),
        _ => Err(format!(
            "{text:?}: expected responses a second from 0 (off) to {}",
            meshdns_server::rrl::MAX_RATE
        )),
    }
}

/// An IPv4 prefix length, 0 to 32.
pub fn ipv4_prefix_len(text: &str) -> Result<u8, String> {
    prefix_len(text, 32)
}

/// An IPv6 prefix length, 0 to 128.
pub fn ipv6_prefix_len(text: &str) -> Result<u8, String> {
    prefix_len(text, 128)
}

fn prefix_len(text: &str, max: u8) -> Result<u8, String> {
    match text.parse::<u8>() {
        Ok(n) if n <= max => Ok(n),
        _ => Err(format!(
            "{text:?}: expected a prefix length from 0 to {max}"
        )),
    }
}

/// How logs are written.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum LogFormat {
    /// Human-readable lines (coloured on a terminal).
    Text,
    /// One JSON object per line.
    Json,
}

/// How an ACME CA validates the names (`--acme-challenge`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum, Deserialize)]
pub enum AcmeChallenge {
    /// TLS-ALPN-01 (RFC 8737), answered on --https (port 443 as the CA sees it).
    #[value(name = "tls-alpn-01")]
    #[serde(rename = "tls-alpn-01")]
    TlsAlpn01,
    /// HTTP-01, answered on --http (port 80 as the CA sees it).
    #[value(name = "http-01")]
    #[serde(rename = "http-01")]
    Http01,
    /// DNS-01, a TXT record at _acme-challenge.<name> in meshdns's own answers (the name must
    /// be in a zone it serves); the only one for wildcard names.
    #[value(name = "dns-01")]
    #[serde(rename = "dns-01")]
    Dns01,
}

/// A zone file as `FILE` or `ORIGIN=FILE`, either followed by `@VIEW[,VIEW…]` for a zone only
/// those views see.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ZoneFileSpec {
    /// The initial `$ORIGIN`, when given.
    pub origin: Option<Name>,
    /// The file.
    pub path: PathBuf,
    /// The views that see it (empty: every view).
    pub views: Vec<String>,
}

impl ZoneFileSpec {
    /// The source `serve` watches for it.
    pub fn source(&self) -> FileSource {
        FileSource {
            path: self.path.clone(),
            kind: FileKind::ZoneFile {
                origin: self.origin.clone(),
                views: self.views.clone(),
            },
        }
    }
}

impl FromStr for ZoneFileSpec {
    type Err = String;

    fn from_str(spec: &str) -> Result<Self, String> {
        // `@` then view names ends the spec; any other `@` is part of the path.
        let (spec, views) = match spec.rsplit_once('@') {
            Some((rest, tags)) if tags.split(',').all(meshdns_sources::content::is_view_name) => {
                let views = meshdns_sources::content::view_tags(&[tags])
                    .map_err(|e| format!("zone file views: {e}"))?;
                (rest, views)
            }
            _ => (spec, Vec::new()),
        };
        match spec.split_once('=') {
            Some((origin, path)) => Ok(ZoneFileSpec {
                origin: Some(name(origin).map_err(|e| format!("zone file origin {e}"))?),
                path: path.into(),
                views,
            }),
            None => Ok(ZoneFileSpec {
                origin: None,
                path: spec.into(),
                views,
            }),
        }
    }
}

/// `--configmap NAMESPACE/NAME[:KEY]`: a ConfigMap key read through the API.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ConfigMapSpec {
    /// Namespace.
    pub namespace: String,
    /// ConfigMap name.
    pub name: String,
    /// Key [default: records.json, as Tailscale's operator writes it].
    pub key: String,
}

impl FromStr for ConfigMapSpec {
    type Err = String;

    fn from_str(spec: &str) -> Result<Self, String> {
        let (object, key) = match spec.split_once(':') {
            Some((object, key)) => (object, key),
            None => (spec, "records.json"),
        };
        let (namespace, name) = object.split_once('/').ok_or_else(|| {
            format!(
                "{spec:?}: expected NAMESPACE/NAME[:KEY], e.g. tailscale/dnsrecords:records.json"
            )
        })?;
        let dns_label = |s: &str| {
            !s.is_empty()
                && s.len() <= 253
                && s.bytes()
                    .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-' || b == b'.')
        };
        if !dns_label(namespace) || !dns_label(name) {
            return Err(format!(
                "{spec:?}: namespace and name must be Kubernetes names (lower-case letters, digits, '-', '.')"
            ));
        }
        if key.is_empty()
            || !key
                .bytes()
                .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_' || b == b'.')
        {
            return Err(format!("{spec:?}: {key:?} is not a ConfigMap key"));
        }
        Ok(ConfigMapSpec {
            namespace: namespace.to_string(),
            name: name.to_string(),
            key: key.to_string(),
        })
    }
}

/// Makes a relative path relative to `base` (the config file's directory).
pub fn rebase(path: &mut PathBuf, base: &Path) {
    if path.is_relative() {
        *path = base.join(&*path);
    }
}

/// A number or a string, as YAML gives either for `30` and `30s`.
#[derive(Deserialize)]
#[serde(untagged)]
enum Scalar {
    Number(u64),
    Text(String),
}

impl fmt::Display for Scalar {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Scalar::Number(n) => write!(f, "{n}"),
            Scalar::Text(t) => f.write_str(t),
        }
    }
}

/// serde adapters: each runs the parser above on what the file gives.
pub mod de {
    use super::*;

    fn with<'de, D, T>(d: D, parse: fn(&str) -> Result<T, String>) -> Result<Option<T>, D::Error>
    where
        D: Deserializer<'de>,
    {
        let Some(v) = Option::<Scalar>::deserialize(d)? else {
            return Ok(None);
        };
        parse(&v.to_string())
            .map(Some)
            .map_err(serde::de::Error::custom)
    }

    /// An optional [`super::duration`]; a bare number is seconds.
    pub fn duration<'de, D: Deserializer<'de>>(d: D) -> Result<Option<Duration>, D::Error> {
        with(d, super::duration)
    }

    /// An optional [`super::name`].
    pub fn name<'de, D: Deserializer<'de>>(d: D) -> Result<Option<Name>, D::Error> {
        with(d, super::name)
    }

    /// An optional [`super::selector`].
    pub fn selector<'de, D: Deserializer<'de>>(
        d: D,
    ) -> Result<Option<meshdns_sources::cluster::Selector>, D::Error> {
        with(d, super::selector)
    }

    /// An optional [`super::ttl`].
    pub fn ttl<'de, D: Deserializer<'de>>(d: D) -> Result<Option<u32>, D::Error> {
        with(d, super::ttl)
    }

    /// An optional [`super::edns_payload`].
    pub fn edns_payload<'de, D: Deserializer<'de>>(d: D) -> Result<Option<u16>, D::Error> {
        with(d, super::edns_payload)
    }

    /// An optional [`super::at_least_one_u32`].
    pub fn at_least_one_u32<'de, D: Deserializer<'de>>(d: D) -> Result<Option<u32>, D::Error> {
        with(d, super::at_least_one_u32)
    }

    /// An optional [`super::page_bytes`].
    pub fn page_bytes<'de, D: Deserializer<'de>>(d: D) -> Result<Option<u32>, D::Error> {
        with(d, super::page_bytes)
    }

    /// An optional [`super::rrl_rate`].
    pub fn rrl_rate<'de, D: Deserializer<'de>>(d: D) -> Result<Option<u32>, D::Error> {
        with(d, super::rrl_rate)
    }

    /// An optional [`super::ipv4_prefix_len`].
    pub fn ipv4_prefix_len<'de, D: Deserializer<'de>>(d: D) -> Result<Option<u8>, D::Error> {
        with(d, super::ipv4_prefix_len)
    }

    /// An optional [`super::ipv6_prefix_len`].
    pub fn ipv6_prefix_len<'de, D: Deserializer<'de>>(d: D) -> Result<Option<u8>, D::Error> {
        with(d, super::ipv6_prefix_len)
    }

    /// An optional [`super::at_least_one`].
    pub fn at_least_one<'de, D: Deserializer<'de>>(d: D) -> Result<Option<usize>, D::Error> {
        with(d, super::at_least_one)
    }

    /// A list of anything parsed from text (names, zone file specs).
    pub fn list<'de, D, T>(d: D) -> Result<Vec<T>, D::Error>
    where
        D: Deserializer<'de>,
        T: FromText,
    {
        Option::<Vec<String>>::deserialize(d)?
            .unwrap_or_default()
            .iter()
            .map(|s| T::from_text(s).map_err(serde::de::Error::custom))
            .collect()
    }
}

/// Types the config file writes as text.
pub trait FromText: Sized {
    /// Parses one value.
    fn from_text(text: &str) -> Result<Self, String>;
}

impl FromText for meshdns_zone::Cidr {
    fn from_text(text: &str) -> Result<Self, String> {
        cidr(text)
    }
}

/// A secondary to notify: `HOST:PORT`, optionally `@KEYNAME` to sign the NOTIFY.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NotifySpec {
    /// `HOST:PORT` (`[v6]:PORT` for an IPv6 address).
    pub address: String,
    /// The TSIG key to sign with.
    pub key: Option<Name>,
}

/// Parses `HOST:PORT[@KEY]`.
pub fn notify_target(text: &str) -> Result<NotifySpec, String> {
    let text = text.trim();
    let (address, key) = match text.rsplit_once('@') {
        Some((a, k)) => (a, Some(name(k)?)),
        None => (text, None),
    };
    let port_ok = address
        .rsplit_once(':')
        .is_some_and(|(host, port)| !host.is_empty() && port.parse::<u16>().is_ok_and(|p| p > 0));
    if !port_ok {
        return Err(format!(
            "{text:?}: expected HOST:PORT (192.0.2.1:53, [2001:db8::1]:53, ns2.example.net:53), optionally @KEYNAME"
        ));
    }
    Ok(NotifySpec {
        address: address.to_string(),
        key,
    })
}

impl FromText for NotifySpec {
    fn from_text(text: &str) -> Result<Self, String> {
        notify_target(text)
    }
}

/// Another pkarr relay replica: its base URL, `http://HOST:PORT` or `https://HOST[:PORT]`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PeerUrl(pub String);

/// Parses a peer's base URL (no path beyond `/`, no query).
pub fn peer_url(text: &str) -> Result<PeerUrl, String> {
    let text = text.trim();
    let bad = || {
        format!(
            "{text:?}: expected a replica's base URL, http://HOST:PORT or https://HOST[:PORT] (http://meshdns-1.meshdns-peers:8080)"
        )
    };
    let rest = text
        .strip_prefix("http://")
        .or_else(|| text.strip_prefix("https://"))
        .ok_or_else(bad)?;
    let authority = rest.strip_suffix('/').unwrap_or(rest);
    if authority.is_empty() || authority.contains(['/', '?', '#', '@', ' ']) {
        return Err(bad());
    }
    text.parse::<axum::http::Uri>().map_err(|_| bad())?;
    Ok(PeerUrl(text.trim_end_matches('/').to_string()))
}

impl FromText for PeerUrl {
    fn from_text(text: &str) -> Result<Self, String> {
        peer_url(text)
    }
}

/// A name to resolve and the port at its addresses: `NAME:PORT`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HostPort {
    /// The name (or an address).
    pub host: String,
    /// The port.
    pub port: u16,
}

/// Parses `NAME:PORT`.
pub fn host_port(text: &str) -> Result<HostPort, String> {
    let text = text.trim();
    match text.rsplit_once(':') {
        Some((host, port)) if !host.is_empty() && !host.contains('/') => match port.parse() {
            Ok(port) if port > 0 => Ok(HostPort {
                host: host
                    .trim_start_matches('[')
                    .trim_end_matches(']')
                    .to_string(),
                port,
            }),
            _ => Err(format!("{text:?}: the port must be 1 to 65535")),
        },
        _ => Err(format!(
            "{text:?}: expected NAME:PORT (meshdns-peers.meshdns-system.svc.cluster.local:8080)"
        )),
    }
}

impl FromText for HostPort {
    fn from_text(text: &str) -> Result<Self, String> {
        host_port(text)
    }
}

/// A zone to transfer from a primary: `ORIGIN=HOST:PORT`, optionally `@KEYNAME`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SecondaryArg {
    /// The zone.
    pub origin: Name,
    /// The primary, `HOST:PORT`.
    pub primary: String,
    /// The TSIG key to sign requests with.
    pub key: Option<Name>,
}

/// Parses `ORIGIN=HOST:PORT[@KEY]`.
pub fn secondary(text: &str) -> Result<SecondaryArg, String> {
    let (origin, rest) = text.trim().split_once('=').ok_or_else(|| {
        format!(
            "{text:?}: expected ORIGIN=HOST:PORT (example.org=192.0.2.1:53), optionally @KEYNAME"
        )
    })?;
    let target = notify_target(rest).map_err(|e| format!("{text:?}: the primary: {e}"))?;
    Ok(SecondaryArg {
        origin: name(origin)?,
        primary: target.address,
        key: target.key,
    })
}

impl FromText for SecondaryArg {
    fn from_text(text: &str) -> Result<Self, String> {
        secondary(text)
    }
}

/// A TSIG key granted dynamic UPDATE: `KEY` (every update zone) or `KEY=ORIGIN` (one).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct UpdateGrant {
    /// The key's name.
    pub key: Name,
    /// The zone it may update (`None`: every update zone).
    pub zone: Option<Name>,
}

/// Parses `KEY[=ORIGIN]`.
pub fn update_grant(text: &str) -> Result<UpdateGrant, String> {
    let (key, zone) = match text.trim().split_once('=') {
        Some((k, z)) => (k, Some(name(z)?)),
        None => (text.trim(), None),
    };
    if key.is_empty() {
        return Err(format!(
            "{text:?}: expected KEY or KEY=ORIGIN (a key of --tsig-keys, a zone of --update-zone)"
        ));
    }
    Ok(UpdateGrant {
        key: name(key)?,
        zone,
    })
}

impl FromText for UpdateGrant {
    fn from_text(text: &str) -> Result<Self, String> {
        update_grant(text)
    }
}

/// A view (split horizon): `NAME=CIDR[,CIDR…]`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ViewSpec {
    /// Its name, which data names with `view:`, `meshdns.io/views` or `@VIEW`.
    pub name: String,
    /// The client addresses it holds.
    pub ranges: Vec<meshdns_zone::Cidr>,
}

/// Parses `NAME=CIDR[,CIDR…]`.
pub fn view(text: &str) -> Result<ViewSpec, String> {
    let usage = "expected NAME=CIDR[,CIDR...], e.g. inside=100.64.0.0/10,fd7a:115c:a1e0::/48";
    let Some((name, ranges)) = text.trim().split_once('=') else {
        return Err(format!("{text:?}: {usage}"));
    };
    let name = name.trim();
    if !meshdns_sources::content::is_view_name(name) {
        return Err(format!(
            "{text:?}: view name {name:?} must be letters, digits, '-' and '_' (at most 63)"
        ));
    }
    let ranges = ranges
        .split(',')
        .filter(|r| !r.trim().is_empty())
        .map(|r| cidr(r).map_err(|e| format!("{text:?}: {e}")))
        .collect::<Result<Vec<_>, _>>()?;
    if ranges.is_empty() {
        return Err(format!("{text:?}: no address range; {usage}"));
    }
    Ok(ViewSpec {
        name: name.to_string(),
        ranges,
    })
}

impl FromText for ViewSpec {
    fn from_text(text: &str) -> Result<Self, String> {
        view(text)
    }
}

/// A view a TSIG key selects for transfers and NOTIFY: `NAME=KEY`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ViewKey {
    /// The view (of `--view`).
    pub view: String,
    /// The key (of `--tsig-keys`).
    pub key: Name,
}

/// Parses `NAME=KEY`.
pub fn view_key(text: &str) -> Result<ViewKey, String> {
    let usage = "expected VIEW=KEY, a view of --view and a key of --tsig-keys (inside=xfr-inside.)";
    let Some((view, key)) = text.trim().split_once('=') else {
        return Err(format!("{text:?}: {usage}"));
    };
    let view = view.trim();
    if !meshdns_sources::content::is_view_name(view) || key.trim().is_empty() {
        return Err(format!("{text:?}: {usage}"));
    }
    Ok(ViewKey {
        view: view.to_string(),
        key: name(key)?,
    })
}

impl FromText for ViewKey {
    fn from_text(text: &str) -> Result<Self, String> {
        view_key(text)
    }
}

/// An address or prefix (`10.0.0.0/8`, `2001:db8::/32`, `192.0.2.7`).
pub fn cidr(text: &str) -> Result<meshdns_zone::Cidr, String> {
    text.trim().parse()
}

/// A catch-up page's size in bytes: 1024 to 4 MiB (what a reader takes in one response).
pub fn page_bytes(text: &str) -> Result<u32, String> {
    match text.trim().parse::<u32>() {
        Ok(n) if (1024..=4 << 20).contains(&n) => Ok(n),
        _ => Err(format!(
            "{text:?}: expected bytes from 1024 to 4194304 (4 MiB)"
        )),
    }
}

/// A count of at least one.
pub fn at_least_one_u32(text: &str) -> Result<u32, String> {
    match text.trim().parse::<u32>() {
        Ok(n) if n >= 1 => Ok(n),
        _ => Err(format!("{text:?} is not a whole number of at least 1")),
    }
}

/// A `kubectl -l` label selector (equality-based).
pub fn selector(text: &str) -> Result<meshdns_sources::cluster::Selector, String> {
    meshdns_sources::cluster::Selector::parse(text).map_err(|e| format!("{text:?}: {e}"))
}

/// The kinds of one `--kube-source` value (comma-separated).
pub fn kube_sources(text: &str) -> Result<KubeSources, String> {
    text.split(',')
        .filter(|s| !s.trim().is_empty())
        .map(meshdns_sources::cluster::Kind::parse)
        .collect::<Result<Vec<_>, _>>()
        .map(KubeSources)
}

/// The kinds one `--kube-source` value names.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct KubeSources(pub Vec<meshdns_sources::cluster::Kind>);

impl FromText for KubeSources {
    fn from_text(text: &str) -> Result<Self, String> {
        kube_sources(text)
    }
}

impl FromText for String {
    fn from_text(text: &str) -> Result<Self, String> {
        Ok(text.to_string())
    }
}

impl FromText for Name {
    fn from_text(text: &str) -> Result<Self, String> {
        name(text)
    }
}

impl FromText for ZoneFileSpec {
    fn from_text(text: &str) -> Result<Self, String> {
        text.parse()
    }
}

impl FromText for ConfigMapSpec {
    fn from_text(text: &str) -> Result<Self, String> {
        text.parse()
    }
}

/// One layer of settings filled from a lower one where it says nothing: an unset `Option`
/// or an empty list (a list given as flags replaces the file's, it is not appended to).
pub trait Layer {
    /// Takes `lower` if `self` is unset.
    fn fill(&mut self, lower: Self);
}

impl<T> Layer for Option<T> {
    fn fill(&mut self, lower: Self) {
        if self.is_none() {
            *self = lower;
        }
    }
}

impl<T> Layer for Vec<T> {
    fn fill(&mut self, lower: Self) {
        if self.is_empty() {
            *self = lower;
        }
    }
}

impl Layer for bool {
    /// A `--no-x` flag: set on either layer means set.
    fn fill(&mut self, lower: Self) {
        *self |= lower;
    }
}

/// `flags.fill(file)` for every field of a block. The pattern lists every field without `..`,
/// so a field added to the block and not here is a compile error, not a silently dropped key.
macro_rules! layer_fields {
    ($upper:expr, $lower:expr, $ty:ident { $($field:ident),* $(,)? }) => {{
        let $ty { $($field),* } = $lower;
        $( $crate::config::values::Layer::fill(&mut $upper.$field, $field); )*
    }};
}
pub(crate) use layer_fields;

/// A `--x[=BOOL]` / `--no-x` pair as one setting: `--no-x` means `false`.
pub fn toggle(on: Option<bool>, off: bool) -> Option<bool> {
    if off { Some(false) } else { on }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn durations_ttls_and_names_parse_once_for_flags_and_file() {
        assert_eq!(duration("250ms"), Ok(Duration::from_millis(250)));
        assert_eq!(duration("1m30s"), Ok(Duration::from_secs(90)));
        assert!(duration("soon").unwrap_err().contains("not a duration"));
        assert_eq!(ttl("1m"), Ok(60));
        assert_eq!(name("ts.net").unwrap().to_string(), "ts.net.");
        assert!(edns_payload("511").is_err());
        assert!(at_least_one("0").is_err());
        let spec: ZoneFileSpec = "example.org=ex.zone".parse().unwrap();
        assert_eq!(spec.origin.unwrap().to_string(), "example.org.");
        assert_eq!(spec.path, PathBuf::from("ex.zone"));
    }

    #[test]
    fn layers_fill_only_what_is_unset() {
        let mut a = Some(1);
        a.fill(Some(2));
        assert_eq!(a, Some(1));
        let mut b: Option<u8> = None;
        b.fill(Some(2));
        assert_eq!(b, Some(2));
        let mut v = vec![1];
        v.fill(vec![2, 3]);
        assert_eq!(v, vec![1]);
        let mut e: Vec<u8> = Vec::new();
        e.fill(vec![2, 3]);
        assert_eq!(e, vec![2, 3]);
        assert_eq!(toggle(Some(true), true), Some(false));
        assert_eq!(toggle(None, false), None);
    }
}
