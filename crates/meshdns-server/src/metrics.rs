//! DNS metrics, counted at the transport boundary.
//!
//! Fixed arrays of relaxed atomics indexed by (transport, qtype, rcode) rather than a labelled
//! metrics registry: the query path does a few array indexings and `fetch_add`s, never a hash
//! lookup, lock or allocation. Rendering to Prometheus text happens only on scrape.

use std::fmt::Write as _;
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};
use std::time::Duration;

use meshdns_zone::{Outcome, RType, rcode};

/// How a query reached us.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Proto {
    /// UDP.
    Udp = 0,
    /// TCP.
    Tcp = 1,
    /// DNS over HTTPS (and over plain HTTP at /dns-query).
    Doh = 2,
    /// DNS over TLS (RFC 7858).
    Dot = 3,
}

const PROTOS: [&str; 4] = ["udp", "tcp", "doh", "dot"];
const QTYPES: [(RType, &str); 15] = [
    (RType::A, "A"),
    (RType::NS, "NS"),
    (RType::CNAME, "CNAME"),
    (RType::SOA, "SOA"),
    (RType::PTR, "PTR"),
    (RType::MX, "MX"),
    (RType::TXT, "TXT"),
    (RType::AAAA, "AAAA"),
    (RType::SRV, "SRV"),
    (RType(64), "SVCB"),
    (RType(65), "HTTPS"),
    (RType::CAA, "CAA"),
    (RType::ANY, "ANY"),
    (RType::AXFR, "AXFR"),
    (RType::IXFR, "IXFR"),
];
const QTYPE_SLOTS: usize = QTYPES.len() + 1; // + "other"
const RCODES: [(u16, &str); 8] = [
    (rcode::NOERROR, "NOERROR"),
    (rcode::FORMERR, "FORMERR"),
    (rcode::SERVFAIL, "SERVFAIL"),
    (rcode::NXDOMAIN, "NXDOMAIN"),
    (rcode::NOTIMP, "NOTIMP"),
    (rcode::REFUSED, "REFUSED"),
    (rcode::YXDOMAIN, "YXDOMAIN"),
    (rcode::BADVERS, "BADVERS"),
];
const RCODE_SLOTS: usize = RCODES.len() + 1;
/// Upper bounds (seconds) of the answer-latency histogram buckets.
const BUCKETS: [f64; 10] = [
    1e-6, 2.5e-6, 5e-6, 1e-5, 2.5e-5, 5e-5, 1e-4, 2.5e-4, 1e-3, 1e-2,
];

/// Counters for every DNS query answered or dropped.
pub struct DnsMetrics {
    queries: [[[AtomicU64; RCODE_SLOTS]; QTYPE_SLOTS]; PROTOS.len()],
    dropped: [AtomicU64; PROTOS.len()],
    truncated: AtomicU64,
    buckets: [AtomicU64; BUCKETS.len()],
    latency_count: AtomicU64,
    latency_sum_ns: AtomicU64,
    tcp_connections: AtomicU64,
    tcp_open: AtomicU64,
    tcp_max: AtomicU64,
    rrl: [AtomicU64; 2],
    tcp_shed: AtomicU64,
    http_connections: [AtomicU64; 2],
    http_open: [AtomicU64; 2],
    http_closed: [[AtomicU64; 2]; 2],
    http_panics: AtomicU64,
}

/// An HTTP listener, for the connection metrics.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum HttpListener {
    /// `--http`.
    Http = 0,
    /// `--https`.
    Https = 1,
}

/// Why meshdns closed an HTTP connection.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum HttpClose {
    /// No request in progress for the idle timeout.
    Idle = 0,
    /// The one idle the longest, to make room at the connection cap.
    Shed = 1,
}

impl Default for DnsMetrics {
    fn default() -> Self {
        DnsMetrics {
            queries: std::array::from_fn(|_| {
                std::array::from_fn(|_| std::array::from_fn(|_| AtomicU64::new(0)))
            }),
            dropped: std::array::from_fn(|_| AtomicU64::new(0)),
            truncated: AtomicU64::new(0),
            buckets: std::array::from_fn(|_| AtomicU64::new(0)),
            latency_count: AtomicU64::new(0),
            latency_sum_ns: AtomicU64::new(0),
            tcp_connections: AtomicU64::new(0),
            tcp_open: AtomicU64::new(0),
            tcp_max: AtomicU64::new(0),
            rrl: std::array::from_fn(|_| AtomicU64::new(0)),
            tcp_shed: AtomicU64::new(0),
            http_connections: std::array::from_fn(|_| AtomicU64::new(0)),
            http_open: std::array::from_fn(|_| AtomicU64::new(0)),
            http_closed: std::array::from_fn(|_| std::array::from_fn(|_| AtomicU64::new(0))),
            http_panics: AtomicU64::new(0),
        }
    }
}

fn qtype_slot(t: RType) -> usize {
    QTYPES
        .iter()
        .position(|(q, _)| *q == t)
        .unwrap_or(QTYPES.len())
}

fn rcode_slot(r: u16) -> usize {
    RCODES
        .iter()
        .position(|(c, _)| *c == r)
        .unwrap_or(RCODES.len())
}

impl DnsMetrics {
    /// Counts one query's outcome and how long `answer()` took.
    #[inline]
    pub fn record(&self, proto: Proto, outcome: &Outcome, elapsed: Duration) {
        let p = proto as usize;
        if !outcome.reply {
            self.dropped[p].fetch_add(1, Relaxed);
            return;
        }
        let q = outcome.qtype.map_or(QTYPES.len(), qtype_slot);
        self.queries[p][q][rcode_slot(outcome.rcode)].fetch_add(1, Relaxed);
        if outcome.truncated {
            self.truncated.fetch_add(1, Relaxed);
        }
        let secs = elapsed.as_secs_f64();
        if let Some(b) = BUCKETS.iter().position(|&le| secs <= le) {
            self.buckets[b].fetch_add(1, Relaxed);
        }
        self.latency_count.fetch_add(1, Relaxed);
        self.latency_sum_ns
            .fetch_add(elapsed.as_nanos() as u64, Relaxed);
    }

    /// An idle TCP or DoT connection was closed to make room for a new one at the cap.
    pub fn tcp_shed(&self) {
        self.tcp_shed.fetch_add(1, Relaxed);
    }

    /// An HTTP or HTTPS connection was accepted (after its TLS handshake).
    pub fn http_opened(&self, listener: HttpListener) {
        self.http_connections[listener as usize].fetch_add(1, Relaxed);
        self.http_open[listener as usize].fetch_add(1, Relaxed);
    }

    /// An HTTP or HTTPS connection ended.
    pub fn http_ended(&self, listener: HttpListener) {
        self.http_open[listener as usize].fetch_sub(1, Relaxed);
    }

    /// meshdns closed an HTTP or HTTPS connection (idle, or shed at the cap).
    pub fn http_closed(&self, listener: HttpListener, why: HttpClose) {
        self.http_closed[listener as usize][why as usize].fetch_add(1, Relaxed);
    }

    /// An HTTP handler panicked (a bug); its request was answered 500.
    pub fn http_panic(&self) {
        self.http_panics.fetch_add(1, Relaxed);
    }

    /// Response rate limiting held back a response: sent truncated (`slipped`) or not at all.
    pub fn rrl(&self, slipped: bool) {
        self.rrl[usize::from(slipped)].fetch_add(1, Relaxed);
    }

    /// A packet was dropped before `answer()` saw it.
    pub fn dropped(&self, proto: Proto) {
        self.dropped[proto as usize].fetch_add(1, Relaxed);
    }

    /// Records the TCP connection cap (`--tcp-max-connections`), for alerts on reaching it.
    pub fn set_tcp_max(&self, max: usize) {
        self.tcp_max.store(max as u64, Relaxed);
    }

    /// A TCP connection was accepted.
    pub fn tcp_opened(&self) {
        self.tcp_connections.fetch_add(1, Relaxed);
        self.tcp_open.fetch_add(1, Relaxed);
    }

    /// A TCP connection ended.
    pub fn tcp_closed(&self) {
        self.tcp_open.fetch_sub(1, Relaxed);
    }

    /// Total answered queries with this rcode over every transport and type (for tests and
    /// logs).
    pub fn answered(&self, rc: u16) -> u64 {
        let r = rcode_slot(rc);
        self.queries
            .iter()
            .flat_map(|p| p.iter())
            .map(|q| q[r].load(Relaxed))
            .sum()
    }

    /// The Prometheus text of these metrics alone.
    pub fn render_string(&self) -> String {
        let mut out = String::new();
        self.render(&mut out);
        out
    }

    /// Appends the Prometheus text exposition of these metrics.
    pub fn render(&self, out: &mut String) {
        header(
            out,
            "meshdns_dns_queries_total",
            "DNS queries answered, by transport, question type and response code.",
            "counter",
        );
        for (p, proto) in PROTOS.iter().enumerate() {
            for q in 0..QTYPE_SLOTS {
                let qname = QTYPES.get(q).map_or("other", |(_, n)| n);
                for r in 0..RCODE_SLOTS {
                    let v = self.queries[p][q][r].load(Relaxed);
                    if v > 0 {
                        let rname = RCODES.get(r).map_or("other", |(_, n)| n);
                        let _ = writeln!(
                            out,
                            "meshdns_dns_queries_total{{transport=\"{proto}\",qtype=\"{qname}\",rcode=\"{rname}\"}} {v}"
                        );
                    }
                }
            }
        }
        header(
            out,
            "meshdns_dns_dropped_total",
            "Packets dropped without a reply (no header, or a response sent to us).",
            "counter",
        );
        for (p, proto) in PROTOS.iter().enumerate() {
            let _ = writeln!(
                out,
                "meshdns_dns_dropped_total{{transport=\"{proto}\"}} {}",
                self.dropped[p].load(Relaxed)
            );
        }
        header(
            out,
            "meshdns_dns_truncated_total",
            "UDP answers truncated (TC set) because they exceeded the client's size limit.",
            "counter",
        );
        let _ = writeln!(
            out,
            "meshdns_dns_truncated_total {}",
            self.truncated.load(Relaxed)
        );
        header(
            out,
            "meshdns_dns_answer_seconds",
            "Time spent computing an answer, from parsed packet to response bytes.",
            "histogram",
        );
        let mut cumulative = 0;
        for (i, le) in BUCKETS.iter().enumerate() {
            cumulative += self.buckets[i].load(Relaxed);
            let _ = writeln!(
                out,
                "meshdns_dns_answer_seconds_bucket{{le=\"{le}\"}} {cumulative}"
            );
        }
        let count = self.latency_count.load(Relaxed);
        let _ = writeln!(
            out,
            "meshdns_dns_answer_seconds_bucket{{le=\"+Inf\"}} {count}"
        );
        let _ = writeln!(
            out,
            "meshdns_dns_answer_seconds_sum {}",
            self.latency_sum_ns.load(Relaxed) as f64 / 1e9
        );
        let _ = writeln!(out, "meshdns_dns_answer_seconds_count {count}");
        header(
            out,
            "meshdns_dns_tcp_connections_total",
            "TCP connections accepted.",
            "counter",
        );
        let _ = writeln!(
            out,
            "meshdns_dns_tcp_connections_total {}",
            self.tcp_connections.load(Relaxed)
        );
        header(
            out,
            "meshdns_dns_tcp_connections_open",
            "TCP connections open now.",
            "gauge",
        );
        let _ = writeln!(
            out,
            "meshdns_dns_tcp_connections_open {}",
            self.tcp_open.load(Relaxed)
        );
        header(
            out,
            "meshdns_dns_tcp_connections_max",
            "TCP connections served at once (--tcp-max-connections); more wait in the backlog.",
            "gauge",
        );
        let _ = writeln!(
            out,
            "meshdns_dns_tcp_connections_max {}",
            self.tcp_max.load(Relaxed)
        );
        header(
            out,
            "meshdns_dns_tcp_connections_shed_total",
            "Idle TCP and DoT connections closed to make room for a new one at the cap.",
            "counter",
        );
        let _ = writeln!(
            out,
            "meshdns_dns_tcp_connections_shed_total {}",
            self.tcp_shed.load(Relaxed)
        );
        const HTTP: [&str; 2] = ["http", "https"];
        header(
            out,
            "meshdns_http_connections_total",
            "HTTP connections accepted, by listener (HTTPS after the handshake).",
            "counter",
        );
        for (l, name) in HTTP.iter().enumerate() {
            let n = self.http_connections[l].load(Relaxed);
            let _ = writeln!(
                out,
                "meshdns_http_connections_total{{listener=\"{name}\"}} {n}"
            );
        }
        header(
            out,
            "meshdns_http_connections_open",
            "HTTP connections open now, by listener.",
            "gauge",
        );
        for (l, name) in HTTP.iter().enumerate() {
            let n = self.http_open[l].load(Relaxed);
            let _ = writeln!(
                out,
                "meshdns_http_connections_open{{listener=\"{name}\"}} {n}"
            );
        }
        header(
            out,
            "meshdns_http_connections_closed_total",
            "HTTP connections meshdns closed: idle past the idle timeout, or shed (the one idle \
             the longest) to make room at the connection cap.",
            "counter",
        );
        for (l, name) in HTTP.iter().enumerate() {
            for (r, reason) in ["idle", "shed"].iter().enumerate() {
                let n = self.http_closed[l][r].load(Relaxed);
                let _ = writeln!(
                    out,
                    "meshdns_http_connections_closed_total{{listener=\"{name}\",reason=\"{reason}\"}} {n}"
                );
            }
        }
        header(
            out,
            "meshdns_http_panics_total",
            "HTTP requests whose handler panicked (a bug, logged): each was answered 500.",
            "counter",
        );
        let _ = writeln!(
            out,
            "meshdns_http_panics_total {}",
            self.http_panics.load(Relaxed)
        );
        header(
            out,
            "meshdns_rrl_responses_total",
            "UDP responses held back by response rate limiting: not sent (dropped) or sent \
             truncated so the client retries over TCP (slipped).",
            "counter",
        );
        for (i, action) in ["dropped", "slipped"].iter().enumerate() {
            let _ = writeln!(
                out,
                "meshdns_rrl_responses_total{{action=\"{action}\"}} {}",
                self.rrl[i].load(Relaxed)
            );
        }
    }
}

/// Writes the `# HELP` and `# TYPE` lines of a metric.
pub fn header(out: &mut String, name: &str, help: &str, kind: &str) {
    let _ = writeln!(out, "# HELP {name} {help}");
    let _ = writeln!(out, "# TYPE {name} {kind}");
}

/// Escapes a label value for the text exposition format.
pub fn label_value(v: &str) -> String {
    v.replace('\\', "\\\\")
        .replace('"', "\\\"")
        .replace('\n', "\\n")
}
