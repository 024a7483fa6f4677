//! Presentation-format pieces shared by every text source: tokens, TTLs, character-strings
//! (RFC 1035 §5.1).

use crate::name::unescape;

/// One whitespace-separated field of presentation format, borrowed from the text it was read
/// from.
///
/// `text` keeps `\` escapes as written (names and character-strings decode them differently),
/// so it is always a slice of the input; `quoted` says the field was written inside `"…"` (only
/// character-strings may be).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Token<'a> {
    /// The field as written, without surrounding quotes, escapes kept.
    pub text: &'a str,
    /// Whether the field was a quoted string.
    pub quoted: bool,
}

/// Whether `b` ends an unquoted field.
pub const fn is_delimiter(b: u8) -> bool {
    matches!(b, b' ' | b'\t' | b'\r' | b'\n' | b';' | b'(' | b')' | b'"')
}

/// Bytes that end an unquoted field ([`is_delimiter`]) or start an escape.
static ENDS_OR_ESCAPES: [bool; 256] = {
    let mut table = [false; 256];
    let mut b = 0;
    while b < 256 {
        table[b] = is_delimiter(b as u8) || b == b'\\' as usize;
        b += 1;
    }
    table
};

/// Reads the field starting at byte `at` of `text` (a quote or a non-delimiter); returns it
/// and the index just after it. A quoted field may not run past the end of its line.
pub fn scan_token(text: &str, at: usize) -> Result<(Token<'_>, usize), String> {
    let b = text.as_bytes();
    if b[at] == b'"' {
        let mut j = at + 1;
        loop {
            match b.get(j) {
                None | Some(b'\n') => return Err("unterminated quoted string".into()),
                Some(b'\\') => j += 2,
                Some(b'"') => break,
                Some(_) => j += 1,
            }
        }
        return Ok((
            Token {
                text: &text[at + 1..j],
                quoted: true,
            },
            j + 1,
        ));
    }
    // A zone file is mostly fields of plain bytes: one table lookup per byte finds the end,
    // and only an escape needs a second look.
    let mut j = at;
    let mut escaped = false;
    while j < b.len() {
        let c = b[j];
        if !ENDS_OR_ESCAPES[usize::from(c)] {
            j += 1;
        } else if c == b'\\' {
            escaped = true;
            j += 2;
        } else {
            break;
        }
    }
    let mut end = j.min(b.len());
    // An escape may have skipped into a multi-byte character; end at the next boundary.
    while escaped && !text.is_char_boundary(end) {
        end += 1;
    }
    Ok((
        Token {
            text: &text[at..end],
            quoted: false,
        },
        end,
    ))
}

/// Splits one line of presentation format into tokens (quotes and escapes honoured; no
/// parentheses or comments, which only zone files have).
pub fn tokenize(line: &str) -> Result<Vec<Token<'_>>, String> {
    let b = line.as_bytes();
    let mut tokens = Vec::new();
    let mut i = 0;
    while i < b.len() {
        if b[i].is_ascii_whitespace() {
            i += 1;
            continue;
        }
        // Any other delimiter (`;`, `(`, `)`) would make an empty field and no progress; they
        // have a meaning only in zone files, whose lexer handles them before this.
        if b[i] != b'"' && is_delimiter(b[i]) {
            return Err(format!(
                "unexpected {:?} at column {} (quote or escape it; comments and parentheses belong to zone files)",
                char::from(b[i]),
                i + 1
            ));
        }
        let (token, next) =
            scan_token(line, i).map_err(|e| format!("{e} starting at column {}", i + 1))?;
        tokens.push(token);
        i = next;
    }
    Ok(tokens)
}

/// Decodes a character-string field (`\DDD` and `\X` escapes) into its bytes, at most 255.
pub fn character_string(token: &Token<'_>) -> Result<Vec<u8>, String> {
    let mut out = Vec::with_capacity(token.text.len() + 1);
    character_string_into(token, &mut out)?;
    out.remove(0);
    Ok(out)
}

/// A field's bytes with its `\` escapes decoded, of any length (for data that is not one
/// character-string: a URI target, an SVCB value).
pub fn unescaped(token: &Token<'_>) -> Result<Vec<u8>, String> {
    let bytes = token.text.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        if bytes[i] == b'\\' {
            let (b, used) = unescape(&bytes[i + 1..])
                .ok_or_else(|| format!("bad escape in {:?}", token.text))?;
            out.push(b);
            i += 1 + used;
        } else {
            out.push(bytes[i]);
            i += 1;
        }
    }
    Ok(out)
}

/// Appends a character-string field in wire form (a length byte, then the decoded bytes) to
/// `out`. On error `out` is left as it was.
pub fn character_string_into(token: &Token<'_>, out: &mut Vec<u8>) -> Result<(), String> {
    let bytes = token.text.as_bytes();
    let start = out.len();
    out.push(0);
    if !bytes.contains(&b'\\') {
        out.extend_from_slice(bytes);
    } else {
        let mut i = 0;
        while i < bytes.len() {
            if bytes[i] == b'\\' {
                let Some((b, used)) = unescape(&bytes[i + 1..]) else {
                    out.truncate(start);
                    return Err(format!("bad escape in {:?}", token.text));
                };
                out.push(b);
                i += 1 + used;
            } else {
                out.push(bytes[i]);
                i += 1;
            }
        }
    }
    let len = out.len() - start - 1;
    if len > 255 {
        out.truncate(start);
        return Err(format!(
            "character-string of {len} bytes is longer than 255"
        ));
    }
    out[start] = len as u8;
    Ok(())
}

/// Parses a TTL: seconds, or BIND-style units (`1h30m`, `2d`, `1w`).
pub fn parse_ttl(text: &str) -> Result<u32, String> {
    let bad = || format!("{text:?} is not a TTL (seconds, or units such as 30s, 5m, 1h, 1d, 1w)");
    if text.is_empty() {
        return Err(bad());
    }
    if let Ok(n) = text.parse::<u32>() {
        return Ok(n);
    }
    let mut total: u64 = 0;
    let mut number: Option<u64> = None;
    for c in text.chars() {
        if let Some(d) = c.to_digit(10) {
            number = Some(number.unwrap_or(0) * 10 + u64::from(d));
            if number > Some(u64::from(u32::MAX)) {
                return Err(bad());
            }
            continue;
        }
        let unit = match c.to_ascii_lowercase() {
            's' => 1,
            'm' => 60,
            'h' => 3600,
            'd' => 86_400,
            'w' => 604_800,
            _ => return Err(bad()),
        };
        total += number.take().ok_or_else(bad)? * unit;
    }
    if number.is_some() {
        return Err(bad());
    }
    u32::try_from(total).map_err(|_| bad())
}

/// Whether a token looks like a TTL (so zone-file fields can be told apart).
pub fn looks_like_ttl(text: &str) -> bool {
    text.as_bytes().first().is_some_and(u8::is_ascii_digit) && parse_ttl(text).is_ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    // Found by fuzzing (fuzz/regressions/records): a `;` in a structured file's value made an
    // empty token and no progress, so tokenize pushed tokens until memory ran out.
    #[test]
    fn tokenize_refuses_a_bare_delimiter_instead_of_looping() {
        for line in ["189.0.2;80", "10 (mail)", ")", "a ; b"] {
            let err = tokenize(line).unwrap_err();
            assert!(err.contains("unexpected"), "{line}: {err}");
        }
        assert_eq!(tokenize(r#"a\;b "c;d""#).unwrap().len(), 2);
    }

    #[test]
    fn tokenizes_quotes_and_escapes() {
        let t = tokenize(r#"10 "hello world" a\ b "q\"x""#).unwrap();
        assert_eq!(t.len(), 4);
        assert_eq!(
            t[1],
            Token {
                text: "hello world",
                quoted: true
            }
        );
        assert_eq!(t[2].text, r"a\ b");
        assert_eq!(character_string(&t[3]).unwrap(), b"q\"x");
        assert!(tokenize("\"open").is_err());
    }

    #[test]
    fn parses_ttls_with_units() {
        assert_eq!(parse_ttl("300"), Ok(300));
        assert_eq!(parse_ttl("1h30m"), Ok(5400));
        assert_eq!(parse_ttl("1W"), Ok(604_800));
        assert!(parse_ttl("5x").is_err());
        assert!(parse_ttl("h").is_err());
        assert!(parse_ttl("99999999999").is_err());
    }
}
