//! RFC 1035 §5 master files, as Knot, NSD and BIND read them.
//!
//! Supported: `$ORIGIN`, `$TTL` (RFC 2308 §4), owner inheritance (a line starting with blank
//! space), `@`, relative names, TTL and class in either order, parentheses across lines, `;`
//! comments, quoted strings and `\` escapes, TTL units (`1h30m`). Types: those meshdns serves.
//!
//! Unusable (the whole file is rejected, the last good version keeps serving): unbalanced
//! parentheses, an unterminated quote, a bad or unknown directive, no way to know the origin.
//! Skipped with a problem naming the line: an unknown type or class, data that does not parse,
//! a record outside the zone, `$INCLUDE`/`$GENERATE` (not supported: files must stand alone).

use meshdns_zone::name::{MAX_NAME_LEN, is_wire_subdomain};
use meshdns_zone::text::{Token, looks_like_ttl, parse_ttl, scan_token};
use meshdns_zone::{Name, RData, RType, Records};

use crate::content::{Parsed, Problem, ZoneContent};

/// Reads a zone file one logical entry at a time (an entry may span lines inside parentheses).
/// Tokens are slices of the text, collected into a buffer the caller reuses.
struct Lexer<'a, 'f> {
    file: &'f str,
    text: &'a str,
    at: usize,
    line: usize,
}

/// Where an entry starts and whether it began with blank space (inheriting the owner).
struct EntryStart {
    line: usize,
    inherit_owner: bool,
}

impl<'a> Lexer<'a, '_> {
    fn syntax(&self, line: usize, reason: String) -> Problem {
        Problem::new(self.file, format!("line {line}"), reason)
    }

    /// Fills `tokens` with the next entry's fields; `None` at the end of the text.
    fn next_entry(&mut self, tokens: &mut Vec<Token<'a>>) -> Result<Option<EntryStart>, Problem> {
        let b = self.text.as_bytes();
        loop {
            tokens.clear();
            if self.at >= b.len() {
                return Ok(None);
            }
            let start = EntryStart {
                line: self.line,
                inherit_owner: b[self.at] == b' ' || b[self.at] == b'\t',
            };
            let mut open_since: Option<usize> = None;
            while self.at < b.len() {
                match b[self.at] {
                    b'\n' => {
                        self.line += 1;
                        self.at += 1;
                        if open_since.is_none() {
                            break;
                        }
                    }
                    b';' => {
                        while self.at < b.len() && b[self.at] != b'\n' {
                            self.at += 1;
                        }
                    }
                    b'(' => {
                        if let Some(open) = open_since {
                            return Err(self.syntax(
                                self.line,
                                format!("nested '(' (one is already open since line {open})"),
                            ));
                        }
                        open_since = Some(self.line);
                        self.at += 1;
                    }
                    b')' => {
                        if open_since.take().is_none() {
                            return Err(self.syntax(self.line, "')' without a matching '('".into()));
                        }
                        self.at += 1;
                    }
                    b' ' | b'\t' | b'\r' => self.at += 1,
                    _ => {
                        let (token, next) = scan_token(self.text, self.at)
                            .map_err(|e| self.syntax(self.line, e))?;
                        tokens.push(token);
                        self.at = next;
                    }
                }
            }
            if let Some(open) = open_since {
                return Err(self.syntax(open, "'(' is never closed".into()));
            }
            if !tokens.is_empty() {
                return Ok(Some(start));
            }
        }
    }
}

/// Parses a zone file. `origin` is the initial `$ORIGIN`; without one the file must set
/// `$ORIGIN` or start with an SOA record at an absolute name.
pub fn parse(
    file: &str,
    text: &str,
    origin: Option<&Name>,
    default_ttl: u32,
) -> Result<Parsed, Problem> {
    let mut lexer = Lexer {
        file,
        text,
        at: 0,
        line: 1,
    };
    let mut tokens: Vec<Token<'_>> = Vec::with_capacity(16);
    let mut problems = Vec::new();
    let mut current_origin = origin.cloned();
    let mut apex = origin.cloned();
    let mut dollar_ttl: Option<u32> = None;
    let mut last_ttl: Option<u32> = None;
    // The current owner in wire form; empty when there is none to inherit.
    let mut owner: Vec<u8> = Vec::with_capacity(MAX_NAME_LEN);
    let mut last_owner_text: Option<&str> = None;
    let mut last_owner_origin: Option<Name> = None;
    // About one record per 40 bytes of text, and less RDATA than text: reserve once.
    let mut records = Records::with_capacity(text.len() / 40, text.len() / 3);
    // Records added before the apex was known (index, line), checked against it at the end.
    let mut unchecked: Vec<(usize, usize)> = Vec::new();
    let mut seen_soa = false;
    while let Some(entry) = lexer.next_entry(&mut tokens)? {
        let at = || format!("line {}", entry.line);
        let skip = |problems: &mut Vec<Problem>, reason: String| {
            problems.push(Problem::new(file, at(), reason))
        };
        let t = tokens.as_slice();
        let first = &t[0];
        if !entry.inherit_owner && !first.quoted && first.text.starts_with('$') {
            let fatal = |reason: String| Problem::new(file, at(), reason);
            match first.text.to_ascii_uppercase().as_str() {
                "$ORIGIN" => {
                    let arg = t
                        .get(1)
                        .ok_or_else(|| fatal("$ORIGIN needs a domain name".into()))?;
                    let name = Name::parse(arg.text, current_origin.as_ref())
                        .map_err(|e| fatal(format!("$ORIGIN {:?}: {e}", arg.text)))?;
                    apex.get_or_insert_with(|| name.clone());
                    current_origin = Some(name);
                }
                "$TTL" => {
                    let arg = t.get(1).ok_or_else(|| fatal("$TTL needs a value".into()))?;
                    dollar_ttl = Some(parse_ttl(arg.text).map_err(fatal)?);
                }
                "$INCLUDE" | "$GENERATE" => {
                    skip(
                        &mut problems,
                        format!("{} is not supported; the directive is skipped", first.text),
                    );
                }
                other => {
                    return Err(fatal(format!(
                        "unknown directive {other} (accepted: $ORIGIN, $TTL)"
                    )));
                }
            }
            continue;
        }
        let mut rest = t;
        if entry.inherit_owner {
            if owner.is_empty() {
                skip(
                    &mut problems,
                    "no owner name to inherit (the first record must name its owner)".into(),
                );
                continue;
            }
        } else {
            rest = &t[1..];
            // The same owner text under the same origin as the line before is the same name:
            // the common case, a run of records at one name, costs no parse.
            if owner.is_empty()
                || last_owner_text != Some(first.text)
                || last_owner_origin != current_origin
            {
                owner.clear();
                if let Err(e) = Name::parse_into(first.text, current_origin.as_ref(), &mut owner) {
                    skip(&mut problems, format!("owner {:?}: {e}", first.text));
                    owner.clear();
                    continue;
                }
                last_owner_text = Some(first.text);
                if last_owner_origin != current_origin {
                    last_owner_origin.clone_from(&current_origin);
                }
            }
        }
        let owner_name = || Name::from_wire(&owner).expect("parsed above");
        let mut ttl = None;
        let mut class_ok = true;
        while let Some(tok) = rest.first() {
            if ttl.is_none() && looks_like_ttl(tok.text) {
                ttl = parse_ttl(tok.text).ok();
            } else if tok.text.eq_ignore_ascii_case("IN") {
            } else if ["CH", "HS", "CS", "ANY", "NONE"]
                .iter()
                .any(|c| tok.text.eq_ignore_ascii_case(c))
            {
                class_ok = false;
            } else {
                break;
            }
            rest = &rest[1..];
        }
        let Some(type_tok) = rest.first() else {
            skip(
                &mut problems,
                format!("{}: missing record type", owner_name()),
            );
            continue;
        };
        if !class_ok {
            skip(
                &mut problems,
                format!("{}: only class IN is served", owner_name()),
            );
            continue;
        }
        let Some(rtype) = RType::from_mnemonic(type_tok.text) else {
            skip(
                &mut problems,
                format!(
                    "{}: unknown or unsupported type {:?}",
                    owner_name(),
                    type_tok.text
                ),
            );
            continue;
        };
        let fields = &rest[1..];
        let owner_as_origin;
        let origin_now = match &current_origin {
            Some(o) => o,
            None => {
                owner_as_origin = owner_name();
                &owner_as_origin
            }
        };
        if rtype == RType::SOA {
            if let Err(e) = RData::from_tokens(rtype, fields, origin_now) {
                skip(&mut problems, format!("{} {rtype}: {e}", owner_name()));
                continue;
            }
            if seen_soa {
                skip(
                    &mut problems,
                    format!(
                        "{}: a second SOA record; only the first is used",
                        owner_name()
                    ),
                );
                continue;
            }
            seen_soa = true;
            apex.get_or_insert_with(owner_name);
        }
        if let Some(apex) = &apex
            && let Some(reason) = outside_apex(&owner, rtype, apex)
        {
            skip(&mut problems, reason);
            continue;
        }
        // An explicit TTL carries over to later records only from a record that is kept.
        let ttl_now = ttl.or(dollar_ttl).or(last_ttl).unwrap_or(default_ttl);
        let added = records.push_with(&owner, rtype, ttl_now, |out| {
            RData::wire_from_tokens(rtype, fields, origin_now, out)
        });
        if let Err(e) = added {
            skip(&mut problems, format!("{} {rtype}: {e}", owner_name()));
            continue;
        }
        if ttl.is_some() {
            last_ttl = ttl;
        }
        if apex.is_none() {
            unchecked.push((records.len() - 1, entry.line));
        }
    }
    let Some(apex) = apex else {
        return Err(Problem::new(
            file,
            "file",
            "no origin: add a $ORIGIN line, start with an SOA record at an absolute name, or give the origin with the file",
        ));
    };
    if !unchecked.is_empty() {
        let mut next = 0;
        records.retain(|index, r| {
            let Some(&(_, line)) = unchecked.get(next).filter(|(i, _)| *i == index) else {
                return true;
            };
            next += 1;
            match outside_apex(r.owner, r.rtype, &apex) {
                Some(reason) => {
                    problems.push(Problem::new(file, format!("line {line}"), reason));
                    false
                }
                None => true,
            }
        });
    }
    Ok(Parsed {
        zones: vec![ZoneContent {
            origin: apex,
            soa: None,
            records,
        }],
        problems,
        ..Parsed::default()
    })
}

/// Why a record at `owner` of type `rtype` cannot be in the zone at `apex`, if it cannot.
fn outside_apex(owner: &[u8], rtype: RType, apex: &Name) -> Option<String> {
    let name = || Name::from_wire(owner).unwrap_or_else(Name::root);
    if !is_wire_subdomain(owner, apex.wire()) {
        Some(format!("{} is outside zone {apex}", name()))
    } else if rtype == RType::SOA && owner != apex.wire() {
        Some(format!("SOA at {} is not at the zone apex {apex}", name()))
    } else {
        None
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const ZONE: &str = r#"
$ORIGIN example.org.
$TTL 1h
@   IN  SOA ns1 hostmaster (
            2024010101 ; serial
            1h 15m 1w 30 )
    IN  NS  ns1
ns1     A   192.0.2.53
www 300 IN A 192.0.2.1
        IN AAAA 2001:db8::1
txt     TXT "hello world" "second; not a comment"
mail    IN 60 MX 10 mx.other.net.
_sip._tcp SRV 0 5 5060 sip
alias   CNAME www
"#;

    #[test]
    fn parses_a_zone_file_with_every_feature() {
        let p = parse("example.zone", ZONE, None, 5).unwrap();
        assert!(p.problems.is_empty(), "{:?}", p.problems);
        let z = &p.zones[0];
        assert_eq!(z.origin.to_string(), "example.org.");
        let shown: Vec<String> = z
            .records
            .to_vec()
            .iter()
            .map(|r| format!("{} {} {} {}", r.name, r.ttl, r.data.rtype(), r.data))
            .collect();
        assert_eq!(
            shown,
            [
                "example.org. 3600 SOA ns1.example.org. hostmaster.example.org. 2024010101 3600 900 604800 30",
                "example.org. 3600 NS ns1.example.org.",
                "ns1.example.org. 3600 A 192.0.2.53",
                "www.example.org. 300 A 192.0.2.1",
                "www.example.org. 3600 AAAA 2001:db8::1",
                "txt.example.org. 3600 TXT \"hello world\" \"second; not a comment\"",
                "mail.example.org. 60 MX 10 mx.other.net.",
                "_sip._tcp.example.org. 3600 SRV 0 5 5060 sip.example.org.",
                "alias.example.org. 3600 CNAME www.example.org.",
            ]
        );
    }

    #[test]
    fn origin_comes_from_the_soa_or_the_caller() {
        let p = parse(
            "f",
            "example.net. 60 IN SOA ns h 1 2 3 4 5\nwww.example.net. A 192.0.2.1\n",
            None,
            5,
        )
        .unwrap();
        assert_eq!(p.zones[0].origin.to_string(), "example.net.");
        let given: Name = "given.org.".parse().unwrap();
        let p = parse("f", "www A 192.0.2.1\n", Some(&given), 7).unwrap();
        assert_eq!(
            p.zones[0].records.to_vec()[0].name.to_string(),
            "www.given.org."
        );
        assert_eq!(p.zones[0].records.to_vec()[0].ttl, 7);
        let e = parse("f", "www A 192.0.2.1\n", None, 5).unwrap_err();
        assert_eq!(e.entry, "file");
        let e = parse("f", "www.x. A 192.0.2.1\n", None, 5).unwrap_err();
        assert!(e.reason.starts_with("no origin"), "{e}");
    }

    #[test]
    fn syntax_errors_make_the_file_unusable() {
        let e = parse("f", "$ORIGIN a.\n@ SOA ns h ( 1 2 3 4 5\n", None, 5).unwrap_err();
        assert_eq!(e.to_string(), "f: line 2: '(' is never closed");
        let e = parse("f", "$ORIGIN a.\nx TXT \"open\n", None, 5).unwrap_err();
        assert_eq!(e.to_string(), "f: line 2: unterminated quoted string");
        let e = parse("f", "$BOGUS x\n", None, 5).unwrap_err();
        assert!(e.reason.starts_with("unknown directive $BOGUS"));
        let e = parse("f", "$ORIGIN a.\nx A 1.2.3.4 )\n", None, 5).unwrap_err();
        assert!(e.reason.contains("without a matching"));
    }

    #[test]
    fn records_before_the_soa_names_the_apex_are_checked_against_it_afterwards() {
        let text = "www.a. 60 A 192.0.2.1\nother.b. A 192.0.2.2\n  TXT hi\na. SOA ns h 1 2 3 4 5\nlate.b. A 192.0.2.3\n";
        let p = parse("f", text, None, 5).unwrap();
        let shown: Vec<String> = p.problems.iter().map(ToString::to_string).collect();
        assert_eq!(
            shown,
            [
                "f: line 5: late.b. is outside zone a.",
                "f: line 2: other.b. is outside zone a.",
                "f: line 3: other.b. is outside zone a.",
            ]
        );
        let kept: Vec<String> = p.zones[0]
            .records
            .to_vec()
            .iter()
            .map(|r| format!("{} {} {}", r.name, r.ttl, r.data))
            .collect();
        assert_eq!(
            kept,
            ["www.a. 60 192.0.2.1", "a. 60 ns.a. h.a. 1 2 3 4 5"],
            "the SOA inherits the last explicit TTL"
        );
    }

    #[test]
    fn bad_records_are_skipped_with_their_line() {
        let text = "$ORIGIN a.\nx A 1.2.3.400\ny BOGUS 1\nz CH A 1.2.3.4\nw.b. A 1.2.3.4\nok A 1.2.3.4\n$INCLUDE other\n";
        let p = parse("f", text, None, 5).unwrap();
        let shown: Vec<String> = p.problems.iter().map(ToString::to_string).collect();
        assert_eq!(shown.len(), 5, "{shown:#?}");
        assert!(shown[0].starts_with("f: line 2: x.a. A: \"1.2.3.400\" is not an IPv4"));
        assert!(shown[1].starts_with("f: line 3: y.a.: unknown or unsupported type \"BOGUS\""));
        assert!(shown[2].starts_with("f: line 4: z.a.: only class IN"));
        // In line order: a record outside a zone already known is reported where it stands.
        assert!(shown[3].starts_with("f: line 5: w.b. is outside zone a."));
        assert!(shown[4].starts_with("f: line 7: $INCLUDE is not supported"));
        assert_eq!(p.zones[0].records.len(), 1);
    }
}
