//! An in-memory Kubernetes API server for tests, on a loopback port, that kube-rs clients
//! talk to over real HTTP: get, list (label and field selectors), watch (streamed events from
//! any resource version), create, replace, delete (finalizers hold an object with a
//! `deletionTimestamp`), and the patch kinds controllers use: server-side apply (per field
//! manager; labels, annotations and finalizers merge by key, other top-level fields are owned
//! whole), JSON merge patch, and JSON patch (with `test`), on the main resource and `/status`.
//!
//! It keeps a log of every request, so a test can assert that a steady state costs no writes,
//! and can be told to fail the next requests to a path, so a test can exercise retries. It can
//! hold the requests to RBAC rules read from `deploy/` ([`rbac`], [`FakeKube::enforce`]),
//! answering 403 as the API server would to what they do not allow. It is
//! written here because the fake clients available pin other kube versions; it models only
//! what meshdns's controllers use, and says so when asked for anything else (HTTP 405/422).

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use axum::body::{Body, Bytes};
use axum::http::{HeaderMap, Method, StatusCode, Uri};
use axum::response::{IntoResponse, Response};
use serde_json::{Map, Value, json};

pub mod rbac;

/// One request the server received.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Request {
    /// `GET`, `POST`, `PUT`, `PATCH`, `DELETE`.
    pub method: String,
    /// Path, e.g. `/apis/kilo.squat.ai/v1alpha1/peers/p1`.
    pub path: String,
    /// Query string (may be empty).
    pub query: String,
    /// `Content-Type` of the body (patch kind), empty for none.
    pub content_type: String,
}

impl Request {
    /// Whether the request changes state (anything but `GET`).
    pub fn is_write(&self) -> bool {
        self.method != "GET"
    }
}

#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
struct Key {
    /// `v1` or `group/version`.
    gv: String,
    plural: String,
    namespace: String,
    name: String,
}

#[derive(Debug, Clone)]
struct Event {
    rv: u64,
    key: Key,
    kind: &'static str,
    object: Value,
}

#[derive(Debug)]
struct Fault {
    method: String,
    path_contains: String,
    status: u16,
    /// How long the request hangs before the failure is returned.
    delay: Duration,
    remaining: usize,
}

#[derive(Default)]
struct State {
    rv: u64,
    uids: u64,
    objects: BTreeMap<Key, Value>,
    /// What each field manager last applied, per object and subresource.
    applied: BTreeMap<(Key, String, bool), Value>,
    log: Vec<Event>,
    requests: Vec<Request>,
    faults: Vec<Fault>,
    /// Watches from resource versions below this get 410 Gone (history compacted).
    expired_before: u64,
    /// Bumped to end every open watch with 410 Gone.
    watch_epoch: u64,
    /// Bumped to end every open watch without a word, as a dropped connection does.
    disconnect_epoch: u64,
    /// RBAC the requests are held to, and what it refused.
    policy: Option<rbac::Policy>,
    denied: Vec<String>,
}

struct Inner {
    state: Mutex<State>,
    changed: tokio::sync::watch::Sender<u64>,
}

impl Inner {
    fn lock(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }
}

/// A running fake API server. Dropping it stops the server.
pub struct FakeKube {
    url: String,
    inner: Arc<Inner>,
    task: tokio::task::JoinHandle<()>,
}

impl Drop for FakeKube {
    fn drop(&mut self) {
        self.task.abort();
        let denied = std::mem::take(&mut self.inner.lock().denied);
        if !denied.is_empty() && !std::thread::panicking() {
            panic!(
                "requests the RBAC rules do not allow:\n  {}",
                denied.join("\n  ")
            );
        }
    }
}

/// The plural resource name Kubernetes uses for a kind (`ClusterMesh` -> `clustermeshes`,
/// `Gateway` -> `gateways`).
pub fn plural(kind: &str) -> String {
    let k = kind.to_ascii_lowercase();
    if k.ends_with('s') || k.ends_with("sh") || k.ends_with("ch") || k.ends_with('x') {
        format!("{k}es")
    } else if let Some(stem) = k.strip_suffix('y')
        && !stem.ends_with(['a', 'e', 'i', 'o', 'u'])
    {
        // `policy` -> `policies`, but `gateway` -> `gateways`.
        format!("{stem}ies")
    } else {
        format!("{k}s")
    }
}

impl FakeKube {
    /// Starts the server on `127.0.0.1:0` (needs a tokio runtime).
    pub async fn start() -> FakeKube {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
            .await
            .expect("bind loopback");
        let addr: SocketAddr = listener.local_addr().expect("local addr");
        let (changed, _) = tokio::sync::watch::channel(0);
        let inner = Arc::new(Inner {
            state: Mutex::new(State::default()),
            changed,
        });
        let shared = inner.clone();
        let app = axum::Router::new().fallback(
            move |method: Method, uri: Uri, headers: HeaderMap, body: Bytes| {
                let inner = shared.clone();
                async move { handle(inner, method, uri, headers, body).await }
            },
        );
        let task = tokio::spawn(async move {
            let _ = axum::serve(listener, app).await;
        });
        FakeKube {
            url: format!("http://{addr}"),
            inner,
            task,
        }
    }

    /// The server's base URL.
    pub fn url(&self) -> &str {
        &self.url
    }

    /// A kube client for this server (default namespace `default`).
    pub fn client(&self) -> kube::Client {
        let config = kube::Config::new(self.url.parse().expect("url"));
        kube::Client::try_from(config).expect("client")
    }

    /// A kubeconfig that points at this server, as a Secret would hold it.
    pub fn kubeconfig(&self, name: &str) -> String {
        format!(
            "apiVersion: v1\nkind: Config\nclusters:\n- name: {name}\n  cluster: {{server: \"{url}\"}}\nusers:\n- name: {name}\n  user: {{}}\ncontexts:\n- name: {name}\n  context: {{cluster: {name}, user: {name}}}\ncurrent-context: {name}\n",
            url = self.url
        )
    }

    /// Creates an object as a client would (uid, resourceVersion, creationTimestamp and
    /// generation filled in when absent) and returns it as stored.
    pub fn insert(&self, object: Value) -> Value {
        let key = key_of(&object).expect("insert: apiVersion, kind and metadata.name");
        let mut st = self.inner.lock();
        let stored = create(&mut st, key, object).expect("insert: object exists");
        drop(st);
        self.notify();
        stored
    }

    /// Replaces an object whole (status included), as a test would to simulate another
    /// writer (an agent updating a status, a user editing a spec).
    pub fn replace(&self, object: Value) -> Value {
        let key = key_of(&object).expect("replace: apiVersion, kind and metadata.name");
        let mut st = self.inner.lock();
        let current = st
            .objects
            .get(&key)
            .cloned()
            .expect("replace: no such object");
        let mut next = object;
        let meta = next["metadata"].as_object_mut().expect("metadata");
        for k in ["uid", "creationTimestamp", "deletionTimestamp"] {
            if let Some(v) = current["metadata"].get(k) {
                meta.insert(k.into(), v.clone());
            }
        }
        if current.get("spec") != next.get("spec") {
            bump_generation(&current, &mut next);
        } else {
            next["metadata"]["generation"] = current["metadata"]["generation"].clone();
        }
        let stored = store(&mut st, key, next);
        drop(st);
        self.notify();
        stored
    }

    /// Deletes an object as `kubectl delete` would: with finalizers it only gets a
    /// `deletionTimestamp`. Returns whether it existed.
    pub fn delete(
        &self,
        api_version: &str,
        kind: &str,
        namespace: Option<&str>,
        name: &str,
    ) -> bool {
        let key = Key {
            gv: api_version.to_string(),
            plural: plural(kind),
            namespace: namespace.unwrap_or("").to_string(),
            name: name.to_string(),
        };
        let mut st = self.inner.lock();
        let found = delete(&mut st, &key).is_some();
        drop(st);
        self.notify();
        found
    }

    /// The object, if it exists.
    pub fn get(
        &self,
        api_version: &str,
        kind: &str,
        namespace: Option<&str>,
        name: &str,
    ) -> Option<Value> {
        let key = Key {
            gv: api_version.to_string(),
            plural: plural(kind),
            namespace: namespace.unwrap_or("").to_string(),
            name: name.to_string(),
        };
        self.inner.lock().objects.get(&key).cloned()
    }

    /// Every object of a kind, ordered by namespace and name.
    pub fn list(&self, api_version: &str, kind: &str) -> Vec<Value> {
        let p = plural(kind);
        self.inner
            .lock()
            .objects
            .iter()
            .filter(|(k, _)| k.gv == api_version && k.plural == p)
            .map(|(_, v)| v.clone())
            .collect()
    }

    /// Every request so far.
    pub fn requests(&self) -> Vec<Request> {
        self.inner.lock().requests.clone()
    }

    /// Every write (non-GET request) so far.
    pub fn writes(&self) -> Vec<Request> {
        self.requests()
            .into_iter()
            .filter(Request::is_write)
            .collect()
    }

    /// Forgets the request log.
    pub fn clear_requests(&self) {
        self.inner.lock().requests.clear();
    }

    /// Compacts the watch history, as etcd does: every open watch ends with a 410 Gone event
    /// (`Expired`), and a watch from an older resource version gets one at once, so clients
    /// must list again.
    pub fn expire_watches(&self) {
        {
            let mut st = self.inner.lock();
            st.expired_before = st.rv;
            st.watch_epoch += 1;
        }
        self.notify();
    }

    /// Holds every later request to `policy`, as the API server's RBAC authorizer would: a
    /// request it does not allow gets 403 Forbidden, and dropping the server then panics,
    /// listing them. Allowed requests are recorded against the grant that allowed them
    /// ([`rbac::unused`]).
    pub fn enforce(&self, policy: rbac::Policy) {
        self.inner.lock().policy = Some(policy);
    }

    /// The requests the policy refused, described.
    pub fn denied(&self) -> Vec<String> {
        self.inner.lock().denied.clone()
    }

    /// The requests the policy refused, taken: a test that expects refusals says so (those
    /// left when the server is dropped fail the test).
    pub fn take_denied(&self) -> Vec<String> {
        std::mem::take(&mut self.inner.lock().denied)
    }

    /// Makes the next `times` requests with this method whose path contains `path_contains`
    /// fail with `status` (a Kubernetes `Status` body).
    pub fn fail(&self, method: &str, path_contains: &str, status: u16, times: usize) {
        self.inner.lock().faults.push(Fault {
            method: method.to_string(),
            path_contains: path_contains.to_string(),
            status,
            delay: Duration::ZERO,
            remaining: times,
        });
    }

    /// Makes the next `times` matching requests hang for `delay` and then fail with 504
    /// `Timeout`, as the API server does when a request outlives its deadline.
    pub fn stall(&self, method: &str, path_contains: &str, delay: Duration, times: usize) {
        self.inner.lock().faults.push(Fault {
            method: method.to_string(),
            path_contains: path_contains.to_string(),
            status: 504,
            delay,
            remaining: times,
        });
    }

    /// Ends every open watch stream without an error event, as a dropped connection or an API
    /// server restart does: clients must watch again from where they were.
    pub fn disconnect_watches(&self) {
        self.inner.lock().disconnect_epoch += 1;
        self.notify();
    }

    /// Polls `check` every 20 ms until it returns `Some`, for at most `timeout`.
    pub async fn eventually<T>(
        &self,
        timeout: Duration,
        mut check: impl FnMut(&FakeKube) -> Option<T>,
    ) -> Option<T> {
        let deadline = tokio::time::Instant::now() + timeout;
        loop {
            if let Some(v) = check(self) {
                return Some(v);
            }
            if tokio::time::Instant::now() >= deadline {
                return None;
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }

    fn notify(&self) {
        let rv = self.inner.lock().rv;
        self.inner.changed.send_replace(rv);
    }
}

/// Checks a request against the policy, if one is set: `Some(403)` when it is not allowed.
fn authorize(st: &mut State, method: &str, path: &str, query: &str) -> Option<Status> {
    let policy = st.policy.as_ref()?;
    let attributes = rbac::attributes(method, path, query)?;
    match policy.allows(&attributes) {
        Some(grant) => {
            rbac::record_use(grant);
            None
        }
        None => {
            let message = format!("{}: {attributes} is not allowed", policy.name);
            // Shown with the failing test's output, whatever else it fails on first.
            eprintln!("fakekube: 403: {message}");
            st.denied.push(message.clone());
            Some(Status::new(403, "Forbidden", &message))
        }
    }
}

fn key_of(object: &Value) -> Option<Key> {
    Some(Key {
        gv: object.get("apiVersion")?.as_str()?.to_string(),
        plural: plural(object.get("kind")?.as_str()?),
        namespace: object["metadata"]
            .get("namespace")
            .and_then(Value::as_str)
            .unwrap_or("")
            .to_string(),
        name: object["metadata"].get("name")?.as_str()?.to_string(),
    })
}

fn now_rfc3339() -> String {
    let secs = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_secs())
        .unwrap_or(0);
    let (days, rem) = (secs / 86400, secs % 86400);
    // Civil date from days since 1970-01-01 (Howard Hinnant's algorithm).
    let z = days as i64 + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1460 + doe / 36524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = doy - (153 * mp + 2) / 5 + 1;
    let m = if mp < 10 { mp + 3 } else { mp - 9 };
    let y = yoe + era * 400 + i64::from(m <= 2);
    format!(
        "{y:04}-{m:02}-{d:02}T{:02}:{:02}:{:02}Z",
        rem / 3600,
        rem % 3600 / 60,
        rem % 60
    )
}

fn store(st: &mut State, key: Key, mut object: Value) -> Value {
    // As the API server's Go types do (omitempty): empty lists and maps are not stored.
    if let Some(meta) = object["metadata"].as_object_mut() {
        meta.retain(|k, v| {
            !(matches!(
                k.as_str(),
                "finalizers" | "labels" | "annotations" | "ownerReferences"
            ) && (v.is_null()
                || v.as_array().is_some_and(|a| a.is_empty())
                || v.as_object().is_some_and(|o| o.is_empty())))
        });
    }
    st.rv += 1;
    object["metadata"]["resourceVersion"] = json!(st.rv.to_string());
    let kind = if st.objects.contains_key(&key) {
        "MODIFIED"
    } else {
        "ADDED"
    };
    st.objects.insert(key.clone(), object.clone());
    st.log.push(Event {
        rv: st.rv,
        key,
        kind,
        object: object.clone(),
    });
    object
}

fn create(st: &mut State, mut key: Key, mut object: Value) -> Result<Value, Status> {
    if key.name.is_empty() {
        let prefix = object["metadata"]
            .get("generateName")
            .and_then(Value::as_str)
            .ok_or_else(|| {
                Status::new(422, "Invalid", "metadata.name or generateName is required")
            })?
            .to_string();
        st.uids += 1;
        key.name = format!("{prefix}{:05x}", st.uids);
        object["metadata"]["name"] = json!(key.name);
    }
    if st.objects.contains_key(&key) {
        return Err(Status::new(
            409,
            "AlreadyExists",
            &format!("{} {:?} already exists", key.plural, key.name),
        ));
    }
    st.uids += 1;
    let meta = object["metadata"]
        .as_object_mut()
        .ok_or_else(|| Status::new(400, "BadRequest", "metadata must be an object"))?;
    if !key.namespace.is_empty() {
        meta.insert("namespace".into(), json!(key.namespace));
    }
    // UIDs are unique across every fake server of the process, as across real clusters.
    static UIDS: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(1);
    let uid = UIDS.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    meta.entry("uid").or_insert(json!(format!("uid-{uid:05}")));
    meta.entry("creationTimestamp")
        .or_insert(json!(now_rfc3339()));
    meta.entry("generation").or_insert(json!(1));
    Ok(store(st, key, object))
}

/// Removes an object, or marks it deleted while finalizers remain.
fn delete(st: &mut State, key: &Key) -> Option<Value> {
    let current = st.objects.get(key)?.clone();
    let has_finalizers = current["metadata"]["finalizers"]
        .as_array()
        .is_some_and(|f| !f.is_empty());
    if has_finalizers {
        if current["metadata"].get("deletionTimestamp").is_some() {
            return Some(current);
        }
        let mut next = current;
        next["metadata"]["deletionTimestamp"] = json!(now_rfc3339());
        return Some(store(st, key.clone(), next));
    }
    st.rv += 1;
    let mut gone = st.objects.remove(key)?;
    gone["metadata"]["resourceVersion"] = json!(st.rv.to_string());
    st.applied.retain(|(k, _, _), _| k != key);
    st.log.push(Event {
        rv: st.rv,
        key: key.clone(),
        kind: "DELETED",
        object: gone.clone(),
    });
    Some(gone)
}

fn bump_generation(current: &Value, next: &mut Value) {
    let g = current["metadata"]["generation"].as_i64().unwrap_or(1);
    next["metadata"]["generation"] = json!(g + 1);
}

/// A Kubernetes `Status` error.
#[derive(Debug)]
struct Status {
    code: u16,
    reason: &'static str,
    message: String,
}

impl Status {
    fn new(code: u16, reason: &'static str, message: &str) -> Status {
        Status {
            code,
            reason,
            message: message.to_string(),
        }
    }
}

impl IntoResponse for Status {
    fn into_response(self) -> Response {
        let body = json!({
            "kind": "Status", "apiVersion": "v1", "metadata": {},
            "status": "Failure", "message": self.message, "reason": self.reason, "code": self.code,
        });
        (
            StatusCode::from_u16(self.code).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR),
            [("content-type", "application/json")],
            body.to_string(),
        )
            .into_response()
    }
}

/// What a request path addresses.
struct Target {
    gv: String,
    plural: String,
    namespace: Option<String>,
    name: Option<String>,
    status: bool,
}

fn parse_path(path: &str) -> Option<Target> {
    let segs: Vec<&str> = path.trim_matches('/').split('/').collect();
    let (gv, rest) = match segs.as_slice() {
        ["api", v, rest @ ..] => (v.to_string(), rest),
        ["apis", g, v, rest @ ..] => (format!("{g}/{v}"), rest),
        _ => return None,
    };
    let (namespace, rest) = match rest {
        ["namespaces", ns, rest @ ..] if !rest.is_empty() => (Some(ns.to_string()), rest),
        _ => (None, rest),
    };
    let plural = rest.first()?.to_string();
    let name = rest.get(1).map(|s| s.to_string());
    let status = match rest.get(2) {
        None => false,
        Some(&"status") => true,
        Some(_) => return None,
    };
    Some(Target {
        gv,
        plural,
        namespace,
        name,
        status,
    })
}

fn query_params(query: &str) -> BTreeMap<String, String> {
    query
        .split('&')
        .filter(|p| !p.is_empty())
        .map(|p| {
            let (k, v) = p.split_once('=').unwrap_or((p, ""));
            (decode(k), decode(v))
        })
        .collect()
}

fn decode(s: &str) -> String {
    let bytes = s.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        match bytes[i] {
            b'%' if i + 2 < bytes.len() => {
                let hex = std::str::from_utf8(&bytes[i + 1..i + 3]).unwrap_or("");
                match u8::from_str_radix(hex, 16) {
                    Ok(b) => {
                        out.push(b);
                        i += 3;
                    }
                    Err(_) => {
                        out.push(b'%');
                        i += 1;
                    }
                }
            }
            b'+' => {
                out.push(b' ');
                i += 1;
            }
            b => {
                out.push(b);
                i += 1;
            }
        }
    }
    String::from_utf8_lossy(&out).into_owned()
}

/// Equality-based label selectors: `k=v`, `k==v`, `k!=v`, `k`, `!k`, comma-separated.
fn labels_match(selector: &str, object: &Value) -> bool {
    let labels = object["metadata"]["labels"].as_object();
    let get = |k: &str| labels.and_then(|l| l.get(k)).and_then(Value::as_str);
    selector
        .split(',')
        .map(str::trim)
        .filter(|t| !t.is_empty())
        .all(|term| {
            if let Some((k, v)) = term.split_once("!=") {
                get(k.trim()) != Some(v.trim())
            } else if let Some((k, v)) = term.split_once("==").or_else(|| term.split_once('=')) {
                get(k.trim()) == Some(v.trim())
            } else if let Some(k) = term.strip_prefix('!') {
                get(k.trim()).is_none()
            } else {
                get(term).is_some()
            }
        })
}

/// `metadata.name=x`, `metadata.namespace=x` (and `!=`).
fn fields_match(selector: &str, object: &Value) -> bool {
    selector.split(',').filter(|t| !t.is_empty()).all(|term| {
        let (field, want, negate) = match term.split_once("!=") {
            Some((f, v)) => (f, v, true),
            None => match term.split_once("==").or_else(|| term.split_once('=')) {
                Some((f, v)) => (f, v, false),
                None => return true,
            },
        };
        let have = match field {
            "metadata.name" => object["metadata"]["name"].as_str(),
            "metadata.namespace" => object["metadata"]["namespace"].as_str(),
            _ => return true,
        };
        (have == Some(want)) != negate
    })
}

struct Filter {
    gv: String,
    plural: String,
    namespace: Option<String>,
    labels: String,
    fields: String,
}

impl Filter {
    fn matches(&self, key: &Key, object: &Value) -> bool {
        key.gv == self.gv
            && key.plural == self.plural
            && self
                .namespace
                .as_ref()
                .is_none_or(|ns| &key.namespace == ns)
            && labels_match(&self.labels, object)
            && fields_match(&self.fields, object)
    }
}

async fn handle(
    inner: Arc<Inner>,
    method: Method,
    uri: Uri,
    headers: HeaderMap,
    body: Bytes,
) -> Response {
    let path = uri.path().to_string();
    let query = uri.query().unwrap_or("").to_string();
    let content_type = headers
        .get("content-type")
        .and_then(|v| v.to_str().ok())
        .unwrap_or("")
        .to_string();
    let fault = {
        let mut st = inner.lock();
        st.requests.push(Request {
            method: method.to_string(),
            path: path.clone(),
            query: query.clone(),
            content_type: content_type.clone(),
        });
        if let Some(refused) = authorize(&mut st, method.as_str(), &path, &query) {
            return refused.into_response();
        }
        st.faults
            .iter_mut()
            .find(|f| {
                f.remaining > 0 && f.method == method.as_str() && path.contains(&f.path_contains)
            })
            .map(|f| {
                f.remaining -= 1;
                (f.status, f.delay)
            })
    };
    if let Some((status, delay)) = fault {
        tokio::time::sleep(delay).await;
        let reason = match status {
            409 => "Conflict",
            410 => "Expired",
            429 => "TooManyRequests",
            503 => "ServiceUnavailable",
            504 => "Timeout",
            _ => "InternalError",
        };
        return Status::new(status, reason, "injected fault").into_response();
    }
    let Some(target) = parse_path(&path) else {
        return Status::new(404, "NotFound", &format!("no route for {path}")).into_response();
    };
    let params = query_params(&query);
    let result = match (method.clone(), target.name.is_some()) {
        (Method::GET, false) if params.get("watch").is_some_and(|w| w == "true" || w == "1") => {
            return watch(inner, &target, &params);
        }
        (Method::GET, false) => list(&inner, &target, &params),
        (Method::GET, true) => {
            let st = inner.lock();
            st.objects
                .get(&target_key(&target))
                .cloned()
                .ok_or_else(|| not_found(&target))
        }
        (Method::POST, false) => parse_body(&body).and_then(|object| {
            let mut key = target_key(&target);
            key.name = object["metadata"]["name"]
                .as_str()
                .unwrap_or("")
                .to_string();
            create(&mut inner.lock(), key, object)
        }),
        (Method::PUT, true) => {
            parse_body(&body).and_then(|object| replace(&mut inner.lock(), &target, object))
        }
        (Method::PATCH, true) => parse_body(&body).and_then(|patch| {
            let manager = params.get("fieldManager").cloned().unwrap_or_default();
            patch_object(&mut inner.lock(), &target, &content_type, patch, &manager)
        }),
        (Method::DELETE, true) => {
            let mut st = inner.lock();
            delete(&mut st, &target_key(&target)).ok_or_else(|| not_found(&target))
        }
        _ => Err(Status::new(
            405,
            "MethodNotAllowed",
            &format!("{method} {path} is not modelled"),
        )),
    };
    let rv = inner.lock().rv;
    inner.changed.send_replace(rv);
    match result {
        Ok(v) => (
            StatusCode::OK,
            [("content-type", "application/json")],
            v.to_string(),
        )
            .into_response(),
        Err(s) => s.into_response(),
    }
}

fn target_key(t: &Target) -> Key {
    Key {
        gv: t.gv.clone(),
        plural: t.plural.clone(),
        namespace: t.namespace.clone().unwrap_or_default(),
        name: t.name.clone().unwrap_or_default(),
    }
}

fn not_found(t: &Target) -> Status {
    Status::new(
        404,
        "NotFound",
        &format!(
            "{} {:?} not found",
            t.plural,
            t.name.as_deref().unwrap_or("")
        ),
    )
}

fn parse_body(body: &Bytes) -> Result<Value, Status> {
    serde_json::from_slice(body)
        .map_err(|e| Status::new(400, "BadRequest", &format!("body is not JSON: {e}")))
}

fn filter_of(t: &Target, params: &BTreeMap<String, String>) -> Filter {
    Filter {
        gv: t.gv.clone(),
        plural: t.plural.clone(),
        namespace: t.namespace.clone(),
        labels: params.get("labelSelector").cloned().unwrap_or_default(),
        fields: params.get("fieldSelector").cloned().unwrap_or_default(),
    }
}

fn list(inner: &Inner, t: &Target, params: &BTreeMap<String, String>) -> Result<Value, Status> {
    let filter = filter_of(t, params);
    let st = inner.lock();
    let items: Vec<Value> = st
        .objects
        .iter()
        .filter(|(k, v)| filter.matches(k, v))
        .map(|(_, v)| v.clone())
        .collect();
    Ok(json!({
        "apiVersion": t.gv, "kind": "List",
        "metadata": {"resourceVersion": st.rv.to_string()},
        "items": items,
    }))
}

fn watch(inner: Arc<Inner>, t: &Target, params: &BTreeMap<String, String>) -> Response {
    let filter = filter_of(t, params);
    let since: u64 = params
        .get("resourceVersion")
        .and_then(|rv| rv.parse().ok())
        .unwrap_or(0);
    let timeout = params
        .get("timeoutSeconds")
        .and_then(|s| s.parse().ok())
        .unwrap_or(290u64);
    let (tx, rx) = tokio::sync::mpsc::channel::<Bytes>(64);
    let mut changed = inner.changed.subscribe();
    let gone = Bytes::from(format!(
        "{}\n",
        json!({"type": "ERROR", "object": {"apiVersion": "v1", "kind": "Status", "status": "Failure",
            "message": "too old resource version", "reason": "Expired", "code": 410}})
    ));
    let (epoch, disconnect, expired) = {
        let st = inner.lock();
        (
            st.watch_epoch,
            st.disconnect_epoch,
            since != 0 && since < st.expired_before,
        )
    };
    tokio::spawn(async move {
        if expired {
            let _ = tx.send(gone).await;
            return;
        }
        let deadline = tokio::time::Instant::now() + Duration::from_secs(timeout);
        let mut pos = since;
        if since == 0 {
            let (initial, rv): (Vec<Value>, u64) = {
                let st = inner.lock();
                (
                    st.objects
                        .iter()
                        .filter(|(k, v)| filter.matches(k, v))
                        .map(|(_, v)| v.clone())
                        .collect(),
                    st.rv,
                )
            };
            for object in initial {
                let line = format!("{}\n", json!({"type": "ADDED", "object": object}));
                if tx.send(Bytes::from(line)).await.is_err() {
                    return;
                }
            }
            pos = rv;
        }
        loop {
            if inner.lock().watch_epoch != epoch {
                let _ = tx.send(gone).await;
                return;
            }
            if inner.lock().disconnect_epoch != disconnect {
                return;
            }
            // The events and the version they reach, read under one lock: a change made
            // between two locks would be skipped by the watch, never sent.
            let events: Vec<Event> = {
                let st = inner.lock();
                let events = st
                    .log
                    .iter()
                    .filter(|e| e.rv > pos && filter.matches(&e.key, &e.object))
                    .cloned()
                    .collect();
                pos = pos.max(st.rv);
                events
            };
            for e in events {
                let line = format!("{}\n", json!({"type": e.kind, "object": e.object}));
                if tx.send(Bytes::from(line)).await.is_err() {
                    return;
                }
            }
            tokio::select! {
                r = changed.changed() => if r.is_err() { return },
                _ = tokio::time::sleep_until(deadline) => return,
                _ = tx.closed() => return,
            }
        }
    });
    (
        StatusCode::OK,
        [("content-type", "application/json")],
        Body::from_stream(futures::stream::unfold(rx, |mut rx| async move {
            rx.recv()
                .await
                .map(|b| (Ok::<_, std::convert::Infallible>(b), rx))
        })),
    )
        .into_response()
}

fn replace(st: &mut State, t: &Target, mut object: Value) -> Result<Value, Status> {
    let key = target_key(t);
    let current = st.objects.get(&key).cloned().ok_or_else(|| not_found(t))?;
    check_rv(&current, &object)?;
    let mut next = current.clone();
    if t.status {
        next["status"] = object.get("status").cloned().unwrap_or(Value::Null);
    } else {
        let status = current.get("status").cloned();
        let meta = object["metadata"]
            .as_object_mut()
            .ok_or_else(|| Status::new(400, "BadRequest", "metadata"))?;
        for k in [
            "uid",
            "creationTimestamp",
            "deletionTimestamp",
            "generation",
            "namespace",
        ] {
            if let Some(v) = current["metadata"].get(k) {
                meta.insert(k.into(), v.clone());
            }
        }
        next = object;
        if let Some(s) = status {
            next["status"] = s;
        }
        if current.get("spec") != next.get("spec") {
            bump_generation(&current, &mut next);
        }
    }
    Ok(finish(st, key, &current, next))
}

fn check_rv(current: &Value, incoming: &Value) -> Result<(), Status> {
    match incoming["metadata"]
        .get("resourceVersion")
        .and_then(Value::as_str)
    {
        Some(rv) if Some(rv) != current["metadata"]["resourceVersion"].as_str() => {
            Err(Status::new(
                409,
                "Conflict",
                "the object has been modified; please apply your changes to the latest version and try again",
            ))
        }
        _ => Ok(()),
    }
}

/// Stores `next` unless it equals `current` (no new resourceVersion, no event), and deletes
/// an object whose last finalizer went while it was being deleted.
fn finish(st: &mut State, key: Key, current: &Value, next: Value) -> Value {
    if &next == current {
        return next;
    }
    let stored = store(st, key.clone(), next);
    let deleting = stored["metadata"].get("deletionTimestamp").is_some();
    let no_finalizers = stored["metadata"]["finalizers"]
        .as_array()
        .is_none_or(|f| f.is_empty());
    if deleting && no_finalizers {
        return delete(st, &key).unwrap_or(stored);
    }
    stored
}

fn patch_object(
    st: &mut State,
    t: &Target,
    content_type: &str,
    patch: Value,
    manager: &str,
) -> Result<Value, Status> {
    let key = target_key(t);
    let current = st.objects.get(&key).cloned();
    if content_type.starts_with("application/apply-patch") {
        let applied_key = (key.clone(), manager.to_string(), t.status);
        let previous = st.applied.get(&applied_key).cloned().unwrap_or(Value::Null);
        st.applied.insert(applied_key, patch.clone());
        let Some(current) = current else {
            if t.status {
                return Err(not_found(t));
            }
            return create(st, key, patch);
        };
        let next = if t.status {
            let mut next = current.clone();
            next["status"] = patch.get("status").cloned().unwrap_or(Value::Null);
            next
        } else {
            apply(&current, &previous, &patch)
        };
        return Ok(finish(st, key, &current, next));
    }
    let current = current.ok_or_else(|| not_found(t))?;
    let mut next = current.clone();
    if content_type.starts_with("application/merge-patch")
        || content_type.starts_with("application/strategic-merge-patch")
    {
        check_rv(&current, &patch)?;
        json_patch::merge(&mut next, &patch);
    } else if content_type.starts_with("application/json-patch") {
        let ops: json_patch::Patch = serde_json::from_value(patch)
            .map_err(|e| Status::new(400, "BadRequest", &format!("not a JSON patch: {e}")))?;
        json_patch::patch(&mut next, &ops)
            .map_err(|e| Status::new(422, "Invalid", &format!("JSON patch failed: {e}")))?;
    } else {
        return Err(Status::new(
            415,
            "UnsupportedMediaType",
            &format!("patch type {content_type:?}"),
        ));
    }
    // The main resource ignores status changes and the status subresource everything else.
    if t.status {
        let mut only_status = current.clone();
        only_status["status"] = next.get("status").cloned().unwrap_or(Value::Null);
        next = only_status;
    } else {
        match current.get("status") {
            Some(s) => next["status"] = s.clone(),
            None => {
                if let Some(o) = next.as_object_mut() {
                    o.remove("status");
                }
            }
        }
        for k in ["uid", "creationTimestamp", "resourceVersion", "generation"] {
            next["metadata"][k] = current["metadata"][k].clone();
        }
        if current.get("spec") != next.get("spec") {
            bump_generation(&current, &mut next);
        }
    }
    Ok(finish(st, key, &current, next))
}

/// Server-side apply, simplified: labels, annotations and finalizers merge by key with other
/// managers' (keys this manager applied before and dropped now are removed); every other
/// top-level field the manager sends is owned whole, and one it sent before and dropped now is
/// removed.
fn apply(current: &Value, previous: &Value, patch: &Value) -> Value {
    let mut next = current.clone();
    for field in ["labels", "annotations"] {
        let before = previous["metadata"][field]
            .as_object()
            .cloned()
            .unwrap_or_default();
        let now = patch["metadata"][field]
            .as_object()
            .cloned()
            .unwrap_or_default();
        let mut merged: Map<String, Value> = current["metadata"][field]
            .as_object()
            .cloned()
            .unwrap_or_default();
        for k in before.keys() {
            if !now.contains_key(k) {
                merged.remove(k);
            }
        }
        merged.extend(now);
        set_or_remove(&mut next["metadata"], field, merged);
    }
    {
        let set = |v: &Value| -> Vec<Value> { v.as_array().cloned().unwrap_or_default() };
        let before = set(&previous["metadata"]["finalizers"]);
        let now = set(&patch["metadata"]["finalizers"]);
        let mut merged: Vec<Value> = set(&current["metadata"]["finalizers"])
            .into_iter()
            .filter(|f| !before.contains(f) || now.contains(f))
            .collect();
        for f in now {
            if !merged.contains(&f) {
                merged.push(f);
            }
        }
        if merged.is_empty() {
            if let Some(m) = next["metadata"].as_object_mut() {
                m.remove("finalizers");
            }
        } else {
            next["metadata"]["finalizers"] = Value::Array(merged);
        }
    }
    if let Some(refs) = patch["metadata"].get("ownerReferences") {
        next["metadata"]["ownerReferences"] = refs.clone();
    }
    let owned = |v: &Value| -> Vec<String> {
        v.as_object()
            .map(|o| {
                o.keys()
                    .filter(|k| {
                        !matches!(k.as_str(), "apiVersion" | "kind" | "metadata" | "status")
                    })
                    .cloned()
                    .collect()
            })
            .unwrap_or_default()
    };
    let obj = next.as_object_mut().expect("object");
    for k in owned(previous) {
        if patch.get(&k).is_none() {
            obj.remove(&k);
        }
    }
    for k in owned(patch) {
        obj.insert(k.clone(), patch[&k].clone());
    }
    if current.get("spec") != next.get("spec") {
        bump_generation(current, &mut next);
    }
    next
}

fn set_or_remove(meta: &mut Value, field: &str, map: Map<String, Value>) {
    if map.is_empty() {
        if let Some(m) = meta.as_object_mut() {
            m.remove(field);
        }
    } else {
        meta[field] = Value::Object(map);
    }
}
