//! Reading sources from disk: the one reader that `serve` (through [`crate::watch`]),
//! `check` and `render` share, so they see the same bytes and the same objects.
//!
//! A manifest directory is read file by file ([`read_manifest_dir`]): a file that cannot be
//! used is named in its problem, with the line within it, and does not take the other files
//! down with it.

use std::path::{Path, PathBuf};

use meshdns_zone::BuildDefaults;

use crate::content::{ParseSettings, Problem};
use crate::manifests::Manifest;
use crate::snapshot::{Loaded, load, load_parsed};
use crate::watch::FileSource;
use crate::{limits, manifests};

/// Whether a file in a manifest directory is read: `.yaml`, `.yml` or `.json`, and not a
/// directory. Anything else so named (a named pipe, a socket) is listed, so that reading it
/// refuses it by name ([`limits::read_file`]) rather than passing over it in silence.
fn is_manifest_file(path: &Path) -> bool {
    std::fs::metadata(path).is_ok_and(|m| !m.is_dir())
        && path
            .extension()
            .is_some_and(|e| e == "yaml" || e == "yml" || e == "json")
}

/// The manifest files of a directory, in name order.
pub fn manifest_files(dir: &Path) -> std::io::Result<Vec<PathBuf>> {
    let mut files: Vec<PathBuf> = std::fs::read_dir(dir)?
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| is_manifest_file(p))
        .collect();
    files.sort();
    Ok(files)
}

/// The objects of one manifests file's bytes (`label` names it in problems, and a broken
/// document's line is the file's own).
pub fn manifest_objects(label: &str, bytes: &[u8]) -> Result<Vec<Manifest>, Problem> {
    let text = std::str::from_utf8(bytes).map_err(|e| {
        Problem::new(
            label,
            "file",
            format!("not UTF-8 text (byte {})", e.valid_up_to()),
        )
    })?;
    if text.trim().is_empty() {
        return Ok(Vec::new());
    }
    manifests::objects(label, text)
}

/// One manifests file's objects; problems name the file.
pub fn read_manifest_file(path: &Path) -> Result<Vec<Manifest>, Problem> {
    let label = path.display().to_string();
    let bytes = limits::read_file(&label, path)?;
    manifest_objects(&label, &bytes)
}

/// One file of a manifest directory, as read.
#[derive(Debug)]
pub struct DirFile {
    /// The file.
    pub path: PathBuf,
    /// Its objects, or why it cannot be used (named by the file, with the line within it).
    pub objects: Result<Vec<Manifest>, Problem>,
}

/// A manifest directory read file by file, in name order. One broken file does not make the
/// others unusable.
pub fn read_manifest_dir(dir: &Path) -> Result<Vec<DirFile>, Problem> {
    let files = manifest_files(dir).map_err(|e| {
        Problem::new(
            &dir.display().to_string(),
            "file",
            format!("cannot read: {e}"),
        )
    })?;
    Ok(files
        .into_iter()
        .map(|path| DirFile {
            objects: read_manifest_file(&path),
            path,
        })
        .collect())
}

/// Reads and compiles one source as `serve` reads it at start: a file as a whole (`Err` when it
/// cannot be used), a directory file by file (its broken files in [`Loaded::unusable`], the
/// others loaded).
pub fn load_source(
    source: &FileSource,
    settings: &ParseSettings,
    defaults: BuildDefaults,
) -> Result<Loaded, Problem> {
    let label = source.path.display().to_string();
    if !source.path.is_dir() {
        let bytes = limits::read_file(&label, &source.path)?;
        return load(&label, &source.kind, &bytes, settings, defaults);
    }
    let mut objects = Vec::new();
    let mut unusable = Vec::new();
    for file in read_manifest_dir(&source.path)? {
        match file.objects {
            Ok(o) => objects.extend(o),
            Err(problem) => unusable.push(problem),
        }
    }
    let mut loaded = load_parsed(
        &label,
        manifests::zones(&label, &objects, &settings.cluster),
        defaults,
    );
    loaded.unusable = unusable;
    Ok(loaded)
}

/// Every Kubernetes object in the files and directories given (YAML or JSON, several
/// documents per file, `List` kinds expanded), in path order (a directory's files in name
/// order). The first file that cannot be read or parsed is the error, named by the file.
pub fn read_manifests(paths: &[PathBuf]) -> Result<Vec<Manifest>, Problem> {
    let mut objects = Vec::new();
    for path in paths {
        if path.is_dir() {
            for file in read_manifest_dir(path)? {
                objects.extend(file.objects?);
            }
        } else {
            objects.extend(read_manifest_file(path)?);
        }
    }
    Ok(objects)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_directory_reads_as_its_manifest_files_in_name_order() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("b.yaml"), "kind: B\napiVersion: v1\n").unwrap();
        std::fs::write(
            dir.path().join("a.json"),
            r#"{"kind":"List","apiVersion":"v1","items":[{"kind":"A1"},{"kind":"A2"}]}"#,
        )
        .unwrap();
        std::fs::write(dir.path().join("notes.txt"), "kind: Ignored\n").unwrap();
        let single = dir.path().join("b.yaml");
        let objects = read_manifests(&[dir.path().to_path_buf(), single]).unwrap();
        let kinds: Vec<&str> = objects
            .iter()
            .map(|o| o["kind"].as_str().unwrap())
            .collect();
        assert_eq!(kinds, ["A1", "A2", "B", "B"]);
        let err = read_manifests(&[dir.path().join("missing.yaml")]).unwrap_err();
        assert!(
            err.to_string().contains("missing.yaml: file: cannot read"),
            "{err}"
        );
    }

    #[test]
    fn a_broken_file_of_a_directory_is_named_with_its_own_line() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("a.yaml"), "kind: A\n---\nkind: A2\n").unwrap();
        std::fs::write(dir.path().join("b.yaml"), "kind: B\n---\nkind: [unclosed\n").unwrap();
        let err = read_manifests(&[dir.path().to_path_buf()]).unwrap_err();
        let b = dir.path().join("b.yaml").display().to_string();
        assert_eq!(err.file, b);
        assert_eq!(err.entry, "document 2");
        assert!(err.reason.contains("line 3"), "{err}");
        let files = read_manifest_dir(dir.path()).unwrap();
        assert_eq!(files.len(), 2);
        assert_eq!(
            files[0].objects.as_ref().unwrap().len(),
            2,
            "the other file reads"
        );
        assert!(files[1].objects.is_err());
    }
}
