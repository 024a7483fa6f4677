//! Warnings about peers' requests, rate-limited. A log line per NOTIFY or per refused request
//! lets whoever can send packets spend the disk and the log pipeline; the counters stay exact
//! (each caller counts every event in its metrics), and the log gets the first occurrence of a
//! cause in each interval, then one line per interval saying how many were left out.
//!
//! Keyed by cause (a fixed string) and a scope from a bounded set the server knows (a zone it
//! serves, an outcome), never by the peer: spoofed source addresses cannot grow the state, and a
//! flood from many addresses is still one line per interval.

use std::collections::HashMap;
use std::sync::Mutex;
use std::time::{Duration, Instant};

/// One line per cause per interval.
pub struct Throttle {
    interval: Duration,
    causes: Mutex<Option<HashMap<(&'static str, String), Window>>>,
}

struct Window {
    opened: Instant,
    suppressed: u64,
}

/// The lines about peers' requests (NOTIFY, refused transfers and signed queries): one line per
/// cause every 10 seconds at most. Use: `if let Some(suppressed) =
/// PEER_WARNINGS.admit("cause", zone) { warn!(…, suppressed, "…") }`.
pub static PEER_WARNINGS: Throttle = Throttle::new(Duration::from_secs(10));

impl Throttle {
    /// A throttle letting one line per cause through each `interval`.
    pub const fn new(interval: Duration) -> Throttle {
        Throttle {
            interval,
            causes: Mutex::new(None),
        }
    }

    /// Whether to log this occurrence of `cause` in `scope` (a zone, an outcome: never
    /// anything a peer chooses freely) now: `Some(n)` with the number of occurrences left out
    /// since the last line logged for it, `None` to leave this one out.
    pub fn admit(&self, cause: &'static str, scope: &str) -> Option<u64> {
        self.admit_at(cause, scope, Instant::now())
    }

    fn admit_at(&self, cause: &'static str, scope: &str, now: Instant) -> Option<u64> {
        let mut causes = self.causes.lock().unwrap_or_else(|e| e.into_inner());
        let causes = causes.get_or_insert_with(HashMap::new);
        match causes.get_mut(&(cause, scope.to_string())) {
            None => {
                causes.insert(
                    (cause, scope.to_string()),
                    Window {
                        opened: now,
                        suppressed: 0,
                    },
                );
                Some(0)
            }
            Some(w) if now.duration_since(w.opened) >= self.interval => {
                let left_out = w.suppressed;
                *w = Window {
                    opened: now,
                    suppressed: 0,
                };
                Some(left_out)
            }
            Some(w) => {
                w.suppressed += 1;
                None
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn one_line_per_cause_and_scope_per_interval_with_the_count_left_out() {
        let t = Throttle::new(Duration::from_secs(10));
        let start = Instant::now();
        assert_eq!(t.admit_at("a", "z1", start), Some(0));
        for i in 1..5000 {
            assert_eq!(
                t.admit_at("a", "z1", start + Duration::from_millis(i)),
                None
            );
        }
        assert_eq!(t.admit_at("b", "z1", start), Some(0), "causes are apart");
        assert_eq!(t.admit_at("a", "z2", start), Some(0), "scopes are apart");
        assert_eq!(
            t.admit_at("a", "z1", start + Duration::from_secs(10)),
            Some(4999)
        );
        assert_eq!(t.admit_at("a", "z1", start + Duration::from_secs(11)), None);
        assert_eq!(
            t.admit_at("a", "z1", start + Duration::from_secs(20)),
            Some(1)
        );
    }
}
