//! The documentation, run. Every shell block in `README.md` and `docs/` carries a marker, an
//! HTML comment on the line before its fence, that says how this suite treats it:
//!
//! | marker | the suite |
//! | --- | --- |
//! | `<!-- doc-test: run -->` | runs it with bash (`-euo pipefail`) in a scratch directory holding copies of `examples/` and `deploy/`, with the binary under test first on `PATH` (`cargo run --release --` stands for it); it must exit 0 |
//! | `<!-- doc-test: serve -->` | starts its one command in the background and waits for `meshdns ready`; the blocks after it talk to it; it is stopped with SIGTERM at the end of the document and must exit 0 |
//! | `<!-- doc-test: output -->` | (a text block after a `run` block) each of its lines is in that block's output, spacing aside (`id: N` of a `dig` header is any id) |
//! | `<!-- doc-test: example -->` | a real host's paths, names or ports: every `meshdns` command in it must parse, flags and values (run as `meshdns … --help`) |
//! | `<!-- doc-test: cluster -->` | needs a live Kubernetes cluster: every `kubectl apply -k DIR` names a kustomization the deploy tests render and check, every other file it applies is shown in the document, every `kustomize edit set image NAME=…` names an image of that kustomization |
//! | `<!-- doc-test: image -->` | builds or pushes the container image (`deploy/image/smoke.sh` builds and runs it in `.ci/run`); checked as `cluster` |
//! | `<!-- doc-test: bench -->` | a benchmark (minutes, its own tools; figures in `docs/BENCHMARKS.md`): every `bench/` file it names exists |
//! | `<!-- doc-test: suite -->` | runs this test suite |
//!
//! Every `yaml` and `json` block is checked by what it is: Kubernetes objects against the CRD
//! schemas `meshdns crds` prints (and DNSZones/DNSRecordSets with `meshdns check
//! --manifests`), records files with `meshdns check`, config files with `meshdns check
//! --config-only -c`. `<!-- doc-test: fragment -->` marks a part of a larger file.

use std::collections::BTreeMap;
use std::io::Read;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::Value;

use crate::deploy::{crd_schemas, schema_errors, yaml_documents};
use crate::*;

/// How long one `run` block may take, and how long a `serve` block may take to be ready.
const BLOCK_LIMIT: Duration = Duration::from_secs(120);
const READY_LIMIT: Duration = Duration::from_secs(30);

fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

/// One fenced block of a Markdown document.
#[derive(Debug)]
struct Block {
    file: String,
    line: usize,
    lang: String,
    marker: Option<String>,
    text: String,
}

impl Block {
    fn at(&self) -> String {
        format!("{}:{}", self.file, self.line)
    }
}

/// The fenced blocks of `text` (fences may be indented, inside list items), each with the
/// marker on the line before it, if any.
fn blocks(file: &str, text: &str) -> Vec<Block> {
    let lines: Vec<&str> = text.lines().collect();
    let mut out = Vec::new();
    let mut i = 0;
    while i < lines.len() {
        let trimmed = lines[i].trim_start();
        let Some(info) = trimmed.strip_prefix("```") else {
            i += 1;
            continue;
        };
        let indent = lines[i].len() - trimmed.len();
        let lang = info.split_whitespace().next().unwrap_or("").to_string();
        let marker = lines[..i]
            .iter()
            .rev()
            .find(|l| !l.trim().is_empty())
            .and_then(|l| l.trim().strip_prefix("<!-- doc-test:"))
            .and_then(|l| l.strip_suffix("-->"))
            .map(|m| m.trim().to_string());
        let start = i;
        i += 1;
        let mut body = Vec::new();
        while i < lines.len() && !lines[i].trim_start().starts_with("```") {
            body.push(lines[i].get(indent..).unwrap_or(lines[i].trim_start()));
            i += 1;
        }
        out.push(Block {
            file: file.to_string(),
            line: start + 1,
            lang,
            marker,
            text: body.join("\n") + "\n",
        });
        i += 1;
    }
    out
}

/// README.md and every document in docs/, by path relative to the repository.
fn documents() -> Vec<(String, String)> {
    let mut files = vec!["README.md".to_string()];
    let mut docs: Vec<String> = std::fs::read_dir(root().join("docs"))
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .filter(|n| n.ends_with(".md"))
        .map(|n| format!("docs/{n}"))
        .collect();
    docs.sort();
    files.extend(docs);
    files
        .into_iter()
        .map(|f| {
            let text = std::fs::read_to_string(root().join(&f)).unwrap();
            (f, text)
        })
        .collect()
}

fn is_shell(lang: &str) -> bool {
    matches!(lang, "sh" | "bash" | "shell" | "console")
}

const KINDS: &[&str] = &[
    "run", "serve", "output", "example", "cluster", "image", "bench", "suite", "fragment",
];

#[test]
fn every_shell_block_in_the_docs_says_how_it_is_tested() {
    let mut problems = Vec::new();
    for (file, text) in documents() {
        for b in blocks(&file, &text) {
            match (&b.marker, is_shell(&b.lang)) {
                (Some(m), _) if !KINDS.contains(&m.as_str()) => problems.push(format!(
                    "{}: unknown marker {m:?}; one of {KINDS:?}",
                    b.at()
                )),
                (None, true) => problems.push(format!(
                    "{}: a {} block without a `<!-- doc-test: KIND -->` marker",
                    b.at(),
                    b.lang
                )),
                _ => {}
            }
        }
    }
    assert!(problems.is_empty(), "{}", problems.join("\n"));
}

/// The commands of a shell block: continuation lines joined, comments and blank lines dropped.
fn commands(text: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut current = String::new();
    let mut heredoc: Option<String> = None;
    for line in text.lines() {
        if let Some(end) = &heredoc {
            if line.trim() == end {
                heredoc = None;
            }
            continue;
        }
        let line = match line.find(" #") {
            Some(i) if !line[..i].contains('\'') => &line[..i],
            _ => line,
        };
        if line.trim_start().starts_with('#') {
            continue;
        }
        if let Some(i) = line.find("<<") {
            let tag = line[i + 2..].trim().trim_matches(['\'', '"', '-']);
            heredoc = Some(tag.to_string());
        }
        match line.trim_end().strip_suffix('\\') {
            Some(head) => current.push_str(head),
            None => {
                current.push_str(line);
                if !current.trim().is_empty() {
                    out.push(current.trim().to_string());
                }
                current.clear();
            }
        }
    }
    out
}

/// The words of a command, split as the shell would for the simple commands the docs use.
fn words(command: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut word = String::new();
    let mut quote = None;
    let mut any = false;
    for c in command.chars() {
        match (quote, c) {
            (Some(q), c) if c == q => quote = None,
            (Some(_), c) => word.push(c),
            (None, '\'' | '"') => {
                quote = Some(c);
                any = true;
            }
            (None, c) if c.is_whitespace() => {
                if any || !word.is_empty() {
                    out.push(std::mem::take(&mut word));
                }
                any = false;
            }
            (None, c) => word.push(c),
        }
    }
    if any || !word.is_empty() {
        out.push(word);
    }
    out
}

/// `example` blocks: every `meshdns` command parses (`--help` appended: clap checks each flag
/// and value it meets before it reaches `--help`).
fn check_example(b: &Block) -> Vec<String> {
    let mut problems = Vec::new();
    let mut seen = 0;
    for command in commands(&b.text) {
        let command = command.trim_end_matches('&').trim();
        let w = words(command);
        if w.first().map(String::as_str) != Some("meshdns") {
            continue;
        }
        seen += 1;
        let out = bin().args(&w[1..]).arg("--help").output().unwrap();
        if !out.status.success() {
            problems.push(format!(
                "{}: `{command}` does not parse: {}",
                b.at(),
                String::from_utf8_lossy(&out.stderr).trim()
            ));
        }
    }
    if seen == 0 {
        problems.push(format!(
            "{}: an `example` block with no meshdns command",
            b.at()
        ));
    }
    problems
}

/// `cluster` and `image` blocks: what they apply exists and is rendered by the deploy tests.
fn check_cluster(b: &Block, document: &str) -> Vec<String> {
    let mut problems = Vec::new();
    for command in commands(&b.text) {
        let w = words(&command);
        for (i, word) in w.iter().enumerate() {
            let next = w.get(i + 1).map(String::as_str).unwrap_or("");
            if word == "apply" || w[..i].iter().any(|x| x == "apply") {
                if word == "-k" {
                    let dir = root().join(next);
                    if !next.starts_with("deploy/") || !dir.join("kustomization.yaml").is_file() {
                        problems.push(format!(
                            "{}: `kubectl apply -k {next}`: not a kustomization under deploy/ (the deploy tests render every one)",
                            b.at()
                        ));
                    }
                }
                if word == "-f" && next != "-" {
                    let shown = root().join(next).is_file()
                        || document.contains(&format!("`{next}`"))
                        || document.contains(&format!("({next})"));
                    if !shown {
                        problems.push(format!(
                            "{}: `kubectl apply -f {next}`: neither a file of the repository nor named in the document",
                            b.at()
                        ));
                    }
                }
            }
        }
        // `(cd DIR && kustomize edit set image NAME=REF)`
        if let Some(at) = w.iter().position(|x| x == "kustomize")
            && w.get(at + 1).map(String::as_str) == Some("edit")
        {
            let dir = w
                .iter()
                .position(|x| x == "(cd" || x == "cd")
                .and_then(|i| w.get(i + 1))
                .map(String::as_str)
                .unwrap_or(".");
            let name = w
                .last()
                .and_then(|x| x.split('=').next())
                .unwrap_or("")
                .trim_end_matches(')');
            let k = std::fs::read_to_string(root().join(dir).join("kustomization.yaml"))
                .unwrap_or_default();
            let images: Vec<Value> = yaml_documents(&k)
                .first()
                .and_then(|v| v["images"].as_array().cloned())
                .unwrap_or_default();
            if !images.iter().any(|i| i["name"] == name) {
                problems.push(format!(
                    "{}: `kustomize edit set image {name}=…` in {dir}: that kustomization has no image named {name:?}",
                    b.at()
                ));
            }
        }
    }
    problems
}

/// `bench` blocks: the scripts they run exist.
fn check_bench(b: &Block) -> Vec<String> {
    let mut problems = Vec::new();
    for command in commands(&b.text) {
        for w in words(&command) {
            let w = w.trim_start_matches("OUT=");
            if w.starts_with("bench/") && !root().join(w).exists() {
                problems.push(format!("{}: {w} does not exist", b.at()));
            }
        }
    }
    problems
}

#[test]
fn every_command_the_docs_cannot_run_here_still_names_real_flags_and_files() {
    let mut problems = Vec::new();
    let mut counts: BTreeMap<String, usize> = BTreeMap::new();
    for (file, text) in documents() {
        for b in blocks(&file, &text) {
            let Some(kind) = b.marker.as_deref() else {
                continue;
            };
            *counts.entry(kind.to_string()).or_default() += 1;
            problems.extend(match kind {
                "example" => check_example(&b),
                "cluster" | "image" => check_cluster(&b, &text),
                "bench" => check_bench(&b),
                _ => Vec::new(),
            });
        }
    }
    assert!(problems.is_empty(), "{}", problems.join("\n"));
    for kind in ["example", "cluster", "bench"] {
        assert!(counts.get(kind).is_some_and(|&n| n > 0), "{counts:?}");
    }
}

/// The scratch directory a document's blocks run in.
fn scratch() -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    for sub in ["examples", "deploy"] {
        let status = Command::new("cp")
            .arg("-r")
            .arg(root().join(sub))
            .arg(dir.path())
            .status()
            .unwrap();
        assert!(status.success());
    }
    dir
}

fn path_with_binary() -> String {
    let bin_dir = Path::new(env!("CARGO_BIN_EXE_meshdns")).parent().unwrap();
    format!(
        "{}:{}",
        bin_dir.display(),
        std::env::var("PATH").unwrap_or_default()
    )
}

/// The block as the binary under test runs it.
fn as_run(text: &str) -> String {
    text.replace("cargo run --release -- ", "meshdns ")
}

fn spawn(cwd: &Path, script: &str) -> Child {
    use std::os::unix::process::CommandExt;
    Command::new("bash")
        .args(["-euo", "pipefail", "-c", script])
        .current_dir(cwd)
        .env("PATH", path_with_binary())
        .env_remove("RUST_LOG")
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .process_group(0)
        .spawn()
        .unwrap()
}

fn kill_group(child: &Child, signal: i32) {
    // SAFETY: kill(2) on the process group we created; no memory effects.
    unsafe { libc::kill(-(child.id() as i32), signal) };
}

/// Runs a `run` block to completion (bounded): (success, stdout, stderr).
fn run_block(cwd: &Path, b: &Block) -> (bool, String, String) {
    let mut child = spawn(cwd, &as_run(&b.text));
    let mut stdout = child.stdout.take().unwrap();
    let mut stderr = child.stderr.take().unwrap();
    let out = std::thread::spawn(move || {
        let mut s = String::new();
        let _ = stdout.read_to_string(&mut s);
        s
    });
    let err = std::thread::spawn(move || {
        let mut s = String::new();
        let _ = stderr.read_to_string(&mut s);
        s
    });
    let deadline = Instant::now() + BLOCK_LIMIT;
    let status = loop {
        if let Some(status) = child.try_wait().unwrap() {
            break Some(status);
        }
        if Instant::now() > deadline {
            kill_group(&child, libc::SIGKILL);
            let _ = child.wait();
            break None;
        }
        std::thread::sleep(Duration::from_millis(20));
    };
    // Anything the block left in the background goes with it.
    kill_group(&child, libc::SIGKILL);
    let (out, err) = (out.join().unwrap(), err.join().unwrap());
    match status {
        Some(s) => (s.success(), out, err),
        None => (
            false,
            out,
            format!("{err}\n(still running after {BLOCK_LIMIT:?})"),
        ),
    }
}

/// A `serve` block, running.
struct Served {
    child: Child,
    log: std::sync::Arc<std::sync::Mutex<String>>,
    at: String,
}

fn start_serve(cwd: &Path, b: &Block) -> Served {
    let commands = commands(&as_run(&b.text));
    assert_eq!(
        commands.len(),
        1,
        "{}: a `serve` block holds one command (the server), not {commands:?}",
        b.at()
    );
    assert!(
        !commands[0].ends_with('&'),
        "{}: a `serve` block runs in the foreground",
        b.at()
    );
    let mut child = spawn(cwd, &format!("exec {}", commands[0]));
    let log = std::sync::Arc::new(std::sync::Mutex::new(String::new()));
    for pipe in [
        Box::new(child.stdout.take().unwrap()) as Box<dyn Read + Send>,
        Box::new(child.stderr.take().unwrap()),
    ] {
        let sink = log.clone();
        std::thread::spawn(move || {
            use std::io::BufRead;
            for line in std::io::BufReader::new(pipe).lines().map_while(Result::ok) {
                let mut log = sink.lock().unwrap();
                log.push_str(&line);
                log.push('\n');
            }
        });
    }
    let deadline = Instant::now() + READY_LIMIT;
    while !log.lock().unwrap().contains("meshdns ready") {
        if let Some(status) = child.try_wait().unwrap() {
            panic!(
                "{}: the server exited ({status}) before it was ready:\n{}",
                b.at(),
                log.lock().unwrap()
            );
        }
        if Instant::now() > deadline {
            kill_group(&child, libc::SIGKILL);
            panic!(
                "{}: not ready after {READY_LIMIT:?}:\n{}",
                b.at(),
                log.lock().unwrap()
            );
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    Served {
        child,
        log,
        at: b.at(),
    }
}

impl Served {
    /// SIGTERM, then the server must exit 0 (bounded).
    fn stop(mut self) -> Result<(), String> {
        kill_group(&self.child, libc::SIGTERM);
        let deadline = Instant::now() + Duration::from_secs(20);
        loop {
            if let Some(status) = self.child.try_wait().unwrap() {
                return if status.success() {
                    Ok(())
                } else {
                    Err(format!(
                        "{}: the server exited {status} on SIGTERM:\n{}",
                        self.at,
                        self.log.lock().unwrap()
                    ))
                };
            }
            if Instant::now() > deadline {
                kill_group(&self.child, libc::SIGKILL);
                let _ = self.child.wait();
                return Err(format!("{}: the server ignored SIGTERM", self.at));
            }
            std::thread::sleep(Duration::from_millis(20));
        }
    }
}

impl Drop for Served {
    fn drop(&mut self) {
        if self.child.try_wait().ok().flatten().is_none() {
            kill_group(&self.child, libc::SIGKILL);
            let _ = self.child.wait();
        }
    }
}

/// Spacing collapsed, and the one value a `dig` header always changes (its id) made equal.
fn normalized(line: &str) -> String {
    let line = line.split_whitespace().collect::<Vec<_>>().join(" ");
    match line.find("id: ") {
        Some(i) => {
            let rest = &line[i + 4..];
            let digits = rest.chars().take_while(char::is_ascii_digit).count();
            format!("{}id: N{}", &line[..i], &rest[digits..])
        }
        None => line,
    }
}

/// What an `output` block expects and the output did not have.
fn missing_output(expected: &str, output: &str) -> Vec<String> {
    let have: Vec<String> = output.lines().map(normalized).collect();
    expected
        .lines()
        .map(normalized)
        .filter(|l| !l.is_empty())
        .filter(|l| !have.iter().any(|h| h.contains(l.as_str())))
        .collect()
}

/// Runs the `run` and `serve` blocks of one document, in order; returns the problems.
fn run_document(file: &str, text: &str) -> Vec<String> {
    let all = blocks(file, text);
    if !all
        .iter()
        .any(|b| matches!(b.marker.as_deref(), Some("run" | "serve")))
    {
        return Vec::new();
    }
    let dir = scratch();
    let mut problems = Vec::new();
    let mut servers = Vec::new();
    let mut last_output: Option<(String, String)> = None;
    for b in &all {
        match b.marker.as_deref() {
            Some("serve") => servers.push(start_serve(dir.path(), b)),
            Some("run") => {
                let (ok, out, err) = run_block(dir.path(), b);
                if !ok {
                    problems.push(format!(
                        "{}: failed:\n{}\n--- stdout:\n{out}--- stderr:\n{err}",
                        b.at(),
                        b.text
                    ));
                }
                last_output = Some((b.at(), out));
            }
            Some("output") => match &last_output {
                Some((at, out)) => {
                    let missing = missing_output(&b.text, out);
                    if !missing.is_empty() {
                        problems.push(format!(
                            "{}: the output of {at} lacks {missing:#?}; it was:\n{out}",
                            b.at()
                        ));
                    }
                }
                None => problems.push(format!("{}: an `output` block after no `run`", b.at())),
            },
            _ => {}
        }
    }
    for s in servers {
        if let Err(e) = s.stop() {
            problems.push(e);
        }
    }
    problems
}

/// The documents run one after another: their servers listen on the ports the docs name.
#[test]
fn the_docs_run_as_written() {
    let mut problems = Vec::new();
    let mut ran = 0;
    for (file, text) in documents() {
        ran += blocks(&file, &text)
            .iter()
            .filter(|b| b.marker.as_deref() == Some("run"))
            .count();
        problems.extend(run_document(&file, &text));
    }
    assert!(problems.is_empty(), "{}", problems.join("\n\n"));
    assert!(ran >= 5, "only {ran} blocks ran");
}

/// What a yaml or json block is, and the check that fits it.
/// The view names a records file's zones and entries give (`view: a`, `"a,b"` or a list).
fn views_named(records: &Value) -> std::collections::BTreeSet<String> {
    let tags = |v: &Value| -> Vec<String> {
        match v.get("view") {
            Some(Value::String(s)) => s.split(',').map(|t| t.trim().to_string()).collect(),
            Some(Value::Array(list)) => list
                .iter()
                .filter_map(|t| t.as_str().map(str::to_string))
                .collect(),
            _ => Vec::new(),
        }
    };
    let zones = records["zones"].as_array().map_or(&[][..], Vec::as_slice);
    zones
        .iter()
        .flat_map(|z| {
            let entries = z["records"].as_array().map_or(&[][..], Vec::as_slice);
            tags(z).into_iter().chain(entries.iter().flat_map(tags))
        })
        .collect()
}

fn check_data_block(b: &Block, dir: &Path) -> Vec<String> {
    let ext = if b.lang == "json" { "json" } else { "yaml" };
    let docs: Vec<Value> = if b.lang == "json" {
        match serde_json::from_str(&b.text) {
            Ok(v) => vec![v],
            Err(e) => return vec![format!("{}: not JSON: {e}", b.at())],
        }
    } else {
        let parsed: Result<Vec<Value>, _> = serde_yaml::Deserializer::from_str(&b.text)
            .map(serde::Deserialize::deserialize)
            .collect();
        match parsed {
            Ok(v) => v.into_iter().filter(|v: &Value| !v.is_null()).collect(),
            Err(e) => return vec![format!("{}: not YAML: {e}", b.at())],
        }
    };
    let Some(first) = docs.first() else {
        return vec![format!("{}: empty", b.at())];
    };
    let file = dir.join(format!("block-{}.{ext}", b.line));
    std::fs::write(&file, &b.text).unwrap();
    // `check` prints each problem on stdout (an entry it would skip), its summary on stderr.
    let check = |args: &[&str]| -> Vec<String> {
        let out = bin().args(args).output().unwrap();
        if out.status.success() && out.stdout.is_empty() {
            Vec::new()
        } else {
            vec![format!(
                "{}: `meshdns {}` finds problems: {}{}",
                b.at(),
                args.join(" "),
                String::from_utf8_lossy(&out.stdout),
                String::from_utf8_lossy(&out.stderr)
            )]
        }
    };
    let path = file.to_str().unwrap();
    if first.get("apiVersion").is_some() {
        let schemas = crd_schemas();
        let mut problems = Vec::new();
        let mut dns = false;
        for o in &docs {
            let group = o["apiVersion"].as_str().unwrap_or("").split('/').next();
            let key = format!(
                "{}/{}",
                group.unwrap_or(""),
                o["kind"].as_str().unwrap_or("")
            );
            dns |= key.starts_with("dns.networking.miloapis.com/");
            match schemas.iter().find(|(k, _)| *k == key) {
                Some((_, schema)) => problems.extend(
                    schema_errors(o, schema, "")
                        .into_iter()
                        .map(|e| format!("{}: {key}: {e}", b.at())),
                ),
                None => problems.push(format!("{}: {key}: no schema to check it against", b.at())),
            }
        }
        if dns {
            let sub = dir.join(format!("manifests-{}", b.line));
            std::fs::create_dir_all(&sub).unwrap();
            std::fs::write(sub.join("objects.yaml"), &b.text).unwrap();
            problems.extend(check(&["check", "--manifests", sub.to_str().unwrap()]));
        }
        problems
    } else if first.get("zones").is_some() || first.get("version").is_some() {
        // The views a records file names (`view:`) are configured, as `serve` would be run
        // with them (`docs/views.md`).
        let views: Vec<String> = views_named(first)
            .into_iter()
            .map(|v| format!("{v}=192.0.2.255/32"))
            .collect();
        let mut args = vec!["check", path];
        for v in &views {
            args.extend(["--view", v.as_str()]);
        }
        check(&args)
    } else if first.as_object().is_some_and(|o| {
        o.keys()
            .all(|k| matches!(k.as_str(), "serve" | "iroh" | "mesh"))
    }) {
        check(&["check", "--config-only", "-c", path])
    } else {
        vec![format!(
            "{}: neither Kubernetes objects, a records file nor a config file; mark a part of a larger file `<!-- doc-test: fragment -->`",
            b.at()
        )]
    }
}

#[test]
fn every_manifest_records_file_and_config_shown_in_the_docs_is_accepted() {
    let dir = tempfile::tempdir().unwrap();
    let mut problems = Vec::new();
    let mut checked = 0;
    for (file, text) in documents() {
        for b in blocks(&file, &text) {
            if matches!(b.lang.as_str(), "yaml" | "json") && b.marker.as_deref() != Some("fragment")
            {
                checked += 1;
                problems.extend(check_data_block(&b, dir.path()));
            }
        }
    }
    assert!(problems.is_empty(), "{}", problems.join("\n"));
    assert!(checked >= 5, "only {checked} blocks checked");
}

#[test]
fn the_block_reader_sees_markers_indented_fences_and_continuations() {
    let text = "x\n<!-- doc-test: run -->\n```sh\necho a \\\n  b  # note\n# all comment\n```\n\n1. step\n   <!-- doc-test: cluster -->\n   ```sh\n   kubectl apply -k deploy/base/serve\n   ```\n```yaml\na: 1\n```\n";
    let b = blocks("t.md", text);
    assert_eq!(b.len(), 3);
    assert_eq!(b[0].marker.as_deref(), Some("run"));
    assert_eq!(commands(&b[0].text), vec!["echo a   b"]);
    assert_eq!(b[1].marker.as_deref(), Some("cluster"));
    assert_eq!(b[1].text, "kubectl apply -k deploy/base/serve\n");
    assert_eq!(b[2].marker, None);
    assert_eq!(words("a 'b c' \"\" d"), vec!["a", "b c", "", "d"]);
    assert_eq!(
        normalized(";; ->>HEADER<<- opcode: QUERY, status: NOERROR, id: 437"),
        ";; ->>HEADER<<- opcode: QUERY, status: NOERROR, id: N"
    );
    assert!(check_cluster(&b[1], text).is_empty());
    let bad = blocks(
        "t.md",
        "<!-- doc-test: cluster -->\n```sh\nkubectl apply -k deploy/overlays/nope\n```\n",
    );
    assert_eq!(check_cluster(&bad[0], "").len(), 1);
    let flags = blocks(
        "t.md",
        "```sh\nmeshdns serve --listen 127.0.0.1:53 \\\n  --no-such-flag\nmeshdns check --help-me\n```\n",
    );
    assert_eq!(check_example(&flags[0]).len(), 2);
    let missing = missing_output(
        "status: NOERROR, id: 1\nwww 30 IN A 192.0.2.10\n",
        "status: NOERROR, id: 77\n",
    );
    assert_eq!(missing, vec!["www 30 IN A 192.0.2.10"]);
}
