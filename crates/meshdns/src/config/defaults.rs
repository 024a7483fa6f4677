//! Every default of every setting, in one place. Help texts and `docs/configuration.md`
//! repeat these values; a change here is a change there.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::time::Duration;

use meshdns_zone::Name;

use super::values::LogFormat;

/// The DNS port `serve` listens on, on every address, without `--listen`.
pub const DNS_PORT: u16 = 1053;
/// TTL of records that give none; also the SOA minimum of synthesised SOAs.
pub const TTL: u32 = 5;
/// The zone Tailscale names go into without `--zone` (Tailscale's MagicDNS domain).
pub const TAILSCALE_ZONE: &str = "ts.net.";
/// EDNS UDP payload size (the DNS Flag Day 2020 value).
pub const EDNS_PAYLOAD: u16 = 1232;
/// Idle TCP connections are closed after this long.
pub const TCP_IDLE_TIMEOUT: Duration = Duration::from_secs(10);
/// `--shutdown-grace`: well inside Kubernetes' 30 s before SIGKILL.
pub const SHUTDOWN_GRACE: Duration = Duration::from_secs(5);
/// Concurrent TCP connections.
pub const TCP_MAX_CONNECTIONS: usize = 1024;
/// HTTP connections with no request in progress are closed after this long.
pub const HTTP_IDLE_TIMEOUT: Duration = Duration::from_secs(30);
/// Concurrent connections on each HTTP listener.
pub const HTTP_MAX_CONNECTIONS: usize = 1024;
/// Files are checked this often without a change notification.
pub const POLL_INTERVAL: Duration = Duration::from_secs(1);
/// Records of differences kept per zone for IXFR.
pub const IXFR_JOURNAL_RECORDS: usize = 100_000;
/// `--xfr-max-concurrent`: BIND's `transfers-out` is 10; a few more for a fleet of secondaries.
pub const XFR_MAX_CONCURRENT: usize = 16;
/// A burst of change notifications ends after this much quiet.
pub const DEBOUNCE: Duration = Duration::from_millis(20);
/// UPDATEs accepted per second from one key (`--update-rate`).
pub const UPDATE_RATE: u32 = 100;
/// DNS over HTTPS on the HTTP listener.
pub const DOH: bool = true;
/// pkarr packets older than this are dropped.
pub const PKARR_MAX_AGE: Duration = Duration::from_secs(7 * 24 * 3600);
/// pkarr packets dated further ahead of the clock than this are refused: the clock skew a
/// publisher may have, not a date that would pin its key.
pub const PKARR_MAX_FUTURE: Duration = Duration::from_secs(5 * 60);
/// pkarr publishes a minute per client address (0: no limit, for cluster-internal use).
pub const PKARR_PUT_LIMIT: u32 = 0;
/// pkarr publishes one client address may make at once when a limit is set: a thousand iroh
/// endpoints behind one NAT starting together each publish once.
pub const PKARR_PUT_BURST: u32 = 1000;
/// The pkarr store gathers publishes up to 10 ms while they keep coming (2.5 ms apart) before
/// one commit: at 1,000 publishes a second, 18% less CPU per publish than 5 ms on the replica
/// that takes them, for 3.5 ms more on the 204's p50 (docs/BENCHMARKS.md); a lone publish
/// waits 2.5 ms.
pub const PKARR_COMMIT_WINDOW: Duration = Duration::from_millis(10);
/// `--pkarr-ack-timeout`.
pub const PKARR_ACK_TIMEOUT: Duration = Duration::from_secs(5);
/// `--pkarr-catchup-wait`.
pub const PKARR_CATCHUP_WAIT: Duration = Duration::from_secs(30);
/// `--pkarr-catchup-interval`.
pub const PKARR_CATCHUP_INTERVAL: Duration = Duration::from_secs(30);
/// `--pkarr-peer-queue`.
pub const PKARR_PEER_QUEUE: usize = 65_536;
/// `--pkarr-push-window`.
pub const PKARR_PUSH_WINDOW: Duration = Duration::from_millis(40);
/// `--pkarr-dht-timeout`: below the 2 s a DHT request waits by default in the `mainline`
/// crate, so a query's resolver gets SERVFAIL before it gives up itself.
pub const PKARR_DHT_TIMEOUT: Duration = Duration::from_millis(1500);
/// `--pkarr-dht-cache`.
pub const PKARR_DHT_CACHE: usize = 100_000;
/// `--pkarr-dht-lookups`.
pub const PKARR_DHT_LOOKUPS: usize = 64;
/// `--pkarr-dht-client-lookups`.
pub const PKARR_DHT_CLIENT_LOOKUPS: u32 = 10;
/// The ACME directory without --acme-directory: Let's Encrypt's production CA.
pub const ACME_DIRECTORY: &str = meshdns_server::acme::LETS_ENCRYPT;
/// How long a `--tls-self-signed` certificate is valid.
pub const SELF_SIGNED_DAYS: u32 = 30;
/// Response rate limiting: off.
pub const RRL_RATE: u32 = 0;
/// Every second limited response is sent truncated (NSD's and Knot's default).
pub const RRL_SLIP: u32 = 2;
/// IPv4 clients are limited by /24, IPv6 by /56 (NSD's and Knot's defaults).
pub const RRL_IPV4_PREFIX: u8 = 24;
/// See [`RRL_IPV4_PREFIX`].
pub const RRL_IPV6_PREFIX: u8 = 56;
/// Log filter.
pub const LOG_LEVEL: &str = "info";
/// Log format.
pub const LOG_FORMAT: LogFormat = LogFormat::Text;

/// The controllers' metrics and health address.
pub const CONTROLLER_HTTP: &str = "127.0.0.1:8081";
/// Namespace of the leader-election Lease and of ClusterMeshes outside a Pod.
pub const NAMESPACE: &str = "default";
/// The mesh controller's periodic re-plan (the reference operator's).
pub const MESH_RESYNC: Duration = Duration::from_secs(300);
/// The iroh controller's name for the local cluster in claim labels.
pub const CLUSTER_NAME: &str = "local";

/// [`TAILSCALE_ZONE`] as a name.
pub fn tailscale_zone() -> Name {
    TAILSCALE_ZONE.parse().expect("a valid name")
}

/// The addresses `serve` listens on without `--listen`: every IPv4 and IPv6 address.
pub fn listen() -> [SocketAddr; 2] {
    [
        (std::net::Ipv4Addr::UNSPECIFIED, DNS_PORT).into(),
        (std::net::Ipv6Addr::UNSPECIFIED, DNS_PORT).into(),
    ]
}

/// The namespace the mesh controller works in when none is configured: the Pod's own
/// (`$POD_NAMESPACE`, from the downward API), else [`NAMESPACE`]. The `mesh.namespace` key of
/// the file must win over the Pod's, and clap's `env` would rank the variable above the file,
/// so it is read here, as a default. (The Lease's namespace has no file key; its flag reads
/// `$POD_NAMESPACE` through clap.)
pub fn namespace() -> String {
    std::env::var("POD_NAMESPACE")
        .ok()
        .filter(|v| !v.is_empty())
        .unwrap_or_else(|| NAMESPACE.into())
}

/// `--nsid` when none is set: the host name, as the kernel has it (in a Pod, the Pod's name),
/// else `$HOSTNAME`; `None` when neither names one.
pub fn nsid() -> Option<String> {
    let named = |name: String| Some(name.trim().to_string()).filter(|n| !n.is_empty());
    std::fs::read_to_string("/proc/sys/kernel/hostname")
        .ok()
        .and_then(named)
        .or_else(|| std::env::var("HOSTNAME").ok().and_then(named))
}

/// One per core.
pub fn cores() -> usize {
    std::thread::available_parallelism().map_or(1, |n| n.get())
}

/// `$XDG_DATA_HOME/meshdns`, else `~/.local/share/meshdns`, else `./meshdns-data`.
pub fn data_dir() -> PathBuf {
    if let Some(xdg) = std::env::var_os("XDG_DATA_HOME").filter(|v| !v.is_empty()) {
        return PathBuf::from(xdg).join("meshdns");
    }
    match std::env::var_os("HOME").filter(|v| !v.is_empty()) {
        Some(home) => PathBuf::from(home).join(".local/share/meshdns"),
        None => PathBuf::from("meshdns-data"),
    }
}
