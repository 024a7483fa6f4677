//! The configuration of every command: one YAML file ([`ConfigFile`]) with a block per
//! command, and flags.
//!
//! Each block is one type that is both the file's schema (serde) and the command's flags
//! (clap): [`ServeConfig`] (`serve:`), [`IrohConfig`] (`iroh:`), [`MeshConfig`] (`mesh:`).
//! Every field is optional; a command merges its flags over the file's block field by field
//! (`over`), and what neither gives comes from [`defaults`]. A list given as flags replaces
//! the file's list. Values are parsed by the same functions ([`values`]) from flags and file,
//! so a bad value is refused before anything starts.
//!
//! One file may configure every command: `serve -c` reads only `serve:`, the controllers and
//! `render iroh` only their own block, and none rejects the others. Unknown keys are an error
//! naming the key and the file. Relative paths in the file are relative to its directory.
//! datum's `NetworkServicesOperator` config file is read as it is: its `connector.iroh` block
//! is the `iroh:` block (with `dnsEnabled` false unless it says otherwise, as datum).

pub mod controllers;
pub mod defaults;
pub mod serve;
pub mod values;

use std::path::Path;

use anyhow::{Context, Result};
use serde::Deserialize;

pub use controllers::{ClusterRef, ControllerArgs, IrohConfig, MeshConfig};
pub use serve::ServeConfig;

/// The whole configuration file.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ConfigFile {
    /// `meshdns serve` (and `meshdns check`).
    #[serde(default)]
    pub serve: ServeConfig,
    /// `meshdns controller iroh` and `meshdns render iroh`; `None` when the file has none.
    #[serde(default)]
    pub iroh: Option<IrohConfig>,
    /// `meshdns controller mesh`.
    #[serde(default)]
    pub mesh: MeshConfig,
}

/// datum's operator config: only `connector.iroh` is read; the operator's other keys are
/// its own.
#[derive(Debug, Deserialize)]
struct NetworkServicesOperator {
    #[serde(default)]
    connector: Option<NsoConnector>,
}

#[derive(Debug, Deserialize)]
struct NsoConnector {
    #[serde(default)]
    iroh: Option<IrohConfig>,
}

/// A config file's error naming the key path and the line the key is on
/// (`serve.ednsPayload: "100": expected … at line 5`). serde_yaml names part of the path itself
/// (`serve: …`), which is not said twice, and reports a value checked by our own parsers at the
/// start of its block: the line is found again from the path where the file is block-style
/// YAML, and serde_yaml's position is kept otherwise.
fn keyed(text: &str, path: &str, error: &serde_yaml::Error) -> String {
    let message = error.to_string();
    if path == "." {
        return message;
    }
    let mut rest = message.as_str();
    let segments: Vec<&str> = path.split('.').collect();
    for n in (1..=segments.len()).rev() {
        if let Some(r) = rest.strip_prefix(&format!("{}: ", segments[..n].join("."))) {
            rest = r;
            break;
        }
    }
    match (line_of(text, &segments), rest.rfind(" at line ")) {
        (Some(line), Some(at)) => format!("{path}: {} at line {line}", &rest[..at]),
        (Some(line), None) => format!("{path}: {rest} at line {line}"),
        (None, _) => format!("{path}: {rest}"),
    }
}

/// The line (1-based) of the key at `path` in block-style YAML: each segment is looked for
/// among the lines indented deeper than its parent's key, until the parent's block ends.
fn line_of(text: &str, path: &[&str]) -> Option<usize> {
    let lines: Vec<&str> = text.lines().collect();
    let (mut from, mut parent) = (0, None::<usize>);
    let mut found = None;
    for segment in path {
        let key = segment.split('[').next().unwrap_or(segment);
        let mut hit = None;
        for (i, line) in lines.iter().enumerate().skip(from) {
            let body = line.trim_start();
            if body.is_empty() || body.starts_with('#') {
                continue;
            }
            let indent = line.len() - body.len();
            if parent.is_some_and(|p| indent <= p) {
                break;
            }
            let body = body.strip_prefix("- ").unwrap_or(body);
            let named = [
                format!("{key}:"),
                format!("\"{key}\":"),
                format!("'{key}':"),
            ];
            if named.iter().any(|n| body.starts_with(n.as_str())) {
                hit = Some((i, indent));
                break;
            }
        }
        let (i, indent) = hit?;
        (from, parent, found) = (i + 1, Some(indent), Some(i + 1));
    }
    found
}

impl ConfigFile {
    /// Reads a meshdns config file, or datum's `NetworkServicesOperator` file.
    pub fn read(path: &Path) -> Result<ConfigFile> {
        let text = std::fs::read_to_string(path)
            .with_context(|| format!("cannot read config file {}", path.display()))?;
        let at = || format!("config file {}", path.display());
        let doc: serde_yaml::Value = serde_yaml::from_str(&text).with_context(at)?;
        let mut file = if doc.is_null() {
            ConfigFile::default()
        } else if doc.get("kind").and_then(serde_yaml::Value::as_str)
            == Some("NetworkServicesOperator")
        {
            let nso: NetworkServicesOperator = serde_yaml::from_str(&text).with_context(at)?;
            let mut iroh = nso.connector.and_then(|c| c.iroh);
            if let Some(iroh) = &mut iroh {
                iroh.dns_enabled.get_or_insert(false);
            }
            ConfigFile {
                iroh,
                ..ConfigFile::default()
            }
        } else {
            // From the text, not the parsed value, so errors carry the line and column; and
            // through serde_path_to_error, so they name the key (`serve.ednsPayload`).
            let de = serde_yaml::Deserializer::from_str(&text);
            serde_path_to_error::deserialize(de)
                .map_err(|e| anyhow::anyhow!("{}", keyed(&text, &e.path().to_string(), e.inner())))
                .with_context(at)?
        };
        let base = path.parent().unwrap_or(Path::new(""));
        file.serve.rebase(base);
        if let Some(iroh) = &mut file.iroh {
            iroh.rebase(base);
        }
        Ok(file)
    }

    /// The file at `path`, or an empty one.
    pub fn read_optional(path: Option<&Path>) -> Result<ConfigFile> {
        path.map_or_else(|| Ok(ConfigFile::default()), ConfigFile::read)
    }
}

#[cfg(test)]
mod tests;
