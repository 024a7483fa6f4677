//! ACME (RFC 8555): certificates for the TLS listeners from Let's Encrypt or any ACME CA,
//! validated by TLS-ALPN-01 (RFC 8737, on the HTTPS listener), HTTP-01 (on the HTTP
//! listener) or DNS-01 (a TXT record in meshdns's own answers, [`Dns01Records`]; wildcard
//! names need it), cached in the data directory and renewed before they expire.
//!
//! Written by hand rather than with an ACME crate: the ones on crates.io bring their own HTTP
//! stacks (reqwest), date and X.509 libraries; the protocol is a handful of signed JSON POSTs,
//! and everything it needs (ring for ES256, rcgen for the CSR and the challenge certificate,
//! hyper with rustls for HTTPS) is already in the tree.
//!
//! Layout of `<data-dir>/acme/`: `account.json` (the account key and its URL, per directory),
//! and per certificate `<first-domain>.crt` / `<first-domain>.key` (PEM, the key mode 0600).
//! A restart with a cached certificate that covers the domains and is not due for renewal
//! serves it at once and asks the CA for nothing.
//!
//! Decisions are pure ([`renew_at`], [`key_authorization`], [`dns01_value`], [`jose`]); [`Acme::run`] is the
//! loop that talks to the CA.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use bytes::Bytes;
use http_body_util::{BodyExt, Full};
use hyper::{Method, Request, StatusCode};
use hyper_util::client::legacy::Client;
use hyper_util::rt::TokioExecutor;
use ring::rand::SystemRandom;
use ring::signature::{ECDSA_P256_SHA256_FIXED_SIGNING, EcdsaKeyPair, KeyPair as _};
use serde::{Deserialize, Serialize};
use serde_json::{Value, json};
use tokio_util::sync::CancellationToken;
use tracing::{error, info};

use crate::tls::Certificates;

/// The most of a CA's reply that is read.
const MAX_BODY: usize = 1 << 20;

/// Let's Encrypt's production directory.
pub const LETS_ENCRYPT: &str = "https://acme-v02.api.letsencrypt.org/directory";

/// How the CA checks that we control the names.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Challenge {
    /// TLS-ALPN-01 (RFC 8737): the CA connects to port 443 (the `--https` listener).
    TlsAlpn01,
    /// HTTP-01: the CA fetches `http://<name>/.well-known/acme-challenge/<token>` on port 80
    /// (the `--http` listener).
    Http01,
    /// DNS-01 (RFC 8555 §8.4): the CA asks for the TXT records at `_acme-challenge.<name>`,
    /// which meshdns puts into its own answers ([`Dns01Records`]). The only challenge a
    /// wildcard name can be validated by.
    Dns01,
}

impl Challenge {
    /// The name ACME gives the challenge type.
    pub fn as_str(self) -> &'static str {
        match self {
            Challenge::TlsAlpn01 => "tls-alpn-01",
            Challenge::Http01 => "http-01",
            Challenge::Dns01 => "dns-01",
        }
    }
}

/// What to ask for and where.
#[derive(Debug, Clone)]
pub struct AcmeConfig {
    /// The names on the certificate (the first names the cached files).
    pub domains: Vec<String>,
    /// Contact URLs for the account (`mailto:…`).
    pub contact: Vec<String>,
    /// The CA's directory URL.
    pub directory: String,
    /// The challenge type answered.
    pub challenge: Challenge,
    /// Where the account and certificates are kept (`<data-dir>/acme`).
    pub cache: PathBuf,
    /// Extra trust anchors (PEM) for the CA's own HTTPS, beside the system's (a private CA,
    /// or a test CA such as pebble's).
    pub ca_roots: Option<PathBuf>,
}

/// HTTP-01 key authorizations being served, by token.
#[derive(Debug, Default)]
pub struct Http01Tokens(Mutex<HashMap<String, String>>);

impl Http01Tokens {
    /// The key authorization for `token`, while its challenge is open.
    pub fn get(&self, token: &str) -> Option<String> {
        self.0
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .get(token)
            .cloned()
    }

    fn set(&self, token: &str, key_authorization: Option<String>) {
        let mut m = self.0.lock().unwrap_or_else(|e| e.into_inner());
        match key_authorization {
            Some(k) => m.insert(token.to_string(), k),
            None => m.remove(token),
        };
    }
}

/// Where DNS-01 challenge records go: the answers of the server that runs the client.
pub trait Dns01Records: Send + Sync {
    /// Puts (`present`) or removes the TXT record `value` at `name` (`_acme-challenge.<domain>`).
    fn set(&self, name: &str, value: &str, present: bool);
    /// Why the record is not answered yet (`None`: it is, on this server and everywhere else
    /// the CA may ask).
    fn not_served<'a>(
        &'a self,
        name: &'a str,
        value: &'a str,
    ) -> std::pin::Pin<Box<dyn Future<Output = Option<String>> + Send + 'a>>;
}

/// How challenges are answered: HTTP-01 tokens on `--http`, DNS-01 records in the answers.
#[derive(Clone)]
pub struct Responders {
    /// The HTTP-01 key authorizations the HTTP listener serves.
    pub http01: Arc<Http01Tokens>,
    /// Where DNS-01 records go (`None`: DNS-01 not in use).
    pub dns01: Option<Arc<dyn Dns01Records>>,
}

/// How long a DNS-01 record may take to be answered before the order fails: the watcher
/// serves it within milliseconds, secondaries within their NOTIFY and IXFR.
pub const DNS01_PROPAGATION: Duration = Duration::from_secs(60);

/// The TXT value of a DNS-01 challenge (RFC 8555 §8.4): base64url of the key authorization's
/// SHA-256.
pub fn dns01_value(key_authorization: &str) -> String {
    jose::b64(ring::digest::digest(&ring::digest::SHA256, key_authorization.as_bytes()).as_ref())
}

/// When a certificate valid from `not_before` to `not_after` (unix seconds) is renewed: once a
/// third of its lifetime is left (30 days of Let's Encrypt's 90), as certbot does.
pub fn renew_at(not_before: u64, not_after: u64) -> u64 {
    not_after.saturating_sub(not_after.saturating_sub(not_before) / 3)
}

/// The key authorization of a challenge token (RFC 8555 §8.1).
pub fn key_authorization(token: &str, thumbprint: &str) -> String {
    format!("{token}.{thumbprint}")
}

/// JSON Web Signatures as ACME uses them: ES256, flattened JSON serialization.
pub mod jose {
    use super::*;

    /// base64url without padding (RFC 7515 §2).
    pub fn b64(bytes: &[u8]) -> String {
        data_encoding::BASE64URL_NOPAD.encode(bytes)
    }

    /// The JWK of a P-256 public key in uncompressed form (0x04 ‖ x ‖ y), members in the
    /// lexicographic order RFC 7638 hashes them in.
    pub fn jwk(public: &[u8]) -> Value {
        let (x, y) = public[1..].split_at(32);
        json!({"crv": "P-256", "kty": "EC", "x": b64(x), "y": b64(y)})
    }

    /// The JWK thumbprint (RFC 7638): SHA-256 over the canonical JSON, base64url.
    pub fn thumbprint(jwk: &Value) -> String {
        let canonical = format!(
            r#"{{"crv":"P-256","kty":"EC","x":"{}","y":"{}"}}"#,
            jwk["x"].as_str().unwrap_or(""),
            jwk["y"].as_str().unwrap_or("")
        );
        b64(ring::digest::digest(&ring::digest::SHA256, canonical.as_bytes()).as_ref())
    }

    /// A signed request body: `protected` header, `payload` (`None`: POST-as-GET, an empty
    /// payload), ES256 signature.
    pub fn sign(
        key: &EcdsaKeyPair,
        protected: &Value,
        payload: Option<&Value>,
    ) -> Result<Vec<u8>, String> {
        let protected = b64(protected.to_string().as_bytes());
        let payload = payload.map_or(String::new(), |p| b64(p.to_string().as_bytes()));
        let signing_input = format!("{protected}.{payload}");
        let sig = key
            .sign(&SystemRandom::new(), signing_input.as_bytes())
            .map_err(|_| "ES256 signing failed".to_string())?;
        let body =
            json!({"protected": protected, "payload": payload, "signature": b64(sig.as_ref())});
        Ok(body.to_string().into_bytes())
    }
}

/// The account as cached: which CA, the key, and the account URL (`kid`).
#[derive(Debug, Serialize, Deserialize)]
struct AccountFile {
    directory: String,
    /// PKCS#8 of the P-256 account key, base64.
    key: String,
    kid: String,
}

#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase")]
struct Directory {
    new_nonce: String,
    new_account: String,
    new_order: String,
}

/// One ACME problem or transport failure, with what was being done.
#[derive(Debug)]
pub struct AcmeError(String);

impl std::fmt::Display for AcmeError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for AcmeError {}

/// The certificates of a `--acme-ca` PEM file, each one rustls accepts as a trust anchor.
pub fn read_ca_roots(
    path: &std::path::Path,
) -> Result<Vec<rustls::pki_types::CertificateDer<'static>>, AcmeError> {
    use rustls::pki_types::pem::PemObject;
    let certs = rustls::pki_types::CertificateDer::pem_file_iter(path)
        .and_then(|it| it.collect::<Result<Vec<_>, _>>())
        .map_err(|e| err(format!("--acme-ca {}: {e}", path.display())))?;
    let mut roots = rustls::RootCertStore::empty();
    for c in &certs {
        roots
            .add(c.clone())
            .map_err(|e| err(format!("--acme-ca {}: {e}", path.display())))?;
    }
    Ok(certs)
}

fn err(what: impl std::fmt::Display) -> AcmeError {
    AcmeError(what.to_string())
}

type Https = Client<
    hyper_rustls::HttpsConnector<hyper_util::client::legacy::connect::HttpConnector>,
    Full<Bytes>,
>;

struct Response {
    status: StatusCode,
    location: Option<String>,
    nonce: Option<String>,
    body: Bytes,
}

impl Response {
    fn json(&self) -> Result<Value, AcmeError> {
        serde_json::from_slice(&self.body).map_err(|e| err(format!("not JSON ({e})")))
    }
}

/// Talks to one CA for one set of names, and keeps the certificate fresh.
pub struct Acme {
    config: AcmeConfig,
    http: Https,
    certs: Arc<Certificates>,
    responder: Responder,
}

/// What answers this client's challenges, picked once from its challenge type.
enum Responder {
    /// The challenge certificate, presented by `certs`.
    TlsAlpn01,
    /// Key authorizations served on the HTTP listener.
    Http01(Arc<Http01Tokens>),
    /// TXT records in the server's answers.
    Dns01(Arc<dyn Dns01Records>),
}

/// The account in use for a session of requests.
struct Session {
    key: EcdsaKeyPair,
    jwk: Value,
    kid: Option<String>,
    nonce: Option<String>,
    directory: Directory,
}

impl Acme {
    /// An ACME client installing into `certs`, answering challenges through `responders`.
    pub fn new(
        config: AcmeConfig,
        certs: Arc<Certificates>,
        responders: Responders,
    ) -> Result<Acme, AcmeError> {
        let responder = match config.challenge {
            Challenge::TlsAlpn01 => Responder::TlsAlpn01,
            Challenge::Http01 => Responder::Http01(responders.http01),
            Challenge::Dns01 => Responder::Dns01(
                responders
                    .dns01
                    .ok_or_else(|| err("DNS-01 needs somewhere to put its records"))?,
            ),
        };
        let mut roots = rustls::RootCertStore::empty();
        let native = rustls_native_certs::load_native_certs();
        for cert in native.certs {
            let _ = roots.add(cert);
        }
        if let Some(path) = &config.ca_roots {
            for c in read_ca_roots(path)? {
                roots
                    .add(c)
                    .map_err(|e| err(format!("--acme-ca {}: {e}", path.display())))?;
            }
        }
        let tls = rustls::ClientConfig::builder_with_provider(Arc::new(
            rustls::crypto::ring::default_provider(),
        ))
        .with_safe_default_protocol_versions()
        .map_err(err)?
        .with_root_certificates(roots)
        .with_no_client_auth();
        let connector = hyper_rustls::HttpsConnectorBuilder::new()
            .with_tls_config(tls)
            .https_only()
            .enable_http1()
            .build();
        let http = Client::builder(TokioExecutor::new()).build(connector);
        Ok(Acme {
            config,
            http,
            certs,
            responder,
        })
    }

    fn cert_paths(&self) -> (PathBuf, PathBuf) {
        let name = self.config.domains[0]
            .trim_end_matches('.')
            .replace('*', "_");
        (
            self.config.cache.join(format!("{name}.crt")),
            self.config.cache.join(format!("{name}.key")),
        )
    }

    /// Serves the cached certificate if it covers the domains; returns when it is due for
    /// renewal (`None`: nothing usable cached).
    pub fn load_cached(&self) -> Option<u64> {
        let (cert, key) = self.cert_paths();
        let files = crate::tls::CertFiles { cert, key };
        let (certified, _) = crate::tls::load_files(&files).ok()?;
        let (from, until) = crate::tls::leaf_validity(&certified)?;
        let leaf = certified.end_entity_cert().ok()?;
        if until <= crate::tls::unix_now() || !covers(leaf, &self.config.domains) {
            return None;
        }
        self.certs.install(certified);
        info!(domains = ?self.config.domains, not_after = until, "ACME certificate loaded from the cache");
        Some(renew_at(from, until))
    }

    /// Keeps a certificate in service until `shutdown`: the cached one while it is fresh,
    /// otherwise a new order; failures are retried with backoff (1 minute doubling to 1 hour,
    /// never past the renewal point) while the certificate in service, if any, keeps serving.
    /// `due` is what [`Acme::load_cached`] returned.
    pub async fn run(self, due: Option<u64>, shutdown: CancellationToken) {
        let mut due = due.unwrap_or(0);
        let mut backoff = Duration::from_secs(5);
        loop {
            let wait = Duration::from_secs(due.saturating_sub(crate::tls::unix_now()));
            // Sleep in slices so a wall-clock jump (suspend, NTP) is noticed within an hour.
            let slice = wait.min(Duration::from_secs(3600));
            if !slice.is_zero() {
                tokio::select! {
                    () = tokio::time::sleep(slice) => continue,
                    () = shutdown.cancelled() => return,
                }
            }
            let ordered = tokio::select! {
                r = self.order() => r,
                () = shutdown.cancelled() => return,
            };
            match ordered {
                Ok((from, until)) => {
                    self.certs.metrics.acme_order(true);
                    due = renew_at(from, until);
                    backoff = Duration::from_secs(5);
                    info!(domains = ?self.config.domains, not_after = until, renew_at = due, "ACME certificate issued and in service");
                }
                Err(e) => {
                    self.certs.metrics.acme_order(false);
                    error!(domains = ?self.config.domains, error = %e, retry_in = ?backoff, "ACME order failed; the certificate in service (if any) keeps serving");
                    due = crate::tls::unix_now() + backoff.as_secs();
                    backoff = (backoff * 2).min(Duration::from_secs(3600));
                }
            }
        }
    }

    async fn request(
        &self,
        method: Method,
        url: &str,
        body: Option<Vec<u8>>,
    ) -> Result<Response, AcmeError> {
        let mut req = Request::builder()
            .method(method)
            .uri(url)
            .header("User-Agent", concat!("meshdns/", env!("CARGO_PKG_VERSION")));
        if body.is_some() {
            req = req.header("Content-Type", "application/jose+json");
        }
        let req = req
            .body(Full::new(Bytes::from(body.unwrap_or_default())))
            .map_err(|e| err(format!("{url}: {e}")))?;
        let resp = tokio::time::timeout(Duration::from_secs(30), self.http.request(req))
            .await
            .map_err(|_| err(format!("{url}: no answer in 30 s")))?
            .map_err(|e| err(format!("{url}: {}", causes(&e))))?;
        let header = |name: &str| {
            resp.headers()
                .get(name)
                .and_then(|v| v.to_str().ok())
                .map(str::to_string)
        };
        let (status, location, nonce) = (resp.status(), header("location"), header("replay-nonce"));
        // A certificate chain or an ACME object is a few KiB; a CA sending more is refused.
        let body = http_body_util::Limited::new(resp.into_body(), MAX_BODY);
        let body = tokio::time::timeout(Duration::from_secs(30), body.collect())
            .await
            .map_err(|_| err(format!("{url}: body not read in 30 s")))?
            .map_err(|e| err(format!("{url}: {e} (at most {MAX_BODY} bytes are read)")))?
            .to_bytes();
        Ok(Response {
            status,
            location,
            nonce,
            body,
        })
    }

    /// A signed POST, retried on `badNonce` (RFC 8555 §6.5: the server's answer carries a
    /// fresh nonce to retry with).
    async fn post(
        &self,
        s: &mut Session,
        url: &str,
        payload: Option<&Value>,
    ) -> Result<Response, AcmeError> {
        for _ in 0..5 {
            let nonce = match s.nonce.take() {
                Some(n) => n,
                None => self
                    .request(Method::HEAD, &s.directory.new_nonce, None)
                    .await?
                    .nonce
                    .ok_or_else(|| err("newNonce gave no Replay-Nonce"))?,
            };
            let mut protected = json!({"alg": "ES256", "nonce": nonce, "url": url});
            match &s.kid {
                Some(kid) => protected["kid"] = json!(kid),
                None => protected["jwk"] = s.jwk.clone(),
            }
            let body = jose::sign(&s.key, &protected, payload).map_err(err)?;
            let resp = self.request(Method::POST, url, Some(body)).await?;
            s.nonce = resp.nonce.clone();
            if resp.status.is_success() {
                return Ok(resp);
            }
            let problem = resp.json().unwrap_or(Value::Null);
            if problem["type"] == "urn:ietf:params:acme:error:badNonce" {
                continue;
            }
            return Err(err(format!(
                "{url}: {} {}",
                resp.status,
                if problem.is_null() {
                    String::from_utf8_lossy(&resp.body).into_owned()
                } else {
                    format!(
                        "{} ({})",
                        problem["detail"].as_str().unwrap_or(""),
                        problem["type"].as_str().unwrap_or("")
                    )
                }
            )));
        }
        Err(err(format!("{url}: the CA refused five nonces in a row")))
    }

    /// The account: from the cache when it was made with this directory, otherwise new.
    async fn session(&self) -> Result<Session, AcmeError> {
        let directory: Directory = {
            let r = self
                .request(Method::GET, &self.config.directory, None)
                .await?;
            if !r.status.is_success() {
                return Err(err(format!(
                    "directory {}: {}",
                    self.config.directory, r.status
                )));
            }
            serde_json::from_slice(&r.body).map_err(|e| {
                err(format!(
                    "directory {}: not an ACME directory ({e})",
                    self.config.directory
                ))
            })?
        };
        let path = self.config.cache.join("account.json");
        let cached: Option<AccountFile> = std::fs::read(&path)
            .ok()
            .and_then(|b| serde_json::from_slice(&b).ok())
            .filter(|a: &AccountFile| a.directory == self.config.directory);
        let rng = SystemRandom::new();
        let pkcs8 = match &cached {
            Some(a) => data_encoding::BASE64
                .decode(a.key.as_bytes())
                .map_err(|e| err(format!("{}: bad key ({e})", path.display())))?,
            None => EcdsaKeyPair::generate_pkcs8(&ECDSA_P256_SHA256_FIXED_SIGNING, &rng)
                .map_err(|_| err("cannot generate an account key"))?
                .as_ref()
                .to_vec(),
        };
        let key = EcdsaKeyPair::from_pkcs8(&ECDSA_P256_SHA256_FIXED_SIGNING, &pkcs8, &rng)
            .map_err(|e| err(format!("{}: bad key ({e})", path.display())))?;
        let jwk = jose::jwk(key.public_key().as_ref());
        let mut s = Session {
            key,
            jwk,
            kid: None,
            nonce: None,
            directory,
        };
        if let Some(a) = cached {
            s.kid = Some(a.kid);
            return Ok(s);
        }
        let mut account = json!({"termsOfServiceAgreed": true});
        if !self.config.contact.is_empty() {
            account["contact"] = json!(self.config.contact);
        }
        let url = s.directory.new_account.clone();
        let resp = self.post(&mut s, &url, Some(&account)).await?;
        let kid = resp
            .location
            .ok_or_else(|| err("newAccount gave no account URL (Location)"))?;
        let file = AccountFile {
            directory: self.config.directory.clone(),
            key: data_encoding::BASE64.encode(&pkcs8),
            kid: kid.clone(),
        };
        write_private(
            &path,
            serde_json::to_string_pretty(&file).map_err(err)?.as_bytes(),
        )?;
        info!(account = %kid, directory = %self.config.directory, "ACME account registered");
        s.kid = Some(kid);
        Ok(s)
    }

    /// One order, start to finish: returns the new certificate's validity once it is in
    /// service and cached.
    async fn order(&self) -> Result<(u64, u64), AcmeError> {
        let mut s = self.session().await?;
        let identifiers: Vec<Value> = self
            .config
            .domains
            .iter()
            .map(|d| json!({"type": "dns", "value": d.trim_end_matches('.')}))
            .collect();
        let new_order = s.directory.new_order.clone();
        let resp = self
            .post(
                &mut s,
                &new_order,
                Some(&json!({"identifiers": identifiers})),
            )
            .await?;
        let order_url = resp
            .location
            .clone()
            .ok_or_else(|| err("newOrder gave no order URL"))?;
        let order = resp.json()?;
        let authorizations: Vec<String> = order["authorizations"]
            .as_array()
            .map(|a| {
                a.iter()
                    .filter_map(|v| v.as_str().map(String::from))
                    .collect()
            })
            .unwrap_or_default();
        for authz in &authorizations {
            self.authorize(&mut s, authz).await?;
        }
        // Finalize with a CSR for a fresh key.
        let key = rcgen::KeyPair::generate().map_err(err)?;
        let params = rcgen::CertificateParams::new(
            self.config
                .domains
                .iter()
                .map(|d| d.trim_end_matches('.').to_string())
                .collect::<Vec<_>>(),
        )
        .map_err(err)?;
        let csr = params.serialize_request(&key).map_err(err)?;
        let finalize = order["finalize"]
            .as_str()
            .ok_or_else(|| err("order without a finalize URL"))?
            .to_string();
        self.post(
            &mut s,
            &finalize,
            Some(&json!({"csr": jose::b64(csr.der())})),
        )
        .await?;
        let order = self
            .poll(&mut s, &order_url, "order", &["valid"], &["invalid"])
            .await?;
        let cert_url = order["certificate"]
            .as_str()
            .ok_or_else(|| err("valid order without a certificate URL"))?
            .to_string();
        let chain = self.post(&mut s, &cert_url, None).await?.body;
        // Checked like any certificate file before it is served or cached.
        let (cert_path, key_path) = self.cert_paths();
        let files = crate::tls::CertFiles {
            cert: cert_path.clone(),
            key: key_path.clone(),
        };
        let key_pem = key.serialize_pem();
        let certified = files
            .parse(&chain, key_pem.as_bytes())
            .map_err(|e| err(format!("the CA's certificate: {e}")))?;
        let (from, until) = crate::tls::leaf_validity(&certified)
            .ok_or_else(|| err("the CA's certificate has no readable validity"))?;
        write_private(&key_path, key_pem.as_bytes())?;
        std::fs::write(&cert_path, &chain)
            .map_err(|e| err(format!("cannot write {}: {e}", cert_path.display())))?;
        self.certs.install(certified);
        Ok((from, until))
    }

    /// Answers one authorization's challenge and waits for the CA to validate it.
    async fn authorize(&self, s: &mut Session, url: &str) -> Result<(), AcmeError> {
        let authz = self.post(s, url, None).await?.json()?;
        if authz["status"] == "valid" {
            return Ok(());
        }
        let domain = authz["identifier"]["value"]
            .as_str()
            .ok_or_else(|| err(format!("{url}: authorization without an identifier")))?
            .to_string();
        let wanted = self.config.challenge.as_str();
        let challenge = authz["challenges"]
            .as_array()
            .and_then(|cs| cs.iter().find(|c| c["type"] == wanted))
            .ok_or_else(|| {
                err(format!(
                    "{domain}: the CA offers no {wanted} challenge (try --acme-challenge with another type)"
                ))
            })?;
        let token = challenge["token"]
            .as_str()
            .ok_or_else(|| err(format!("{domain}: challenge without a token")))?
            .to_string();
        let challenge_url = challenge["url"]
            .as_str()
            .ok_or_else(|| err(format!("{domain}: challenge without a URL")))?
            .to_string();
        let key_auth = key_authorization(&token, &jose::thumbprint(&s.jwk));
        let txt = (format!("_acme-challenge.{domain}"), dns01_value(&key_auth));
        match &self.responder {
            Responder::TlsAlpn01 => {
                let cert = alpn_challenge_cert(&domain, &key_auth)?;
                self.certs.start_challenge(&domain, cert);
            }
            Responder::Http01(tokens) => tokens.set(&token, Some(key_auth)),
            Responder::Dns01(records) => records.set(&txt.0, &txt.1, true),
        }
        let validated = async {
            if let Responder::Dns01(records) = &self.responder {
                wait_served(records.as_ref(), &txt.0, &txt.1).await?;
            }
            self.post(s, &challenge_url, Some(&json!({}))).await?;
            self.poll(
                s,
                url,
                "authorization",
                &["valid"],
                &["invalid", "deactivated", "expired", "revoked"],
            )
            .await
        }
        .await;
        match &self.responder {
            Responder::TlsAlpn01 => self.certs.end_challenge(&domain),
            Responder::Http01(tokens) => tokens.set(&token, None),
            Responder::Dns01(records) => records.set(&txt.0, &txt.1, false),
        }
        validated?;
        info!(%domain, challenge = wanted, "ACME authorization valid");
        Ok(())
    }

    /// POST-as-GET `url` until its status is one of `done` (returned) or `failed` (an error
    /// with the CA's reason), for at most two minutes.
    async fn poll(
        &self,
        s: &mut Session,
        url: &str,
        what: &str,
        done: &[&str],
        failed: &[&str],
    ) -> Result<Value, AcmeError> {
        let deadline = tokio::time::Instant::now() + Duration::from_secs(120);
        let mut pause = Duration::from_millis(250);
        loop {
            let v = self.post(s, url, None).await?.json()?;
            let status = v["status"].as_str().unwrap_or("");
            if done.contains(&status) {
                return Ok(v);
            }
            if failed.contains(&status) {
                let why = v["error"]["detail"]
                    .as_str()
                    .or_else(|| {
                        v["challenges"]
                            .as_array()
                            .and_then(|cs| cs.iter().find_map(|c| c["error"]["detail"].as_str()))
                    })
                    .unwrap_or("no reason given");
                return Err(err(format!("{what} {url} is {status}: {why}")));
            }
            if tokio::time::Instant::now() > deadline {
                return Err(err(format!("{what} {url} still {status} after 2 minutes")));
            }
            tokio::time::sleep(pause).await;
            pause = (pause * 2).min(Duration::from_secs(5));
        }
    }
}

/// Waits until the DNS-01 record is answered (the CA is told only then: a query before would
/// find nothing, and a resolver could keep that for the SOA minimum), for at most
/// [`DNS01_PROPAGATION`].
async fn wait_served(records: &dyn Dns01Records, name: &str, value: &str) -> Result<(), AcmeError> {
    let deadline = tokio::time::Instant::now() + DNS01_PROPAGATION;
    let mut pause = Duration::from_millis(10);
    loop {
        let Some(why) = records.not_served(name, value).await else {
            return Ok(());
        };
        if tokio::time::Instant::now() > deadline {
            return Err(err(format!(
                "{name} TXT not answered after {} s: {why}",
                DNS01_PROPAGATION.as_secs()
            )));
        }
        tokio::time::sleep(pause).await;
        pause = (pause * 2).min(Duration::from_millis(500));
    }
}

/// The TLS-ALPN-01 certificate (RFC 8737 §3): self-signed for `domain`, with the critical
/// acmeIdentifier extension holding SHA-256 of the key authorization.
fn alpn_challenge_cert(
    domain: &str,
    key_auth: &str,
) -> Result<rustls::sign::CertifiedKey, AcmeError> {
    let digest = ring::digest::digest(&ring::digest::SHA256, key_auth.as_bytes());
    let mut params = rcgen::CertificateParams::new(vec![domain.to_string()]).map_err(err)?;
    params.custom_extensions = vec![rcgen::CustomExtension::new_acme_identifier(digest.as_ref())];
    let key = rcgen::KeyPair::generate().map_err(err)?;
    let cert = params.self_signed(&key).map_err(err)?;
    crate::tls::certified(cert.der().clone(), &key).map_err(err)
}

/// Whether the certificate names every domain (case-insensitively) in its SANs.
fn covers(leaf: &[u8], domains: &[String]) -> bool {
    let der = rustls::pki_types::CertificateDer::from(leaf);
    let Ok(cert) = webpki::EndEntityCert::try_from(&der) else {
        return false;
    };
    domains.iter().all(|d| {
        // A wildcard name is covered when a name it matches is.
        let d = d.trim_end_matches('.');
        let d = match d.strip_prefix("*.") {
            Some(parent) => format!("acme-wildcard-check.{parent}"),
            None => d.to_string(),
        };
        rustls::pki_types::ServerName::try_from(d)
            .is_ok_and(|name| cert.verify_is_valid_for_subject_name(&name).is_ok())
    })
}

/// An error with its sources (hyper's client errors say only "Connect" at the top).
fn causes(e: &dyn std::error::Error) -> String {
    let mut text = e.to_string();
    let mut source = e.source();
    while let Some(s) = source {
        text.push_str(": ");
        text.push_str(&s.to_string());
        source = s.source();
    }
    text
}

/// Writes `bytes` to `path` readable by the owner only (keys, the account).
fn write_private(path: &Path, bytes: &[u8]) -> Result<(), AcmeError> {
    use std::io::Write as _;
    use std::os::unix::fs::OpenOptionsExt as _;
    if let Some(dir) = path.parent() {
        std::fs::create_dir_all(dir)
            .map_err(|e| err(format!("cannot create {}: {e}", dir.display())))?;
    }
    let tmp = path.with_extension("tmp");
    // A leftover would keep its own mode: the mode below applies only to a new file.
    let _ = std::fs::remove_file(&tmp);
    let mut f = std::fs::OpenOptions::new()
        .write(true)
        .create(true)
        .truncate(true)
        .mode(0o600)
        .open(&tmp)
        .map_err(|e| err(format!("cannot write {}: {e}", tmp.display())))?;
    f.write_all(bytes)
        .and_then(|()| f.sync_all())
        .map_err(|e| err(format!("cannot write {}: {e}", tmp.display())))?;
    std::fs::rename(&tmp, path).map_err(|e| err(format!("cannot write {}: {e}", path.display())))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn renewal_is_due_with_a_third_of_the_lifetime_left() {
        // Let's Encrypt: 90 days, renewed 30 days before expiry.
        let day = 86_400;
        assert_eq!(renew_at(0, 90 * day), 60 * day);
        assert_eq!(renew_at(100, 100), 100);
        assert_eq!(
            renew_at(200, 100),
            100,
            "a nonsense validity renews at its end"
        );
    }

    #[test]
    fn thumbprint_matches_rfc_7638_example_shape() {
        // RFC 7638 §3.1 defines the input; check ours hashes exactly the canonical members by
        // comparing with the digest computed independently.
        let jwk = json!({"crv": "P-256", "kty": "EC", "x": "abc", "y": "def"});
        let want = jose::b64(
            ring::digest::digest(
                &ring::digest::SHA256,
                br#"{"crv":"P-256","kty":"EC","x":"abc","y":"def"}"#,
            )
            .as_ref(),
        );
        assert_eq!(jose::thumbprint(&jwk), want);
        assert_eq!(key_authorization("tok", "thumb"), "tok.thumb");
    }

    #[test]
    fn signatures_verify_with_the_jwk_key() {
        let rng = SystemRandom::new();
        let pkcs8 = EcdsaKeyPair::generate_pkcs8(&ECDSA_P256_SHA256_FIXED_SIGNING, &rng).unwrap();
        let key = EcdsaKeyPair::from_pkcs8(&ECDSA_P256_SHA256_FIXED_SIGNING, pkcs8.as_ref(), &rng)
            .unwrap();
        let protected = json!({"alg": "ES256", "nonce": "n", "url": "https://ca/x"});
        let body: Value =
            serde_json::from_slice(&jose::sign(&key, &protected, Some(&json!({"a": 1}))).unwrap())
                .unwrap();
        let input = format!(
            "{}.{}",
            body["protected"].as_str().unwrap(),
            body["payload"].as_str().unwrap()
        );
        let sig = data_encoding::BASE64URL_NOPAD
            .decode(body["signature"].as_bytes_str())
            .unwrap();
        let public = ring::signature::UnparsedPublicKey::new(
            &ring::signature::ECDSA_P256_SHA256_FIXED,
            key.public_key().as_ref(),
        );
        public.verify(input.as_bytes(), &sig).unwrap();
        // POST-as-GET: an empty payload.
        let get: Value =
            serde_json::from_slice(&jose::sign(&key, &protected, None).unwrap()).unwrap();
        assert_eq!(get["payload"], "");
    }

    trait BytesStr {
        fn as_bytes_str(&self) -> &[u8];
    }
    impl BytesStr for Value {
        fn as_bytes_str(&self) -> &[u8] {
            self.as_str().unwrap().as_bytes()
        }
    }

    #[test]
    fn the_alpn_challenge_certificate_carries_the_digest() {
        let cert = alpn_challenge_cert("a.example", "tok.thumb").unwrap();
        let der = cert.end_entity_cert().unwrap();
        let digest = ring::digest::digest(&ring::digest::SHA256, b"tok.thumb");
        // id-pe-acmeIdentifier 1.3.6.1.5.5.7.1.31, critical, OCTET STRING of the digest.
        let oid = [0x06, 0x08, 0x2b, 0x06, 0x01, 0x05, 0x05, 0x07, 0x01, 0x1f];
        let at = der
            .windows(oid.len())
            .position(|w| w == oid)
            .expect("the extension");
        let tail = &der[at + oid.len()..];
        assert_eq!(&tail[..3], &[0x01, 0x01, 0xff], "critical");
        let value = &tail[3..];
        assert_eq!(&value[..4], &[0x04, 0x22, 0x04, 0x20]);
        assert_eq!(&value[4..36], digest.as_ref());
        let plain =
            rcgen::generate_simple_self_signed(vec!["a.example".into(), "c.example".into()])
                .unwrap();
        let names = |n: &[&str]| n.iter().map(|s| s.to_string()).collect::<Vec<_>>();
        assert!(covers(
            plain.cert.der(),
            &names(&["a.example", "C.example."])
        ));
        assert!(!covers(
            plain.cert.der(),
            &names(&["a.example", "b.example"])
        ));
    }
}
