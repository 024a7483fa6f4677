//! Controller metrics in the Prometheus text format: reconciles by result, errors by kind,
//! reconcile duration, and gauges the controllers set (records published, Connectors
//! deferred, Peers written...).

use std::collections::BTreeMap;
use std::sync::Mutex;
use std::time::Duration;

/// Histogram bucket bounds for reconcile duration, seconds.
const BUCKETS: [f64; 10] = [0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 10.0];

#[derive(Default)]
struct Inner {
    reconciles: BTreeMap<String, u64>,
    errors: BTreeMap<String, u64>,
    gauges: BTreeMap<String, i64>,
    buckets: [u64; BUCKETS.len()],
    count: u64,
    sum: f64,
    leader: bool,
}

/// One controller's metrics.
pub struct Metrics {
    controller: &'static str,
    inner: Mutex<Inner>,
}

impl Metrics {
    /// Metrics labelled `controller="<name>"`.
    pub fn new(controller: &'static str) -> Metrics {
        Metrics {
            controller,
            inner: Mutex::new(Inner::default()),
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Inner> {
        self.inner.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Counts a finished reconcile.
    pub fn reconciled(&self, took: Duration, error: Option<&str>) {
        let mut m = self.lock();
        let result = if error.is_some() { "error" } else { "ok" };
        *m.reconciles.entry(result.to_string()).or_default() += 1;
        if let Some(kind) = error {
            *m.errors.entry(kind.to_string()).or_default() += 1;
        }
        let secs = took.as_secs_f64();
        for (i, b) in BUCKETS.iter().enumerate() {
            if secs <= *b {
                m.buckets[i] += 1;
            }
        }
        m.count += 1;
        m.sum += secs;
    }

    /// Sets a gauge (`meshdns_controller_<name>`).
    pub fn set(&self, name: &str, value: i64) {
        self.lock().gauges.insert(name.to_string(), value);
    }

    /// Records whether this replica leads.
    pub fn set_leader(&self, leader: bool) {
        self.lock().leader = leader;
    }

    /// Reconciles so far with this result (`ok` / `error`).
    pub fn reconciles(&self, result: &str) -> u64 {
        self.lock().reconciles.get(result).copied().unwrap_or(0)
    }

    /// The Prometheus text exposition.
    pub fn render(&self) -> String {
        let m = self.lock();
        let c = self.controller;
        let mut out = String::new();
        out.push_str("# HELP meshdns_controller_reconciles_total Reconciles finished, by result.\n# TYPE meshdns_controller_reconciles_total counter\n");
        for result in ["ok", "error"] {
            let n = m.reconciles.get(result).copied().unwrap_or(0);
            out.push_str(&format!(
                "meshdns_controller_reconciles_total{{controller=\"{c}\",result=\"{result}\"}} {n}\n"
            ));
        }
        out.push_str("# HELP meshdns_controller_errors_total Reconcile errors, by kind.\n# TYPE meshdns_controller_errors_total counter\n");
        for (kind, n) in &m.errors {
            out.push_str(&format!(
                "meshdns_controller_errors_total{{controller=\"{c}\",kind=\"{kind}\"}} {n}\n"
            ));
        }
        out.push_str("# HELP meshdns_controller_reconcile_seconds Reconcile duration.\n# TYPE meshdns_controller_reconcile_seconds histogram\n");
        for (i, b) in BUCKETS.iter().enumerate() {
            out.push_str(&format!(
                "meshdns_controller_reconcile_seconds_bucket{{controller=\"{c}\",le=\"{b}\"}} {}\n",
                m.buckets[i]
            ));
        }
        out.push_str(&format!(
            "meshdns_controller_reconcile_seconds_bucket{{controller=\"{c}\",le=\"+Inf\"}} {}\nmeshdns_controller_reconcile_seconds_sum{{controller=\"{c}\"}} {}\nmeshdns_controller_reconcile_seconds_count{{controller=\"{c}\"}} {}\n",
            m.count, m.sum, m.count
        ));
        for (name, v) in &m.gauges {
            out.push_str(&format!(
                "# TYPE meshdns_controller_{name} gauge\nmeshdns_controller_{name}{{controller=\"{c}\"}} {v}\n"
            ));
        }
        out.push_str(&format!(
            "# TYPE meshdns_controller_leader gauge\nmeshdns_controller_leader{{controller=\"{c}\"}} {}\n",
            u8::from(m.leader)
        ));
        out
    }
}
