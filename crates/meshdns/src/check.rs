//! `meshdns check`: everything `serve` would read, read by the same functions, printed
//! instead of served.

use anyhow::Result;
use meshdns_sources::{Loaded, SourceInput, assemble, load_source};
use meshdns_zone::BuildDefaults;

use crate::cli::CheckCmd;
use crate::config::{ConfigFile, ServeConfig};
use crate::serve::Refused;

/// `check --config-only`: reads the config file as every command would (unknown keys and bad
/// values are errors naming the file and key), the `iroh:` block's rules (a zone reference,
/// the `_iroh` prefix) when it has one, and resolves `serve`'s plan from the `serve:` block
/// (and any flags) as `serve` would: every rule between settings, with the TSIG key file and
/// certificate files it names read. No records file is read.
pub fn config(cmd: &CheckCmd) -> Result<(), Refused> {
    // clap requires `-c` with `--config-only`.
    let path = cmd
        .serve
        .config
        .as_deref()
        .unwrap_or(std::path::Path::new(""));
    let file = ConfigFile::read(path).map_err(|e| Refused::one(&e))?;
    if let Some(iroh) = &file.iroh {
        iroh.settings().map_err(|e| Refused::one(&e))?;
    }
    let settings = cmd.serve.clone().resolve().map_err(|e| Refused::one(&e))?;
    crate::serve::plan::resolve(&settings)?;
    eprintln!("{}: ok", path.display());
    Ok(())
}

/// Prints every problem (`FILE: ENTRY: REASON`) on stdout and a summary per source on stderr;
/// `Ok(false)` when a source cannot be used at all.
pub fn check(settings: &ServeConfig) -> Result<bool> {
    let parse = settings.parse_settings();
    let defaults = BuildDefaults {
        default_ttl: settings.default_ttl(),
        serial: 1,
    };
    let mut usable = true;
    let mut loaded: Vec<(String, Loaded)> = Vec::new();
    for source in settings.files() {
        let label = source.path.display().to_string();
        match load_source(&source, &parse, defaults) {
            Ok(l) => {
                // A directory's broken files: each unusable, the rest of it loaded.
                for problem in &l.unusable {
                    println!("{problem}");
                    eprintln!("{}: unusable", problem.file);
                    usable = false;
                }
                for problem in &l.problems {
                    println!("{problem}");
                }
                loaded.push((label, l));
            }
            Err(problem) => {
                println!("{problem}");
                eprintln!("{label}: unusable");
                usable = false;
            }
        }
    }
    let inputs: Vec<SourceInput<'_>> = loaded
        .iter()
        .map(|(label, l)| SourceInput {
            label,
            compiled: &l.compiled,
        })
        .collect();
    let declared = settings.declared_zones();
    let (catalog, mut refused) = assemble(&inputs, &declared, &settings.generated(), defaults);
    let views: Vec<String> = settings.views.iter().map(|v| v.name.clone()).collect();
    refused.extend(meshdns_sources::snapshot::unconfigured_views(
        &inputs, &views,
    ));
    // What each view refuses beyond what every client's catalog does, as `serve` reports it.
    if meshdns_sources::snapshot::has_tagged(&inputs) {
        for view in &views {
            let (_, view_refused) = meshdns_sources::snapshot::assemble_view(
                &inputs,
                view,
                &declared,
                &settings.generated(),
                defaults,
            );
            for p in view_refused {
                if !refused.contains(&p) {
                    refused.push(p);
                }
            }
        }
    }
    for problem in &refused {
        println!("{problem}");
    }
    for (label, l) in &loaded {
        let skipped = l.problems.len() + refused.iter().filter(|p| &p.file == label).count();
        eprintln!(
            "{label}: ok: {} records served (SOA and NS included) in {} zone(s), {skipped} skipped",
            l.records(),
            l.compiled.zones.len()
        );
    }
    eprintln!(
        "{} zone(s), {} records served in all",
        catalog.zones().len(),
        catalog.record_count()
    );
    Ok(usable)
}
