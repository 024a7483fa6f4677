//! Presentation-format pieces shared by every text source: tokens, TTLs, character-strings
//! (RFC 1035 §5.1).

use crate::name::unescape;

/// One whitespace-separated field of presentation format.
///
/// `text` keeps `\` escapes as written (names and character-strings decode them differently);
/// `quoted` says the field was written inside `"…"` (only character-strings may be).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Token {
    /// The field as written, without surrounding quotes, escapes kept.
    pub text: String,
    /// Whether the field was a quoted string.
    pub quoted: bool,
}

impl Token {
    /// An unquoted token.
    pub fn bare(text: impl Into<String>) -> Token {
        Token {
            text: text.into(),
            quoted: false,
        }
    }
}

/// Splits one line of presentation format into tokens (quotes and escapes honoured; no
/// parentheses or comments, which only zone files have).
pub fn tokenize(line: &str) -> Result<Vec<Token>, String> {
    let mut tokens = Vec::new();
    let mut chars = line.char_indices().peekable();
    while let Some(&(start, c)) = chars.peek() {
        if c.is_whitespace() {
            chars.next();
            continue;
        }
        if c == '"' {
            chars.next();
            let mut text = String::new();
            let mut closed = false;
            while let Some((_, c)) = chars.next() {
                match c {
                    '\\' => {
                        text.push('\\');
                        if let Some((_, e)) = chars.next() {
                            text.push(e);
                        }
                    }
                    '"' => {
                        closed = true;
                        break;
                    }
                    _ => text.push(c),
                }
            }
            if !closed {
                return Err(format!(
                    "unterminated quoted string starting at column {}",
                    start + 1
                ));
            }
            tokens.push(Token { text, quoted: true });
            continue;
        }
        let mut text = String::new();
        while let Some(&(_, c)) = chars.peek() {
            if c.is_whitespace() || c == '"' {
                break;
            }
            chars.next();
            text.push(c);
            if c == '\\'
                && let Some((_, e)) = chars.next()
            {
                text.push(e);
            }
        }
        tokens.push(Token {
            text,
            quoted: false,
        });
    }
    Ok(tokens)
}

/// Decodes a character-string field (`\DDD` and `\X` escapes) into its bytes, at most 255.
pub fn character_string(token: &Token) -> Result<Vec<u8>, String> {
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
    if out.len() > 255 {
        return Err(format!(
            "character-string of {} bytes is longer than 255",
            out.len()
        ));
    }
    Ok(out)
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

    #[test]
    fn tokenizes_quotes_and_escapes() {
        let t = tokenize(r#"10 "hello world" a\ b "q\"x""#).unwrap();
        assert_eq!(t.len(), 4);
        assert_eq!(
            t[1],
            Token {
                text: "hello world".into(),
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
