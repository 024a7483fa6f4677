//! The `serve:` block and the flags of `meshdns serve` (and of `meshdns check`, which reads
//! what `serve` would read): one declaration per setting.

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::time::Duration;

use clap::Args;
use meshdns_sources::{FileKind, FileSource, ParseSettings};
use meshdns_zone::Name;
use serde::Deserialize;

use super::defaults;
use super::values::{
    self, ConfigMapSpec, LogFormat, ZoneFileSpec, de, layer_fields, rebase, toggle,
};

/// Settings of `meshdns serve`. Every field is optional: unset on the command line, it comes
/// from the file; unset there, from [`defaults`].
#[derive(Debug, Clone, Default, Args, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct ServeConfig {
    /// DNS address to listen on, UDP and TCP (repeatable) [default: 0.0.0.0:1053 and [::]:1053].
    #[arg(long, value_name = "ADDR", help_heading = "Listeners")]
    #[serde(default)]
    pub listen: Vec<SocketAddr>,
    /// HTTP address for /metrics, /healthz, /readyz, DoH and pkarr [default: off].
    #[arg(long, value_name = "ADDR", help_heading = "Listeners")]
    pub http: Option<SocketAddr>,
    /// Serve DNS over HTTPS at /dns-query on the HTTP listener [default: true].
    #[arg(long, value_name = "BOOL", num_args = 0..=1, require_equals = true,
        default_missing_value = "true", overrides_with = "no_doh", help_heading = "Listeners")]
    pub doh: Option<bool>,
    /// Do not serve DNS over HTTPS (the same as --doh=false).
    #[arg(long, overrides_with = "doh", help_heading = "Listeners")]
    #[serde(skip)]
    pub no_doh: bool,
    /// This replica's name, sent in DNS replies to queries that ask for it (NSID, RFC 5001:
    /// `dig +nsid`) and as the Meshdns-Nsid header of /dns-query and /pkarr responses: up to
    /// 255 bytes of visible ASCII; "" turns it off [default: the host name; in Kubernetes, the
    /// Pod's name].
    #[arg(long, value_name = "TEXT", help_heading = "Listeners")]
    pub nsid: Option<String>,
    /// HTTPS address (e.g. [::]:443) for DoH, pkarr, /healthz and /readyz over TLS, HTTP/1.1
    /// and HTTP/2; /metrics stays on --http [default: off].
    #[arg(long, value_name = "ADDR", help_heading = "TLS")]
    pub https: Option<SocketAddr>,
    /// DNS-over-TLS address (RFC 7858; the standard port is 853, e.g. [::]:853), repeatable
    /// [default: off].
    #[arg(long, value_name = "ADDR", help_heading = "TLS")]
    #[serde(default)]
    pub dot: Vec<SocketAddr>,
    /// PEM certificate chain (leaf first) for --https and --dot; re-read when it changes
    /// [default: none].
    #[arg(long, value_name = "FILE", help_heading = "TLS")]
    pub tls_cert: Option<PathBuf>,
    /// PEM private key of --tls-cert [default: none].
    #[arg(long, value_name = "FILE", help_heading = "TLS")]
    pub tls_key: Option<PathBuf>,
    /// Present a certificate made at start-up for localhost, 127.0.0.1 and ::1 (tests and
    /// first starts; clients that verify will refuse it); with --acme-domain, only until the
    /// first ACME certificate [default: false].
    #[arg(long, value_name = "BOOL", num_args = 0..=1, require_equals = true,
        default_missing_value = "true", overrides_with = "no_tls_self_signed", help_heading = "TLS")]
    pub tls_self_signed: Option<bool>,
    /// Do not present a self-signed certificate (the same as --tls-self-signed=false).
    #[arg(long, overrides_with = "tls_self_signed", help_heading = "TLS")]
    #[serde(skip)]
    pub no_tls_self_signed: bool,
    /// A name to get a certificate for from an ACME CA, renewed before it expires; the account
    /// and certificates are kept in --data-dir (repeatable; a wildcard such as '*.example.org'
    /// needs --acme-challenge dns-01) [default: none].
    #[arg(long = "acme-domain", value_name = "NAME", value_parser = values::name, help_heading = "TLS")]
    #[serde(default, deserialize_with = "de::list")]
    pub acme_domains: Vec<Name>,
    /// Contact for the ACME account, such as mailto:ops@example.org (repeatable)
    /// [default: none].
    #[arg(long = "acme-contact", value_name = "MAILTO", help_heading = "TLS")]
    #[serde(default)]
    pub acme_contacts: Vec<String>,
    /// The ACME CA's directory URL [default: Let's Encrypt,
    /// https://acme-v02.api.letsencrypt.org/directory].
    #[arg(long, value_name = "URL", help_heading = "TLS")]
    pub acme_directory: Option<String>,
    /// How the CA validates the names: tls-alpn-01 on --https (reached on port 443), http-01
    /// on --http (reached on port 80), or dns-01 by a TXT record in a zone served here
    /// [default: tls-alpn-01].
    #[arg(long, value_enum, value_name = "TYPE", help_heading = "TLS")]
    pub acme_challenge: Option<values::AcmeChallenge>,
    /// CA certificates (PEM) to trust for the ACME directory's own HTTPS, beside the system's
    /// (a private CA, or a test CA) [default: none].
    #[arg(long, value_name = "FILE", help_heading = "TLS")]
    pub acme_ca: Option<PathBuf>,

    /// Records file to serve and watch: Tailscale records.json, meshdns YAML/JSON, or a zone
    /// file by extension (repeatable; the first to give a name and type wins).
    #[arg(long, value_name = "FILE", help_heading = "Records")]
    #[serde(default)]
    pub records: Vec<PathBuf>,
    /// RFC 1035 zone file, as FILE or ORIGIN=FILE (repeatable).
    #[arg(
        long = "zone-file",
        value_name = "[ORIGIN=]FILE",
        help_heading = "Records"
    )]
    #[serde(default, deserialize_with = "de::list")]
    pub zone_files: Vec<ZoneFileSpec>,
    /// Directory (or file) of Kubernetes manifests whose DNSZones and DNSRecordSets are
    /// served, watched like records files (repeatable).
    #[arg(long, value_name = "DIR", help_heading = "Records")]
    #[serde(default)]
    pub manifests: Vec<PathBuf>,
    /// Zone always served; Tailscale records.json names are placed in these (repeatable)
    /// [default: ts.net.].
    #[arg(long = "zone", value_name = "ORIGIN", value_parser = values::name, help_heading = "Records")]
    #[serde(default, deserialize_with = "de::list")]
    pub zones: Vec<Name>,
    /// Serve the reverse zones (in-addr.arpa, ip6.arpa) of this range, with a PTR for every A
    /// and AAAA record served inside it, from any source (repeatable; 100.64.0.0/10,
    /// fd7a:115c:a1e0::/48) [default: none].
    #[arg(long = "reverse-zone", value_name = "CIDR", value_parser = values::cidr, help_heading = "Records")]
    #[serde(default, rename = "reverseZones", deserialize_with = "de::list")]
    pub reverse_zones: Vec<meshdns_zone::Cidr>,
    /// Serve a catalog zone (RFC 9432, version 2) at this origin listing every other zone
    /// served, so secondaries configured with it alone follow zones as they come and go
    /// [default: none].
    #[arg(long = "catalog-zone", value_name = "ORIGIN", value_parser = values::name, help_heading = "Records")]
    #[serde(default, rename = "catalogZone", deserialize_with = "de::name")]
    pub catalog_zone: Option<Name>,
    /// TTL of records that give none, in seconds or with units (30, 1m) [default: 5].
    #[arg(long, value_name = "TTL", value_parser = values::ttl, help_heading = "Records")]
    #[serde(default, deserialize_with = "de::ttl")]
    pub default_ttl: Option<u32>,
    /// Check files this often even without a change notification [default: 1s].
    #[arg(long, value_name = "DURATION", value_parser = values::duration, help_heading = "Records")]
    #[serde(default, deserialize_with = "de::duration")]
    pub poll_interval: Option<Duration>,

    /// Serve the DNSZones and DNSRecordSets of a Kubernetes cluster, watched live [default: false].
    #[arg(long, value_name = "BOOL", num_args = 0..=1, require_equals = true,
        default_missing_value = "true", overrides_with = "no_kubernetes", help_heading = "Kubernetes")]
    pub kubernetes: Option<bool>,
    /// Do not serve a cluster's objects (the same as --kubernetes=false).
    #[arg(long, overrides_with = "kubernetes", help_heading = "Kubernetes")]
    #[serde(skip)]
    pub no_kubernetes: bool,
    /// A ConfigMap key holding records (Tailscale's records.json, or meshdns records), read
    /// through the API and followed live instead of from a mounted volume, as
    /// NAMESPACE/NAME[:KEY] (repeatable) [default key: records.json].
    #[arg(
        long = "configmap",
        value_name = "NS/NAME[:KEY]",
        help_heading = "Kubernetes"
    )]
    #[serde(default, rename = "configMaps", deserialize_with = "de::list")]
    pub configmaps: Vec<ConfigMapSpec>,
    /// With --kubernetes: write the status dns-operator writes on the DNSZones and
    /// DNSRecordSets served (Accepted, Programmed, per-name recordSets), from the replica that
    /// holds the Lease meshdns-serve-status in $POD_NAMESPACE [default: false].
    #[arg(long, value_name = "BOOL", num_args = 0..=1, require_equals = true,
        default_missing_value = "true", overrides_with = "no_write_status", help_heading = "Kubernetes")]
    pub write_status: Option<bool>,
    /// Do not write status (the same as --write-status=false).
    #[arg(long, overrides_with = "write_status", help_heading = "Kubernetes")]
    #[serde(skip)]
    pub no_write_status: bool,
    /// With --kubernetes: only this namespace [default: all namespaces].
    #[arg(long, value_name = "NS", help_heading = "Kubernetes")]
    pub kubernetes_namespace: Option<String>,
    /// With --kubernetes: kubeconfig [default: in-cluster, then $KUBECONFIG, ~/.kube/config].
    #[arg(long, value_name = "FILE", help_heading = "Kubernetes")]
    pub kubeconfig: Option<PathBuf>,

    /// The cluster's own objects to serve names for, from --manifests and with --kubernetes:
    /// service, ingress, httproute, grpcroute, tlsroute, dnsendpoint (comma-separated or
    /// repeated) [default: none].
    #[arg(long = "kube-source", value_name = "KIND[,KIND]", value_parser = values::kube_sources,
        help_heading = "Cluster objects")]
    #[serde(default, rename = "kubeSources", deserialize_with = "de::list")]
    pub kube_sources: Vec<values::KubeSources>,
    /// Also serve <name>.<namespace>.ZONE for every LoadBalancer and headless Service, as
    /// k8s_gateway does (ZONE is served) [default: off].
    #[arg(long, value_name = "ZONE", value_parser = values::name, help_heading = "Cluster objects")]
    #[serde(default, deserialize_with = "de::name")]
    pub kube_source_default_names: Option<Name>,
    /// Serve ClusterIP Services' addresses at their hostname annotation too, as external-dns's
    /// --publish-internal-services (internal-hostname names always are) [default: false].
    #[arg(long, value_name = "BOOL", num_args = 0..=1, require_equals = true,
        default_missing_value = "true", help_heading = "Cluster objects")]
    pub kube_source_internal: Option<bool>,
    /// Only objects of this namespace (repeatable) [default: all].
    #[arg(
        long = "kube-source-namespace",
        value_name = "NS",
        help_heading = "Cluster objects"
    )]
    #[serde(
        default,
        rename = "kubeSourceNamespaces",
        deserialize_with = "de::list"
    )]
    pub kube_source_namespaces: Vec<String>,
    /// Only objects whose labels match (key=value, key!=value, key, !key; comma-separated)
    /// [default: all].
    #[arg(long, value_name = "SELECTOR", value_parser = values::selector, help_heading = "Cluster objects")]
    #[serde(default, deserialize_with = "de::selector")]
    pub kube_source_selector: Option<meshdns_sources::cluster::Selector>,
    /// Only Ingresses of this class (spec.ingressClassName, else the kubernetes.io/ingress.class
    /// annotation; repeatable) [default: all].
    #[arg(
        long = "kube-source-ingress-class",
        value_name = "CLASS",
        help_heading = "Cluster objects"
    )]
    #[serde(
        default,
        rename = "kubeSourceIngressClasses",
        deserialize_with = "de::list"
    )]
    pub kube_source_ingress_classes: Vec<String>,
    /// Only routes attached to Gateways of this class (spec.gatewayClassName; repeatable)
    /// [default: all].
    #[arg(
        long = "kube-source-gateway-class",
        value_name = "CLASS",
        help_heading = "Cluster objects"
    )]
    #[serde(
        default,
        rename = "kubeSourceGatewayClasses",
        deserialize_with = "de::list"
    )]
    pub kube_source_gateway_classes: Vec<String>,

    /// Accept pkarr publishes on the HTTP listener (PUT /pkarr/<z32>) and serve them under
    /// ORIGIN as _iroh.<z32>.ORIGIN (repeatable) [default: off].
    #[arg(long = "pkarr", value_name = "ORIGIN", value_parser = values::name, help_heading = "pkarr relay")]
    #[serde(default, deserialize_with = "de::list")]
    pub pkarr: Vec<Name>,
    /// Where pkarr packets are kept across restarts [default: $XDG_DATA_HOME/meshdns, else
    /// ~/.local/share/meshdns].
    #[arg(long, value_name = "DIR", help_heading = "pkarr relay")]
    pub data_dir: Option<PathBuf>,
    /// Drop pkarr packets older than this [default: 7d].
    #[arg(long, value_name = "DURATION", value_parser = values::duration, help_heading = "pkarr relay")]
    #[serde(default, deserialize_with = "de::duration")]
    pub pkarr_max_age: Option<Duration>,
    /// Refuse pkarr packets dated more than this ahead of the server's clock (400); stored ones
    /// dated beyond it are dropped at start-up [default: 5m].
    #[arg(long, value_name = "DURATION", value_parser = values::duration, help_heading = "pkarr relay")]
    #[serde(default, deserialize_with = "de::duration")]
    pub pkarr_max_future: Option<Duration>,
    /// At most N pkarr publishes a minute per client IP address (after a burst, see
    /// --pkarr-put-burst); 0 = no limit [default: 0].
    #[arg(long, value_name = "N", help_heading = "pkarr relay")]
    pub pkarr_put_limit: Option<u32>,
    /// With --pkarr-put-limit: publishes one client address may make at once before the rate
    /// applies; size it for a fleet behind one NAT starting together [default: 1000].
    #[arg(long, value_name = "N", value_parser = values::at_least_one_u32, help_heading = "pkarr relay")]
    #[serde(default, deserialize_with = "de::at_least_one_u32")]
    pub pkarr_put_burst: Option<u32>,
    /// How long the pkarr store gathers publishes before one commit (fsync), ending early after
    /// a quarter of it without one: less CPU and disk per publish under load, for up to that
    /// much more publish latency [default: 10ms].
    #[arg(long, value_name = "DURATION", value_parser = values::duration, help_heading = "pkarr relay")]
    #[serde(default, deserialize_with = "de::duration")]
    pub pkarr_commit_window: Option<Duration>,
    /// A reverse proxy (address or prefix) whose Forwarded / X-Forwarded-For headers name the
    /// client, for the pkarr rate limit, logs and the view of a DoH query, on --http and
    /// --https (repeatable); ignored from other peers, and when a request has both headers
    /// [default: none].
    #[arg(long = "trusted-proxy", value_name = "CIDR", value_parser = values::cidr, help_heading = "pkarr relay")]
    #[serde(default, deserialize_with = "de::list")]
    pub trusted_proxies: Vec<meshdns_zone::Cidr>,

    /// Another replica of this pkarr relay, by its base URL (http://HOST:PORT or
    /// https://HOST[:PORT]): publishes are pushed to it and caught up from it (repeatable)
    /// [default: none].
    #[arg(long = "pkarr-peer", value_name = "URL", value_parser = values::peer_url, help_heading = "pkarr replication")]
    #[serde(default, deserialize_with = "de::list")]
    pub pkarr_peers: Vec<values::PeerUrl>,
    /// A name whose addresses are the other replicas (a headless Service), resolved every 5 s,
    /// and the HTTP port they listen on; this replica's own address is found and skipped
    /// (repeatable) [default: none].
    #[arg(long = "pkarr-peers-dns", value_name = "NAME:PORT", value_parser = values::host_port, help_heading = "pkarr replication")]
    #[serde(default, deserialize_with = "de::list")]
    pub pkarr_peers_dns: Vec<values::HostPort>,
    /// The token every replica shares (a file, from a Secret; at least 16 bytes): peers
    /// present it, so their pushes are not rate limited, and catch-up reads need it
    /// [default: none; required with peers].
    #[arg(long, value_name = "FILE", help_heading = "pkarr replication")]
    pub pkarr_peer_token_file: Option<PathBuf>,
    /// A publish's 204 waits until N peers hold it durably (503 after --pkarr-ack-timeout)
    /// [default: 0].
    #[arg(long, value_name = "N", help_heading = "pkarr replication")]
    pub pkarr_ack_replicas: Option<u32>,
    /// How long a publish waits for --pkarr-ack-replicas peers [default: 5s].
    #[arg(long, value_name = "DURATION", value_parser = values::duration, help_heading = "pkarr replication")]
    #[serde(default, deserialize_with = "de::duration")]
    pub pkarr_ack_timeout: Option<Duration>,
    /// At start, /readyz waits this long at most for the catch-up from the peers
    /// [default: 30s].
    #[arg(long, value_name = "DURATION", value_parser = values::duration, help_heading = "pkarr replication")]
    #[serde(default, deserialize_with = "de::duration")]
    pub pkarr_catchup_wait: Option<Duration>,
    /// How often each peer is read for what pushes missed: the longest two replicas stay
    /// apart when pushes are lost [default: 30s].
    #[arg(long, value_name = "DURATION", value_parser = values::duration, help_heading = "pkarr replication")]
    #[serde(default, deserialize_with = "de::duration")]
    pub pkarr_catchup_interval: Option<Duration>,
    /// Publishes waiting to be pushed to one peer, at most; beyond it they are dropped and
    /// the peer's catch-up reads them [default: 65536].
    #[arg(long, value_name = "N", value_parser = values::at_least_one_u32, help_heading = "pkarr replication")]
    #[serde(default, deserialize_with = "de::at_least_one_u32")]
    pub pkarr_peer_queue: Option<u32>,
    /// How long a publish may wait for others to be pushed with it to a peer: a steady stream
    /// goes in one request (and one commit on the peer) per window, not one per round trip;
    /// a publish waiting for --pkarr-ack-replicas goes at once [default: 40ms].
    #[arg(long, value_name = "DURATION", value_parser = values::duration, help_heading = "pkarr replication")]
    #[serde(default, deserialize_with = "de::duration")]
    pub pkarr_push_window: Option<Duration>,
    /// The largest page of its change log this replica serves a peer catching up (bytes of
    /// packets; at least 1024): a reader holds two at a time and commits one per page
    /// [default: 4194304].
    #[arg(long, value_name = "BYTES", value_parser = values::page_bytes, help_heading = "pkarr replication")]
    #[serde(default, deserialize_with = "de::page_bytes")]
    pub pkarr_page_bytes: Option<u32>,

    /// Join the Mainline DHT (BEP 44, as pkarr clients use it): keys not published here are
    /// looked up there, and every publish taken here is put there [default: false].
    #[arg(long, value_name = "BOOL", num_args = 0..=1, require_equals = true,
        default_missing_value = "true", overrides_with = "no_pkarr_dht", help_heading = "pkarr DHT")]
    pub pkarr_dht: Option<bool>,
    /// Do not join the Mainline DHT (the same as --pkarr-dht=false).
    #[arg(long, overrides_with = "pkarr_dht", help_heading = "pkarr DHT")]
    #[serde(skip)]
    pub no_pkarr_dht: bool,
    /// A DHT node to join through, HOST:PORT (repeatable) [default: the public bootstrap
    /// routers: router.bittorrent.com:6881, dht.transmissionbt.com:6881,
    /// dht.libtorrent.org:25401, relay.pkarr.org:6881].
    #[arg(long = "pkarr-dht-bootstrap", value_name = "HOST:PORT", value_parser = values::host_port, help_heading = "pkarr DHT")]
    #[serde(default, deserialize_with = "de::list")]
    pub pkarr_dht_bootstrap: Vec<values::HostPort>,
    /// The DHT node's UDP address, IPv4 (port 0: any free port) [default: 0.0.0.0:0].
    #[arg(long, value_name = "ADDR:PORT", help_heading = "pkarr DHT")]
    pub pkarr_dht_bind: Option<std::net::SocketAddrV4>,
    /// How long a query waits for a DHT lookup before SERVFAIL (100ms to 30s); each DHT
    /// request times out at a third of it [default: 1.5s].
    #[arg(long, value_name = "DURATION", value_parser = values::duration, help_heading = "pkarr DHT")]
    #[serde(default, deserialize_with = "de::duration")]
    pub pkarr_dht_timeout: Option<Duration>,
    /// Keys found in the DHT (or found absent) cached at most [default: 100000].
    #[arg(long, value_name = "N", value_parser = values::at_least_one_u32, help_heading = "pkarr DHT")]
    #[serde(default, deserialize_with = "de::at_least_one_u32")]
    pub pkarr_dht_cache: Option<u32>,
    /// DHT lookups in flight at most; beyond, a query that needs one gets SERVFAIL at once
    /// [default: 64].
    #[arg(long, value_name = "N", value_parser = values::at_least_one_u32, help_heading = "pkarr DHT")]
    #[serde(default, deserialize_with = "de::at_least_one_u32")]
    pub pkarr_dht_lookups: Option<u32>,
    /// DHT lookups one client network (IPv4 /24, IPv6 /56) may start per second (joining one
    /// in flight is free); beyond, SERVFAIL at once [default: 10].
    #[arg(long, value_name = "N", value_parser = values::at_least_one_u32, help_heading = "pkarr DHT")]
    #[serde(default, deserialize_with = "de::at_least_one_u32")]
    pub pkarr_dht_client_lookups: Option<u32>,
    /// Put every stored packet to the DHT again once per this interval (10s or more), spread
    /// evenly over it, after reading the DHT for a newer one (which replaces it); e.g. 1h
    /// [default: off].
    #[arg(long, value_name = "DURATION", value_parser = values::duration, help_heading = "pkarr DHT")]
    #[serde(default, deserialize_with = "de::duration")]
    pub pkarr_dht_republish: Option<Duration>,

    /// An address or prefix allowed to transfer zones (AXFR/IXFR) without a key (repeatable)
    /// [default: none].
    #[arg(long = "allow-transfer", value_name = "PREFIX", value_parser = values::cidr, help_heading = "Zone transfers")]
    #[serde(default, deserialize_with = "de::list")]
    pub allow_transfer: Vec<meshdns_zone::Cidr>,
    /// A TSIG key (from --tsig-keys) whose signed transfer requests are allowed from any
    /// address (repeatable) [default: none].
    #[arg(long = "allow-transfer-key", value_name = "NAME", value_parser = values::name, help_heading = "Zone transfers")]
    #[serde(default, deserialize_with = "de::list")]
    pub allow_transfer_keys: Vec<Name>,
    /// A view (split horizon): queries from these client addresses are answered with the
    /// data every view sees and the data given for this view; the first view holding a
    /// client wins, in order; a client in no view sees only what every view sees
    /// (repeatable) [default: none].
    #[arg(long = "view", value_name = "NAME=CIDR[,CIDR...]", value_parser = values::view, help_heading = "Records")]
    #[serde(default, deserialize_with = "de::list")]
    pub views: Vec<values::ViewSpec>,
    /// A TSIG key that selects a view for zone transfers, the SOA queries it signs and NOTIFY
    /// sent with it: VIEW=KEY (repeatable; --allow-transfer-key still grants the transfer).
    /// Requests not signed with such a key take the view of their address [default: none].
    #[arg(long = "view-key", value_name = "VIEW=KEY", value_parser = values::view_key, help_heading = "Zone transfers")]
    #[serde(default, rename = "viewKeys", deserialize_with = "de::list")]
    pub view_keys: Vec<values::ViewKey>,
    /// A zone written by dynamic UPDATE (RFC 2136) signed with a granted TSIG key; served
    /// with meshdns's SOA and NS before any update, kept in --data-dir (repeatable)
    /// [default: none].
    #[arg(long = "update-zone", value_name = "ORIGIN", value_parser = values::name, help_heading = "Dynamic UPDATE")]
    #[serde(default, rename = "updateZones", deserialize_with = "de::list")]
    pub update_zones: Vec<Name>,
    /// Grants a TSIG key (from --tsig-keys) UPDATE of one update zone (KEY=ORIGIN) or of
    /// every one (KEY); it does not grant transfers (repeatable) [default: none].
    #[arg(long = "allow-update", value_name = "KEY[=ORIGIN]", value_parser = values::update_grant, help_heading = "Dynamic UPDATE")]
    #[serde(default, rename = "allowUpdate", deserialize_with = "de::list")]
    pub allow_update: Vec<values::UpdateGrant>,
    /// UPDATEs accepted per second from one key, after a burst of twice as many; beyond,
    /// REFUSED [default: 100].
    #[arg(long, value_name = "PER_SECOND", help_heading = "Dynamic UPDATE")]
    #[serde(default, rename = "updateRate")]
    pub update_rate: Option<u32>,
    /// The most records one update zone holds; an UPDATE that would add beyond is REFUSED
    /// [default: 100000].
    #[arg(long, value_name = "N", help_heading = "Dynamic UPDATE")]
    #[serde(default, rename = "updateMaxRecords")]
    pub update_max_records: Option<usize>,
    /// A secondary to send NOTIFY to when any zone's serial changes, HOST:PORT, optionally
    /// @KEYNAME to sign it (repeatable) [default: none].
    #[arg(long = "notify", value_name = "HOST:PORT[@KEY]", value_parser = values::notify_target, help_heading = "Zone transfers")]
    #[serde(default, deserialize_with = "de::list")]
    pub notify: Vec<values::NotifySpec>,
    /// TSIG keys, in BIND's `key "name" { algorithm hmac-sha256; secret "…"; };` format (a
    /// mounted Secret in Kubernetes) [default: none].
    #[arg(
        long = "tsig-keys",
        value_name = "FILE",
        help_heading = "Zone transfers"
    )]
    pub tsig_keys: Option<PathBuf>,
    /// A zone to serve as a secondary: ORIGIN=HOST:PORT of its primary, optionally @KEYNAME
    /// to sign the transfers (repeatable) [default: none].
    #[arg(long = "secondary", value_name = "ORIGIN=HOST:PORT[@KEY]", value_parser = values::secondary, help_heading = "Zone transfers")]
    #[serde(default, deserialize_with = "de::list")]
    pub secondaries: Vec<values::SecondaryArg>,
    /// An address or prefix whose unsigned NOTIFY starts a refresh of every secondary zone,
    /// besides the primary's own addresses (repeatable); a NOTIFY signed with the zone's key is
    /// accepted from anywhere [default: none].
    #[arg(long = "allow-notify", value_name = "PREFIX", value_parser = values::cidr, help_heading = "Zone transfers")]
    #[serde(default, deserialize_with = "de::list")]
    pub allow_notify: Vec<meshdns_zone::Cidr>,
    /// Records of differences kept per zone for IXFR; a secondary further behind gets the whole
    /// zone [default: 100000].
    #[arg(long, value_name = "N", value_parser = values::at_least_one, help_heading = "Zone transfers")]
    #[serde(default, deserialize_with = "de::at_least_one")]
    pub ixfr_journal_records: Option<usize>,
    /// Transfers out served at once; past it a transfer request is REFUSED, as BIND does past
    /// `transfers-out` [default: 16].
    #[arg(long, value_name = "N", value_parser = values::at_least_one, help_heading = "Zone transfers")]
    #[serde(default, deserialize_with = "de::at_least_one")]
    pub xfr_max_concurrent: Option<usize>,

    /// Response rate limiting: UDP responses a second per client prefix and response class
    /// (positive, NXDOMAIN, NODATA, referral, error), up to 1000000; 0 turns it off
    /// [default: 0].
    #[arg(long, value_name = "N", value_parser = values::rrl_rate, help_heading = "Rate limiting")]
    #[serde(default, deserialize_with = "de::rrl_rate")]
    pub rrl_rate: Option<u32>,
    /// Every Nth limited response is sent truncated, so a real client retries over TCP; 0
    /// drops them all [default: 2].
    #[arg(long, value_name = "N", help_heading = "Rate limiting")]
    pub rrl_slip: Option<u32>,
    /// IPv4 clients are limited together by this prefix length [default: 24].
    #[arg(long, value_name = "LEN", value_parser = values::ipv4_prefix_len, help_heading = "Rate limiting")]
    #[serde(default, deserialize_with = "de::ipv4_prefix_len")]
    pub rrl_ipv4_prefix: Option<u8>,
    /// IPv6 clients are limited together by this prefix length [default: 56].
    #[arg(long, value_name = "LEN", value_parser = values::ipv6_prefix_len, help_heading = "Rate limiting")]
    #[serde(default, deserialize_with = "de::ipv6_prefix_len")]
    pub rrl_ipv6_prefix: Option<u8>,
    /// An address or prefix never rate limited, such as a monitoring probe or a resolver of
    /// yours (repeatable) [default: none].
    #[arg(long = "rrl-exempt", value_name = "PREFIX", value_parser = values::cidr, help_heading = "Rate limiting")]
    #[serde(default, deserialize_with = "de::list")]
    pub rrl_exempt: Vec<meshdns_zone::Cidr>,

    /// UDP sockets per listen address, sharing the port (SO_REUSEPORT) [default: one per core].
    #[arg(long, value_name = "N", value_parser = values::at_least_one, help_heading = "Tuning")]
    #[serde(default, deserialize_with = "de::at_least_one")]
    pub udp_sockets: Option<usize>,
    /// Worker threads answering queries [default: one per core].
    #[arg(long, value_name = "N", value_parser = values::at_least_one, help_heading = "Tuning")]
    #[serde(default, deserialize_with = "de::at_least_one")]
    pub workers: Option<usize>,
    /// EDNS UDP payload size to advertise and accept, 512 to 65535 [default: 1232].
    #[arg(long, value_name = "BYTES", value_parser = values::edns_payload, help_heading = "Tuning")]
    #[serde(default, deserialize_with = "de::edns_payload")]
    pub edns_payload: Option<u16>,
    /// Close TCP connections idle this long [default: 10s].
    #[arg(long, value_name = "DURATION", value_parser = values::duration, help_heading = "Tuning")]
    #[serde(default, deserialize_with = "de::duration")]
    pub tcp_idle_timeout: Option<Duration>,
    /// Maximum concurrent TCP and DoT connections; at the cap the one idle the longest is
    /// closed for a new one (one whose client has sent something is kept for its first
    /// 500 ms) [default: 1024].
    #[arg(long, value_name = "N", value_parser = values::at_least_one, help_heading = "Tuning")]
    #[serde(default, deserialize_with = "de::at_least_one")]
    pub tcp_max_connections: Option<usize>,
    /// Close HTTP and HTTPS connections with no request in progress this long; a request must
    /// arrive whole and be answered within it (else 408) [default: 30s].
    #[arg(long, value_name = "DURATION", value_parser = values::duration, help_heading = "Tuning")]
    #[serde(default, deserialize_with = "de::duration")]
    pub http_idle_timeout: Option<Duration>,
    /// Maximum concurrent connections on each of --http and --https; at the cap the one idle
    /// the longest is closed for a new one [default: 1024].
    #[arg(long, value_name = "N", value_parser = values::at_least_one, help_heading = "Tuning")]
    #[serde(default, deserialize_with = "de::at_least_one")]
    pub http_max_connections: Option<usize>,
    /// On SIGTERM, how long connections in progress (a transfer, a client still reading) may
    /// take to finish before everything left is closed [default: 5s; Kubernetes waits 30s
    /// before SIGKILL].
    #[arg(long, value_name = "DURATION", value_parser = values::duration, help_heading = "Tuning")]
    #[serde(default, deserialize_with = "de::duration")]
    pub shutdown_grace: Option<Duration>,

    /// Log level or filter, e.g. info or info,meshdns_sources=debug (RUST_LOG wins)
    /// [default: info].
    #[arg(
        long,
        value_name = "FILTER",
        env = "MESHDNS_LOG_LEVEL",
        help_heading = "Logging"
    )]
    pub log_level: Option<String>,
    /// Log format [default: text].
    #[arg(long, value_enum, env = "MESHDNS_LOG_FORMAT", help_heading = "Logging")]
    pub log_format: Option<LogFormat>,
}

impl ServeConfig {
    /// These settings (flags) over `file`'s, field by field.
    pub fn over(mut self, file: ServeConfig) -> ServeConfig {
        self.doh = toggle(self.doh, self.no_doh);
        self.kubernetes = toggle(self.kubernetes, self.no_kubernetes);
        self.pkarr_dht = toggle(self.pkarr_dht, self.no_pkarr_dht);
        self.write_status = toggle(self.write_status, self.no_write_status);
        self.tls_self_signed = toggle(self.tls_self_signed, self.no_tls_self_signed);
        layer_fields!(
            self,
            file,
            ServeConfig {
                listen,
                http,
                doh,
                no_doh,
                nsid,
                https,
                dot,
                tls_cert,
                tls_key,
                tls_self_signed,
                no_tls_self_signed,
                acme_domains,
                acme_contacts,
                acme_directory,
                acme_challenge,
                acme_ca,
                records,
                zone_files,
                manifests,
                zones,
                reverse_zones,
                catalog_zone,
                default_ttl,
                poll_interval,
                kubernetes,
                no_kubernetes,
                configmaps,
                write_status,
                no_write_status,
                kubernetes_namespace,
                kubeconfig,
                kube_sources,
                kube_source_default_names,
                kube_source_internal,
                kube_source_namespaces,
                kube_source_selector,
                kube_source_ingress_classes,
                kube_source_gateway_classes,
                pkarr,
                data_dir,
                pkarr_max_age,
                pkarr_max_future,
                pkarr_put_limit,
                pkarr_put_burst,
                pkarr_commit_window,
                trusted_proxies,
                pkarr_peers,
                pkarr_peers_dns,
                pkarr_peer_token_file,
                pkarr_ack_replicas,
                pkarr_ack_timeout,
                pkarr_catchup_wait,
                pkarr_catchup_interval,
                pkarr_peer_queue,
                pkarr_push_window,
                pkarr_page_bytes,
                pkarr_dht,
                no_pkarr_dht,
                pkarr_dht_bootstrap,
                pkarr_dht_bind,
                pkarr_dht_timeout,
                pkarr_dht_cache,
                pkarr_dht_lookups,
                pkarr_dht_client_lookups,
                pkarr_dht_republish,
                allow_transfer,
                allow_transfer_keys,
                update_zones,
                views,
                view_keys,
                allow_update,
                update_rate,
                update_max_records,
                notify,
                tsig_keys,
                secondaries,
                allow_notify,
                ixfr_journal_records,
                xfr_max_concurrent,
                rrl_rate,
                rrl_slip,
                rrl_ipv4_prefix,
                rrl_ipv6_prefix,
                rrl_exempt,
                udp_sockets,
                workers,
                edns_payload,
                tcp_idle_timeout,
                tcp_max_connections,
                http_idle_timeout,
                http_max_connections,
                shutdown_grace,
                log_level,
                log_format,
            }
        );
        self
    }

    /// Resolves the file's relative paths against its directory.
    pub fn rebase(&mut self, base: &Path) {
        let paths = self.records.iter_mut().chain(&mut self.manifests);
        let paths = paths.chain(self.zone_files.iter_mut().map(|z| &mut z.path));
        let paths = paths.chain(&mut self.data_dir).chain(&mut self.kubeconfig);
        let paths = paths.chain(&mut self.tsig_keys);
        let paths = paths.chain(&mut self.tls_cert).chain(&mut self.tls_key);
        let paths = paths
            .chain(&mut self.acme_ca)
            .chain(&mut self.pkarr_peer_token_file);
        for path in paths {
            rebase(path, base);
        }
    }

    /// The files to read, in precedence order: records, then zone files, then manifests.
    pub fn files(&self) -> Vec<FileSource> {
        let records = self.records.iter().map(|p| FileSource {
            path: p.clone(),
            kind: FileKind::Auto,
        });
        let zone_files = self.zone_files.iter().map(ZoneFileSpec::source);
        let manifests = self.manifests.iter().map(|p| FileSource {
            path: p.clone(),
            kind: FileKind::Manifests,
        });
        records.chain(zone_files).chain(manifests).collect()
    }

    /// How records are read: the default TTL and the zones Tailscale names go into.
    pub fn parse_settings(&self) -> ParseSettings {
        ParseSettings {
            default_ttl: self.default_ttl(),
            tailscale_zones: if self.zones.is_empty() {
                vec![defaults::tailscale_zone()]
            } else {
                self.zones.clone()
            },
            cluster: self.cluster_settings(),
        }
    }

    /// Which of the cluster's own objects give names, and how.
    pub fn cluster_settings(&self) -> meshdns_sources::cluster::ClusterSettings {
        meshdns_sources::cluster::ClusterSettings {
            kinds: self.kube_sources.iter().flat_map(|k| k.0.clone()).collect(),
            default_names: self.kube_source_default_names.clone(),
            internal: self.kube_source_internal.unwrap_or(false),
            default_ttl: self.default_ttl(),
            namespaces: self.kube_source_namespaces.clone(),
            selector: self.kube_source_selector.clone().unwrap_or_default(),
            ingress_classes: self.kube_source_ingress_classes.clone(),
            gateway_classes: self.kube_source_gateway_classes.clone(),
        }
    }

    /// Zones served even when nothing gives them records: `--zone`s, pkarr origins, and the
    /// zone of the cluster objects' default names.
    pub fn declared_zones(&self) -> Vec<Name> {
        let default_names = self.kube_source_default_names.iter();
        let names = self.zones.iter().chain(&self.pkarr).chain(default_names);
        names.cloned().collect()
    }

    /// The zones meshdns makes itself: reverse zones and the catalog zone.
    pub fn generated(&self) -> meshdns_sources::Generated {
        meshdns_sources::Generated {
            reverse: self.reverse_zones.clone(),
            catalog: self.catalog_zone.clone(),
        }
    }

    /// Whether zone transfers are served (some client is allowed, or a secondary notified).
    pub fn transfers(&self) -> bool {
        !self.allow_transfer.is_empty()
            || !self.allow_transfer_keys.is_empty()
            || !self.notify.is_empty()
    }

    /// Where the TLS listeners' certificate comes from, checked: one source when a TLS
    /// listener is on (ACME may start self-signed), none without one, and the listener the
    /// ACME challenge needs.
    pub fn tls(&self) -> Result<Option<TlsSource>, String> {
        let listeners = self.https.is_some() || !self.dot.is_empty();
        let files = match (&self.tls_cert, &self.tls_key) {
            (Some(cert), Some(key)) => Some(meshdns_server::tls::CertFiles {
                cert: cert.clone(),
                key: key.clone(),
            }),
            (None, None) => None,
            (Some(_), None) => return Err("--tls-cert needs --tls-key (tlsKey)".into()),
            (None, Some(_)) => return Err("--tls-key needs --tls-cert (tlsCert)".into()),
        };
        let self_signed = self.tls_self_signed.unwrap_or(false);
        let acme = !self.acme_domains.is_empty();
        if files.is_some() && (self_signed || acme) {
            return Err(
                "--tls-cert/--tls-key and --tls-self-signed or --acme-domain each give \
                 a certificate: choose one"
                    .into(),
            );
        }
        if !acme
            && (!self.acme_contacts.is_empty()
                || self.acme_directory.is_some()
                || self.acme_challenge.is_some()
                || self.acme_ca.is_some())
        {
            return Err(
                "--acme-contact, --acme-directory, --acme-challenge and --acme-ca need \
                 --acme-domain"
                    .into(),
            );
        }
        let source = if let Some(f) = files {
            Some(TlsSource::Files(f))
        } else if acme {
            let challenge = self
                .acme_challenge
                .unwrap_or(values::AcmeChallenge::TlsAlpn01);
            match challenge {
                values::AcmeChallenge::TlsAlpn01 if self.https.is_none() => {
                    return Err("--acme-challenge tls-alpn-01 (the default) is answered on \
                         --https: add --https ADDR (port 443 as the CA reaches it), or use \
                         --acme-challenge http-01 with --http"
                        .into());
                }
                values::AcmeChallenge::Http01 if self.http.is_none() => {
                    return Err(
                        "--acme-challenge http-01 is answered on --http: add --http \
                         ADDR (port 80 as the CA reaches it)"
                            .into(),
                    );
                }
                _ => {}
            }
            if challenge != values::AcmeChallenge::Dns01
                && let Some(wild) = self
                    .acme_domains
                    .iter()
                    .find(|d| d.wire().starts_with(b"\x01*"))
            {
                return Err(format!(
                    "--acme-domain {wild}: a CA validates a wildcard name by DNS-01 only: add \
                     --acme-challenge dns-01 (its zone must be served here)"
                ));
            }
            Some(TlsSource::Acme {
                challenge,
                self_signed_first: self_signed,
            })
        } else if self_signed {
            Some(TlsSource::SelfSigned)
        } else {
            None
        };
        match (listeners, source) {
            (true, None) => Err("--https and --dot need a certificate: --tls-cert and \
                 --tls-key, --acme-domain, or --tls-self-signed"
                .into()),
            (false, Some(_)) => Err(
                "a TLS certificate is set but no TLS listener: add --https ADDR or --dot ADDR"
                    .into(),
            ),
            (_, source) => Ok(source),
        }
    }

    /// TTL of records that give none.
    pub fn default_ttl(&self) -> u32 {
        self.default_ttl.unwrap_or(defaults::TTL)
    }

    /// The namespace to watch (`None`: all) when a cluster's objects are served.
    pub fn kubernetes(&self) -> Option<Option<&str>> {
        self.kubernetes
            .unwrap_or(false)
            .then_some(self.kubernetes_namespace.as_deref())
    }
}

/// Where the certificate of the TLS listeners comes from.
#[derive(Debug, Clone)]
pub enum TlsSource {
    /// PEM files, followed for changes.
    Files(meshdns_server::tls::CertFiles),
    /// Made at start-up for the loopback names.
    SelfSigned,
    /// From an ACME CA (`acme_*` settings).
    Acme {
        /// How the CA validates.
        challenge: values::AcmeChallenge,
        /// Serve a self-signed certificate until the first one is issued.
        self_signed_first: bool,
    },
}
