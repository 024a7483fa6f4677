//! `meshdns serve`: wires the sources, the DNS listeners and the HTTP endpoints together,
//! and stops them in order on a signal.

use std::sync::Arc;

use anyhow::{Context, Result};
use arc_swap::ArcSwap;
use meshdns_controller::configmap_source::ConfigMapKey;
use meshdns_server::http::{DohState, HttpLimits, HttpState, router, serve_http, serve_https};
use meshdns_server::relay::PkarrRelay;
use meshdns_server::tls::{CertFiles, Certificates, PemPair};
use meshdns_server::{DnsMetrics, Server, ServerConfig, SharedCatalog};
use meshdns_sources::secondary::{SecondaryFeed, SecondarySpec};
use meshdns_sources::{
    BytesFeed, FileKind, FileSources, PkarrConfig, PkarrStore, Poker, SourceConfig, SourceStatus,
    spawn_watcher,
};
use meshdns_zone::{AnswerConfig, Catalog};
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;
use tracing::{info, warn};

use crate::config::serve::TlsSource;
use crate::config::values::AcmeChallenge;
use crate::config::{ServeConfig, defaults};
use crate::pkarr_http::PkarrHttp;
use crate::{controller_cmd, telemetry, wait_for_signal};

fn key_names(keys: &[meshdns_xfr::Key]) -> String {
    if keys.is_empty() {
        return "none".into();
    }
    keys.iter()
        .map(|k| k.name.to_string())
        .collect::<Vec<_>>()
        .join(", ")
}

/// The certificates of the TLS listeners, loaded (`None` without a TLS listener), and what
/// keeps them fresh.
struct Tls {
    certs: Arc<Certificates>,
    renewal: Renewal,
}

/// What keeps the certificate in service fresh.
enum Renewal {
    /// Nothing (self-signed).
    None,
    /// PEM files, followed; with the bytes already loaded.
    Files(CertFiles, PemPair),
    /// An ACME client, and when the cached certificate is due (`None`: order at once).
    Acme(Box<meshdns_server::acme::Acme>, Option<u64>),
}

fn tls_certificates(
    settings: &ServeConfig,
    data_dir: Option<&std::path::Path>,
    http01: &Arc<meshdns_server::acme::Http01Tokens>,
) -> Result<Option<Tls>> {
    let Some(source) = settings.tls().map_err(anyhow::Error::msg)? else {
        return Ok(None);
    };
    let certs = Arc::new(Certificates::default());
    let self_signed = |certs: &Certificates| -> Result<()> {
        let names = ["localhost", "127.0.0.1", "::1"].map(String::from);
        certs.install(meshdns_server::tls::self_signed(
            &names,
            defaults::SELF_SIGNED_DAYS,
        )?);
        warn!(
            "serving a self-signed TLS certificate (--tls-self-signed): clients that verify will refuse it"
        );
        Ok(())
    };
    let renewal = match source {
        TlsSource::Files(files) => {
            let (key, seen) = meshdns_server::tls::load_files(&files)
                .context("--tls-cert/--tls-key: no certificate to serve")?;
            certs.install(key);
            info!(cert = %files.cert.display(), not_after = certs.expires().unwrap_or(0), "TLS certificate loaded");
            Renewal::Files(files, seen)
        }
        TlsSource::SelfSigned => {
            self_signed(&certs)?;
            Renewal::None
        }
        TlsSource::Acme {
            challenge,
            self_signed_first,
        } => {
            let data_dir = data_dir.context("ACME needs a data directory")?;
            let config = meshdns_server::acme::AcmeConfig {
                domains: settings
                    .acme_domains
                    .iter()
                    .map(|d| d.to_string().trim_end_matches('.').to_string())
                    .collect(),
                contact: settings
                    .acme_contacts
                    .iter()
                    .map(|c| {
                        if c.contains(':') {
                            c.clone()
                        } else {
                            format!("mailto:{c}")
                        }
                    })
                    .collect(),
                directory: settings
                    .acme_directory
                    .clone()
                    .unwrap_or_else(|| defaults::ACME_DIRECTORY.into()),
                challenge: match challenge {
                    AcmeChallenge::TlsAlpn01 => meshdns_server::acme::Challenge::TlsAlpn01,
                    AcmeChallenge::Http01 => meshdns_server::acme::Challenge::Http01,
                },
                cache: data_dir.join("acme"),
                ca_roots: settings.acme_ca.clone(),
            };
            let acme = meshdns_server::acme::Acme::new(config, certs.clone(), http01.clone())
                .map_err(|e| anyhow::anyhow!("{e}"))?;
            let due = acme.load_cached();
            if due.is_none() {
                if self_signed_first {
                    self_signed(&certs)?;
                }
                info!(domains = ?settings.acme_domains.iter().map(ToString::to_string).collect::<Vec<_>>(), "no cached ACME certificate: ordering one");
            }
            Renewal::Acme(Box::new(acme), due)
        }
    };
    Ok(Some(Tls { certs, renewal }))
}

/// Runs `serve` until SIGTERM or SIGINT.
pub async fn run(settings: ServeConfig) -> Result<()> {
    let catalog: SharedCatalog = Arc::new(ArcSwap::from_pointee(Catalog::empty()));
    let status = Arc::new(SourceStatus::default());
    let transfers_on = settings.transfers();
    let keys = match &settings.tsig_keys {
        Some(path) => {
            let text = std::fs::read_to_string(path)
                .with_context(|| format!("--tsig-keys: cannot read {}", path.display()))?;
            meshdns_xfr::parse_key_file(&path.display().to_string(), &text)?
        }
        None => Vec::new(),
    };
    let key = |name: &meshdns_zone::Name, flag: &str| {
        keys.iter()
            .find(|k| &k.name == name)
            .cloned()
            .with_context(|| {
                format!(
                    "{flag} {name}: no such key in --tsig-keys (keys: {})",
                    key_names(&keys)
                )
            })
    };
    for name in &settings.allow_transfer_keys {
        key(name, "--allow-transfer-key")?;
    }
    let notify_targets = settings
        .notify
        .iter()
        .map(|n| {
            Ok(meshdns_server::xfr::NotifyTarget {
                address: n.address.clone(),
                key: n.key.as_ref().map(|k| key(k, "--notify")).transpose()?,
            })
        })
        .collect::<Result<Vec<_>>>()?;
    let secondaries = settings
        .secondaries
        .iter()
        .map(|s| {
            let spec = SecondarySpec {
                origin: s.origin.clone(),
                primary: s.primary.clone(),
                key: s.key.as_ref().map(|k| key(k, "--secondary")).transpose()?,
            };
            Ok((SecondaryFeed::new(&s.origin), spec))
        })
        .collect::<Result<Vec<_>>>()?;
    // Serials, journals and transferred zones are kept in the data directory when there is
    // something to keep.
    let keeps = transfers_on
        || !settings.pkarr.is_empty()
        || !secondaries.is_empty()
        || !settings.acme_domains.is_empty();
    let serial_dir = settings
        .data_dir
        .clone()
        .or_else(|| keeps.then(defaults::data_dir));
    if let Some(dir) = &serial_dir {
        std::fs::create_dir_all(dir)
            .with_context(|| format!("cannot create the data directory {}", dir.display()))?;
    }
    let primary = Arc::new(meshdns_xfr::Primary::new(
        serial_dir.as_deref(),
        settings
            .ixfr_journal_records
            .unwrap_or(defaults::IXFR_JOURNAL_RECORDS),
        transfers_on,
    ));
    let pkarr = if settings.pkarr.is_empty() {
        None
    } else {
        let data_dir = settings.data_dir.clone().unwrap_or_else(defaults::data_dir);
        let mut config = PkarrConfig::new(settings.pkarr.clone(), Some(data_dir.clone()));
        config.max_age = settings.pkarr_max_age.unwrap_or(defaults::PKARR_MAX_AGE);
        config.put_per_minute = settings
            .pkarr_put_limit
            .unwrap_or(defaults::PKARR_PUT_LIMIT);
        config.put_burst = settings
            .pkarr_put_burst
            .unwrap_or(defaults::PKARR_PUT_BURST);
        config.commit_window = settings
            .pkarr_commit_window
            .unwrap_or(defaults::PKARR_COMMIT_WINDOW);
        let store = PkarrStore::open(config)
            .with_context(|| format!("cannot open the pkarr store in {}", data_dir.display()))?;
        if settings.http.is_none() && settings.https.is_none() {
            warn!(
                "--pkarr without --http or --https: stored packets are served, but no new ones can be published"
            );
        }
        Some(Arc::new(store))
    };
    let mut sources = FileSources::new(
        SourceConfig {
            files: settings.files(),
            zones: settings.declared_zones(),
            settings: settings.parse_settings(),
            poll_interval: settings.poll_interval.unwrap_or(defaults::POLL_INTERVAL),
            debounce: defaults::DEBOUNCE,
        },
        catalog.clone(),
        status.clone(),
    )
    .with_primary(primary.clone());
    let feed = settings
        .kubernetes()
        .map(|_| meshdns_sources::manifests::ManifestFeed::new("kubernetes"));
    if let Some(feed) = &feed {
        sources = sources.with_feed(feed.clone());
    }
    let write_status = settings.write_status.unwrap_or(false);
    if write_status && feed.is_none() {
        anyhow::bail!(
            "--write-status writes the status of a cluster's objects: it needs --kubernetes"
        );
    }
    // Signalled from the watcher thread when a snapshot serving new objects is live.
    let status_notify = Arc::new(tokio::sync::Notify::new());
    if let (Some(feed), true) = (&feed, write_status) {
        let notify = status_notify.clone();
        feed.on_served(move || notify.notify_one());
    }
    // ConfigMap keys read through the API: after the files, before the cluster's objects.
    let configmaps: Vec<(ConfigMapKey, Arc<BytesFeed>)> = settings
        .configmaps
        .iter()
        .map(|c| {
            let key = ConfigMapKey {
                namespace: c.namespace.clone(),
                name: c.name.clone(),
                key: c.key.clone(),
            };
            let feed = BytesFeed::new(&key.to_string());
            (key, feed)
        })
        .collect();
    for (_, feed) in &configmaps {
        sources = sources.with_bytes(feed.clone(), FileKind::Auto);
    }
    for (feed, _) in &secondaries {
        feed.load_kept(serial_dir.as_deref());
        sources = sources.with_secondary(feed.clone());
    }
    // Publishes give the pkarr origins new serials (and journal entries), stamped by the
    // watcher: a burst of publishes is one serial. The keys stored are known before the first
    // snapshot, so a restart with the same keys keeps the serial.
    let mut pkarr_poker = None;
    if let Some(store) = &pkarr {
        let poker = Arc::new(std::sync::OnceLock::<Poker>::new());
        let p = poker.clone();
        store.track_changes(move || {
            if let Some(p) = p.get() {
                p.poke();
            }
        });
        // Only transfers keep a second index of the keys: without them, no copy at start-up.
        if transfers_on {
            primary.load_published(store.overlay().entries().into_iter().collect());
        }
        sources = sources.with_pkarr(store.clone());
        pkarr_poker = Some(poker);
    }
    // The first snapshot is in place before the first socket is bound.
    sources.refresh();
    if let Err(reason) = status.readiness() {
        warn!(%reason, "starting without every records file; /readyz reports 503 until they load");
    }

    let http01 = Arc::new(meshdns_server::acme::Http01Tokens::default());
    let tls = tls_certificates(&settings, serial_dir.as_deref(), &http01)?;
    let certs = tls.as_ref().map(|t| t.certs.clone());
    let metrics = Arc::new(DnsMetrics::default());
    let transfers = transfers_on.then(|| {
        Arc::new(meshdns_server::xfr::Transfers {
            primary: primary.clone(),
            policy: meshdns_xfr::Policy {
                keys: keys.clone(),
                allowed_keys: settings.allow_transfer_keys.clone(),
            },
            allow: settings.allow_transfer.clone(),
            metrics: Default::default(),
        })
    });
    let answer = AnswerConfig {
        edns_payload: settings.edns_payload.unwrap_or(defaults::EDNS_PAYLOAD),
    };
    let mut server_config = ServerConfig {
        listen: settings.listen.clone(),
        udp_sockets: settings.udp_sockets.unwrap_or_else(defaults::cores),
        tcp_idle_timeout: settings
            .tcp_idle_timeout
            .unwrap_or(defaults::TCP_IDLE_TIMEOUT),
        tcp_max_connections: settings
            .tcp_max_connections
            .unwrap_or(defaults::TCP_MAX_CONNECTIONS),
        answer,
        transfers: transfers.clone(),
        notify: (!secondaries.is_empty()).then(|| {
            let feeds: Vec<Arc<SecondaryFeed>> =
                secondaries.iter().map(|(f, _)| f.clone()).collect();
            meshdns_server::NotifyHandler(Arc::new(move |packet, peer| {
                meshdns_sources::secondary::answer_notify(&feeds, packet, peer)
            }))
        }),
        dot: settings.dot.clone(),
        tls: certs.clone(),
        rrl: Some(settings.rrl_rate.unwrap_or(defaults::RRL_RATE))
            .filter(|&rate| rate > 0)
            .map(|rate| {
                info!(rate, "response rate limiting on (UDP)");
                Arc::new(meshdns_server::rrl::Rrl::new(
                    meshdns_server::rrl::RrlConfig {
                        rate,
                        slip: settings.rrl_slip.unwrap_or(defaults::RRL_SLIP),
                        ipv4_prefix: settings
                            .rrl_ipv4_prefix
                            .unwrap_or(defaults::RRL_IPV4_PREFIX),
                        ipv6_prefix: settings
                            .rrl_ipv6_prefix
                            .unwrap_or(defaults::RRL_IPV6_PREFIX),
                        exempt: settings.rrl_exempt.clone(),
                    },
                ))
            }),
        ..ServerConfig::default()
    };
    let server = if !settings.listen.is_empty() {
        Server::bind(server_config, catalog.clone(), metrics.clone()).await?
    } else {
        // The default listens on IPv6 too where the host has it.
        let [v4, v6] = defaults::listen();
        server_config.listen = vec![v4, v6];
        match Server::bind(server_config.clone(), catalog.clone(), metrics.clone()).await {
            Ok(s) => s,
            // IPv6 is optional. Any other bind error (a DoT port in use) fails the retry too.
            Err(e) => {
                warn!(error = %e, "cannot listen with {v6}; trying IPv4 only");
                server_config.listen = vec![v4];
                Server::bind(server_config, catalog.clone(), metrics.clone()).await?
            }
        }
    };

    let watcher = spawn_watcher(sources).context("cannot start the file watcher")?;
    let shutdown = CancellationToken::new();
    let tasks = TaskTracker::new();
    if let Some(poker) = &pkarr_poker {
        let _ = poker.set(watcher.poker());
    }
    let secondary_feeds: Vec<Arc<SecondaryFeed>> =
        secondaries.iter().map(|(f, _)| f.clone()).collect();
    for (feed, spec) in secondaries {
        let poker = watcher.poker();
        feed.on_change(move || poker.poke_now());
        info!(zone = %spec.origin, primary = %spec.primary, "secondary zone");
        tasks.spawn(meshdns_sources::secondary::run(
            feed,
            spec,
            serial_dir.clone(),
            shutdown.clone(),
        ));
    }
    if let Some(t) = &transfers {
        for target in notify_targets {
            info!(target = %target.address, "sending NOTIFY on every serial change");
            tasks.spawn(meshdns_server::xfr::notify_loop(
                t.clone(),
                target,
                shutdown.clone(),
            ));
        }
    }
    if !configmaps.is_empty() {
        let client = controller_cmd::client(settings.kubeconfig.as_deref())
            .await
            .context("--configmap")?;
        for (key, feed) in configmaps {
            let poker = watcher.poker();
            info!(source = %key, "watching");
            tasks.spawn(meshdns_controller::configmap_source::watch(
                client.clone(),
                key,
                feed,
                move || poker.poke(),
                shutdown.clone(),
            ));
        }
    }
    if let (Some(feed), Some(namespace)) = (feed, settings.kubernetes()) {
        let namespace = namespace.map(str::to_string);
        let client = controller_cmd::client(settings.kubeconfig.as_deref())
            .await
            .context("--kubernetes")?;
        let poker = watcher.poker();
        info!(
            namespace = namespace.as_deref().unwrap_or("(all)"),
            "watching DNSZones and DNSRecordSets"
        );
        if write_status {
            let election = meshdns_controller::leader::Election::new(
                &defaults::namespace(),
                "meshdns-serve-status",
            );
            info!(lease = %election.name, namespace = %election.namespace, "status writing on");
            tasks.spawn(meshdns_controller::status_writer::write_statuses(
                client.clone(),
                feed.clone(),
                status_notify,
                election,
                shutdown.clone(),
            ));
        }
        tasks.spawn(meshdns_controller::dns_source::reflect(
            client,
            namespace,
            feed,
            move || poker.poke(),
            shutdown.clone(),
        ));
    }
    let state = HttpState {
        metrics: {
            let (metrics, catalog, status, pkarr, transfers, secondaries, certs) = (
                metrics.clone(),
                catalog.clone(),
                status.clone(),
                pkarr.clone(),
                transfers.clone(),
                secondary_feeds.clone(),
                certs.clone(),
            );
            Arc::new(move || {
                telemetry::render(
                    &metrics,
                    &catalog.load(),
                    &status,
                    pkarr.as_deref(),
                    transfers.as_deref(),
                    &secondaries,
                    certs.as_deref(),
                )
            })
        },
        readiness: {
            let status = status.clone();
            Arc::new(move || status.readiness())
        },
        pkarr: pkarr
            .clone()
            .map(|store| Arc::new(PkarrHttp { store }) as Arc<dyn PkarrRelay>),
        trusted_proxies: settings.trusted_proxies.clone().into(),
        acme_http01: (settings.acme_challenge == Some(AcmeChallenge::Http01))
            .then(|| http01.clone()),
        doh: settings.doh.unwrap_or(defaults::DOH).then(|| DohState {
            catalog: catalog.clone(),
            metrics: metrics.clone(),
            answer,
        }),
    };
    let limits = HttpLimits {
        max_connections: settings
            .http_max_connections
            .unwrap_or(defaults::HTTP_MAX_CONNECTIONS),
        idle_timeout: settings
            .http_idle_timeout
            .unwrap_or(defaults::HTTP_IDLE_TIMEOUT),
    };
    let http_addr = match settings.http {
        Some(addr) => Some(
            serve_http(
                addr,
                router(state.clone(), true),
                limits,
                metrics.clone(),
                shutdown.clone(),
                &tasks,
            )
            .await
            .with_context(|| format!("cannot serve HTTP on {addr}"))?,
        ),
        None => None,
    };
    let https_addr = match (settings.https, &certs) {
        (Some(addr), Some(certs)) => Some(
            serve_https(
                addr,
                router(state, false),
                certs.clone(),
                limits,
                metrics.clone(),
                shutdown.clone(),
                &tasks,
            )
            .await
            .with_context(|| format!("cannot serve HTTPS on {addr}"))?,
        ),
        _ => None,
    };
    // Renewal starts once the listeners a CA validates through are up.
    if let Some(tls) = tls {
        match tls.renewal {
            Renewal::None => {}
            Renewal::Files(files, seen) => {
                tasks.spawn(meshdns_server::tls::watch_files(
                    tls.certs,
                    files,
                    Some(seen),
                    shutdown.clone(),
                ));
            }
            Renewal::Acme(acme, due) => {
                tasks.spawn(acme.run(due, shutdown.clone()));
            }
        }
    }
    let dns: Vec<String> = server.udp_addrs().iter().map(ToString::to_string).collect();
    let dot: Vec<String> = server.dot_addrs().iter().map(ToString::to_string).collect();
    let shown = |a: Option<std::net::SocketAddr>| a.map_or("off".to_string(), |a| a.to_string());
    info!(
        dns = %dns.join(","),
        http = %shown(http_addr),
        https = %shown(https_addr),
        dot = %if dot.is_empty() { "off".to_string() } else { dot.join(",") },
        "meshdns ready"
    );

    wait_for_signal().await;
    info!("shutting down");
    server.shutdown();
    shutdown.cancel();
    server.join().await;
    tasks.close();
    tasks.wait().await;
    tokio::task::spawn_blocking(move || watcher.stop())
        .await
        .ok();
    info!("stopped");
    Ok(())
}
