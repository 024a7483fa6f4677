//! The certificate of the TLS listeners, from the plan, and what keeps it fresh.

use std::sync::Arc;

use anyhow::Result;
use meshdns_server::SharedCatalog;
use meshdns_server::acme::{Acme, Dns01Records, Responders};
use meshdns_server::tls::{CertFiles, Certificates, PemPair};
use meshdns_sources::challenges::{Dns01Challenges, served};
use meshdns_zone::Name;
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
}

/// Where the ACME client puts its DNS-01 records: this server's own answers.
pub fn own_answers(store: Arc<Dns01Challenges>, catalog: SharedCatalog) -> Arc<dyn Dns01Records> {
    Arc::new(OwnAnswers { store, catalog })
}

impl Dns01Records for OwnAnswers {
    fn set(&self, name: &str, value: &str, present: bool) {
        // The CA's identifier, checked by the plan as a --acme-domain: a valid name.
        if let Ok(name) = format!("{name}.").parse::<Name>() {
            self.store.set(name, value.to_string(), present);
        }
    }

    fn not_served(&self, name: &str, value: &str) -> Option<String> {
        let Ok(at) = format!("{name}.").parse::<Name>() else {
            return Some(format!("{name} is not a domain name"));
        };
        let catalog = self.catalog.load();
        if served(&catalog, &at, value) {
            return None;
        }
        Some(match catalog.find_zone(at.wire()) {
            None => {
                format!("no zone served here holds {at} (serve its zone to validate by DNS-01)")
            }
            Some(zone) => format!(
                "not in zone {} (a zone from a zone file or a secondary keeps its own records; the log says why)",
                zone.origin()
            ),
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
