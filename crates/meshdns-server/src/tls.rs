//! TLS for the HTTPS and DNS-over-TLS listeners: the certificate in service, where it comes
//! from, and what the handshakes did.
//!
//! One [`Certificates`] is shared by every TLS listener. It is rustls's certificate resolver,
//! so a new certificate (a rotated file, an ACME renewal) is swapped in atomically and the next
//! handshake presents it; connections already open keep the one they started with. It also
//! answers TLS-ALPN-01 challenges (RFC 8737): a handshake offering only `acme-tls/1` gets the
//! challenge certificate for its SNI name, never the served one.
//!
//! Certificates come from PEM files ([`CertFiles`], re-read every half second by [`watch_files`],
//! so a kubelet `..data` symlink swap or a cert-manager rotation shows within a second; a bad
//! new pair keeps the old one serving, logged and counted), from [`self_signed`], or from ACME
//! (`meshdns::acme`, which calls [`Certificates::install`]).

use std::collections::HashMap;
use std::fmt::Write as _;
use std::io;
use std::path::PathBuf;
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use arc_swap::ArcSwapOption;
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer};
use rustls::server::{ClientHello, ResolvesServerCert};
use rustls::sign::CertifiedKey;
use tokio_util::sync::CancellationToken;
use tracing::{error, info};

/// The ALPN protocol of TLS-ALPN-01 challenges (RFC 8737 §6.2).
pub const ACME_TLS_ALPN: &[u8] = b"acme-tls/1";
/// The ALPN protocol of DNS over TLS (RFC 7858, registered in RFC 8310 §7.2 as "dot").
pub const DOT_ALPN: &[u8] = b"dot";

/// Which TLS listener a handshake was on.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Listener {
    /// `--https`: DoH, the pkarr relay and the operational endpoints.
    Https = 0,
    /// `--dot`: DNS over TLS.
    Dot = 1,
}

const LISTENERS: [&str; 2] = ["https", "dot"];

/// Handshake and certificate counters.
#[derive(Default)]
pub struct TlsMetrics {
    handshakes: [[AtomicU64; 2]; 2],
    reloads: [AtomicU64; 2],
    acme_orders: [AtomicU64; 2],
    not_after: AtomicU64,
}

impl TlsMetrics {
    /// Counts one handshake, completed or not.
    pub fn handshake(&self, listener: Listener, ok: bool) {
        self.handshakes[listener as usize][usize::from(!ok)].fetch_add(1, Relaxed);
    }

    /// Counts one ACME order, issued or failed.
    pub fn acme_order(&self, issued: bool) {
        self.acme_orders[usize::from(!issued)].fetch_add(1, Relaxed);
    }

    /// Appends the TLS metrics in Prometheus text format.
    pub fn render(&self, out: &mut String) {
        out.push_str(
            "# HELP meshdns_tls_handshakes_total TLS handshakes by listener and result.\n\
             # TYPE meshdns_tls_handshakes_total counter\n",
        );
        for (l, listener) in LISTENERS.iter().enumerate() {
            for (r, result) in ["ok", "failed"].iter().enumerate() {
                let n = self.handshakes[l][r].load(Relaxed);
                let _ = writeln!(
                    out,
                    "meshdns_tls_handshakes_total{{listener=\"{listener}\",result=\"{result}\"}} {n}"
                );
            }
        }
        out.push_str(
            "# HELP meshdns_tls_certificate_loads_total Certificates put in service (ok) or \
             rejected with the previous one kept (failed).\n\
             # TYPE meshdns_tls_certificate_loads_total counter\n",
        );
        for (r, result) in ["ok", "failed"].iter().enumerate() {
            let n = self.reloads[r].load(Relaxed);
            let _ = writeln!(
                out,
                "meshdns_tls_certificate_loads_total{{result=\"{result}\"}} {n}"
            );
        }
        out.push_str(
            "# HELP meshdns_acme_orders_total ACME certificate orders by result (failed ones \
             are retried with backoff).\n\
             # TYPE meshdns_acme_orders_total counter\n",
        );
        for (r, result) in ["issued", "failed"].iter().enumerate() {
            let n = self.acme_orders[r].load(Relaxed);
            let _ = writeln!(out, "meshdns_acme_orders_total{{result=\"{result}\"}} {n}");
        }
        out.push_str(
            "# HELP meshdns_tls_certificate_expiry_timestamp_seconds When the certificate in \
             service expires (notAfter), in unix seconds.\n\
             # TYPE meshdns_tls_certificate_expiry_timestamp_seconds gauge\n",
        );
        let _ = writeln!(
            out,
            "meshdns_tls_certificate_expiry_timestamp_seconds {}",
            self.not_after.load(Relaxed)
        );
    }
}

/// The longest a TLS handshake may take on any listener (never longer than the listener's idle
/// timeout). A handshake takes a round trip or two; a client that connects and says nothing
/// holds its place no longer than this, whatever the idle timeout of established connections.
pub const HANDSHAKE_TIMEOUT: Duration = Duration::from_secs(10);

/// The server side of a TLS handshake on `stream`, as every TLS listener runs it: bounded by
/// [`HANDSHAKE_TIMEOUT`] (or `idle`, if shorter), abandoned as soon as `close` is cancelled
/// (the connection was shed to make room for a newer one, or the server is shutting down), and
/// counted under `listener` when it completes, fails or times out. `Ok(None)`: abandoned.
pub(crate) async fn handshake<Io>(
    acceptor: &tokio_rustls::TlsAcceptor,
    stream: Io,
    idle: Duration,
    close: &CancellationToken,
    listener: Listener,
    metrics: &TlsMetrics,
) -> io::Result<Option<tokio_rustls::server::TlsStream<Io>>>
where
    Io: tokio::io::AsyncRead + tokio::io::AsyncWrite + Unpin,
{
    let limit = idle.min(HANDSHAKE_TIMEOUT);
    let done = tokio::select! {
        r = tokio::time::timeout(limit, acceptor.accept(stream)) => r,
        () = close.cancelled() => return Ok(None),
    };
    let result = match done {
        Ok(r) => r,
        Err(_) => Err(io::Error::new(
            io::ErrorKind::TimedOut,
            format!("TLS handshake not completed within {limit:?}"),
        )),
    };
    metrics.handshake(listener, result.is_ok());
    result.map(Some)
}

/// The certificate in service, and the TLS-ALPN-01 challenge certificates being answered.
#[derive(Default)]
pub struct Certificates {
    current: ArcSwapOption<CertifiedKey>,
    challenges: Mutex<HashMap<String, Arc<CertifiedKey>>>,
    /// What the handshakes and loads did.
    pub metrics: TlsMetrics,
}

impl std::fmt::Debug for Certificates {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Certificates")
            .field("serving", &self.current.load().is_some())
            .finish()
    }
}

impl Certificates {
    /// Puts `key` in service for every handshake from now on.
    pub fn install(&self, key: CertifiedKey) {
        let not_after = leaf_validity(&key).map_or(0, |(_, until)| until);
        self.metrics.not_after.store(not_after, Relaxed);
        self.metrics.reloads[0].fetch_add(1, Relaxed);
        self.current.store(Some(Arc::new(key)));
    }

    /// Counts a certificate that was not put in service (the previous one keeps serving).
    pub fn rejected(&self) {
        self.metrics.reloads[1].fetch_add(1, Relaxed);
    }

    /// When the certificate in service expires (unix seconds), if one is and it says.
    pub fn expires(&self) -> Option<u64> {
        self.current
            .load()
            .as_ref()
            .and_then(|k| leaf_validity(k))
            .map(|(_, until)| until)
    }

    /// Answers TLS-ALPN-01 for `domain` with `key` until [`Certificates::end_challenge`].
    pub fn start_challenge(&self, domain: &str, key: CertifiedKey) {
        let mut c = self.challenges.lock().unwrap_or_else(|e| e.into_inner());
        c.insert(domain.to_ascii_lowercase(), Arc::new(key));
    }

    /// Stops answering TLS-ALPN-01 for `domain`.
    pub fn end_challenge(&self, domain: &str) {
        let mut c = self.challenges.lock().unwrap_or_else(|e| e.into_inner());
        c.remove(&domain.to_ascii_lowercase());
    }

    /// A rustls server configuration presenting these certificates, offering `alpn`.
    pub fn server_config(self: &Arc<Self>, alpn: &[&[u8]]) -> io::Result<rustls::ServerConfig> {
        let provider = Arc::new(rustls::crypto::ring::default_provider());
        let mut config = rustls::ServerConfig::builder_with_provider(provider)
            .with_safe_default_protocol_versions()
            .map_err(io::Error::other)?
            .with_no_client_auth()
            .with_cert_resolver(self.clone());
        config.alpn_protocols = alpn.iter().map(|p| p.to_vec()).collect();
        Ok(config)
    }
}

impl ResolvesServerCert for Certificates {
    fn resolve(&self, hello: ClientHello<'_>) -> Option<Arc<CertifiedKey>> {
        let acme = hello
            .alpn()
            .is_some_and(|mut protocols| protocols.any(|p| p == ACME_TLS_ALPN));
        if acme {
            let name = hello.server_name()?.to_ascii_lowercase();
            let c = self.challenges.lock().unwrap_or_else(|e| e.into_inner());
            return c.get(&name).cloned();
        }
        self.current.load_full()
    }
}

/// Why a certificate could not be put in service.
#[derive(Debug, thiserror::Error)]
pub enum CertError {
    /// A file could not be read.
    #[error("cannot read {path}: {source}")]
    Read {
        /// The file.
        path: String,
        /// Why.
        source: io::Error,
    },
    /// A file was read but holds nothing usable.
    #[error("{path}: {why}")]
    Invalid {
        /// The file.
        path: String,
        /// What is wrong and what would be accepted.
        why: String,
    },
}

/// A certificate chain and its private key, PEM files (as cert-manager writes `tls.crt` and
/// `tls.key` into a Secret).
#[derive(Debug, Clone)]
pub struct CertFiles {
    /// The chain, leaf first.
    pub cert: PathBuf,
    /// The private key (PKCS#8, PKCS#1 or SEC1).
    pub key: PathBuf,
}

impl CertFiles {
    fn read(&self) -> Result<PemPair, CertError> {
        let read = |p: &PathBuf| {
            // A FIFO or device in a certificate's place would block the read (and the reload
            // thread) forever: only a regular file, or a symlink to one, is opened.
            let err = |source| CertError::Read {
                path: p.display().to_string(),
                source,
            };
            if !std::fs::metadata(p).map_err(err)?.is_file() {
                return Err(err(io::Error::new(
                    io::ErrorKind::InvalidInput,
                    "not a regular file; a certificate or key file must be a regular file or a symlink to one",
                )));
            }
            std::fs::read(p).map_err(err)
        };
        Ok((read(&self.cert)?, read(&self.key)?))
    }

    /// Reads and checks the pair: the chain parses, the key parses and is one rustls can sign
    /// with, and the key belongs to the leaf certificate.
    pub fn load(&self) -> Result<CertifiedKey, CertError> {
        let (cert, key) = self.read()?;
        self.parse(&cert, &key)
    }

    /// Checks a pair given as bytes (named by these paths in errors).
    pub fn parse(&self, cert: &[u8], key: &[u8]) -> Result<CertifiedKey, CertError> {
        let cert_path = self.cert.display().to_string();
        let key_path = self.key.display().to_string();
        let chain = CertificateDer::pem_slice_iter(cert)
            .collect::<Result<Vec<_>, _>>()
            .map_err(|e| CertError::Invalid {
                path: cert_path.clone(),
                why: format!("not a PEM certificate chain ({e})"),
            })?;
        if chain.is_empty() {
            return Err(CertError::Invalid {
                path: cert_path,
                why: "no CERTIFICATE block (expected a PEM chain, leaf first)".into(),
            });
        }
        let key = PrivateKeyDer::from_pem_slice(key).map_err(|e| CertError::Invalid {
            path: key_path.clone(),
            why: format!("no usable PEM private key ({e}; expected PKCS#8, RSA or EC)"),
        })?;
        let signer = rustls::crypto::ring::sign::any_supported_type(&key).map_err(|e| {
            CertError::Invalid {
                path: key_path.clone(),
                why: format!(
                    "unsupported private key ({e}; expected RSA, ECDSA P-256/P-384 or Ed25519)"
                ),
            }
        })?;
        let certified = CertifiedKey::new(chain, signer);
        certified.keys_match().map_err(|e| CertError::Invalid {
            path: key_path,
            why: format!("this key does not belong to the certificate in {cert_path} ({e})"),
        })?;
        Ok(certified)
    }
}

/// The bytes of a certificate file and its key file.
pub type PemPair = (Vec<u8>, Vec<u8>);

/// How often [`watch_files`] looks at the files.
pub const FILE_POLL: Duration = Duration::from_millis(500);

/// Follows `files` until `shutdown`: whenever their bytes change, the new pair is checked and
/// put in service, or rejected (logged and counted) with the old one kept. Polling, not inotify:
/// a mounted Secret changes by a symlink swap in the parent directory, and two small reads
/// twice a second cost nothing. `seen` is the pair already in service, so it is not loaded
/// twice.
pub async fn watch_files(
    certs: Arc<Certificates>,
    files: CertFiles,
    seen: Option<PemPair>,
    shutdown: CancellationToken,
) {
    let mut seen = seen;
    // A rotation written file by file can show a missing file or a key that does not match
    // for a moment: a failure is reported once it is still there at the next look.
    let mut failing: Option<String> = None;
    let mut reported = false;
    loop {
        tokio::select! {
            () = tokio::time::sleep(FILE_POLL) => {}
            () = shutdown.cancelled() => return,
        }
        let outcome = files.read().and_then(|bytes| {
            if seen.as_ref() == Some(&bytes) {
                return Ok(None);
            }
            let key = files.parse(&bytes.0, &bytes.1)?;
            let now = unix_now();
            if let Some((_, t)) = leaf_validity(&key).filter(|&(_, t)| t < now) {
                return Err(CertError::Invalid {
                    path: files.cert.display().to_string(),
                    why: format!("the certificate expired {} s ago (notAfter {t})", now - t),
                });
            }
            Ok(Some((key, bytes)))
        });
        match outcome {
            Ok(None) => {}
            Ok(Some((key, bytes))) => {
                certs.install(key);
                info!(cert = %files.cert.display(), not_after = certs.expires().unwrap_or(0), "TLS certificate reloaded");
                seen = Some(bytes);
            }
            Err(e) => {
                let text = e.to_string();
                if failing.as_deref() == Some(text.as_str()) {
                    if !reported {
                        certs.rejected();
                        error!(error = %text, "new TLS certificate rejected; the previous one keeps serving");
                        reported = true;
                    }
                } else {
                    failing = Some(text);
                    reported = false;
                }
                continue;
            }
        }
        failing = None;
        reported = false;
    }
}

/// Loads `files` for start-up: the key in service plus the bytes it came from.
pub fn load_files(files: &CertFiles) -> Result<(CertifiedKey, PemPair), CertError> {
    let bytes = files.read()?;
    let key = files.parse(&bytes.0, &bytes.1)?;
    Ok((key, bytes))
}

/// A self-signed certificate for `names` (DNS names or IP addresses), valid from now for
/// `days`, with a fresh P-256 key: for tests and first starts, never for clients that verify.
pub fn self_signed(names: &[String], days: u32) -> io::Result<CertifiedKey> {
    let key = rcgen::KeyPair::generate().map_err(io::Error::other)?;
    let mut params = rcgen::CertificateParams::new(names.to_vec()).map_err(io::Error::other)?;
    let now = std::time::SystemTime::now();
    params.not_before = now.into();
    params.not_after = (now + Duration::from_secs(u64::from(days) * 86_400)).into();
    params
        .distinguished_name
        .push(rcgen::DnType::CommonName, "meshdns self-signed");
    let cert = params.self_signed(&key).map_err(io::Error::other)?;
    certified(cert.der().clone(), &key)
}

/// Pairs a certificate with its rcgen key as rustls wants them.
pub fn certified(cert: CertificateDer<'static>, key: &rcgen::KeyPair) -> io::Result<CertifiedKey> {
    let der = PrivateKeyDer::Pkcs8(key.serialize_der().into());
    let signer = rustls::crypto::ring::sign::any_supported_type(&der).map_err(io::Error::other)?;
    Ok(CertifiedKey::new(vec![cert], signer))
}

/// The notAfter of an X.509 certificate, in unix seconds.
///
/// Written by hand: one field, a short walk over DER, instead of a full X.509 parser in the
/// dependency tree (rustls's webpki does not expose validity).
pub fn not_after(der: &[u8]) -> Option<u64> {
    validity(der).map(|(_, until)| until)
}

/// The notBefore and notAfter of `key`'s leaf certificate, in unix seconds.
pub fn leaf_validity(key: &CertifiedKey) -> Option<(u64, u64)> {
    validity(key.end_entity_cert().ok()?)
}

/// Seconds since the unix epoch.
pub fn unix_now() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs())
}

/// The notBefore and notAfter of an X.509 certificate, in unix seconds.
pub fn validity(der: &[u8]) -> Option<(u64, u64)> {
    let (_, cert, _) = tlv(der).filter(|t| t.0 == 0x30)?;
    let (_, tbs, _) = tlv(cert).filter(|t| t.0 == 0x30)?;
    let mut rest = tbs;
    if rest.first() == Some(&0xA0) {
        rest = tlv(rest)?.2; // [0] version
    }
    for _ in 0..3 {
        rest = tlv(rest)?.2; // serialNumber, signature, issuer
    }
    let (_, validity, _) = tlv(rest).filter(|t| t.0 == 0x30)?;
    let (before_tag, before, after) = tlv(validity)?;
    let (after_tag, after, _) = tlv(after)?;
    Some((der_time(before_tag, before)?, der_time(after_tag, after)?))
}

/// One DER tag-length-value: (tag, value, what follows).
fn tlv(b: &[u8]) -> Option<(u8, &[u8], &[u8])> {
    let tag = *b.first()?;
    let first = usize::from(*b.get(1)?);
    let (len, head) = if first < 0x80 {
        (first, 2)
    } else {
        let n = first & 0x7F;
        if n == 0 || n > 4 {
            return None;
        }
        let len = b
            .get(2..2 + n)?
            .iter()
            .fold(0usize, |acc, &x| (acc << 8) | usize::from(x));
        (len, 2 + n)
    };
    let end = head.checked_add(len)?;
    Some((tag, b.get(head..end)?, b.get(end..)?))
}

/// UTCTime (YYMMDDHHMMSSZ) or GeneralizedTime (YYYYMMDDHHMMSSZ) to unix seconds.
fn der_time(tag: u8, t: &[u8]) -> Option<u64> {
    let digits = |s: &[u8]| -> Option<u64> {
        s.iter().try_fold(0u64, |acc, &c| {
            c.is_ascii_digit().then(|| acc * 10 + u64::from(c - b'0'))
        })
    };
    let (year, rest) = match tag {
        0x17 => {
            let yy = digits(t.get(..2)?)?;
            (if yy >= 50 { 1900 + yy } else { 2000 + yy }, t.get(2..)?)
        }
        0x18 => (digits(t.get(..4)?)?, t.get(4..)?),
        _ => return None,
    };
    if rest.len() < 11 || rest[10] != b'Z' {
        return None;
    }
    let (month, day) = (digits(&rest[0..2])?, digits(&rest[2..4])?);
    let (h, m, s) = (
        digits(&rest[4..6])?,
        digits(&rest[6..8])?,
        digits(&rest[8..10])?,
    );
    if !(1..=12).contains(&month) || !(1..=31).contains(&day) || year < 1970 {
        return None;
    }
    Some(days_from_civil(year, month, day) * 86_400 + h * 3600 + m * 60 + s)
}

/// Days since 1970-01-01 of a proleptic Gregorian date (Howard Hinnant's algorithm).
fn days_from_civil(y: u64, m: u64, d: u64) -> u64 {
    let y = if m <= 2 { y - 1 } else { y };
    let era = y / 400;
    let yoe = y - era * 400;
    let mp = (m + 9) % 12;
    let doy = (153 * mp + 2) / 5 + d - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    era * 146_097 + doe - 719_468
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn not_after_reads_rcgen_certificates() {
        let key = rcgen::KeyPair::generate().unwrap();
        let mut params = rcgen::CertificateParams::new(vec!["a.example".into()]).unwrap();
        // UTCTime before 2050, GeneralizedTime from then on (RFC 5280 §4.1.2.5).
        params.not_after = rcgen::date_time_ymd(2031, 5, 17);
        let cert = params.self_signed(&key).unwrap();
        assert_eq!(not_after(cert.der()), Some(midnight(2031, 5, 17)));
        params.not_after = rcgen::date_time_ymd(2061, 1, 2);
        let cert = params.self_signed(&key).unwrap();
        assert_eq!(not_after(cert.der()), Some(midnight(2061, 1, 2)));
    }

    fn midnight(y: u64, m: u64, d: u64) -> u64 {
        days_from_civil(y, m, d) * 86_400
    }

    #[test]
    fn days_from_civil_matches_known_dates() {
        assert_eq!(days_from_civil(1970, 1, 1), 0);
        assert_eq!(days_from_civil(2000, 3, 1), 11_017);
        assert_eq!(days_from_civil(2026, 11, 23) * 86_400, 1_795_392_000);
    }

    #[test]
    fn not_after_rejects_garbage() {
        for bad in [
            &[][..],
            &[0x30],
            &[0x30, 0x84, 0xff, 0xff, 0xff, 0xff],
            &[0x30, 0x02, 0x30, 0x00],
        ] {
            assert_eq!(not_after(bad), None);
        }
    }

    fn write_pair(dir: &std::path::Path, cert: &str, key: &str) -> CertFiles {
        let files = CertFiles {
            cert: dir.join("tls.crt"),
            key: dir.join("tls.key"),
        };
        std::fs::write(&files.cert, cert).unwrap();
        std::fs::write(&files.key, key).unwrap();
        files
    }

    #[test]
    fn files_load_and_mismatches_are_named() {
        let dir = tempfile::tempdir().unwrap();
        let a = rcgen::generate_simple_self_signed(vec!["a.example".into()]).unwrap();
        let b = rcgen::generate_simple_self_signed(vec!["b.example".into()]).unwrap();
        let files = write_pair(dir.path(), &a.cert.pem(), &a.signing_key.serialize_pem());
        assert!(files.load().is_ok());

        let files = write_pair(dir.path(), &a.cert.pem(), &b.signing_key.serialize_pem());
        let e = files.load().unwrap_err().to_string();
        assert!(
            e.contains("tls.key") && e.contains("does not belong"),
            "{e}"
        );

        let files = write_pair(dir.path(), "hello", &a.signing_key.serialize_pem());
        let e = files.load().unwrap_err().to_string();
        assert!(e.contains("tls.crt") && e.contains("CERTIFICATE"), "{e}");

        let files = write_pair(dir.path(), &a.cert.pem(), "nope");
        let e = files.load().unwrap_err().to_string();
        assert!(e.contains("tls.key") && e.contains("private key"), "{e}");

        std::fs::remove_file(&files.key).unwrap();
        let e = files.load().unwrap_err().to_string();
        assert!(e.contains("cannot read") && e.contains("tls.key"), "{e}");
    }
}
