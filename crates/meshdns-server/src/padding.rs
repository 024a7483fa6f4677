//! EDNS(0) padding (RFC 7830) of DoT responses, by the block-length policy of RFC 8467 §4.1:
//! a response is padded to a multiple of 468 bytes, and only when its query carried a Padding
//! option (RFC 7830 §4: a server must not pad otherwise), which `answer()` reports in
//! `Outcome::padding`. The Padding option goes last in the OPT `answer()` wrote, after the
//! NSID option (RFC 5001) when the reply carries one.

use meshdns_zone::wire::NSID_OPTION;

/// The Padding option's code (RFC 7830 §3).
const PADDING: u16 = 12;
/// RFC 8467 §4.1: responses padded to a multiple of 468 octets.
pub const RESPONSE_BLOCK: usize = 468;
const OPT: u16 = 41;
/// An empty OPT record: root owner, type, class, TTL, RDLENGTH.
const EMPTY_OPT_LEN: usize = 11;

/// Where the OPT record ending `response` starts, when its RDATA is `options` bytes long (so
/// the record is the last one and nothing follows its options).
fn opt_ending_with(response: &[u8], options: usize) -> Option<usize> {
    let opt = response.len().checked_sub(EMPTY_OPT_LEN + options)?;
    let rdlen = u16::try_from(options).ok()?.to_be_bytes();
    (opt >= 12
        && response[opt] == 0
        && response[opt + 1..opt + 3] == OPT.to_be_bytes()
        && response[opt + 9..opt + 11] == rdlen)
        .then_some(opt)
}

/// Where the OPT record ending `response` starts and the length of its options, when it is
/// empty or carries exactly the NSID option with `nsid`.
fn final_opt(response: &[u8], nsid: Option<&[u8]>) -> Option<(usize, usize)> {
    if let Some(opt) = opt_ending_with(response, 0) {
        return Some((opt, 0));
    }
    let text = nsid.filter(|t| !t.is_empty() && t.len() <= usize::from(u8::MAX))?;
    let opt = opt_ending_with(response, 4 + text.len())?;
    let option = &response[opt + EMPTY_OPT_LEN..];
    (option[..2] == NSID_OPTION.to_be_bytes()
        && option[2..4] == (text.len() as u16).to_be_bytes()
        && option[4..] == *text)
        .then_some((opt, 4 + text.len()))
}

/// Pads `response` (whose last record is the OPT `answer()` writes: empty, or carrying `nsid`
/// when the server has one and the query asked for it) to a multiple of `block` bytes with a
/// Padding option after the OPT's options. Leaves it alone when it does not end in such an OPT,
/// or when padding would take it past the 65,535 bytes a stream frame can carry.
pub fn pad(response: &mut Vec<u8>, block: usize, nsid: Option<&[u8]>) {
    let len = response.len();
    if len < 12 + EMPTY_OPT_LEN || response[10] == 0 && response[11] == 0 {
        return;
    }
    let Some((opt, options)) = final_opt(response, nsid) else {
        return;
    };
    let with_header = len + 4;
    let fill = (block - with_header % block) % block;
    let Ok(rdlen) = u16::try_from(options + 4 + fill) else {
        return;
    };
    if with_header + fill > usize::from(u16::MAX) {
        return;
    }
    response[opt + 9..opt + EMPTY_OPT_LEN].copy_from_slice(&rdlen.to_be_bytes());
    response.extend_from_slice(&PADDING.to_be_bytes());
    response.extend_from_slice(&(fill as u16).to_be_bytes());
    response.resize(len + 4 + fill, 0);
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A query for `example.org. A` with an OPT carrying `options`.
    fn query(options: &[u8]) -> Vec<u8> {
        let mut q = vec![0, 1, 0, 0, 0, 1, 0, 0, 0, 0, 0, 1];
        q.extend_from_slice(b"\x07example\x03org\x00\x00\x01\x00\x01");
        q.extend_from_slice(&[0, 0, 41, 4, 0xd0, 0, 0, 0, 0]);
        q.extend_from_slice(&(options.len() as u16).to_be_bytes());
        q.extend_from_slice(options);
        q
    }

    #[test]
    fn responses_are_padded_to_the_block() {
        for extra in [0usize, 1, 400, 463, 464, 465, 900] {
            let mut r = query(&[]);
            // Turn the OPT into the last record after `extra` bytes of (opaque) answer data.
            let opt = r.split_off(r.len() - EMPTY_OPT_LEN);
            r.extend(std::iter::repeat_n(0xAB, extra));
            r.extend_from_slice(&opt);
            let before = r.len();
            pad(&mut r, RESPONSE_BLOCK, None);
            assert_eq!(r.len() % RESPONSE_BLOCK, 0, "extra {extra}");
            assert!(r.len() >= before + 4);
            let rdlen = u16::from_be_bytes([r[before - 2], r[before - 1]]) as usize;
            assert_eq!(before + rdlen, r.len());
            assert_eq!(&r[before..before + 2], &[0, 12]);
        }
    }

    #[test]
    fn responses_without_a_final_empty_opt_are_left_alone() {
        let mut r = query(&[0, 12, 0, 0]);
        let before = r.clone();
        pad(&mut r, RESPONSE_BLOCK, None);
        assert_eq!(r, before);
        let mut no_additional = vec![0u8; 40];
        pad(&mut no_additional, RESPONSE_BLOCK, Some(b"replica-a"));
        assert_eq!(no_additional.len(), 40);
    }

    /// `query`'s packet turned into a stand-in reply whose last record is an OPT carrying
    /// `options`, after `extra` bytes of (opaque) answer data.
    fn reply(options: &[u8], extra: usize) -> Vec<u8> {
        let mut r = query(&[]);
        r.truncate(r.len() - EMPTY_OPT_LEN);
        r.extend(std::iter::repeat_n(0xAB, extra));
        r.extend_from_slice(&[0, 0, 41, 4, 0xd0, 0, 0, 0, 0]);
        r.extend_from_slice(&(options.len() as u16).to_be_bytes());
        r.extend_from_slice(options);
        r
    }

    const NSID: &[u8] = b"replica-a";
    const NSID_OPTION_BYTES: &[u8] = &[
        0, 3, 0, 9, b'r', b'e', b'p', b'l', b'i', b'c', b'a', b'-', b'a',
    ];

    #[test]
    fn responses_carrying_nsid_are_padded_after_it() {
        for extra in [0usize, 1, 400, 450, 451, 452, 900] {
            let mut r = reply(NSID_OPTION_BYTES, extra);
            let before = r.len();
            let opt = before - EMPTY_OPT_LEN - NSID_OPTION_BYTES.len();
            pad(&mut r, RESPONSE_BLOCK, Some(NSID));
            assert_eq!(r.len() % RESPONSE_BLOCK, 0, "extra {extra}");
            assert!(r.len() >= before + 4);
            // RDLENGTH covers the NSID option and the padding option after it.
            let rdlen = usize::from(u16::from_be_bytes([r[opt + 9], r[opt + 10]]));
            assert_eq!(opt + EMPTY_OPT_LEN + rdlen, r.len(), "extra {extra}");
            assert_eq!(&r[opt + EMPTY_OPT_LEN..before], NSID_OPTION_BYTES);
            assert_eq!(&r[before..before + 2], &[0, 12]);
            let fill = usize::from(u16::from_be_bytes([r[before + 2], r[before + 3]]));
            assert_eq!(before + 4 + fill, r.len());
            assert!(r[before + 4..].iter().all(|&b| b == 0));
        }
    }

    #[test]
    fn an_opt_with_options_other_than_the_servers_nsid_is_left_alone() {
        for (options, nsid) in [
            // The NSID the reply carries is not this server's.
            (NSID_OPTION_BYTES, Some(&b"replica-b"[..])),
            // None configured: the option is not one answer() writes.
            (NSID_OPTION_BYTES, None),
            // Not NSID, though as long.
            (
                &[
                    0, 10, 0, 9, b'r', b'e', b'p', b'l', b'i', b'c', b'a', b'-', b'a',
                ][..],
                Some(NSID),
            ),
            // The NSID followed by something else.
            (
                &[NSID_OPTION_BYTES, &[0, 12, 0, 0]].concat()[..],
                Some(NSID),
            ),
        ] {
            let mut r = reply(options, 10);
            let before = r.clone();
            pad(&mut r, RESPONSE_BLOCK, nsid);
            assert_eq!(r, before, "{options:?} {nsid:?}");
        }
        // With an NSID configured, a reply to a query that did not ask (an empty OPT) is
        // padded as before.
        let mut r = reply(&[], 10);
        pad(&mut r, RESPONSE_BLOCK, Some(NSID));
        assert_eq!(r.len() % RESPONSE_BLOCK, 0);
    }

    /// What `answer()` writes for a query asking for NSID and padding, padded, is a DNS message
    /// whose OPT holds the NSID and then the padding.
    #[test]
    fn an_answer_with_nsid_pads_into_a_well_formed_message() {
        use hickory_proto::op::Message;
        use meshdns_zone::{AnswerConfig, BuildDefaults, CatalogBuilder, Name, RData, Record};

        let origin: Name = "example.org.".parse().unwrap();
        let mut b = CatalogBuilder::new(BuildDefaults {
            default_ttl: 5,
            serial: 1,
        });
        let www = Record {
            name: Name::parse("www", Some(&origin)).unwrap(),
            ttl: 60,
            data: RData::A(std::net::Ipv4Addr::new(192, 0, 2, 1)),
        };
        b.add(&origin, www, 0).unwrap();
        let catalog = b.build().0;
        let mut q = vec![0, 1, 0, 0, 0, 1, 0, 0, 0, 0, 0, 1];
        q.extend_from_slice(b"\x03www\x07example\x03org\x00\x00\x01\x00\x01");
        q.extend_from_slice(&[0, 0, 41, 4, 0xd0, 0, 0, 0, 0, 0, 8, 0, 3, 0, 0, 0, 12, 0, 0]);
        let config = AnswerConfig {
            nsid: Some(NSID),
            ..AnswerConfig::default()
        };
        let mut out = Vec::new();
        let outcome = meshdns_zone::answer(
            &catalog,
            &q,
            meshdns_zone::Transport::Stream,
            &config,
            &mut out,
        );
        assert!(outcome.padding);
        assert!(out.ends_with(NSID_OPTION_BYTES));
        pad(&mut out, RESPONSE_BLOCK, config.nsid);
        assert_eq!(out.len(), RESPONSE_BLOCK);
        let m = Message::from_vec(&out).expect("a well-formed padded reply");
        assert_eq!(m.answers.len(), 1);
        let at = out
            .windows(NSID_OPTION_BYTES.len())
            .position(|w| w == NSID_OPTION_BYTES);
        let at = at.expect("the NSID option");
        assert_eq!(&out[at + NSID_OPTION_BYTES.len()..][..2], &[0, 12]);
    }
}
