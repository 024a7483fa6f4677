//! The `/metrics` text: DNS counters from the server, plus the sources and the snapshot.

use std::fmt::Write as _;

use meshdns_server::DnsMetrics;
use meshdns_server::metrics::{header, label_value};
use std::sync::atomic::Ordering::Relaxed;

use meshdns_sources::watch::SourceCounters;
use meshdns_sources::{PkarrStore, SourceStatus};
use meshdns_zone::Catalog;

/// What `/metrics` reports on.
pub struct Sources<'a> {
    /// The DNS listeners' counters.
    pub dns: &'a DnsMetrics,
    /// The snapshot served.
    pub catalog: &'a Catalog,
    /// The sources' counters.
    pub status: &'a SourceStatus,
    /// The pkarr store, when on.
    pub pkarr: Option<&'a PkarrStore>,
    /// Zone transfers out, when on.
    pub transfers: Option<&'a meshdns_server::xfr::Transfers>,
    /// Secondary zones.
    pub secondaries: &'a [std::sync::Arc<meshdns_sources::secondary::SecondaryFeed>],
    /// NOTIFY requests answered, by outcome (with secondary zones).
    pub notify: &'a meshdns_sources::secondary::NotifyCounts,
    /// UPDATEs answered, by rcode (with update zones).
    pub updates: Option<&'a meshdns_xfr::update::UpdateCounts>,
    /// The TLS listeners' certificates, when on.
    pub tls: Option<&'a meshdns_server::tls::Certificates>,
    /// Replication with the pkarr relay's peers, when on.
    pub replication: Option<&'a meshdns_server::replicate::Replicator>,
    /// The Mainline DHT node, when on.
    pub dht: Option<&'a meshdns_sources::PkarrDht>,
    /// The views' query counts (`--view`), when any.
    pub views: Option<&'a meshdns_server::views::Views>,
}

/// Renders every meshdns metric in Prometheus text format.
pub fn render(m: &Sources<'_>) -> String {
    let mut out = String::with_capacity(8192);
    m.dns.render(&mut out);
    if let Some(views) = m.views {
        views.render(&mut out);
    }
    if let Some(tls) = m.tls {
        tls.metrics.render(&mut out);
    }
    zone_serials(&mut out, m.catalog);
    if let Some(t) = m.transfers {
        t.render(&mut out);
    }
    if !m.secondaries.is_empty() {
        secondaries(&mut out, m.secondaries);
        header(
            &mut out,
            "meshdns_notify_received_total",
            "NOTIFY requests answered, by outcome (accepted, unknown_zone, not_allowed, bad_tsig).",
            "counter",
        );
        for (outcome, n) in m.notify.iter() {
            let _ = writeln!(
                out,
                "meshdns_notify_received_total{{outcome=\"{outcome}\"}} {n}"
            );
        }
    }
    if let Some(updates) = m.updates {
        header(
            &mut out,
            "meshdns_update_requests_total",
            "Dynamic UPDATE requests answered, by rcode.",
            "counter",
        );
        for (rcode, n) in updates.iter() {
            let _ = writeln!(
                out,
                "meshdns_update_requests_total{{rcode=\"{rcode}\"}} {n}"
            );
        }
        header(
            &mut out,
            "meshdns_update_dropped_total",
            "UPDATEs dropped unanswered (datagrams dropped, TCP connections closed), past twice the rate of the key they name.",
            "counter",
        );
        let _ = writeln!(out, "meshdns_update_dropped_total {}", updates.dropped());
    }
    zone_records(&mut out, m.catalog);
    sources(&mut out, m.status);
    if let Some(store) = m.pkarr {
        pkarr(&mut out, store);
    }
    if let Some(r) = m.replication {
        r.render(&mut out);
    }
    if let Some(d) = m.dht {
        dht(&mut out, d);
    }
    out
}

fn dht(out: &mut String, dht: &meshdns_sources::PkarrDht) {
    let c = &dht.counters;
    header(
        out,
        "meshdns_pkarr_dht_lookups_total",
        "Mainline DHT lookups, by outcome: found, not_found (nodes answered without a value), timeout (no node answered in time), failed (only errors), refused (not started: over --pkarr-dht-lookups or a client's --pkarr-dht-client-lookups).",
        "counter",
    );
    for (outcome, n) in [
        ("found", &c.found),
        ("not_found", &c.not_found),
        ("timeout", &c.timeout),
        ("failed", &c.failed),
        ("refused", &c.refused),
    ] {
        let _ = writeln!(
            out,
            "meshdns_pkarr_dht_lookups_total{{outcome=\"{outcome}\"}} {}",
            n.load(Relaxed)
        );
    }
    for (name, help, n) in [
        (
            "meshdns_pkarr_dht_lookups_started_total",
            "Mainline DHT lookups started (counted as they start; meshdns_pkarr_dht_lookups_total counts them as they end).",
            &c.started,
        ),
        (
            "meshdns_pkarr_dht_cache_answers_total",
            "Queries for keys not stored here answered from the DHT cache, without a lookup.",
            &c.cache_answers,
        ),
        (
            "meshdns_pkarr_dht_joined_total",
            "Queries that joined a DHT lookup already in flight for their key.",
            &c.joined,
        ),
        (
            "meshdns_pkarr_dht_refreshes_total",
            "Cached keys looked up again in the background (asked for in the last fifth of their life).",
            &c.refreshes,
        ),
        (
            "meshdns_pkarr_dht_invalid_total",
            "Items found in the DHT that failed verification (signature, size, records, date).",
            &c.invalid,
        ),
    ] {
        header(out, name, help, "counter");
        let _ = writeln!(out, "{name} {}", n.load(Relaxed));
    }
    header(
        out,
        "meshdns_pkarr_dht_puts_total",
        "Packets put to the DHT, by outcome: ok (stored at nodes), failed, dropped (the queue was full).",
        "counter",
    );
    for (outcome, n) in [
        ("ok", &c.puts_ok),
        ("failed", &c.puts_failed),
        ("dropped", &c.puts_dropped),
    ] {
        let _ = writeln!(
            out,
            "meshdns_pkarr_dht_puts_total{{outcome=\"{outcome}\"}} {}",
            n.load(Relaxed)
        );
    }
    for (name, help, n) in [
        (
            "meshdns_pkarr_dht_republished_total",
            "Stored keys republished: read from the DHT, then put again (or replaced by a newer packet found).",
            &c.republished,
        ),
        (
            "meshdns_pkarr_dht_republish_newer_total",
            "Stored keys replaced by a newer packet found in the DHT while republishing.",
            &c.republish_newer,
        ),
        (
            "meshdns_pkarr_dht_republish_rounds_total",
            "Republish rounds whose every key was started.",
            &c.republish_rounds,
        ),
    ] {
        header(out, name, help, "counter");
        let _ = writeln!(out, "{name} {}", n.load(Relaxed));
    }
    header(
        out,
        "meshdns_pkarr_dht_republish_round_keys",
        "Keys of the current republish round, and (…_done) how many of them are done.",
        "gauge",
    );
    let _ = writeln!(
        out,
        "meshdns_pkarr_dht_republish_round_keys {}",
        c.republish_round_keys.load(Relaxed)
    );
    header(
        out,
        "meshdns_pkarr_dht_republish_round_done",
        "Keys of the current republish round done.",
        "gauge",
    );
    let _ = writeln!(
        out,
        "meshdns_pkarr_dht_republish_round_done {}",
        c.republish_round_done.load(Relaxed)
    );
    header(
        out,
        "meshdns_pkarr_dht_cache_keys",
        "Keys in the DHT cache (found, or found absent).",
        "gauge",
    );
    let _ = writeln!(out, "meshdns_pkarr_dht_cache_keys {}", dht.cached());
    header(
        out,
        "meshdns_pkarr_dht_lookups_in_flight",
        "Mainline DHT lookups in flight (at most --pkarr-dht-lookups).",
        "gauge",
    );
    let _ = writeln!(
        out,
        "meshdns_pkarr_dht_lookups_in_flight {}",
        dht.in_flight()
    );
    header(
        out,
        "meshdns_pkarr_dht_routing_nodes",
        "Nodes in the DHT routing table, as last read (every 10 s).",
        "gauge",
    );
    let _ = writeln!(
        out,
        "meshdns_pkarr_dht_routing_nodes {}",
        c.routing_nodes.load(Relaxed)
    );
    header(
        out,
        "meshdns_pkarr_dht_lookup_seconds",
        "Time from a DHT lookup's start to its end.",
        "histogram",
    );
    let (counts, sum) = c.latency();
    for (bound, n) in meshdns_sources::pkarr_dht_buckets().iter().zip(&counts) {
        let _ = writeln!(
            out,
            "meshdns_pkarr_dht_lookup_seconds_bucket{{le=\"{bound}\"}} {n}"
        );
    }
    let total = counts.last().copied().unwrap_or(0);
    let _ = writeln!(
        out,
        "meshdns_pkarr_dht_lookup_seconds_bucket{{le=\"+Inf\"}} {total}"
    );
    let _ = writeln!(out, "meshdns_pkarr_dht_lookup_seconds_sum {sum}");
    let _ = writeln!(out, "meshdns_pkarr_dht_lookup_seconds_count {total}");
}

fn zone_serials(out: &mut String, catalog: &Catalog) {
    header(
        out,
        "meshdns_zone_serial",
        "SOA serial served per zone.",
        "gauge",
    );
    let mut serials: Vec<(String, u32)> =
        catalog.serials().map(|(o, s)| (o.to_string(), s)).collect();
    serials.sort();
    for (zone, serial) in serials {
        let _ = writeln!(
            out,
            "meshdns_zone_serial{{zone=\"{}\"}} {serial}",
            label_value(&zone)
        );
    }
}

fn secondaries(
    out: &mut String,
    secondaries: &[std::sync::Arc<meshdns_sources::secondary::SecondaryFeed>],
) {
    header(
        out,
        "meshdns_secondary_serial",
        "SOA serial held per secondary zone (absent before the first transfer).",
        "gauge",
    );
    for f in secondaries {
        if let (Some(serial), _) = f.status() {
            let z = label_value(&f.origin().to_string());
            let _ = writeln!(out, "meshdns_secondary_serial{{zone=\"{z}\"}} {serial}");
        }
    }
    header(
        out,
        "meshdns_secondary_last_refresh_seconds",
        "Unix time of the last successful refresh per secondary zone.",
        "gauge",
    );
    for f in secondaries {
        if let (_, Some(at)) = f.status() {
            let z = label_value(&f.origin().to_string());
            let _ = writeln!(
                out,
                "meshdns_secondary_last_refresh_seconds{{zone=\"{z}\"}} {at}"
            );
        }
    }
    header(
        out,
        "meshdns_secondary_expired",
        "1 while a secondary zone is not served (not transferred yet, or expired).",
        "gauge",
    );
    for f in secondaries {
        let z = label_value(&f.origin().to_string());
        let v = u8::from(f.not_ready().is_some());
        let _ = writeln!(out, "meshdns_secondary_expired{{zone=\"{z}\"}} {v}");
    }
}

fn zone_records(out: &mut String, catalog: &Catalog) {
    header(
        out,
        "meshdns_zone_records",
        "Records served per zone, SOA and NS included.",
        "gauge",
    );
    for zone in catalog.zones() {
        let _ = writeln!(
            out,
            "meshdns_zone_records{{zone=\"{}\"}} {}",
            label_value(&zone.origin().to_string()),
            zone.record_count()
        );
    }
}

fn sources(out: &mut String, status: &SourceStatus) {
    let counters = status.counters();
    header(
        out,
        "meshdns_source_reloads_total",
        "Loads of each source, by result (ok, or error when the file could not be used).",
        "counter",
    );
    for (source, c) in &counters {
        let s = label_value(source);
        let _ = writeln!(
            out,
            "meshdns_source_reloads_total{{source=\"{s}\",result=\"ok\"}} {}",
            c.reloads_ok
        );
        let _ = writeln!(
            out,
            "meshdns_source_reloads_total{{source=\"{s}\",result=\"error\"}} {}",
            c.reloads_error
        );
    }
    header(
        out,
        "meshdns_source_skipped_entries_total",
        "Entries skipped because they were invalid or conflicted with another source.",
        "counter",
    );
    for (source, c) in &counters {
        let _ = writeln!(
            out,
            "meshdns_source_skipped_entries_total{{source=\"{}\"}} {}",
            label_value(source),
            c.skipped_entries
        );
    }
    header(
        out,
        "meshdns_source_last_success_timestamp_seconds",
        "Unix time of the last successful load of each source.",
        "gauge",
    );
    for (source, c) in &counters {
        if let Some(t) = c.last_success_unix {
            let _ = writeln!(
                out,
                "meshdns_source_last_success_timestamp_seconds{{source=\"{}\"}} {t:.3}",
                label_value(source)
            );
        }
    }
    header(
        out,
        "meshdns_source_up",
        "1 while the source's current file is usable and readable, 0 while it fails or cannot be watched (last good records keep serving).",
        "gauge",
    );
    for (source, c) in &counters {
        let _ = writeln!(
            out,
            "meshdns_source_up{{source=\"{}\"}} {}",
            label_value(source),
            u8::from(c.last_error.is_none() && c.watch_error.is_none())
        );
    }
    header(
        out,
        "meshdns_source_absent",
        "1 while the source's file does not exist (served as empty, as Tailscale's nameserver does).",
        "gauge",
    );
    for (source, c) in &counters {
        let _ = writeln!(
            out,
            "meshdns_source_absent{{source=\"{}\"}} {}",
            label_value(source),
            u8::from(c.absent)
        );
    }
    cluster_objects(out, &counters);
}

/// The cluster's objects each live source reads (`--kube-source`), and what is at fault in
/// them, by kind and reason.
fn cluster_objects(out: &mut String, counters: &[(String, SourceCounters)]) {
    if counters.iter().all(|(_, c)| c.objects.is_empty()) {
        return;
    }
    header(
        out,
        "meshdns_source_objects",
        "The cluster's objects read by --kube-source and served now, by kind.",
        "gauge",
    );
    for (source, c) in counters {
        for (kind, n) in &c.objects {
            let _ = writeln!(
                out,
                "meshdns_source_objects{{source=\"{}\",kind=\"{kind}\"}} {}",
                label_value(source),
                n.read
            );
        }
    }
    header(
        out,
        "meshdns_source_object_problems",
        "What is at fault in the cluster's objects read by --kube-source now (each logged, and an Event with --write-status), by kind and reason.",
        "gauge",
    );
    for (source, c) in counters {
        for (kind, n) in &c.objects {
            for reason in meshdns_sources::cluster::Reason::ALL {
                let _ = writeln!(
                    out,
                    "meshdns_source_object_problems{{source=\"{}\",kind=\"{kind}\",reason=\"{}\"}} {}",
                    label_value(source),
                    reason.as_str(),
                    n.problems.get(reason.as_str()).copied().unwrap_or(0)
                );
            }
        }
    }
}

fn pkarr(out: &mut String, store: &PkarrStore) {
    let c = &store.counters;
    header(
        out,
        "meshdns_pkarr_publishes_total",
        "pkarr publishes, by result (accepted, or the reason for refusing).",
        "counter",
    );
    let _ = writeln!(
        out,
        "meshdns_pkarr_publishes_total{{result=\"accepted\"}} {}",
        c.accepted.load(Relaxed)
    );
    for (reason, n) in c.rejected.lock().unwrap_or_else(|e| e.into_inner()).iter() {
        let _ = writeln!(
            out,
            "meshdns_pkarr_publishes_total{{result=\"{reason}\"}} {n}"
        );
    }
    header(
        out,
        "meshdns_pkarr_packets",
        "Signed packets stored.",
        "gauge",
    );
    let _ = writeln!(out, "meshdns_pkarr_packets {}", store.len());
    header(
        out,
        "meshdns_pkarr_expired_total",
        "Packets dropped for age.",
        "counter",
    );
    let _ = writeln!(
        out,
        "meshdns_pkarr_expired_total {}",
        c.expired.load(Relaxed)
    );
    header(
        out,
        "meshdns_pkarr_commits_total",
        "Commits of the pkarr store's database (each writes a batch of publishes, with those the journal held and the pushes answered since the last).",
        "counter",
    );
    let _ = writeln!(
        out,
        "meshdns_pkarr_commits_total {}",
        c.commits.load(Relaxed)
    );
    header(
        out,
        "meshdns_pkarr_synced_commits_total",
        "Of the pkarr store's commits, those synced to disk: the others (pushed packets, and publishes the journal holds) are made durable by the next synced one, at most a second later.",
        "counter",
    );
    let _ = writeln!(
        out,
        "meshdns_pkarr_synced_commits_total {}",
        c.synced_commits.load(Relaxed)
    );
    header(
        out,
        "meshdns_pkarr_commit_seconds_total",
        "Time the pkarr store spent deciding and committing batches (fsync included).",
        "counter",
    );
    let _ = writeln!(
        out,
        "meshdns_pkarr_commit_seconds_total {}",
        c.commit_micros.load(Relaxed) as f64 / 1e6
    );
    header(
        out,
        "meshdns_pkarr_journal_syncs_total",
        "Writes of clients' publishes to the pkarr publish journal, each synced before the publishes are answered (the next commit writes them into the database).",
        "counter",
    );
    let _ = writeln!(
        out,
        "meshdns_pkarr_journal_syncs_total {}",
        c.journal_syncs.load(Relaxed)
    );
    header(
        out,
        "meshdns_pkarr_journal_seconds_total",
        "Time the pkarr store spent writing and syncing its publish journal.",
        "counter",
    );
    let _ = writeln!(
        out,
        "meshdns_pkarr_journal_seconds_total {}",
        c.journal_micros.load(Relaxed) as f64 / 1e6
    );
    header(
        out,
        "meshdns_pkarr_stale_log_rows",
        "Change-log rows of replaced packets not removed yet (removed in rounds, in order).",
        "gauge",
    );
    let _ = writeln!(
        out,
        "meshdns_pkarr_stale_log_rows {}",
        c.stale_rows.load(Relaxed)
    );
}
