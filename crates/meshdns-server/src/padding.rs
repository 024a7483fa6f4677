//! EDNS(0) padding (RFC 7830) of DoT responses, by the block-length policy of RFC 8467 §4.1:
//! a response is padded to a multiple of 468 bytes, and only when its query carried a Padding
//! option (RFC 7830 §4: a server must not pad otherwise), which `answer()` reports in
//! `Outcome::padding`.

/// The Padding option's code (RFC 7830 §3).
const PADDING: u16 = 12;
/// RFC 8467 §4.1: responses padded to a multiple of 468 octets.
pub const RESPONSE_BLOCK: usize = 468;
const OPT: u16 = 41;
/// An empty OPT record: root owner, type, class, TTL, RDLENGTH.
const EMPTY_OPT_LEN: usize = 11;

/// Pads `response` (whose last record is the empty OPT `answer()` writes) to a multiple of
/// `block` bytes with a Padding option. Leaves it alone when it does not end in an empty OPT,
/// or when padding would take it past the 65,535 bytes a stream frame can carry.
pub fn pad(response: &mut Vec<u8>, block: usize) {
    let len = response.len();
    if len < 12 + EMPTY_OPT_LEN || response[10] == 0 && response[11] == 0 {
        return;
    }
    let opt = len - EMPTY_OPT_LEN;
    let ends_in_empty_opt = response[opt] == 0
        && response[opt + 1..opt + 3] == OPT.to_be_bytes()
        && response[len - 2..] == [0, 0];
    if !ends_in_empty_opt {
        return;
    }
    let with_header = len + 4;
    let fill = (block - with_header % block) % block;
    let Ok(rdlen) = u16::try_from(4 + fill) else {
        return;
    };
    if with_header + fill > usize::from(u16::MAX) {
        return;
    }
    response[len - 2..].copy_from_slice(&rdlen.to_be_bytes());
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
            pad(&mut r, RESPONSE_BLOCK);
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
        pad(&mut r, RESPONSE_BLOCK);
        assert_eq!(r, before);
        let mut no_additional = vec![0u8; 40];
        pad(&mut no_additional, RESPONSE_BLOCK);
        assert_eq!(no_additional.len(), 40);
    }
}
