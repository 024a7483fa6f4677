//! The bounds every watched input is held to before it is parsed: what kind of file may be
//! opened, how large it may be, and how deeply a YAML or JSON document may nest.
//!
//! - **Only regular files** (or symlinks to one) are read. A file is opened with `O_NONBLOCK`
//!   and checked with `fstat` before any read, so a named pipe, socket or device in a
//!   records file's place is refused at once (a blocking `open` of a FIFO waits for a writer
//!   forever, and held the watcher thread and shutdown with it).
//! - **Size.** A file may be at most [`MAX_FILE_BYTES`] (a zone file of about five million
//!   hosts); a YAML or JSON document at most [`MAX_DOCUMENT_BYTES`], whose parse builds a
//!   tree several times its size.
//! - **Flow nesting.** libyaml, which reads every YAML file (and JSON read as YAML, such as
//!   manifests), spends time proportional to the flow nesting (`[` and `{` within one
//!   another) on each token: 100,000 levels in a 200 KB file took 16 s. Before the parse,
//!   the document is walked with libyaml's own event parser, which stops at the first
//!   collection past [`MAX_DEPTH`], so the walk costs a few milliseconds whatever the input,
//!   and no guess about YAML's quoting rules can be fooled. JSON read by serde_json is
//!   counted with a scanner of its strings (serde_json itself stops at 128, in linear time).
//!
//! Each refusal is a [`Problem`] naming the file, the limit, and what would be accepted.

use std::fs::{File, Metadata};
use std::io::Read;
use std::mem::MaybeUninit;
use std::os::unix::fs::{FileTypeExt, OpenOptionsExt};
use std::path::Path;

use crate::content::Problem;

/// The largest file read as records, zone file or manifests: 1 GiB.
pub const MAX_FILE_BYTES: u64 = 1 << 30;
/// The largest YAML or JSON document parsed: 128 MiB.
pub const MAX_DOCUMENT_BYTES: usize = 128 << 20;
/// The deepest nesting of flow collections (`[ ]`, `{ }`) in a YAML or JSON document. A
/// meshdns records file needs 4, a Kubernetes manifest about 8.
pub const MAX_DEPTH: usize = 64;

/// Reads a watched input file: only a regular file (or a symlink to one), opened without
/// blocking, at most [`MAX_FILE_BYTES`]. `label` names it in problems.
pub fn read_file(label: &str, path: &Path) -> Result<Vec<u8>, Problem> {
    let refuse = |reason: String| Problem::new(label, "file", reason);
    let not_file = |kind: &str| {
        refuse(format!(
            "not a regular file ({kind}); a records, zone or manifests file must be a regular file or a symlink to one"
        ))
    };
    // Checked before the open too: opening a device can have effects of its own.
    if let Ok(meta) = std::fs::metadata(path)
        && let Some(kind) = not_regular(&meta)
    {
        return Err(not_file(kind));
    }
    let mut file = File::options()
        .read(true)
        .custom_flags(libc::O_NONBLOCK | libc::O_CLOEXEC | libc::O_NOCTTY)
        .open(path)
        .map_err(|e| refuse(format!("cannot read: {e}")))?;
    let meta = file
        .metadata()
        .map_err(|e| refuse(format!("cannot read: {e}")))?;
    if let Some(kind) = not_regular(&meta) {
        return Err(not_file(kind));
    }
    let too_large = |size: u64| {
        refuse(format!(
            "{size} bytes, larger than the limit of {} bytes (1 GiB); a records, zone or manifests file may be at most 1 GiB",
            MAX_FILE_BYTES
        ))
    };
    if meta.len() > MAX_FILE_BYTES {
        return Err(too_large(meta.len()));
    }
    let mut bytes = Vec::with_capacity(meta.len() as usize);
    // The file may grow while it is read: never past the limit.
    (&mut file)
        .take(MAX_FILE_BYTES + 1)
        .read_to_end(&mut bytes)
        .map_err(|e| refuse(format!("cannot read: {e}")))?;
    if bytes.len() as u64 > MAX_FILE_BYTES {
        return Err(too_large(bytes.len() as u64));
    }
    Ok(bytes)
}

/// What a file that is not a regular one is, in words.
fn not_regular(meta: &Metadata) -> Option<&'static str> {
    let t = meta.file_type();
    if t.is_file() {
        None
    } else if t.is_dir() {
        Some("a directory")
    } else if t.is_fifo() {
        Some("a FIFO (named pipe)")
    } else if t.is_socket() {
        Some("a socket")
    } else if t.is_char_device() {
        Some("a character device")
    } else if t.is_block_device() {
        Some("a block device")
    } else {
        Some("not a file")
    }
}

/// Refuses a YAML document (or JSON read as YAML) larger than [`MAX_DOCUMENT_BYTES`] or with
/// flow collections nested deeper than [`MAX_DEPTH`], before it is parsed.
pub fn check_yaml(file: &str, text: &str) -> Result<(), Problem> {
    check_size(file, text)?;
    // Fewer brackets than the limit cannot nest past it: no walk needed.
    if count_openers(text) <= MAX_DEPTH {
        return Ok(());
    }
    match yaml_too_deep(text, MAX_DEPTH) {
        Some((line, column)) => Err(too_deep(file, line, column)),
        None => Ok(()),
    }
}

/// Refuses a JSON document larger than [`MAX_DOCUMENT_BYTES`] or nested deeper than
/// [`MAX_DEPTH`], before it is parsed.
pub fn check_json(file: &str, text: &str) -> Result<(), Problem> {
    check_size(file, text)?;
    if count_openers(text) <= MAX_DEPTH {
        return Ok(());
    }
    match json_too_deep(text, MAX_DEPTH) {
        Some((line, column)) => Err(too_deep(file, line, column)),
        None => Ok(()),
    }
}

fn check_size(file: &str, text: &str) -> Result<(), Problem> {
    if text.len() > MAX_DOCUMENT_BYTES {
        return Err(Problem::new(
            file,
            "file",
            format!(
                "{} bytes of YAML or JSON, larger than the limit of {} bytes (128 MiB); split the records over several files, or use a zone file",
                text.len(),
                MAX_DOCUMENT_BYTES
            ),
        ));
    }
    Ok(())
}

fn count_openers(text: &str) -> usize {
    text.bytes().filter(|b| matches!(b, b'[' | b'{')).count()
}

fn too_deep(file: &str, line: u64, column: u64) -> Problem {
    Problem::new(
        file,
        "file",
        format!(
            "collections ([ ] or {{ }}) nested deeper than {MAX_DEPTH}, at line {line} column {column}; at most {MAX_DEPTH} levels are read"
        ),
    )
}

/// Where (line, column, from 1) a JSON text first nests deeper than `limit`, if it does.
/// Brackets inside strings do not count.
fn json_too_deep(text: &str, limit: usize) -> Option<(u64, u64)> {
    let (mut depth, mut line, mut column) = (0usize, 1u64, 0u64);
    let (mut in_string, mut escaped) = (false, false);
    for b in text.bytes() {
        column += 1;
        if b == b'\n' {
            line += 1;
            column = 0;
        }
        if in_string {
            match b {
                _ if escaped => escaped = false,
                b'\\' => escaped = true,
                b'"' => in_string = false,
                _ => {}
            }
            continue;
        }
        match b {
            b'"' => in_string = true,
            b'[' | b'{' => {
                depth += 1;
                if depth > limit {
                    return Some((line, column));
                }
            }
            b']' | b'}' => depth = depth.saturating_sub(1),
            _ => {}
        }
    }
    None
}

/// Where (line, column, from 1) a YAML text first nests flow collections deeper than `limit`,
/// if it does, as libyaml (the parser serde_yaml uses) reads it. The walk stops there, so it
/// never pays for the depth it refuses. A syntax error ends the walk: the parse proper
/// reports it.
fn yaml_too_deep(text: &str, limit: usize) -> Option<(u64, u64)> {
    #[allow(clippy::unsafe_removed_from_name)]
    // the crate's items are called as sys::, as serde_yaml does
    use unsafe_libyaml as sys;
    // The parser points at itself once given its input: it lives on the heap and never moves.
    let mut parser: Box<MaybeUninit<sys::yaml_parser_t>> = Box::new(MaybeUninit::uninit());
    let parser = parser.as_mut_ptr();
    // SAFETY: `parser` is valid for writes; initialize sets every field.
    if unsafe { sys::yaml_parser_initialize(parser) }.fail {
        return None;
    }
    // SAFETY: the parser was initialized; `text` outlives it (deleted before returning).
    unsafe {
        sys::yaml_parser_set_encoding(parser, sys::YAML_UTF8_ENCODING);
        sys::yaml_parser_set_input_string(parser, text.as_ptr(), text.len() as u64);
    }
    // Whether each open collection is a flow one.
    let mut open: Vec<bool> = Vec::new();
    let mut flow = 0usize;
    let mut found = None;
    loop {
        let mut event = MaybeUninit::<sys::yaml_event_t>::uninit();
        // SAFETY: an initialized parser and room for one event.
        if unsafe { sys::yaml_parser_parse(parser, event.as_mut_ptr()) }.fail {
            break;
        }
        let event = event.as_mut_ptr();
        // SAFETY: yaml_parser_parse succeeded, so the event is initialized; the union field
        // read is the one its type names.
        let (kind, is_flow, mark) = unsafe {
            let kind = (*event).type_;
            let is_flow = match kind {
                sys::YAML_SEQUENCE_START_EVENT => {
                    (*event).data.sequence_start.style == sys::YAML_FLOW_SEQUENCE_STYLE
                }
                sys::YAML_MAPPING_START_EVENT => {
                    (*event).data.mapping_start.style == sys::YAML_FLOW_MAPPING_STYLE
                }
                _ => false,
            };
            let mark = &(*event).start_mark;
            let at = (mark.line + 1, mark.column + 1);
            sys::yaml_event_delete(event);
            (kind, is_flow, at)
        };
        match kind {
            sys::YAML_SEQUENCE_START_EVENT | sys::YAML_MAPPING_START_EVENT => {
                open.push(is_flow);
                flow += usize::from(is_flow);
                if flow > limit {
                    found = Some(mark);
                    break;
                }
            }
            sys::YAML_SEQUENCE_END_EVENT | sys::YAML_MAPPING_END_EVENT => {
                flow -= usize::from(open.pop() == Some(true));
            }
            sys::YAML_STREAM_END_EVENT => break,
            _ => {}
        }
    }
    // SAFETY: initialized above, deleted once.
    unsafe { sys::yaml_parser_delete(parser) };
    found
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Instant;

    fn nested(open: &str, close: &str, n: usize) -> String {
        format!("zones: {}{}\n", open.repeat(n), close.repeat(n))
    }

    #[test]
    fn deep_flow_nesting_is_refused_before_parsing_with_the_limit_named() {
        let err = check_yaml("a.yaml", &nested("[", "]", 100_000)).unwrap_err();
        assert_eq!(
            err.reason,
            "collections ([ ] or { }) nested deeper than 64, at line 1 column 72; at most 64 \
             levels are read"
        );
        for text in [
            nested("[", "]", 100_000),
            nested("{a: ", "}", 50_000),
            format!("kind: X\n---\nspec: {}\n", "[".repeat(100_000)),
        ] {
            let started = Instant::now();
            let err = check_yaml("a.yaml", &text).unwrap_err().to_string();
            // Not a timed assertion: printed for the record (`--nocapture`).
            println!("refused in {:?}", started.elapsed());
            assert!(
                err.starts_with("a.yaml: file: collections ([ ] or { }) nested deeper than 64"),
                "{err}"
            );
            assert!(err.contains("at most 64 levels are read"), "{err}");
        }
        let json = format!(
            "{{\"zones\": {}{}}}",
            "[".repeat(100_000),
            "]".repeat(100_000)
        );
        let err = check_json("a.json", &json).unwrap_err().to_string();
        assert!(
            err.contains("nested deeper than 64, at line 1 column 74"),
            "{err}"
        );
    }

    #[test]
    fn nesting_up_to_the_limit_and_brackets_in_strings_pass() {
        assert_eq!(check_yaml("a.yaml", &nested("[", "]", MAX_DEPTH)), Ok(()));
        assert!(check_yaml("a.yaml", &nested("[", "]", MAX_DEPTH + 1)).is_err());
        // Brackets in quoted strings, block scalars, comments and plain scalars are text.
        let texty = format!(
            "a: '{0}'\nb: \"{0}\"\nc: |\n  {0}\n# {0}\nd: x{0}\n",
            "[".repeat(200)
        );
        assert_eq!(check_yaml("a.yaml", &texty), Ok(()));
        let json = format!("{{\"a\": \"{}\\\"[\", \"b\": [[1]]}}", "[".repeat(200));
        assert_eq!(check_json("a.json", &json), Ok(()));
        // Deep block nesting is cheap to parse; serde_yaml's own limit refuses it.
        assert_eq!(check_yaml("a.yaml", &"- ".repeat(1000)), Ok(()));
        // A syntax error is left to the parser.
        assert_eq!(
            check_yaml("a.yaml", &format!("a: b: c\n{}", "[".repeat(70))),
            Ok(())
        );
    }

    #[test]
    fn only_regular_files_are_read_and_a_fifo_does_not_block() {
        let dir = tempfile::tempdir().unwrap();
        let fifo = dir.path().join("a.yaml");
        let c = std::ffi::CString::new(fifo.display().to_string()).unwrap();
        // SAFETY: mkfifo(3) with a NUL-terminated path.
        assert_eq!(unsafe { libc::mkfifo(c.as_ptr(), 0o644) }, 0);
        let err = read_file("a.yaml", &fifo).unwrap_err().to_string();
        assert_eq!(
            err,
            "a.yaml: file: not a regular file (a FIFO (named pipe)); a records, zone or \
             manifests file must be a regular file or a symlink to one"
        );
        let err = read_file("d", dir.path()).unwrap_err().to_string();
        assert!(err.contains("not a regular file (a directory)"), "{err}");
        let err = read_file("null", Path::new("/dev/null"))
            .unwrap_err()
            .to_string();
        assert!(err.contains("(a character device)"), "{err}");

        let real = dir.path().join("b.yaml");
        std::fs::write(&real, "zones: []\n").unwrap();
        let link = dir.path().join("link.yaml");
        std::os::unix::fs::symlink(&real, &link).unwrap();
        assert_eq!(read_file("link", &link).unwrap(), b"zones: []\n");
        let err = read_file("gone", &dir.path().join("gone")).unwrap_err();
        assert!(err.reason.starts_with("cannot read: "), "{err}");
    }
}
