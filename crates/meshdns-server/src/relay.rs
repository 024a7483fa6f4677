//! The pkarr relay over HTTP (pkarr's `design/relays.md`; the API iroh-dns-server serves).
//!
//! - `PUT /pkarr/<z32>` with the relay payload (`signature ‖ timestamp ‖ DNS message`): 204 once
//!   the packet is durable and served; 400 with the reason for a bad key or payload (or a
//!   timestamp further ahead than `--pkarr-max-future`); 409 when not
//!   newer than the stored packet; with `If-Match: <timestamp>` (compare-and-swap), 412 when the
//!   stored packet's timestamp is another; 429 over the client's rate; 503 when the store's queue
//!   is full.
//! - `GET /pkarr/<z32>`: 200 with `application/x-pkarr-signed-packet`, `Last-Modified` (the
//!   packet's timestamp; left out for one past year 9999, which HTTP cannot date) and
//!   `Cache-Control: public, max-age=<smallest TTL in the packet>`; 304 when
//!   `If-Modified-Since` is not older than the packet; 404 when unknown.
//! - CORS for browser publishers: every response allows any origin, and `OPTIONS` answers the
//!   preflight (methods GET, PUT; headers Content-Type, If-Match, If-Modified-Since).
//! - Every response names the replica that answered in `Meshdns-Nsid` when the server has an
//!   NSID ([`PkarrRelay::nsid`]; `--nsid`), as `/dns-query` does.
//!
//! The client address (for the rate limit and logs) is the TCP peer, unless the peer is a
//! trusted proxy ([`Cidr`], `--trusted-proxy`): then it is the last address in `Forwarded`
//! (RFC 7239), or else `X-Forwarded-For`, that is not itself a trusted proxy. From any other
//! peer those headers are ignored, so a client cannot choose its own bucket.

use std::future::Future;
use std::net::{IpAddr, SocketAddr};
use std::pin::Pin;
use std::sync::Arc;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use axum::body::Bytes;
use axum::extract::{ConnectInfo, Path, State};
use axum::http::{HeaderMap, HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};

use meshdns_zone::Cidr;

/// What the relay's routes need: the store behind it and whose forwarding headers count.
#[derive(Clone)]
pub struct RelayState {
    /// The relay.
    pub relay: Arc<dyn PkarrRelay>,
    /// Peers whose `Forwarded` / `X-Forwarded-For` name the client.
    pub trusted_proxies: Arc<[Cidr]>,
}

/// `/pkarr/<key>`: `GET`, `PUT` and the CORS preflight, with their own state.
pub fn routes<S>(state: RelayState) -> axum::Router<S>
where
    S: Clone + Send + Sync + 'static,
{
    let nsid = state.relay.nsid();
    let routes = axum::Router::new()
        .route(
            "/pkarr/{key}",
            axum::routing::get(get).put(put).options(preflight),
        )
        .with_state(state);
    match nsid {
        // Every response, refusals and the preflight included.
        Some(nsid) => routes.layer(axum::middleware::map_response(
            move |mut response: Response| {
                response
                    .headers_mut()
                    .insert(crate::NSID_HEADER, nsid.clone());
                std::future::ready(response)
            },
        )),
        None => routes,
    }
}

/// The media type of pkarr relay payloads.
pub const PKARR_PACKET: &str = "application/x-pkarr-signed-packet";

/// A refusal: the HTTP status and the reason given in the body.
pub type Refusal = (StatusCode, String);

/// What `/pkarr/<key>` stores into and serves from.
pub trait PkarrRelay: Send + Sync {
    /// Stores a publish from `client` (compare-and-swap on the stored timestamp when
    /// `if_match` is given); resolves once the packet is durable (204), or with a refusal.
    fn put<'a>(
        &'a self,
        client: IpAddr,
        key: &'a str,
        body: &'a [u8],
        if_match: Option<u64>,
    ) -> Pin<Box<dyn Future<Output = Result<(), Refusal>> + Send + 'a>>;
    /// The stored packet (200), nothing (404), or a refusal (400; 503 when a lookup
    /// elsewhere failed). `client` may be counted against a bound of such lookups.
    fn get<'a>(
        &'a self,
        client: IpAddr,
        key: &'a str,
    ) -> Pin<Box<dyn Future<Output = Result<Option<Stored>, Refusal>> + Send + 'a>>;
    /// The server's NSID (RFC 5001, `--nsid`), sent as [`crate::NSID_HEADER`] on every
    /// `/pkarr` response so a client behind a load balancer can tell which replica answered;
    /// `None`: no header.
    fn nsid(&self) -> Option<HeaderValue> {
        None
    }
}

/// A stored packet as `GET` serves it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Stored {
    /// The relay payload.
    pub payload: Vec<u8>,
    /// The smallest TTL of its records (`None` without records).
    pub min_ttl: Option<u32>,
}

/// The client's address: the peer's, or the one a trusted proxy forwarded. A request with
/// both `Forwarded` and `X-Forwarded-For` is taken from the peer: a proxy writes one of them,
/// and the other then came from the client, who could name any address (and with views, pick
/// the data it is answered from).
pub fn client_address(peer: IpAddr, headers: &HeaderMap, trusted: &[Cidr]) -> IpAddr {
    let is_trusted = |ip: IpAddr| trusted.iter().any(|c| c.contains(ip));
    if !is_trusted(peer) {
        return peer;
    }
    if headers.contains_key(header::FORWARDED) && headers.contains_key("x-forwarded-for") {
        return peer;
    }
    let mut hops = forwarded_for(headers);
    if hops.is_empty() {
        hops = headers
            .get_all("x-forwarded-for")
            .iter()
            .filter_map(|v| v.to_str().ok())
            .flat_map(|v| v.split(','))
            .filter_map(|h| parse_hop(h.trim()))
            .collect();
    }
    // The nearest hop that is not one of our proxies is the client as far as we can trust.
    hops.iter()
        .rev()
        .copied()
        .find(|ip| !is_trusted(*ip))
        .or(hops.first().copied())
        .unwrap_or(peer)
}

/// The `for=` addresses of `Forwarded` (RFC 7239 §4), in order.
fn forwarded_for(headers: &HeaderMap) -> Vec<IpAddr> {
    headers
        .get_all(header::FORWARDED)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split(','))
        .filter_map(|element| {
            element.split(';').find_map(|pair| {
                let (k, v) = pair.trim().split_once('=')?;
                k.eq_ignore_ascii_case("for")
                    .then(|| parse_hop(v.trim().trim_matches('"')))
                    .flatten()
            })
        })
        .collect()
}

/// One hop: `192.0.2.1`, `192.0.2.1:4711`, `2001:db8::1` or `[2001:db8::1]:4711`.
fn parse_hop(hop: &str) -> Option<IpAddr> {
    if let Some(rest) = hop.strip_prefix('[') {
        return rest.split(']').next()?.parse().ok();
    }
    hop.parse().ok().or_else(|| {
        let (addr, port) = hop.rsplit_once(':')?;
        port.parse::<u16>().ok()?;
        addr.parse::<std::net::Ipv4Addr>().ok().map(IpAddr::V4)
    })
}

fn cors(headers: &mut HeaderMap) {
    headers.insert(
        header::ACCESS_CONTROL_ALLOW_ORIGIN,
        HeaderValue::from_static("*"),
    );
    headers.insert(
        header::ACCESS_CONTROL_EXPOSE_HEADERS,
        HeaderValue::from_static("Last-Modified, Cache-Control, Meshdns-Nsid"),
    );
}

fn with_cors(response: impl IntoResponse) -> Response {
    let mut r = response.into_response();
    cors(r.headers_mut());
    r
}

/// `OPTIONS /pkarr/<key>`: the CORS preflight.
pub async fn preflight() -> Response {
    let mut r = StatusCode::NO_CONTENT.into_response();
    let h = r.headers_mut();
    cors(h);
    h.insert(
        header::ACCESS_CONTROL_ALLOW_METHODS,
        HeaderValue::from_static("GET, PUT, OPTIONS"),
    );
    h.insert(
        header::ACCESS_CONTROL_ALLOW_HEADERS,
        HeaderValue::from_static("Content-Type, If-Match, If-Modified-Since"),
    );
    h.insert(
        header::ACCESS_CONTROL_MAX_AGE,
        HeaderValue::from_static("86400"),
    );
    r
}

/// `PUT /pkarr/<key>`.
pub async fn put(
    State(s): State<RelayState>,
    ConnectInfo(peer): ConnectInfo<SocketAddr>,
    Path(key): Path<String>,
    headers: HeaderMap,
    body: Bytes,
) -> Response {
    put_packet(&s, peer.ip(), &key, &headers, &body).await
}

/// `PUT /pkarr/<key>` answered ahead of the router ([`crate::http::Service`]): the route's
/// answers (its body bound, CORS, `Meshdns-Nsid`) without the router's matching, its layers and
/// its extractors: about 6% of the `perf` samples of the replica that takes publishes, 2.5% of
/// its instructions per publish (the `HeaderMap` extractor alone copies the headers). It takes a key segment as it came, with
/// nothing to decode (no `%`, no further `/`); any other request goes on to the router.
pub struct FastPut {
    state: RelayState,
    nsid: Option<HeaderValue>,
}

impl FastPut {
    /// Publishes into `state`'s relay.
    pub fn new(state: RelayState) -> FastPut {
        let nsid = state.relay.nsid();
        FastPut { state, nsid }
    }

    /// The key of a publish this takes: `PUT /pkarr/<key>`, the key as it came.
    pub fn key<B>(request: &axum::http::Request<B>) -> Option<&str> {
        let key = FastPut::key_of(request.uri())?;
        let plain = !key.is_empty() && !key.contains(['/', '%']);
        (request.method() == axum::http::Method::PUT && plain).then_some(key)
    }

    /// Answers a request [`FastPut::key`] takes, from `peer`.
    pub async fn serve<B>(&self, peer: SocketAddr, request: axum::http::Request<B>) -> Response
    where
        B: axum::body::HttpBody<Data = Bytes>,
        B::Error: Into<Box<dyn std::error::Error + Send + Sync>>,
    {
        use http_body_util::BodyExt as _;
        let (parts, body) = request.into_parts();
        let mut response = match http_body_util::Limited::new(body, crate::http::MAX_BODY)
            .collect()
            .await
        {
            Ok(body) => match FastPut::key_of(&parts.uri) {
                Some(key) => {
                    put_packet(
                        &self.state,
                        peer.ip(),
                        key,
                        &parts.headers,
                        &body.to_bytes(),
                    )
                    .await
                }
                None => with_cors(StatusCode::NOT_FOUND),
            },
            Err(e) if e.is::<http_body_util::LengthLimitError>() => with_cors((
                StatusCode::PAYLOAD_TOO_LARGE,
                format!("the body is larger than {} bytes\n", crate::http::MAX_BODY),
            )),
            Err(e) => with_cors((
                StatusCode::BAD_REQUEST,
                format!("the body could not be read: {e}\n"),
            )),
        };
        if let Some(nsid) = &self.nsid {
            response
                .headers_mut()
                .insert(crate::NSID_HEADER, nsid.clone());
        }
        response
    }

    /// The segment after `/pkarr/`, whatever it holds.
    fn key_of(uri: &axum::http::Uri) -> Option<&str> {
        uri.path().strip_prefix("/pkarr/")
    }
}

/// A publish, taken apart: shared by the route and [`FastPut`].
async fn put_packet(
    s: &RelayState,
    peer: IpAddr,
    key: &str,
    headers: &HeaderMap,
    body: &[u8],
) -> Response {
    let relay = &s.relay;
    let if_match = match headers.get(header::IF_MATCH) {
        None => None,
        Some(v) => match v
            .to_str()
            .ok()
            .map(|v| v.trim().trim_start_matches("W/").trim_matches('"'))
            .and_then(|v| v.parse::<u64>().ok())
        {
            Some(t) => Some(t),
            None => {
                return with_cors((
                    StatusCode::BAD_REQUEST,
                    "If-Match must be the stored packet's timestamp (microseconds since the epoch)\n",
                ));
            }
        },
    };
    let client = client_address(peer, headers, &s.trusted_proxies);
    match relay.put(client, key, body, if_match).await {
        Ok(()) => with_cors(StatusCode::NO_CONTENT),
        Err((status, reason)) => with_cors((status, format!("{reason}\n"))),
    }
}

/// `GET /pkarr/<key>`.
pub async fn get(
    State(s): State<RelayState>,
    ConnectInfo(peer): ConnectInfo<SocketAddr>,
    Path(key): Path<String>,
    headers: HeaderMap,
) -> Response {
    let relay = &s.relay;
    let client = client_address(peer.ip(), &headers, &s.trusted_proxies);
    let stored = match relay.get(client, &key).await {
        Ok(Some(stored)) => stored,
        Ok(None) => return with_cors(StatusCode::NOT_FOUND),
        Err((status, reason)) => return with_cors((status, format!("{reason}\n"))),
    };
    let timestamp_us = stored
        .payload
        .get(64..72)
        .and_then(|b| b.try_into().ok())
        .map_or(0, u64::from_be_bytes);
    // A date HTTP can write (a packet stored before timestamps were bounded may be dated
    // past year 9999): without one, no Last-Modified and never 304.
    let modified = http_time(timestamp_us);
    let not_modified = headers
        .get(header::IF_MODIFIED_SINCE)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| httpdate::parse_http_date(v).ok())
        .zip(modified)
        .is_some_and(|(since, modified)| modified <= since);
    let cache = format!("public, max-age={}", stored.min_ttl.unwrap_or(0));
    let mut caching = HeaderMap::new();
    if let Ok(v) = HeaderValue::from_str(&cache) {
        caching.insert(header::CACHE_CONTROL, v);
    }
    if let Some(date) = modified.map(httpdate::fmt_http_date)
        && let Ok(v) = HeaderValue::from_str(&date)
    {
        caching.insert(header::LAST_MODIFIED, v);
    }
    if not_modified {
        return with_cors((StatusCode::NOT_MODIFIED, caching));
    }
    with_cors((
        caching,
        [(header::CONTENT_TYPE, PKARR_PACKET)],
        stored.payload,
    ))
}

/// The last second an HTTP date can name (9999-12-31T23:59:59Z): `httpdate` panics past it.
const LAST_HTTP_DATE: u64 = 253_402_300_799;

/// A pkarr timestamp (µs since the epoch) as a time `httpdate` can format, to the second;
/// `None` past [`LAST_HTTP_DATE`]. Total: no timestamp panics.
pub fn http_time(timestamp_us: u64) -> Option<SystemTime> {
    let secs = timestamp_us / 1_000_000;
    if secs > LAST_HTTP_DATE {
        return None;
    }
    UNIX_EPOCH.checked_add(Duration::from_secs(secs))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn headers(pairs: &[(&str, &str)]) -> HeaderMap {
        let mut h = HeaderMap::new();
        for (k, v) in pairs {
            h.append(
                axum::http::HeaderName::from_bytes(k.as_bytes()).unwrap(),
                v.parse().unwrap(),
            );
        }
        h
    }

    fn ip(s: &str) -> IpAddr {
        s.parse().unwrap()
    }

    #[test]
    fn every_timestamp_has_a_date_or_none_and_never_panics() {
        let last = LAST_HTTP_DATE * 1_000_000;
        for (stamp, date) in [
            (0, Some("Thu, 01 Jan 1970 00:00:00 GMT")),
            (1_700_000_000_999_999, Some("Tue, 14 Nov 2023 22:13:20 GMT")),
            (last + 999_999, Some("Fri, 31 Dec 9999 23:59:59 GMT")),
            (last + 1_000_000, None),
            (1 << 63, None),
            (u64::MAX, None),
        ] {
            let shown = http_time(stamp).map(httpdate::fmt_http_date);
            assert_eq!(shown.as_deref(), date, "{stamp}");
        }
    }

    #[test]
    fn forwarded_addresses_count_only_from_trusted_proxies() {
        let trusted: Vec<Cidr> = vec!["10.0.0.0/8".parse().unwrap()];
        let xff = headers(&[("x-forwarded-for", "203.0.113.9, 10.0.0.5")]);
        assert_eq!(
            client_address(ip("10.0.0.1"), &xff, &trusted),
            ip("203.0.113.9")
        );
        assert_eq!(
            client_address(ip("198.51.100.1"), &xff, &trusted),
            ip("198.51.100.1"),
            "an untrusted peer cannot choose its address"
        );
        // A client's own spoofed entry sits left of the address our proxy saw.
        let spoofed = headers(&[("x-forwarded-for", "1.2.3.4, 203.0.113.9")]);
        assert_eq!(
            client_address(ip("10.0.0.1"), &spoofed, &trusted),
            ip("203.0.113.9")
        );
        let fwd = headers(&[(
            "forwarded",
            "for=\"[2001:db8::17]:4711\";proto=https, for=10.0.0.9",
        )]);
        assert_eq!(
            client_address(ip("10.0.0.1"), &fwd, &trusted),
            ip("2001:db8::17")
        );
        // Both headers: the proxy wrote one, the client the other, and which is which cannot
        // be told; the proxy's own address is taken (a client cannot choose its view).
        let both = headers(&[
            ("forwarded", "for=100.64.0.1"),
            ("x-forwarded-for", "203.0.113.9"),
        ]);
        assert_eq!(
            client_address(ip("10.0.0.1"), &both, &trusted),
            ip("10.0.0.1")
        );
        let ported = headers(&[("forwarded", "for=192.0.2.44:1234")]);
        assert_eq!(
            client_address(ip("10.0.0.1"), &ported, &trusted),
            ip("192.0.2.44")
        );
        assert_eq!(
            client_address(ip("10.0.0.1"), &HeaderMap::new(), &trusted),
            ip("10.0.0.1"),
            "no header: the proxy itself"
        );
    }

    /// A publish as the relay was given it: the client, the key, the body and If-Match.
    type Given = (IpAddr, String, Vec<u8>, Option<u64>);

    /// A relay that takes every publish and keeps what it was given.
    struct Taking(std::sync::Mutex<Vec<Given>>);

    impl PkarrRelay for Taking {
        fn put<'a>(
            &'a self,
            client: IpAddr,
            key: &'a str,
            body: &'a [u8],
            if_match: Option<u64>,
        ) -> Pin<Box<dyn Future<Output = Result<(), Refusal>> + Send + 'a>> {
            self.0
                .lock()
                .unwrap()
                .push((client, key.to_owned(), body.to_vec(), if_match));
            Box::pin(std::future::ready(Ok(())))
        }

        fn get<'a>(
            &'a self,
            _: IpAddr,
            _: &'a str,
        ) -> Pin<Box<dyn Future<Output = Result<Option<Stored>, Refusal>> + Send + 'a>> {
            Box::pin(std::future::ready(Ok(None)))
        }

        fn nsid(&self) -> Option<HeaderValue> {
            Some(HeaderValue::from_static("replica-0"))
        }
    }

    fn request(method: &str, path: &str, body: Vec<u8>) -> axum::http::Request<axum::body::Body> {
        axum::http::Request::builder()
            .method(method)
            .uri(path)
            .header(header::IF_MATCH, "\"17\"")
            .body(axum::body::Body::from(body))
            .unwrap()
    }

    #[tokio::test]
    async fn publishes_ahead_of_the_router_get_the_routes_answers() {
        // Taken: a plain key segment on PUT. Left to the router: what it decodes or refuses.
        let takes = |method, path: &str| {
            FastPut::key(&request(method, path, Vec::new())).map(str::to_owned)
        };
        assert_eq!(takes("PUT", "/pkarr/abc").as_deref(), Some("abc"));
        assert_eq!(takes("PUT", "/pkarr/abc?x=1").as_deref(), Some("abc"));
        for (method, path) in [
            ("GET", "/pkarr/abc"),
            ("OPTIONS", "/pkarr/abc"),
            ("PUT", "/pkarr/a%62c"),
            ("PUT", "/pkarr/abc/"),
            ("PUT", "/pkarr/"),
            ("PUT", "/pkarrabc"),
            ("PUT", "/dns-query"),
        ] {
            assert_eq!(takes(method, path), None, "{method} {path}");
        }

        let relay = Arc::new(Taking(Default::default()));
        let fast = FastPut::new(RelayState {
            relay: relay.clone(),
            trusted_proxies: Arc::from(vec!["10.0.0.0/8".parse::<Cidr>().unwrap()]),
        });
        let peer: SocketAddr = "10.0.0.7:4711".parse().unwrap();
        let mut put = request("PUT", "/pkarr/abc", b"packet".to_vec());
        put.headers_mut()
            .insert("x-forwarded-for", HeaderValue::from_static("203.0.113.9"));
        let r = fast.serve(peer, put).await;
        assert_eq!(r.status(), StatusCode::NO_CONTENT);
        assert_eq!(r.headers()[crate::NSID_HEADER], "replica-0");
        assert_eq!(r.headers()[header::ACCESS_CONTROL_ALLOW_ORIGIN], "*");
        assert_eq!(
            relay.0.lock().unwrap().as_slice(),
            [(
                ip("203.0.113.9"),
                "abc".to_owned(),
                b"packet".to_vec(),
                Some(17)
            )],
            "the client a trusted proxy named, the key, the body and If-Match"
        );

        // A body over the bound (one that declares its length is refused before it is read,
        // in `http`): 413, and not stored.
        let big = request("PUT", "/pkarr/abc", vec![0; crate::http::MAX_BODY + 1]);
        let r = fast.serve(peer, big).await;
        assert_eq!(r.status(), StatusCode::PAYLOAD_TOO_LARGE);
        assert_eq!(r.headers()[crate::NSID_HEADER], "replica-0");
        let mut bad = request("PUT", "/pkarr/abc", b"packet".to_vec());
        bad.headers_mut()
            .insert(header::IF_MATCH, HeaderValue::from_static("soon"));
        let r = fast.serve(peer, bad).await;
        assert_eq!(r.status(), StatusCode::BAD_REQUEST);
        assert_eq!(r.headers()[crate::NSID_HEADER], "replica-0");
        assert_eq!(relay.0.lock().unwrap().len(), 1, "refused before the relay");
    }
}
