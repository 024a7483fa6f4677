//! The certificate of the TLS listeners, from the plan, and what keeps it fresh.

use std::net::SocketAddr;
use std::pin::Pin;
use std::sync::Arc;
use std::time::Duration;

use anyhow::Result;
use meshdns_server::SharedCatalog;
use meshdns_server::acme::{Acme, Dns01Records, Responders};
use meshdns_server::tls::{CertFiles, Certificates, PemPair};
use meshdns_sources::challenges::{Dns01Challenges, record as challenge_record, served};
use meshdns_xfr::probe;
use meshdns_zone::{Name, RType};
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;
use tracing::{info, warn};

use super::plan::TlsPlan;
use crate::config::defaults;

/// The certificates in service, and what keeps them fresh.
pub struct Tls {
    pub certs: Arc<Certificates>,
    renewal: Renewal,
}

/// What keeps the certificate in service fresh.
enum Renewal {
    /// Nothing (self-signed).
    None,
    /// PEM files, followed; with the bytes already loaded.
    Files(CertFiles, PemPair),
    /// An ACME client, and when the cached certificate is due (`None`: order at once).
    Acme(Box<Acme>, Option<u64>),
}

fn self_signed(certs: &Certificates) -> Result<()> {
    let names = ["localhost", "127.0.0.1", "::1"].map(String::from);
    certs.install(meshdns_server::tls::self_signed(
        &names,
        defaults::SELF_SIGNED_DAYS,
    )?);
    warn!(
        "serving a self-signed TLS certificate (--tls-self-signed): clients that verify will refuse it"
    );
    Ok(())
}

/// The certificate to serve first (`None` without a TLS listener).
pub fn certificates(plan: Option<TlsPlan>, responders: Responders) -> Result<Option<Tls>> {
    let Some(plan) = plan else {
        return Ok(None);
    };
    let certs = Arc::new(Certificates::default());
    let renewal = match plan {
        TlsPlan::Files(files, key, seen) => {
            certs.install(*key);
            info!(cert = %files.cert.display(), not_after = certs.expires().unwrap_or(0), "TLS certificate loaded");
            Renewal::Files(files, seen)
        }
        TlsPlan::SelfSigned => {
            self_signed(&certs)?;
            Renewal::None
        }
        TlsPlan::Acme(config, self_signed_first) => {
            let domains = config.domains.clone();
            let acme = Acme::new(*config, certs.clone(), responders)
                .map_err(|e| anyhow::anyhow!("{e}"))?;
            let due = acme.load_cached();
            if due.is_none() {
                if self_signed_first {
                    self_signed(&certs)?;
                }
                info!(?domains, "no cached ACME certificate: ordering one");
            }
            Renewal::Acme(Box::new(acme), due)
        }
    };
    Ok(Some(Tls { certs, renewal }))
}

/// DNS-01 records put into the watcher's challenge store, and looked for in the answers
/// served.
struct OwnAnswers {
    store: Arc<Dns01Challenges>,
    catalog: SharedCatalog,
    /// The secondaries NOTIFYd of changes (`--notify`), which the CA may ask too.
    secondaries: Vec<String>,
}

/// Where the ACME client puts its DNS-01 records: this server's own answers, followed by the
/// `secondaries` it NOTIFYs.
pub fn own_answers(
    store: Arc<Dns01Challenges>,
    catalog: SharedCatalog,
    secondaries: Vec<String>,
) -> Arc<dyn Dns01Records> {
    Arc::new(OwnAnswers {
        store,
        catalog,
        secondaries,
    })
}

/// How long a secondary has to answer one probe.
const PROBE_TIMEOUT: Duration = Duration::from_secs(1);

/// Whether every server `address` (host:port) names answers `value` at `name` now: a name
/// may stand for several secondaries (a headless Service), as it does for NOTIFY.
async fn probe(address: &str, name: &Name, value: &str) -> Result<bool, String> {
    let targets: Vec<SocketAddr> = tokio::net::lookup_host(address)
        .await
        .map_err(|e| e.to_string())?
        .collect();
    if targets.is_empty() {
        return Err("no address".into());
    }
    for to in targets {
        if !probe_one(to, name, value)
            .await
            .map_err(|e| format!("{to}: {e}"))?
        {
            return Ok(false);
        }
    }
    Ok(true)
}

/// Whether the server at `to` answers `value` at `name` now.
async fn probe_one(to: SocketAddr, name: &Name, value: &str) -> Result<bool, String> {
    let local: SocketAddr = if to.is_ipv4() {
        ([0, 0, 0, 0], 0).into()
    } else {
        (std::net::Ipv6Addr::UNSPECIFIED, 0).into()
    };
    let socket = tokio::net::UdpSocket::bind(local)
        .await
        .map_err(|e| e.to_string())?;
    let id = meshdns_xfr::message::random_id();
    let mut wanted = Vec::new();
    challenge_record(name, value).data.to_wire(&mut wanted);
    socket
        .send_to(&probe::request(id, name, RType::TXT), to)
        .await
        .map_err(|e| e.to_string())?;
    let mut buf = vec![0; 65535];
    tokio::time::timeout(PROBE_TIMEOUT, async {
        loop {
            let (n, from) = socket
                .recv_from(&mut buf)
                .await
                .map_err(|e| e.to_string())?;
            // Anything else (a stray or forged datagram) is read past.
            if from == to
                && let Ok(held) = probe::answers(&buf[..n], id, name, RType::TXT, &wanted)
            {
                return Ok(held);
            }
        }
    })
    .await
    .map_err(|_| "no reply within a second".to_string())?
}

impl Dns01Records for OwnAnswers {
    fn set(&self, name: &str, value: &str, present: bool) {
        // The CA's identifier, checked by the plan as a --acme-domain: a valid name.
        if let Ok(name) = format!("{name}.").parse::<Name>() {
            self.store.set(name, value.to_string(), present);
        }
    }

    fn not_served<'a>(
        &'a self,
        name: &'a str,
        value: &'a str,
    ) -> Pin<Box<dyn Future<Output = Option<String>> + Send + 'a>> {
        Box::pin(async move {
            let Ok(at) = format!("{name}.").parse::<Name>() else {
                return Some(format!("{name} is not a domain name"));
            };
            {
                let catalog = self.catalog.load();
                if !served(&catalog, &at, value) {
                    return Some(match catalog.find_zone(at.wire()) {
                        None => format!(
                            "no zone served here holds {at} (serve its zone to validate by DNS-01)"
                        ),
                        Some(zone) => format!(
                            "not in zone {} (a zone from a zone file or a secondary keeps its own \
                             records; the log says why)",
                            zone.origin()
                        ),
                    });
                }
            }
            for secondary in &self.secondaries {
                match probe(secondary, &at, value).await {
                    Ok(true) => {}
                    Ok(false) => {
                        return Some(format!(
                            "the secondary {secondary} (--notify) does not answer it yet"
                        ));
                    }
                    Err(e) => return Some(format!("the secondary {secondary} (--notify): {e}")),
                }
            }
            None
        })
    }
}

impl Tls {
    /// Follows the files or runs the ACME client until `shutdown`.
    pub fn spawn_renewal(self, tracker: &TaskTracker, shutdown: &CancellationToken) {
        match self.renewal {
            Renewal::None => {}
            Renewal::Files(files, seen) => {
                tracker.spawn(meshdns_server::tls::watch_files(
                    self.certs,
                    files,
                    Some(seen),
                    shutdown.clone(),
                ));
            }
            Renewal::Acme(acme, due) => {
                tracker.spawn(acme.run(due, shutdown.clone()));
            }
        }
    }
}
