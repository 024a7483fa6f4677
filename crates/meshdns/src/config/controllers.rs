//! The `iroh:` and `mesh:` blocks and the flags of the controllers (and of `render iroh`,
//! which runs the iroh controller's planner): one declaration per setting.

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::time::Duration;

use anyhow::{Result, bail};
use clap::Args;
use meshdns_iroh::connector::IrohSettings;
use serde::Deserialize;

use super::defaults;
use super::values::{Layer, LogFormat, layer_fields, rebase, toggle};

/// The iroh controller's block: datum's `connector.iroh` keys, plus meshdns's own
/// (`fieldManager`, `clusterName`, `includeLocal`, `sourceClusters`, `withdrawExpiredLeases`).
#[derive(Debug, Clone, Default, Args, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
#[command(next_help_heading = "iroh")]
pub struct IrohConfig {
    /// The DNSZone the records go into (its namespace is where DNSRecordSets are written).
    #[command(flatten)]
    #[serde(default)]
    pub dns_zone_ref: ZoneRef,
    /// First label of record names; must be _iroh, the only one iroh queries [default: _iroh].
    #[arg(long, value_name = "LABEL")]
    pub record_prefix: Option<String>,
    /// Labels between the z32 label and the zone origin [default: none].
    #[arg(long, value_name = "LABELS")]
    pub record_suffix: Option<String>,
    /// TTL of every TXT entry, in seconds [default: 5].
    #[arg(long, value_name = "SECONDS")]
    pub ttl_seconds: Option<u32>,
    /// Publish at all; when false the controller only releases records and removes its
    /// finalizers [default: true in a meshdns file, false in datum's, as datum].
    #[arg(long, value_name = "BOOL", num_args = 0..=1, require_equals = true,
        default_missing_value = "true", overrides_with = "no_dns_enabled")]
    pub dns_enabled: Option<bool>,
    /// Do not publish (the same as --dns-enabled=false).
    #[arg(long, overrides_with = "dns_enabled")]
    #[serde(skip)]
    pub no_dns_enabled: bool,
    /// kubeconfig of the cluster that holds the DNSRecordSets [default: the local cluster].
    #[arg(long = "downstream-kubeconfig", value_name = "FILE")]
    pub downstream_kubeconfig_path: Option<PathBuf>,
    /// Server-side apply field manager [default: network-services-operator/iroh-dns].
    #[arg(long, value_name = "NAME")]
    pub field_manager: Option<String>,
    /// Name of the local cluster in claim labels [default: local].
    #[arg(long, visible_alias = "cluster", value_name = "NAME")]
    pub cluster_name: Option<String>,
    /// Publish the local cluster's Connectors [default: true].
    #[arg(long, value_name = "BOOL", num_args = 0..=1, require_equals = true,
        default_missing_value = "true", overrides_with = "no_include_local")]
    pub include_local: Option<bool>,
    /// Do not publish the local cluster's Connectors (the same as --include-local=false).
    #[arg(long, overrides_with = "include_local")]
    #[serde(skip)]
    pub no_include_local: bool,
    /// Further clusters whose Connectors are published (config file only).
    #[arg(skip)]
    #[serde(default)]
    pub source_clusters: Vec<ClusterRef>,
    /// Withdraw a Connector's records while its Lease is expired [default: false].
    #[arg(long, value_name = "BOOL", num_args = 0..=1, require_equals = true,
        default_missing_value = "true", overrides_with = "no_withdraw_expired_leases")]
    pub withdraw_expired_leases: Option<bool>,
    /// Keep records while a Lease is expired (the same as --withdraw-expired-leases=false).
    #[arg(long, overrides_with = "withdraw_expired_leases")]
    #[serde(skip)]
    pub no_withdraw_expired_leases: bool,
}

/// `{namespace, name}` of the DNSZone.
#[derive(Debug, Clone, Default, Args, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ZoneRef {
    /// Namespace of the DNSZone, and of every DNSRecordSet written.
    #[arg(
        long = "dns-zone-namespace",
        id = "dns_zone_namespace",
        value_name = "NS"
    )]
    pub namespace: Option<String>,
    /// Name of the DNSZone.
    #[arg(long = "dns-zone-name", id = "dns_zone_name", value_name = "NAME")]
    pub name: Option<String>,
}

impl Layer for ZoneRef {
    fn fill(&mut self, lower: ZoneRef) {
        layer_fields!(self, lower, ZoneRef { namespace, name });
    }
}

impl IrohConfig {
    /// These settings (flags) over `file`'s, field by field.
    pub fn over(mut self, file: IrohConfig) -> IrohConfig {
        self.dns_enabled = toggle(self.dns_enabled, self.no_dns_enabled);
        self.include_local = toggle(self.include_local, self.no_include_local);
        self.withdraw_expired_leases = toggle(
            self.withdraw_expired_leases,
            self.no_withdraw_expired_leases,
        );
        layer_fields!(
            self,
            file,
            IrohConfig {
                dns_zone_ref,
                record_prefix,
                record_suffix,
                ttl_seconds,
                dns_enabled,
                no_dns_enabled,
                downstream_kubeconfig_path,
                field_manager,
                cluster_name,
                include_local,
                no_include_local,
                source_clusters,
                withdraw_expired_leases,
                no_withdraw_expired_leases,
            }
        );
        self
    }

    /// Resolves the file's relative paths against its directory.
    pub fn rebase(&mut self, base: &Path) {
        let clusters = self.source_clusters.iter_mut();
        let paths = clusters.filter_map(|c| c.kubeconfig_path.as_mut());
        for path in paths.chain(&mut self.downstream_kubeconfig_path) {
            rebase(path, base);
        }
    }

    /// The planner's settings, or every problem with them (`iroh.dnsZoneRef.namespace:
    /// required`, …).
    pub fn settings(&self) -> Result<IrohSettings> {
        let s = IrohSettings {
            zone_namespace: self.dns_zone_ref.namespace.clone().unwrap_or_default(),
            zone_name: self.dns_zone_ref.name.clone().unwrap_or_default(),
            record_prefix: self
                .record_prefix
                .clone()
                .unwrap_or_else(|| meshdns_iroh::IROH_LABEL.to_string()),
            record_suffix: self.record_suffix.clone().unwrap_or_default(),
            ttl: self.ttl_seconds.unwrap_or(meshdns_iroh::DEFAULT_TTL),
        };
        let problems = s.problems();
        if !problems.is_empty() {
            bail!("{}", problems.join("; "));
        }
        Ok(s)
    }

    /// The local cluster's name in claim labels.
    pub fn cluster_name(&self) -> &str {
        self.cluster_name
            .as_deref()
            .unwrap_or(defaults::CLUSTER_NAME)
    }
}

/// A cluster reached through a kubeconfig file or Secret.
#[derive(Debug, Clone, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ClusterRef {
    /// The cluster's name (in labels, logs and conditions).
    pub name: String,
    /// A kubeconfig file.
    #[serde(default)]
    pub kubeconfig_path: Option<PathBuf>,
    /// A kubeconfig in a Secret of the local cluster.
    #[serde(default)]
    pub kubeconfig_secret_ref: Option<SecretRef>,
}

/// `{namespace, name, key}` of a Secret holding a kubeconfig.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SecretRef {
    /// Namespace.
    pub namespace: String,
    /// Name.
    pub name: String,
    /// Key in `data` [default: `kubeconfig`].
    #[serde(default = "default_secret_key")]
    pub key: String,
}

fn default_secret_key() -> String {
    "kubeconfig".into()
}

/// The mesh controller's block.
#[derive(Debug, Clone, Default, Args, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
#[command(next_help_heading = "mesh")]
pub struct MeshConfig {
    /// Namespace of the ClusterMeshes and their kubeconfig Secrets [default: $POD_NAMESPACE,
    /// else default].
    #[arg(long, value_name = "NS")]
    pub namespace: Option<String>,
    /// Re-plan every mesh this often even when nothing changed, in seconds [default: 300].
    #[arg(long, value_name = "SECONDS")]
    pub resync_seconds: Option<u64>,
}

impl MeshConfig {
    /// These settings (flags) over `file`'s, field by field.
    pub fn over(mut self, file: MeshConfig) -> MeshConfig {
        layer_fields!(
            self,
            file,
            MeshConfig {
                namespace,
                resync_seconds
            }
        );
        self
    }

    /// The namespace served: the block's (flag or file), else the Pod's own.
    pub fn namespace(&self) -> String {
        self.namespace.clone().unwrap_or_else(defaults::namespace)
    }

    /// The periodic re-plan.
    pub fn resync(&self) -> Duration {
        self.resync_seconds
            .map_or(defaults::MESH_RESYNC, |s| Duration::from_secs(s.max(1)))
    }
}

/// Flags of both controllers that concern the process, not the block.
#[derive(Debug, Clone, Args)]
#[command(next_help_heading = "Process")]
pub struct ControllerArgs {
    /// kubeconfig of the cluster the controller runs against [default: in-cluster, then
    /// $KUBECONFIG, ~/.kube/config].
    #[arg(long, value_name = "FILE")]
    pub kubeconfig: Option<PathBuf>,
    /// Metrics and health (/metrics, /healthz) on this address.
    #[arg(long, value_name = "ADDR", default_value = defaults::CONTROLLER_HTTP)]
    pub http: SocketAddr,
    /// Elect one active replica through a Lease [default: true].
    #[arg(long, value_name = "BOOL", num_args = 0..=1, require_equals = true,
        default_missing_value = "true", overrides_with = "no_leader_elect")]
    pub leader_elect: Option<bool>,
    /// Run without leader election (the same as --leader-elect=false).
    #[arg(long, overrides_with = "leader_elect")]
    pub no_leader_elect: bool,
    /// Namespace of the leader-election Lease [default: the Pod's, else default].
    #[arg(long, value_name = "NS", env = "POD_NAMESPACE")]
    pub leader_election_namespace: Option<String>,
    /// Log level or filter, e.g. info or meshdns=debug (RUST_LOG wins) [default: info].
    #[arg(long, value_name = "FILTER", env = "MESHDNS_LOG_LEVEL")]
    pub log_level: Option<String>,
    /// Log format [default: text].
    #[arg(long, value_enum, env = "MESHDNS_LOG_FORMAT")]
    pub log_format: Option<LogFormat>,
    /// Log as JSON (the same as --log-format json).
    #[arg(long, env = "MESHDNS_LOG_JSON", hide = true)]
    pub log_json: bool,
}

impl ControllerArgs {
    /// Whether to elect a leader.
    pub fn leader_elect(&self) -> bool {
        toggle(self.leader_elect, self.no_leader_elect).unwrap_or(true)
    }

    /// The Lease's namespace.
    pub fn lease_namespace(&self) -> String {
        self.leader_election_namespace
            .clone()
            .filter(|ns| !ns.is_empty())
            .unwrap_or_else(|| defaults::NAMESPACE.into())
    }

    /// The log format asked for.
    pub fn log_format(&self) -> LogFormat {
        match (self.log_format, self.log_json) {
            (Some(f), _) => f,
            (None, true) => LogFormat::Json,
            (None, false) => defaults::LOG_FORMAT,
        }
    }
}
