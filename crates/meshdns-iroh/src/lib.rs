//! iroh endpoint ids, and the TXT records iroh's resolver reads to dial an endpoint by id.
//!
//! # The record format
//!
//! iroh looks an endpoint up by querying TXT at `_iroh.<z32-endpoint-id>.<origin>` (meshdns
//! also allows `_iroh.<z32>.<suffix>.<origin>`, which iroh resolves with the suffix as part of
//! its origin). The first label is always `_iroh`: iroh queries nothing else. The answer is
//! one RRset, each record one `key=value` character-string:
//!
//! ```text
//! _iroh.<z32>.<origin>. 5 IN TXT "relay=https://relay.example.org./"
//! _iroh.<z32>.<origin>. 5 IN TXT "addr=192.0.2.1:4433"
//! _iroh.<z32>.<origin>. 5 IN TXT "addr=[2001:db8::1]:4433"
//! _iroh.<z32>.<origin>. 5 IN TXT "user-data=rack-7"
//! ```
//!
//! - `relay=<url>`: the home relay, when known, as configured (checked to parse as iroh does).
//! - `addr=<ip:port>`: one record per direct address, IPv6 in brackets. Sorted by (address
//!   text, port) and deduplicated, so the same set always gives the same bytes.
//! - `user-data=<text>`: when given, at most 245 bytes (a 255-byte string minus the key).
//!
//! iroh's parser splits each string at the first two `=` and drops anything after a second
//! one. It rejects the *whole lookup* for a string without `=` or with a key it does not know.
//! It takes only the first socket address of a string. So [`endpoint_txt`] refuses input
//! iroh would mangle: a relay URL with `=` in it or too long for one string, user data over
//! 245 bytes or containing `=`, and port 0. It never emits other keys or several addresses
//! in one record.
//!
//! Endpoint ids are ed25519 public keys, written as 64 hex characters (datum's Connector
//! status) or 52 z-base-32 characters (DNS names). [`parse_endpoint_id`] accepts both and
//! checks that the key is a valid curve point, using iroh's own key type.

use std::net::SocketAddr;

pub mod connector;
pub mod pkarr;

pub use iroh_base::EndpointId;
use meshdns_zone::{Name, RData, Record};

/// The first label of every iroh record name.
pub const IROH_LABEL: &str = "_iroh";
/// TTL of iroh records when none is given: short, because endpoints move (datum-cloud NSO
/// #179 lowered it from 30 s to 5 s for that reason).
pub const DEFAULT_TTL: u32 = 5;
/// Longest `user-data` value iroh accepts: one 255-byte TXT string minus `user-data=`.
pub const MAX_USER_DATA: usize = 245;
/// Longest relay URL that fits one TXT string with its `relay=` key.
pub const MAX_RELAY_URL: usize = 255 - "relay=".len();

/// Why text is not an endpoint id.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum IdError {
    /// Neither 64 hex nor 52 z-base-32 characters.
    #[error(
        "{0:?} is not an endpoint id: expected 64 hexadecimal characters (as in a Connector's status) or 52 z-base-32 characters (as in DNS names)"
    )]
    Form(String),
    /// 64 characters, but not all hexadecimal.
    #[error("{0:?} is not an endpoint id: 64 characters, but not all hexadecimal (0-9, a-f)")]
    Hex(String),
    /// 52 characters, but not z-base-32.
    #[error(
        "{0:?} is not an endpoint id: 52 characters, but not z-base-32 (alphabet ybndrfg8ejkmcpqxot1uwisza345h769)"
    )]
    Z32(String),
    /// 32 bytes that are not a valid ed25519 public key.
    #[error("{0:?} is not an endpoint id: the 32 bytes are not a valid ed25519 public key")]
    NotAKey(String),
}

/// Parses an endpoint id written as 64 hex characters (either case) or 52 z-base-32
/// characters (either case; DNS names are case-insensitive).
pub fn parse_endpoint_id(text: &str) -> Result<EndpointId, IdError> {
    let bytes = endpoint_id_bytes(text)?;
    EndpointId::from_bytes(&bytes).map_err(|_| IdError::NotAKey(text.to_string()))
}

/// The 32 bytes an endpoint id spells, as [`parse_endpoint_id`] reads them, without checking
/// that they are a curve point (for a caller that decodes the key anyway, as signature
/// verification does).
pub fn endpoint_id_bytes(text: &str) -> Result<[u8; 32], IdError> {
    // Exactly the characters of an id: a stray space or newline is an error, not trimmed.
    match text.len() {
        64 => {
            let mut bytes = [0u8; 32];
            for (i, pair) in text.as_bytes().chunks(2).enumerate() {
                let hex = |c: u8| (c as char).to_digit(16);
                match (hex(pair[0]), hex(pair[1])) {
                    (Some(h), Some(l)) => bytes[i] = (h * 16 + l) as u8,
                    _ => return Err(IdError::Hex(text.to_string())),
                }
            }
            Ok(bytes)
        }
        52 => meshdns_zone::key_of_label(text.to_ascii_lowercase().as_bytes())
            .ok_or_else(|| IdError::Z32(text.to_string())),
        _ => Err(IdError::Form(text.to_string())),
    }
}

/// What an iroh endpoint publishes: the input of [`endpoint_txt`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EndpointInfo {
    /// The endpoint id.
    pub id: EndpointId,
    /// Home relay URL, if any.
    pub relay: Option<String>,
    /// Direct addresses.
    pub addrs: Vec<SocketAddr>,
    /// Free-form user data.
    pub user_data: Option<String>,
    /// Extra labels between `_iroh.<z32>` and the origin (relative, e.g. `nodes`).
    pub suffix: Option<String>,
    /// Record TTL.
    pub ttl: u32,
}

/// Why endpoint info cannot be published.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum InfoError {
    /// The relay URL does not parse as a URL.
    #[error("relay {0:?} is not a URL")]
    RelayNotUrl(String),
    /// The relay URL contains `=`, which iroh's parser would cut off.
    #[error("relay {0:?} contains '=', which iroh's TXT parser would cut off")]
    RelayHasEquals(String),
    /// The relay URL does not fit one TXT string.
    #[error("relay URL of {0} bytes does not fit one TXT string (at most {MAX_RELAY_URL})")]
    RelayTooLong(usize),
    /// User data over 245 bytes.
    #[error("user data of {0} bytes is longer than iroh accepts ({MAX_USER_DATA})")]
    UserDataTooLong(usize),
    /// User data containing `=`.
    #[error("user data contains '=', which iroh's TXT parser would cut off")]
    UserDataHasEquals,
    /// A direct address with port 0.
    #[error("address {0} has port 0, which cannot be dialled")]
    PortZero(SocketAddr),
    /// The suffix is not a relative domain name.
    #[error("suffix {0:?} is not a relative domain name: {1}")]
    Suffix(String, String),
    /// Neither a relay nor any address: nothing to publish.
    #[error("neither a relay nor any direct address: nothing to publish")]
    Empty,
}

/// The owner name `_iroh.<z32>[.<suffix>].<origin>`.
pub fn record_name(
    id: &EndpointId,
    suffix: Option<&str>,
    origin: &Name,
) -> Result<Name, InfoError> {
    let base = match suffix.map(str::trim).filter(|s| !s.is_empty()) {
        Some(s) => {
            let s = s.trim_end_matches('.');
            Name::parse(s, Some(origin))
                .map_err(|e| InfoError::Suffix(s.to_string(), e.to_string()))?
        }
        None => origin.clone(),
    };
    base.prepend(id.to_z32().as_bytes())
        .and_then(|n| n.prepend(IROH_LABEL.as_bytes()))
        .map_err(|e| InfoError::Suffix(suffix.unwrap_or_default().to_string(), e.to_string()))
}

/// The TXT strings for `info`, in the documented order (relay, sorted addresses, user data).
pub fn txt_strings(info: &EndpointInfo) -> Result<Vec<String>, InfoError> {
    let mut out = Vec::with_capacity(info.addrs.len() + 2);
    if let Some(relay) = info
        .relay
        .as_deref()
        .map(str::trim)
        .filter(|r| !r.is_empty())
    {
        // Validated as iroh will parse it, but published as given (as datum's controller
        // does): iroh reads `https://r.example` and `https://r.example/` as the same relay.
        relay
            .parse::<iroh_base::RelayUrl>()
            .map_err(|_| InfoError::RelayNotUrl(relay.to_string()))?;
        let text = relay;
        if text.contains('=') {
            return Err(InfoError::RelayHasEquals(relay.to_string()));
        }
        if text.len() > MAX_RELAY_URL {
            return Err(InfoError::RelayTooLong(text.len()));
        }
        out.push(format!("relay={text}"));
    }
    let mut addrs = info.addrs.clone();
    if let Some(bad) = addrs.iter().find(|a| a.port() == 0) {
        return Err(InfoError::PortZero(*bad));
    }
    addrs.sort_by_key(|a| (a.ip().to_string(), a.port()));
    addrs.dedup();
    out.extend(addrs.iter().map(|a| format!("addr={a}")));
    if let Some(data) = &info.user_data {
        if data.len() > MAX_USER_DATA {
            return Err(InfoError::UserDataTooLong(data.len()));
        }
        if data.contains('=') {
            return Err(InfoError::UserDataHasEquals);
        }
        out.push(format!("user-data={data}"));
    }
    if info.relay.is_none() && info.addrs.is_empty() {
        return Err(InfoError::Empty);
    }
    Ok(out)
}

/// The records that publish `info` under `origin`: one TXT record per string of
/// [`txt_strings`], at [`record_name`].
pub fn endpoint_txt(info: &EndpointInfo, origin: &Name) -> Result<Vec<Record>, InfoError> {
    let name = record_name(&info.id, info.suffix.as_deref(), origin)?;
    let strings = txt_strings(info)?;
    Ok(strings
        .into_iter()
        .map(|s| Record {
            name: name.clone(),
            ttl: info.ttl,
            data: RData::Txt(vec![s.into_bytes().into_boxed_slice()]),
        })
        .collect())
}

#[cfg(test)]
mod tests;
