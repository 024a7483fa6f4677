//! Response rate limiting (RRL) on UDP, as NSD's and Knot's: a spoofed flood aimed at a victim
//! gets at most `rate` responses a second per (client prefix, response class) from us, and a
//! real client that is limited still gets every `slip`-th response truncated (TC set, no
//! records) and retries over TCP, which cannot be spoofed.
//!
//! - **Buckets.** A fixed table of token buckets indexed by a keyed hash of (prefix, class,
//!   and for positive answers the name), so memory is constant whatever the flood's source
//!   addresses; two keys that collide share a bucket, as in Knot. The hash is hashbrown's
//!   default (foldhash, seeded at random per process), fed the name eight bytes at a time:
//!   the table has a fixed size, so there is no chain for crafted collisions to grow, and a
//!   seed the client cannot see is what keeps it from aiming at another client's bucket.
//!   (SipHash fed byte by byte cost about 250 instructions per query more.) Each bucket is one
//!   `AtomicU64` (refill time in ms, tokens in thousandths) updated by compare-and-swap: the UDP
//!   threads share the table without a lock.
//! - **Classes.** Positive answers are keyed by name too (a client asking many names is not
//!   throttled by one), while NXDOMAIN, NODATA, referrals and errors are keyed by the prefix
//!   alone, so random names cannot mint fresh buckets.
//! - **Off by default** (`--rrl-rate 0`); TCP, DoT and DoH are never limited.
//!
//! [`Rrl::decide`] is the decision; it takes the clock as a parameter so tests drive time.

use std::hash::{BuildHasher, Hasher};
use std::net::IpAddr;
use std::sync::atomic::{AtomicU64, Ordering};

use meshdns_zone::Cidr;

/// The highest rate: tokens (in thousandths) must fit the 32 bits a bucket keeps them in.
pub const MAX_RATE: u32 = 1_000_000;
/// Buckets in the table (a power of two): 64 Ki buckets, 512 KiB.
const BUCKETS: usize = 1 << 16;
/// Tokens are kept in thousandths, so a refill of a fraction of a response is not lost.
const MILLI: u64 = 1000;

/// What RRL decided for one response.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Action {
    /// Send it.
    Send,
    /// Send it truncated: TC set, the question only.
    Slip,
    /// Send nothing.
    Drop,
}

/// The response classes limited apart (RFC-less, as NSD and Knot name them).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Class {
    /// NOERROR with answers.
    Positive = 0,
    /// NXDOMAIN.
    NxDomain = 1,
    /// NOERROR, authoritative, no answers.
    NoData = 2,
    /// NOERROR, not authoritative, with authority records: a delegation.
    Referral = 3,
    /// Any other rcode.
    Error = 4,
}

impl Class {
    /// The class of a response message (its header is enough).
    pub fn of(response: &[u8]) -> Class {
        if response.len() < 12 {
            return Class::Error;
        }
        let rcode = response[3] & 0xF;
        let aa = response[2] & 0x04 != 0;
        let ancount = u16::from_be_bytes([response[6], response[7]]);
        let nscount = u16::from_be_bytes([response[8], response[9]]);
        match rcode {
            0 if ancount > 0 => Class::Positive,
            0 if !aa && nscount > 0 => Class::Referral,
            0 => Class::NoData,
            3 => Class::NxDomain,
            _ => Class::Error,
        }
    }
}

/// The settings (`--rrl-*`).
#[derive(Debug, Clone)]
pub struct RrlConfig {
    /// Responses a second per bucket (also the burst).
    pub rate: u32,
    /// Every `slip`-th limited response is sent truncated; 0 drops them all.
    pub slip: u32,
    /// IPv4 clients are grouped by this prefix length.
    pub ipv4_prefix: u8,
    /// IPv6 clients are grouped by this prefix length.
    pub ipv6_prefix: u8,
    /// Clients never limited.
    pub exempt: Vec<Cidr>,
}

/// The shared limiter.
pub struct Rrl {
    config: RrlConfig,
    table: Box<[AtomicU64]>,
    hasher: hashbrown::DefaultHashBuilder,
    started: std::time::Instant,
}

impl std::fmt::Debug for Rrl {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Rrl").field("config", &self.config).finish()
    }
}

impl Rrl {
    /// A limiter with an empty table (every bucket full); a rate above [`MAX_RATE`] is taken
    /// as [`MAX_RATE`].
    pub fn new(mut config: RrlConfig) -> Rrl {
        config.rate = config.rate.min(MAX_RATE);
        Rrl {
            config,
            table: (0..BUCKETS).map(|_| AtomicU64::new(u64::MAX)).collect(),
            hasher: hashbrown::DefaultHashBuilder::default(),
            started: std::time::Instant::now(),
        }
    }

    /// Milliseconds since this limiter started (the clock [`Rrl::decide`] is given).
    pub fn now_ms(&self) -> u32 {
        let d = self.started.elapsed();
        // Wraps after 49 days, as the buckets' refill arithmetic expects (wrapping_sub).
        (d.as_secs().wrapping_mul(1000) + u64::from(d.subsec_millis())) as u32
    }

    /// What to do with `response` to `client`. `qname` is the question name as sent (its case
    /// is ignored); `slips` is the caller's count of limited responses, for the slip ratio.
    pub fn decide(
        &self,
        client: IpAddr,
        qname: &[u8],
        response: &[u8],
        now_ms: u32,
        slips: &mut u32,
    ) -> Action {
        if self.config.rate == 0 || self.config.exempt.iter().any(|c| c.contains(client)) {
            return Action::Send;
        }
        let class = Class::of(response);
        let mut h = self.hasher.build_hasher();
        match client {
            IpAddr::V4(a) => h.write_u32(u32::from(a) & mask32(self.config.ipv4_prefix)),
            IpAddr::V6(a) => h.write_u128(u128::from(a) & mask128(self.config.ipv6_prefix)),
        }
        h.write_u8(class as u8);
        if class == Class::Positive {
            // The name eight bytes at a time with bit 0x20 of every byte set, so upper and
            // lower case hash alike (so do a few other pairs, such as `@` and `` ` ``, which
            // then share a bucket as any two colliding keys do).
            const CASE: u64 = 0x2020_2020_2020_2020;
            let words = qname.chunks_exact(8);
            let tail = words.remainder();
            for w in words {
                let mut word = [0u8; 8];
                word.copy_from_slice(w);
                h.write_u64(u64::from_le_bytes(word) | CASE);
            }
            let mut last = [0u8; 8];
            last[..tail.len()].copy_from_slice(tail);
            h.write_u64(u64::from_le_bytes(last) | CASE);
        }
        let hash = h.finish();
        let slot = &self.table[(hash as usize) & (BUCKETS - 1)];
        if self.take(slot, now_ms) {
            return Action::Send;
        }
        *slips = slips.wrapping_add(1);
        if self.config.slip > 0 && (*slips).is_multiple_of(self.config.slip) {
            Action::Slip
        } else {
            Action::Drop
        }
    }

    /// Takes one response's token from `slot`, refilling it for the time since its last use.
    fn take(&self, slot: &AtomicU64, now_ms: u32) -> bool {
        let rate = u64::from(self.config.rate);
        let full = rate * MILLI;
        let mut current = slot.load(Ordering::Relaxed);
        loop {
            let (tokens, last) = if current == u64::MAX {
                (full, now_ms)
            } else {
                ((current >> 32), current as u32)
            };
            // ms × responses/s = thousandths of a response.
            let elapsed = u64::from(now_ms.wrapping_sub(last));
            let refilled = (tokens + elapsed.saturating_mul(rate)).min(full);
            let (allowed, left) = if refilled >= MILLI {
                (true, refilled - MILLI)
            } else {
                (false, refilled)
            };
            let next = (left << 32) | u64::from(now_ms);
            match slot.compare_exchange_weak(current, next, Ordering::Relaxed, Ordering::Relaxed) {
                Ok(_) => return allowed,
                Err(seen) => current = seen,
            }
        }
    }
}

fn mask32(len: u8) -> u32 {
    if len == 0 {
        0
    } else {
        u32::MAX << (32 - u32::from(len.min(32)))
    }
}

fn mask128(len: u8) -> u128 {
    if len == 0 {
        0
    } else {
        u128::MAX << (128 - u32::from(len.min(128)))
    }
}

/// Turns `reply` into its truncated form: the header with TC set and only the question (no
/// records, no OPT), so the client retries over TCP.
pub fn slip(reply: &mut Vec<u8>) {
    if reply.len() < 12 {
        return;
    }
    let question = meshdns_zone::wire::question_end(reply);
    reply.truncate(question.unwrap_or(12));
    reply[2] |= 0x02; // TC
    reply[4..6].copy_from_slice(&u16::from(question.is_some()).to_be_bytes());
    reply[6..12].fill(0);
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rrl(rate: u32, slip: u32) -> Rrl {
        Rrl::new(RrlConfig {
            rate,
            slip,
            ipv4_prefix: 24,
            ipv6_prefix: 56,
            exempt: vec!["192.0.2.77/32".parse().unwrap()],
        })
    }

    /// A response header with rcode, AA, and counts.
    fn response(rcode: u8, aa: bool, an: u16, ns: u16) -> Vec<u8> {
        let mut r = vec![0, 1, 0x80 | if aa { 0x04 } else { 0 }, rcode, 0, 1];
        r.extend_from_slice(&an.to_be_bytes());
        r.extend_from_slice(&ns.to_be_bytes());
        r.extend_from_slice(&[0, 0]);
        r
    }

    #[test]
    fn classes_come_from_the_header() {
        assert_eq!(Class::of(&response(0, true, 1, 0)), Class::Positive);
        assert_eq!(Class::of(&response(0, true, 0, 1)), Class::NoData);
        assert_eq!(Class::of(&response(0, false, 0, 2)), Class::Referral);
        assert_eq!(Class::of(&response(3, true, 0, 1)), Class::NxDomain);
        assert_eq!(Class::of(&response(5, false, 0, 0)), Class::Error);
        assert_eq!(Class::of(&[1, 2]), Class::Error);
    }

    fn count(r: &Rrl, ip: &str, name: &[u8], resp: &[u8], n: usize, now: u32) -> [usize; 3] {
        let mut slips = 0;
        let mut seen = [0; 3];
        for _ in 0..n {
            let a = r.decide(ip.parse().unwrap(), name, resp, now, &mut slips);
            seen[a as usize] += 1;
        }
        seen
    }

    #[test]
    fn a_prefix_gets_its_rate_and_every_second_limited_response_slips() {
        let r = rrl(10, 2);
        let pos = response(0, true, 1, 0);
        // A burst of 100 at one instant: 10 sent, 90 limited, half of them slipped.
        assert_eq!(
            count(&r, "198.51.100.1", b"\x01a", &pos, 100, 0),
            [10, 45, 45]
        );
        // Another address in the same /24 shares the bucket; 100 ms later one more token.
        assert_eq!(
            count(&r, "198.51.100.200", b"\x01a", &pos, 5, 100),
            [1, 2, 2]
        );
        // Another /24 has its own.
        assert_eq!(
            count(&r, "198.51.101.1", b"\x01a", &pos, 10, 100),
            [10, 0, 0]
        );
        // A second later the bucket is full again (and never more than full).
        assert_eq!(
            count(&r, "198.51.100.1", b"\x01a", &pos, 20, 5000),
            [10, 5, 5]
        );
    }

    #[test]
    fn names_split_positive_answers_only_and_exempt_clients_pass() {
        let r = rrl(5, 0);
        let pos = response(0, true, 1, 0);
        let nx = response(3, true, 0, 1);
        // Positive answers for different names: separate buckets.
        assert_eq!(count(&r, "203.0.113.9", b"\x01a", &pos, 5, 0), [5, 0, 0]);
        assert_eq!(count(&r, "203.0.113.9", b"\x01b", &pos, 5, 0), [5, 0, 0]);
        // NXDOMAIN for random names: one bucket; slip 0 drops every limited one.
        let mut slips = 0;
        let sent = (0..50u8)
            .filter(|i| {
                r.decide("203.0.113.9".parse().unwrap(), &[1, *i], &nx, 0, &mut slips)
                    == Action::Send
            })
            .count();
        assert_eq!(sent, 5);
        // The NXDOMAIN flood leaves NODATA alone.
        assert_eq!(
            count(&r, "203.0.113.9", b"\x01a", &response(0, true, 0, 1), 5, 0),
            [5, 0, 0]
        );
        assert_eq!(count(&r, "192.0.2.77", b"\x01a", &pos, 50, 0), [50, 0, 0]);
        // The name's case is ignored, over every word of a long name.
        let long = b"\x0bEXAMPLE-com\x03Org\x00";
        assert_eq!(count(&r, "198.51.100.1", long, &pos, 5, 0), [5, 0, 0]);
        let lower = long.to_ascii_lowercase();
        assert_eq!(count(&r, "198.51.100.1", &lower, &pos, 1, 0), [0, 0, 1]);
        assert_eq!(
            count(
                &r,
                "198.51.100.1",
                b"\x0bexample-net\x03org\x00",
                &pos,
                1,
                0
            ),
            [1, 0, 0]
        );
        // IPv6 by /56.
        assert_eq!(
            count(&r, "2001:db8:0:1::1", b"\x01a", &pos, 6, 0),
            [5, 0, 1]
        );
        assert_eq!(
            count(&r, "2001:db8:0:ff::1", b"\x01a", &pos, 1, 0),
            [0, 0, 1]
        );
        assert_eq!(
            count(&r, "2001:db8:0:100::1", b"\x01a", &pos, 1, 0),
            [1, 0, 0]
        );
    }

    #[test]
    fn a_steady_flood_gets_the_rate_after_the_burst() {
        let r = rrl(100, 2);
        let pos = response(0, true, 1, 0);
        let mut slips = 0;
        let mut sent = 0;
        // 50 queries every millisecond for 10 s: a burst of 100, then 100 a second.
        for ms in 0..10_000u32 {
            for _ in 0..50 {
                if r.decide(
                    "198.51.100.1".parse().unwrap(),
                    b"\x01a",
                    &pos,
                    ms,
                    &mut slips,
                ) == Action::Send
                {
                    sent += 1;
                }
            }
        }
        assert!((1099..=1101).contains(&sent), "{sent}");
    }

    #[test]
    fn off_sends_everything() {
        let r = rrl(0, 2);
        assert_eq!(
            count(&r, "198.51.100.1", b"", &response(0, true, 1, 0), 1000, 0),
            [1000, 0, 0]
        );
    }

    #[test]
    fn slipped_replies_keep_the_question_only() {
        let mut reply = vec![0x12, 0x34, 0x84, 0x00, 0, 1, 0, 1, 0, 0, 0, 1];
        reply.extend_from_slice(b"\x03www\x07example\x00\x00\x01\x00\x01");
        let question_end = reply.len();
        reply.extend_from_slice(&[0xc0, 12, 0, 1, 0, 1, 0, 0, 0, 60, 0, 4, 192, 0, 2, 1]);
        reply.extend_from_slice(&[0, 0, 41, 4, 0xd0, 0, 0, 0, 0, 0, 0]);
        slip(&mut reply);
        assert_eq!(reply.len(), question_end);
        assert_eq!(reply[2] & 0x02, 0x02, "TC");
        assert_eq!(&reply[4..12], &[0, 1, 0, 0, 0, 0, 0, 0]);
    }
}
