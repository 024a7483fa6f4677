//! Domain names (RFC 1035 §3.1), kept as lower-cased wire format.
//!
//! Every name the catalog holds is absolute and lower-cased, so a lookup is a byte comparison of
//! the query's lower-cased wire name against map keys: no parsing, no allocation. The case a
//! client used is never stored here; the answer path echoes it from the question
//! (see [`crate::answer`]).

use std::borrow::Borrow;
use std::fmt;
use std::sync::Arc;

/// Longest name on the wire, root byte included (RFC 1035 §2.3.4).
pub const MAX_NAME_LEN: usize = 255;
/// Longest label (RFC 1035 §2.3.4).
pub const MAX_LABEL_LEN: usize = 63;

/// An absolute domain name in lower-cased wire format (`\x03www\x07example\x03org\x00`).
///
/// Shared, not copied, when cloned: a zone file names an owner once and gives it several
/// records, and a million-host load would otherwise allocate a copy per record.
#[derive(Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Name(Arc<[u8]>);

/// Why text is not a usable domain name.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum NameError {
    /// The text was empty.
    #[error("empty name")]
    Empty,
    /// Two dots in a row, or a leading dot before other labels.
    #[error("empty label")]
    EmptyLabel,
    /// A label longer than 63 bytes.
    #[error("label longer than 63 bytes")]
    LabelTooLong,
    /// The whole name is longer than 255 bytes on the wire.
    #[error("name longer than 255 bytes")]
    TooLong,
    /// A character that is not allowed in a label without escaping.
    #[error(
        "character {0:?} is not allowed in a name (letters, digits, '-', '_', '*', '/' or \\-escapes)"
    )]
    BadChar(char),
    /// A malformed `\` escape.
    #[error("bad escape sequence")]
    BadEscape,
    /// A relative name with no origin to complete it.
    #[error("relative name with no origin (end it with '.' or set an origin)")]
    NoOrigin,
}

impl Name {
    /// The root name `.`.
    pub fn root() -> Name {
        Name(Arc::from(&[0u8][..]))
    }

    /// Builds a name from (possibly mixed-case) wire bytes, lower-casing them.
    pub fn from_wire(wire: &[u8]) -> Option<Name> {
        if !is_valid_wire(wire) {
            return None;
        }
        Some(Name(wire.to_ascii_lowercase().into()))
    }

    /// Parses presentation format (`www.example.org.`, `\046` and `\.` escapes).
    ///
    /// A name without a trailing dot is relative: it is completed with `origin`, and is an error
    /// without one. `@` is the origin itself.
    pub fn parse(text: &str, origin: Option<&Name>) -> Result<Name, NameError> {
        if text == "@" {
            return origin.cloned().ok_or(NameError::NoOrigin);
        }
        // Built on the stack, then copied once into an exactly sized allocation.
        let mut wire = [0u8; MAX_NAME_LEN + 1];
        let len = parse_to(text, origin.map(Name::wire), &mut wire)?;
        Ok(Name(Arc::from(&wire[..len])))
    }

    /// Parses like [`Name::parse`] and appends the lower-cased wire form to `out`, allocating
    /// nothing (a bulk load writes its names straight into an arena).
    pub fn parse_into(
        text: &str,
        origin: Option<&Name>,
        out: &mut Vec<u8>,
    ) -> Result<(), NameError> {
        let mut wire = [0u8; MAX_NAME_LEN + 1];
        let len = parse_to(text, origin.map(Name::wire), &mut wire)?;
        out.extend_from_slice(&wire[..len]);
        Ok(())
    }

    /// The lower-cased wire bytes, root byte included.
    pub fn wire(&self) -> &[u8] {
        &self.0
    }

    /// Number of labels, not counting the root.
    pub fn label_count(&self) -> usize {
        label_offsets(&self.0).count() - 1
    }

    /// Whether this is the root name.
    pub fn is_root(&self) -> bool {
        self.0.len() == 1
    }

    /// Whether `self` equals `ancestor` or lies below it.
    pub fn is_subdomain_of(&self, ancestor: &Name) -> bool {
        is_wire_subdomain(&self.0, &ancestor.0)
    }

    /// The name one label up, or `None` for the root.
    pub fn parent(&self) -> Option<Name> {
        if self.is_root() {
            return None;
        }
        let skip = self.0[0] as usize + 1;
        Some(Name(self.0[skip..].into()))
    }

    /// `label.self`.
    pub fn prepend(&self, label: &[u8]) -> Result<Name, NameError> {
        if label.is_empty() {
            return Err(NameError::EmptyLabel);
        }
        let mut wire = Vec::with_capacity(self.0.len() + label.len() + 1);
        push_label(&mut wire, &label.to_ascii_lowercase())?;
        wire.extend_from_slice(&self.0);
        if wire.len() > MAX_NAME_LEN {
            return Err(NameError::TooLong);
        }
        Ok(Name(wire.into()))
    }

    /// The name relative to `origin` in presentation format (`@` for the origin itself), or the
    /// absolute text when it is not below `origin`.
    pub fn relative_to(&self, origin: &Name) -> String {
        if self == origin {
            return "@".to_string();
        }
        if self.is_subdomain_of(origin) {
            let keep = self.0.len() - origin.0.len();
            let mut text = String::new();
            write_labels(&self.0[..keep], &mut text);
            return text;
        }
        self.to_string()
    }
}

/// Parses presentation format into `wire` (see [`Name::parse`]); returns the length used.
/// `origin` completes a relative name and stands for `@`.
fn parse_to(
    text: &str,
    origin: Option<&[u8]>,
    wire: &mut [u8; MAX_NAME_LEN + 1],
) -> Result<usize, NameError> {
    if text.is_empty() {
        return Err(NameError::Empty);
    }
    if text == "@" {
        let o = origin.ok_or(NameError::NoOrigin)?;
        wire[..o.len()].copy_from_slice(o);
        return Ok(o.len());
    }
    if text == "." {
        wire[0] = 0;
        return Ok(1);
    }
    let mut len = 0; // bytes of `wire` in use
    let mut label_at = 0; // where the current label's length byte goes
    let bytes = text.as_bytes();
    let mut i = 0;
    let mut absolute = false;
    let close_label = |wire: &mut [u8], label_at: usize, len: usize| -> Result<(), NameError> {
        let label_len = len - label_at - 1;
        if label_len == 0 {
            return Err(NameError::EmptyLabel);
        }
        if label_len > MAX_LABEL_LEN {
            return Err(NameError::LabelTooLong);
        }
        wire[label_at] = label_len as u8;
        Ok(())
    };
    len += 1; // length byte of the first label
    while i < bytes.len() {
        if len >= MAX_NAME_LEN {
            return Err(NameError::TooLong);
        }
        let c = bytes[i];
        match c {
            b'.' => {
                close_label(&mut wire[..], label_at, len)?;
                if i == bytes.len() - 1 {
                    absolute = true;
                } else {
                    label_at = len;
                    len += 1;
                }
                i += 1;
            }
            b'\\' => {
                let (byte, used) = unescape(&bytes[i + 1..]).ok_or(NameError::BadEscape)?;
                wire[len] = byte.to_ascii_lowercase();
                len += 1;
                i += 1 + used;
            }
            c if c.is_ascii_alphanumeric() || matches!(c, b'-' | b'_' | b'*' | b'/') => {
                wire[len] = c.to_ascii_lowercase();
                len += 1;
                i += 1;
            }
            _ => {
                // `i` may be inside a character, after an escape of its first byte.
                let start = (0..=i)
                    .rev()
                    .find(|&j| text.is_char_boundary(j))
                    .unwrap_or(0);
                let ch = text[start..].chars().next().unwrap_or('?');
                return Err(NameError::BadChar(ch));
            }
        }
    }
    if !absolute {
        close_label(&mut wire[..], label_at, len)?;
    }
    let tail: &[u8] = if absolute {
        &[0]
    } else {
        origin.ok_or(NameError::NoOrigin)?
    };
    if len + tail.len() > MAX_NAME_LEN {
        return Err(NameError::TooLong);
    }
    wire[len..len + tail.len()].copy_from_slice(tail);
    len += tail.len();
    Ok(len)
}

fn push_label(wire: &mut Vec<u8>, label: &[u8]) -> Result<(), NameError> {
    if label.len() > MAX_LABEL_LEN {
        return Err(NameError::LabelTooLong);
    }
    wire.push(label.len() as u8);
    wire.extend_from_slice(label);
    if wire.len() >= MAX_NAME_LEN {
        return Err(NameError::TooLong);
    }
    Ok(())
}

/// Decodes the part of an escape after the backslash: `\DDD` (decimal byte) or `\X`.
/// Returns the byte and how many input bytes it used.
pub(crate) fn unescape(rest: &[u8]) -> Option<(u8, usize)> {
    let first = *rest.first()?;
    if first.is_ascii_digit() {
        let digits = rest.get(..3)?;
        if !digits.iter().all(u8::is_ascii_digit) {
            return None;
        }
        let value: u32 = digits.iter().fold(0, |n, d| n * 10 + u32::from(d - b'0'));
        return u8::try_from(value).ok().map(|b| (b, 3));
    }
    Some((first, 1))
}

/// Offsets of each label start in a wire name, ending with the root byte's offset.
pub(crate) fn label_offsets(wire: &[u8]) -> impl Iterator<Item = usize> + '_ {
    let mut pos = Some(0usize);
    std::iter::from_fn(move || {
        let here = pos?;
        let len = *wire.get(here)? as usize;
        pos = if len == 0 { None } else { Some(here + 1 + len) };
        Some(here)
    })
}

/// The names strictly above `wire`, nearest first, down to the root (`b"\0"`).
pub(crate) fn ancestors(wire: &[u8]) -> impl Iterator<Item = &[u8]> + '_ {
    label_offsets(wire).skip(1).map(move |o| &wire[o..])
}

/// Whether `wire` equals `ancestor` or ends with it at a label boundary.
pub fn is_wire_subdomain(wire: &[u8], ancestor: &[u8]) -> bool {
    if ancestor.len() > wire.len() {
        return false;
    }
    let start = wire.len() - ancestor.len();
    wire[start..] == *ancestor && label_offsets(wire).any(|o| o == start)
}

fn is_valid_wire(wire: &[u8]) -> bool {
    if wire.is_empty() || wire.len() > MAX_NAME_LEN {
        return false;
    }
    let mut pos = 0;
    loop {
        let Some(&len) = wire.get(pos) else {
            return false;
        };
        if len == 0 {
            return pos + 1 == wire.len();
        }
        if len as usize > MAX_LABEL_LEN {
            return false;
        }
        pos += 1 + len as usize;
    }
}

fn write_labels(wire: &[u8], out: &mut String) {
    let mut pos = 0;
    let mut first = true;
    while pos < wire.len() {
        let len = wire[pos] as usize;
        if len == 0 {
            break;
        }
        if !first {
            out.push('.');
        }
        first = false;
        for &b in &wire[pos + 1..pos + 1 + len] {
            match b {
                b'.' | b'\\' | b'"' | b'(' | b')' | b';' | b'@' | b'$' => {
                    out.push('\\');
                    out.push(b as char);
                }
                0x21..=0x7e => out.push(b as char),
                _ => out.push_str(&format!("\\{b:03}")),
            }
        }
        pos += 1 + len;
    }
}

impl fmt::Display for Name {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.is_root() {
            return f.write_str(".");
        }
        let mut text = String::with_capacity(self.0.len());
        write_labels(&self.0, &mut text);
        text.push('.');
        f.write_str(&text)
    }
}

impl fmt::Debug for Name {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "Name({self})")
    }
}

impl Borrow<[u8]> for Name {
    fn borrow(&self) -> &[u8] {
        &self.0
    }
}

impl std::str::FromStr for Name {
    type Err = NameError;
    /// Parses an absolute name; a missing trailing dot is added.
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let s = s.strip_prefix('.').filter(|r| !r.is_empty()).unwrap_or(s);
        Name::parse(s, Some(&Name::root()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    // Found by fuzzing (fuzz/regressions/keys): an escape before a multi-byte character left
    // the reader inside the character, and naming the bad character sliced the text there.
    #[test]
    fn an_escaped_multibyte_character_is_an_error_not_a_panic() {
        for text in [r"\ա", r"a\ա.b", r"\\*\ա\\"] {
            assert!(Name::parse(text, None).is_err(), "{text}");
        }
    }

    #[test]
    fn parses_absolute_relative_and_apex_names_lowercased() {
        let origin: Name = "Example.ORG".parse().unwrap();
        assert_eq!(origin.wire(), b"\x07example\x03org\x00");
        assert_eq!(
            Name::parse("WWW", Some(&origin)).unwrap().to_string(),
            "www.example.org."
        );
        assert_eq!(Name::parse("@", Some(&origin)).unwrap(), origin);
        assert_eq!(Name::parse("a.b.", None).unwrap().to_string(), "a.b.");
        assert_eq!(Name::parse("a", None), Err(NameError::NoOrigin));
    }

    #[test]
    fn rejects_bad_names_with_a_reason() {
        assert_eq!(Name::parse("a..b.", None), Err(NameError::EmptyLabel));
        assert_eq!(Name::parse("a b.", None), Err(NameError::BadChar(' ')));
        let long = "a".repeat(64) + ".";
        assert_eq!(Name::parse(&long, None), Err(NameError::LabelTooLong));
        let huge = "abcdefghi.".repeat(26);
        assert_eq!(Name::parse(&huge, None), Err(NameError::TooLong));
    }

    #[test]
    fn escapes_round_trip() {
        let n = Name::parse("a\\.b.c.", None).unwrap();
        assert_eq!(n.wire(), b"\x03a.b\x01c\x00");
        assert_eq!(n.to_string(), "a\\.b.c.");
        let d = Name::parse("\\065.c.", None).unwrap();
        assert_eq!(d.wire(), b"\x01a\x01c\x00");
    }

    #[test]
    fn subdomain_checks_respect_label_boundaries() {
        let a: Name = "www.example.org".parse().unwrap();
        let b: Name = "example.org".parse().unwrap();
        let c: Name = "ample.org".parse().unwrap();
        assert!(a.is_subdomain_of(&b));
        assert!(!a.is_subdomain_of(&c));
        assert!(a.is_subdomain_of(&Name::root()));
        assert_eq!(a.relative_to(&b), "www");
        assert_eq!(a.parent().unwrap(), b);
        assert_eq!(a.label_count(), 3);
    }
}
