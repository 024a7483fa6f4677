//! Reading sources from disk: the one reader that `serve` (through [`crate::watch`]),
//! `check` and `render` share, so they see the same bytes and the same objects.

use std::path::{Path, PathBuf};

use serde_json::Value;

use crate::content::Problem;
use crate::manifests;

/// Whether a file in a manifest directory is read: `.yaml`, `.yml` or `.json`.
fn is_manifest_file(path: &Path) -> bool {
    path.is_file()
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

/// A file's bytes; for a directory, its manifest files as one multi-document YAML text.
pub fn read_source(path: &Path) -> std::io::Result<Vec<u8>> {
    if !path.is_dir() {
        return std::fs::read(path);
    }
    let mut out = Vec::new();
    for f in manifest_files(path)? {
        out.extend_from_slice(b"\n---\n");
        out.extend_from_slice(&std::fs::read(&f)?);
        out.push(b'\n');
    }
    Ok(out)
}

/// Every Kubernetes object in the files and directories given (YAML or JSON, several
/// documents per file, `List` kinds expanded), in path order. The first file that cannot be
/// read or parsed is the error.
pub fn read_manifests(paths: &[PathBuf]) -> Result<Vec<Value>, Problem> {
    let mut objects = Vec::new();
    for path in paths {
        let label = path.display().to_string();
        let bytes = read_source(path)
            .map_err(|e| Problem::new(&label, "file", format!("cannot read: {e}")))?;
        let text = std::str::from_utf8(&bytes)
            .map_err(|e| Problem::new(&label, "file", format!("not UTF-8: {e}")))?;
        objects.extend(manifests::objects(&label, text)?);
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
}
