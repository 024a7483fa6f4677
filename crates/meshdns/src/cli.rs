//! The command line: commands, and the flags each adds to its config block.

use std::path::PathBuf;

use anyhow::{Context, Result, bail};
use clap::{Args, Parser, Subcommand};

use crate::config::{ConfigFile, ControllerArgs, IrohConfig, MeshConfig, ServeConfig};

/// `meshdns --version`: the crate version and the git commit it was built from (`unknown`
/// outside a git checkout; see `build.rs`).
const VERSION: &str = concat!(
    env!("CARGO_PKG_VERSION"),
    " (commit ",
    env!("MESHDNS_GIT_COMMIT"),
    ")"
);

/// Discovery DNS for overlay networks on Kubernetes.
#[derive(Debug, Parser)]
#[command(name = "meshdns", version = VERSION, about)]
pub struct Cli {
    /// What to run.
    #[command(subcommand)]
    pub command: Command,
}

/// The commands.
#[derive(Debug, Subcommand)]
#[allow(clippy::large_enum_variant)] // parsed once at start-up; boxing buys nothing
pub enum Command {
    /// Serve DNS authoritatively from records files, manifests, a cluster and pkarr
    /// publishes, reloading them when they change.
    Serve(ServeCmd),
    /// Read everything `serve` would read (the same flags and config file; positional FILEs
    /// are more --records) and print every problem as FILE: ENTRY: REASON; exit 1 if a
    /// source cannot be used, 2 if the configuration is refused (as `serve` refuses it).
    Check(CheckCmd),
    /// Run a controller's planner on manifest files and print what it would converge to.
    #[command(subcommand)]
    Render(RenderTarget),
    /// Run a controller against Kubernetes clusters (with leader election).
    #[command(subcommand)]
    Controller(ControllerTarget),
    /// Print the CRDs meshdns owns (ClusterMesh) and compatible copies of those it consumes
    /// (Connector, ConnectorClass, DNSZone, DNSRecordSet, Peer).
    Crds,
}

/// `meshdns controller …`.
#[derive(Debug, Subcommand)]
#[allow(clippy::large_enum_variant)] // parsed once at start-up; boxing buys nothing
pub enum ControllerTarget {
    /// Publish each Connector's iroh endpoint as a DNSRecordSet of TXT records.
    Iroh(IrohCmd),
    /// Keep Kilo WireGuard Peers in every member cluster of each ClusterMesh.
    Mesh(MeshCmd),
}

/// `meshdns render …`.
#[derive(Debug, Subcommand)]
#[allow(clippy::large_enum_variant)] // parsed once at start-up; boxing buys nothing
pub enum RenderTarget {
    /// The iroh controller: DNSRecordSets for Connectors, then each Connector's
    /// IrohDNSPublished condition.
    Iroh(RenderIrohCmd),
    /// The mesh controller: per target cluster the Peers it would keep, then each
    /// ClusterMesh's status and an Event per skipped node.
    Mesh(RenderMeshCmd),
    /// The zones DNSZones and DNSRecordSets make, as RFC 1035 zone-file text.
    Zone(RenderZoneCmd),
    /// The status dns-operator would write on each DNSZone and DNSRecordSet, as meshdns
    /// serves them (Accepted, Programmed, per-name recordSets, recordCount, nameservers).
    Status(RenderZoneCmd),
}

/// `meshdns serve`.
#[derive(Debug, Clone, Args)]
pub struct ServeCmd {
    /// Config file (YAML; its `serve:` block is read); flags override it.
    #[arg(long, short = 'c', value_name = "FILE")]
    pub config: Option<PathBuf>,
    /// The settings.
    #[command(flatten)]
    pub settings: ServeConfig,
}

impl ServeCmd {
    /// The flags over the config file's `serve:` block.
    pub fn resolve(self) -> Result<ServeConfig> {
        let file = ConfigFile::read_optional(self.config.as_deref())?;
        // Settings that only make sense together are checked by `serve::plan::resolve`.
        Ok(self.settings.over(file.serve))
    }
}

/// `meshdns check`.
#[derive(Debug, Args)]
pub struct CheckCmd {
    /// Records files (Tailscale records.json, meshdns YAML/JSON, or zone files by extension),
    /// checked before any --records.
    #[arg(value_name = "FILE")]
    pub files: Vec<PathBuf>,
    /// Only check the config file (`-c`): every block, every key and value, as each command
    /// would read it, and every rule `serve` applies before it starts (reading the TSIG key
    /// and certificate files it names); no records are read.
    #[arg(long, requires = "config")]
    pub config_only: bool,
    /// What `serve` would read.
    #[command(flatten)]
    pub serve: ServeCmd,
}

impl CheckCmd {
    /// What `serve` would be configured with, the positional files first among the records.
    pub fn resolve(self) -> Result<ServeConfig> {
        let mut settings = self.serve.resolve()?;
        let mut records = self.files;
        records.append(&mut settings.records);
        settings.records = records;
        if settings.kubernetes().is_some() {
            bail!("check reads files; a cluster's objects (--kubernetes) cannot be checked here");
        }
        if settings.files().is_empty() {
            bail!(
                "nothing to check: give files, --records, --zone-file, --manifests or a config file that lists some"
            );
        }
        Ok(settings)
    }
}

/// `meshdns controller iroh`.
#[derive(Debug, Args)]
pub struct IrohCmd {
    /// Config file: a meshdns file with an `iroh:` block, or datum's NetworkServicesOperator
    /// config; flags override it.
    #[arg(long, short = 'c', value_name = "FILE",
        required_unless_present_all = ["dns_zone_namespace", "dns_zone_name"])]
    pub config: Option<PathBuf>,
    /// The `iroh:` block's settings.
    #[command(flatten)]
    pub iroh: IrohConfig,
    /// Process flags.
    #[command(flatten)]
    pub process: ControllerArgs,
}

/// How errors name where the iroh settings came from: the config file, or the flags alone.
pub fn iroh_origin(config: Option<&std::path::Path>) -> String {
    config.map_or_else(|| "flags".to_string(), |p| p.display().to_string())
}

/// The flags over the config file's iroh block; a file without one is an error.
fn resolve_iroh(config: Option<&std::path::Path>, flags: IrohConfig) -> Result<IrohConfig> {
    let file = match config {
        Some(path) => ConfigFile::read(path)?.iroh.with_context(|| {
            format!(
                "config file {}: no `iroh:` block (or `connector.iroh` in a NetworkServicesOperator config)",
                path.display()
            )
        })?,
        None => IrohConfig::default(),
    };
    Ok(flags.over(file))
}

impl IrohCmd {
    /// The flags over the config file's iroh block.
    pub fn resolve(&self) -> Result<IrohConfig> {
        resolve_iroh(self.config.as_deref(), self.iroh.clone())
    }
}

/// `meshdns controller mesh`.
#[derive(Debug, Args)]
pub struct MeshCmd {
    /// Config file with a `mesh:` block (optional); flags override it.
    #[arg(long, short = 'c', value_name = "FILE")]
    pub config: Option<PathBuf>,
    /// The `mesh:` block's settings.
    #[command(flatten)]
    pub mesh: MeshConfig,
    /// Process flags.
    #[command(flatten)]
    pub process: ControllerArgs,
}

impl MeshCmd {
    /// The flags over the config file's mesh block.
    pub fn resolve(&self) -> Result<MeshConfig> {
        let file = ConfigFile::read_optional(self.config.as_deref())?;
        Ok(self.mesh.clone().over(file.mesh))
    }
}

/// `meshdns render iroh`.
#[derive(Debug, Args)]
pub struct RenderIrohCmd {
    /// Config file with an `iroh:` block, or datum's NetworkServicesOperator config; flags
    /// override it.
    #[arg(long, short = 'c', value_name = "FILE",
        required_unless_present_all = ["dns_zone_namespace", "dns_zone_name"])]
    pub config: Option<PathBuf>,
    /// The `iroh:` block's settings.
    #[command(flatten)]
    pub iroh: IrohConfig,
    /// Manifest files or directories (YAML, several documents, List kinds).
    #[arg(short = 'f', long = "filename", required = true, value_name = "PATH")]
    pub files: Vec<PathBuf>,
}

impl RenderIrohCmd {
    /// The flags over the config file's iroh block.
    pub fn resolve(&self) -> Result<IrohConfig> {
        resolve_iroh(self.config.as_deref(), self.iroh.clone())
    }
}

/// `meshdns render mesh`.
#[derive(Debug, Args)]
pub struct RenderMeshCmd {
    /// Directory with ClusterMesh manifests at the top and clusters/<name>/ Node lists.
    #[arg(short = 'f', long = "filename", value_name = "DIR")]
    pub dir: PathBuf,
}

/// `meshdns render zone`.
#[derive(Debug, Args)]
pub struct RenderZoneCmd {
    /// Manifest files or directories (YAML, several documents, List kinds).
    #[arg(short = 'f', long = "filename", required = true, value_name = "PATH")]
    pub files: Vec<PathBuf>,
    /// TTL of the synthesised SOA and NS, and the SOA minimum [default: 5].
    #[arg(long, value_name = "TTL", value_parser = crate::config::values::ttl)]
    pub default_ttl: Option<u32>,
    /// Zone served even when nothing gives it records, as `serve --zone` (repeatable).
    #[arg(long = "zone", value_name = "ORIGIN", value_parser = crate::config::values::name)]
    pub zones: Vec<meshdns_zone::Name>,
    /// The cluster's own objects to give names for, as `serve --kube-source`.
    #[arg(long = "kube-source", value_name = "KIND[,KIND]", value_parser = crate::config::values::kube_sources)]
    pub kube_sources: Vec<crate::config::values::KubeSources>,
    /// As `serve --kube-source-default-names`.
    #[arg(long, value_name = "ZONE", value_parser = crate::config::values::name)]
    pub kube_source_default_names: Option<meshdns_zone::Name>,
    /// As `serve --kube-source-internal`.
    #[arg(long)]
    pub kube_source_internal: bool,
    /// As `serve --kube-source-namespace` (repeatable).
    #[arg(long = "kube-source-namespace", value_name = "NS")]
    pub kube_source_namespaces: Vec<String>,
    /// As `serve --kube-source-selector`.
    #[arg(long, value_name = "SELECTOR", value_parser = crate::config::values::selector)]
    pub kube_source_selector: Option<meshdns_sources::cluster::Selector>,
    /// As `serve --kube-source-ingress-class` (repeatable).
    #[arg(long = "kube-source-ingress-class", value_name = "CLASS")]
    pub kube_source_ingress_classes: Vec<String>,
    /// As `serve --kube-source-gateway-class` (repeatable).
    #[arg(long = "kube-source-gateway-class", value_name = "CLASS")]
    pub kube_source_gateway_classes: Vec<String>,
    /// As `serve --reverse-zone`: the reverse zones of a range, a PTR for each address
    /// (repeatable).
    #[arg(long = "reverse-zone", value_name = "CIDR", value_parser = crate::config::values::cidr)]
    pub reverse_zones: Vec<meshdns_zone::Cidr>,
}

impl RenderZoneCmd {
    /// The cluster objects' settings these flags give (the rest as `serve`'s defaults).
    pub fn cluster_settings(&self) -> meshdns_sources::cluster::ClusterSettings {
        meshdns_sources::cluster::ClusterSettings {
            kinds: self.kube_sources.iter().flat_map(|k| k.0.clone()).collect(),
            default_names: self.kube_source_default_names.clone(),
            internal: self.kube_source_internal,
            default_ttl: self.default_ttl.unwrap_or(crate::config::defaults::TTL),
            namespaces: self.kube_source_namespaces.clone(),
            selector: self.kube_source_selector.clone().unwrap_or_default(),
            ingress_classes: self.kube_source_ingress_classes.clone(),
            gateway_classes: self.kube_source_gateway_classes.clone(),
        }
    }

    /// The zones served without records: `--zone`s and the default names' zone.
    pub fn declared_zones(&self) -> Vec<meshdns_zone::Name> {
        let default_names = self.kube_source_default_names.iter();
        self.zones.iter().chain(default_names).cloned().collect()
    }
}
