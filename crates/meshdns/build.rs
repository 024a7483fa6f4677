//! Embeds the git commit the binary is built from, for `meshdns --version`: `$MESHDNS_GIT_COMMIT`
//! when set (a container build, which has no `.git`), else `git rev-parse HEAD`, else `unknown`
//! (a source tarball, or no `git`).
//! Uncommitted changes are not marked: the script reruns when HEAD moves, not on every edit.

use std::path::PathBuf;
use std::process::Command;

fn git(args: &[&str]) -> Option<String> {
    let out = Command::new("git").args(args).output().ok()?;
    let text = String::from_utf8(out.stdout).ok()?;
    (out.status.success() && !text.trim().is_empty()).then(|| text.trim().to_string())
}

fn main() {
    // A container build without `.git` passes the commit in (`--build-arg MESHDNS_GIT_COMMIT`).
    println!("cargo:rerun-if-env-changed=MESHDNS_GIT_COMMIT");
    let given = std::env::var("MESHDNS_GIT_COMMIT")
        .ok()
        .filter(|c| !c.trim().is_empty() && c != "unknown");
    let commit = given.or_else(|| git(&["rev-parse", "--short=12", "HEAD"]));
    // Rebuild when HEAD moves: HEAD itself, the branch it names, and packed refs. Only files
    // that exist are named (cargo would otherwise rerun this script on every build).
    if let Some(dir) = git(&["rev-parse", "--git-dir"]).map(PathBuf::from) {
        let mut watched = vec![dir.join("HEAD"), dir.join("packed-refs")];
        if let Some(branch) = git(&["symbolic-ref", "-q", "HEAD"]) {
            if let Some(common) = git(&["rev-parse", "--git-common-dir"]).map(PathBuf::from) {
                watched.push(common.join(&branch));
            }
            watched.push(dir.join(&branch));
        }
        for path in watched.into_iter().filter(|p| p.exists()) {
            println!("cargo:rerun-if-changed={}", path.display());
        }
    } else {
        println!("cargo:rerun-if-changed=build.rs");
    }
    let commit = commit.unwrap_or_else(|| "unknown".to_string());
    println!("cargo:rustc-env=MESHDNS_GIT_COMMIT={commit}");
}
