//! NSID (RFC 5001): which replica answered. `dig +nsid` and `kdig +nsid` see `--nsid` (by
//! default the host name) over UDP, TCP and DoT, only when they ask; `--nsid ""` turns it off;
//! a bad one is refused before anything starts; `/dns-query` and `/pkarr` name the replica in a
//! `Meshdns-Nsid` header.

use std::process::Command;

use iroh_base::SecretKey;
use iroh_dns::endpoint_info::EndpointInfo;

use crate::*;

/// `program ARGS` (dig or kdig), stdout and stderr together.
fn tool(program: &str, args: &[&str]) -> String {
    let out = Command::new(program)
        .args(args)
        .output()
        .unwrap_or_else(|e| panic!("{program} is installed (dnsutils, knot-dnsutils): {e}"));
    String::from_utf8_lossy(&out.stdout).into_owned() + &String::from_utf8_lossy(&out.stderr)
}

/// `kdig @server -p port ARGS`.
fn kdig(server: std::net::SocketAddr, args: &[&str]) -> String {
    let port = server.port().to_string();
    let mut all = vec!["@127.0.0.1", "-p", &port, "+norec", "+time=2", "+retry=0"];
    all.extend_from_slice(args);
    tool("kdig", &all)
}

/// The NSID line of dig's or kdig's output, if any.
fn nsid_line(out: &str) -> Option<&str> {
    out.lines().find(|l| l.contains("NSID"))
}

/// A server of `SMALL_ZONE` with `extra` flags.
fn serve(dir: &tempfile::TempDir, extra: &[&str]) -> Meshdns {
    let zone = write(dir.path(), "example.org.zone", SMALL_ZONE);
    let mut args = vec!["--zone-file", &zone];
    args.extend_from_slice(extra);
    Meshdns::serve(&args)
}

#[test]
fn dig_and_kdig_see_the_nsid_over_udp_tcp_and_dot_only_when_they_ask() {
    let dir = tempfile::tempdir().unwrap();
    let m = serve(
        &dir,
        &[
            "--nsid",
            "replica-a",
            "--dot",
            "127.0.0.1:0",
            "--tls-self-signed",
        ],
    );
    let www = ["www.example.org", "A"];
    for transport in [&[][..], &["+tcp"]] {
        let asked = dig(m.dns, &[&www[..], transport, &["+nsid"]].concat());
        assert!(asked.contains("192.0.2.1"), "{asked}");
        let line = nsid_line(&asked).unwrap_or_else(|| panic!("no NSID:\n{asked}"));
        // dig prints the bytes in hex, then the text: `; NSID: 72 65 … ("replica-a")`.
        assert!(line.contains("(\"replica-a\")"), "{line}");
        let unasked = dig(m.dns, &[&www[..], transport].concat());
        assert!(unasked.contains("192.0.2.1"), "{unasked}");
        assert_eq!(nsid_line(&unasked), None, "{unasked}");
    }
    // Negative answers name the replica too.
    let nx = dig(m.dns, &["nope.example.org", "A", "+nsid"]);
    assert!(nx.contains("NXDOMAIN") && nx.contains("replica-a"), "{nx}");

    for transport in [&["+notcp"][..], &["+tcp"]] {
        let asked = kdig(m.dns, &[&www[..], transport, &["+nsid"]].concat());
        assert!(asked.contains("192.0.2.1"), "{asked}");
        let line = nsid_line(&asked).unwrap_or_else(|| panic!("no NSID:\n{asked}"));
        assert!(line.contains("replica-a"), "{line}");
        let unasked = kdig(m.dns, &[&www[..], transport].concat());
        assert_eq!(nsid_line(&unasked), None, "{unasked}");
    }

    // DoT pads the reply after the NSID (RFC 8467 block padding: the OPT keeps both).
    let dot = m.dot.expect("started with --dot");
    let asked = kdig(dot, &[&www[..], &["+tls", "+nsid", "+padding"]].concat());
    assert!(asked.contains("192.0.2.1"), "{asked}");
    let line = nsid_line(&asked).unwrap_or_else(|| panic!("no NSID over DoT:\n{asked}"));
    assert!(line.contains("replica-a"), "{line}");
    assert!(asked.contains("PADDING"), "padded:\n{asked}");
    let size = asked
        .lines()
        .find_map(|l| l.split("Received ").nth(1))
        .and_then(|l| l.split(" B").next())
        .and_then(|n| n.trim().parse::<usize>().ok())
        .unwrap_or_else(|| panic!("no reply size in\n{asked}"));
    assert_eq!(size % 468, 0, "a multiple of the RFC 8467 block:\n{asked}");
}

#[test]
fn nsid_defaults_to_the_host_name_and_an_empty_one_turns_it_off() {
    let host = std::fs::read_to_string("/proc/sys/kernel/hostname")
        .ok()
        .map(|h| h.trim().to_string())
        .filter(|h| !h.is_empty())
        .or_else(|| std::env::var("HOSTNAME").ok())
        .expect("the test host has a name");
    let dir = tempfile::tempdir().unwrap();
    let m = serve(&dir, &[]);
    let out = dig(m.dns, &["www.example.org", "A", "+nsid"]);
    let line = nsid_line(&out).unwrap_or_else(|| panic!("no NSID:\n{out}"));
    assert!(line.contains(&format!("(\"{host}\")")), "{line}");
    drop(m);

    let m = serve(&dir, &["--nsid", "", "--http", "127.0.0.1:0"]);
    for transport in [&[][..], &["+tcp"]] {
        let out = dig(
            m.dns,
            &[&["www.example.org", "A", "+nsid"][..], transport].concat(),
        );
        assert!(out.contains("192.0.2.1"), "{out}");
        assert_eq!(nsid_line(&out), None, "{out}");
    }
    let q = data_encoding::BASE64URL_NOPAD.encode(&dns_query());
    let (status, head, _) = http(
        m.http.unwrap(),
        "GET",
        &format!("/dns-query?dns={q}"),
        None,
        &[],
    );
    assert_eq!(status, 200);
    assert!(
        !head.to_ascii_lowercase().contains("meshdns-nsid"),
        "{head}"
    );
}

/// `meshdns ARGS`: its exit status and stderr.
fn run(args: &[&str]) -> (Option<i32>, String) {
    let out = bin().args(args).output().unwrap();
    (
        out.status.code(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

#[test]
fn a_bad_nsid_is_refused_by_serve_and_check_naming_the_flag() {
    let dir = tempfile::tempdir().unwrap();
    let zone = write(dir.path(), "example.org.zone", SMALL_ZONE);
    let long = "n".repeat(256);
    for (bad, why) in [
        ("replica a", "byte 0x20"),
        ("répliqué", "byte 0xC3"),
        ("tab\there", "byte 0x09"),
        (long.as_str(), "256 bytes"),
    ] {
        let flags = ["--nsid", bad, "--zone-file", &zone];
        let serve = run(&[&["serve", "--listen", "127.0.0.1:0"][..], &flags].concat());
        let check = run(&[&["check"][..], &flags].concat());
        for (what, (status, stderr)) in [("serve", serve), ("check", check)] {
            assert_eq!(status, Some(2), "{what} {bad:?}: {stderr}");
            assert!(stderr.contains("--nsid (nsid)"), "{what}: {stderr}");
            assert!(stderr.contains(why), "{what}: {stderr}");
        }
    }
    // The config file's key, by `check --config-only`, alike.
    let cfg = write(
        dir.path(),
        "meshdns.yaml",
        "serve:\n  listen: ['127.0.0.1:0']\n  nsid: 'replica a'\n",
    );
    let (status, stderr) = run(&["check", "--config-only", "-c", &cfg]);
    assert_eq!(status, Some(2), "{stderr}");
    assert!(stderr.contains("--nsid (nsid) \"replica a\""), "{stderr}");
    // 255 bytes of visible ASCII is fine; so is the empty one.
    for good in [
        "n".repeat(255),
        String::new(),
        "replica-a.example_1~".into(),
    ] {
        let (status, stderr) = run(&["check", "--nsid", &good, "--zone-file", &zone]);
        assert_eq!(status, Some(0), "{good:?}: {stderr}");
    }
}

/// A query for `www.example.org. A` without EDNS, as DoH sends it.
fn dns_query() -> Vec<u8> {
    let mut q = vec![0, 0, 1, 0, 0, 1, 0, 0, 0, 0, 0, 0];
    q.extend_from_slice(b"\x03www\x07example\x03org\x00\x00\x01\x00\x01");
    q
}

/// The `meshdns-nsid` value of an HTTP header block (names are case-insensitive).
fn nsid_header(head: &str) -> Option<String> {
    head.lines().find_map(|l| {
        let (name, value) = l.split_once(':')?;
        name.trim()
            .eq_ignore_ascii_case("meshdns-nsid")
            .then(|| value.trim().to_string())
    })
}

#[test]
fn dns_query_and_pkarr_responses_name_the_replica_in_a_header() {
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("data");
    let m = serve(
        &dir,
        &[
            "--nsid",
            "replica-a",
            "--http",
            "127.0.0.1:0",
            "--pkarr",
            "dns.example.org",
            "--data-dir",
            data.to_str().unwrap(),
        ],
    );
    let addr = m.http.unwrap();
    let header = |head: &str| nsid_header(head).unwrap_or_else(|| panic!("no header:\n{head}"));

    // curl, as an operator would look.
    let url = |path: &str| format!("http://{addr}{path}");
    let q = data_encoding::BASE64URL_NOPAD.encode(&dns_query());
    let head = tool(
        "curl",
        &[
            "-s",
            "-D",
            "-",
            "-o",
            "/dev/null",
            &url(&format!("/dns-query?dns={q}")),
        ],
    );
    assert!(head.starts_with("HTTP/1.1 200"), "{head}");
    assert_eq!(header(&head), "replica-a");

    // DoH: GET, POST, and a packet that is no query.
    let (status, head, _) = http(addr, "GET", &format!("/dns-query?dns={q}"), None, &[]);
    assert_eq!((status, header(&head).as_str()), (200, "replica-a"));
    let post = |body: &[u8]| http(addr, "POST", "/dns-query", Some(DNS_MESSAGE), body);
    let (status, head, _) = post(&dns_query());
    assert_eq!((status, header(&head).as_str()), (200, "replica-a"));
    let mut response = dns_query();
    response[2] |= 0x80;
    let (status, head, _) = post(&response);
    assert_eq!((status, header(&head).as_str()), (400, "replica-a"));

    // pkarr: a publish, the packet, an unknown key, a bad key, the CORS preflight.
    let secret = SecretKey::generate();
    let payload = EndpointInfo::new(secret.public())
        .with_relay_url("https://relay.example.org".parse().unwrap())
        .to_pkarr_signed_packet(&secret, 30)
        .unwrap()
        .to_relay_payload();
    let path = format!("/pkarr/{}", secret.public().to_z32());
    let (status, head, _) = http(addr, "PUT", &path, None, &payload);
    assert_eq!((status, header(&head).as_str()), (204, "replica-a"));
    let (status, head, _) = http(addr, "GET", &path, None, &[]);
    assert_eq!((status, header(&head).as_str()), (200, "replica-a"));
    let unknown = format!("/pkarr/{}", SecretKey::generate().public().to_z32());
    let (status, head, _) = http(addr, "GET", &unknown, None, &[]);
    assert_eq!((status, header(&head).as_str()), (404, "replica-a"));
    let (status, head, _) = http(addr, "GET", "/pkarr/not-a-key", None, &[]);
    assert_eq!((status, header(&head).as_str()), (400, "replica-a"));
    let (status, head, _) = http(addr, "OPTIONS", &path, None, &[]);
    assert_eq!((status, header(&head).as_str()), (204, "replica-a"));
    let head = tool("curl", &["-s", "-D", "-", "-o", "/dev/null", &url(&path)]);
    assert!(head.starts_with("HTTP/1.1 200"), "{head}");
    assert_eq!(header(&head), "replica-a");

    // The rest of the listener is not asked which replica it is.
    let (status, head, _) = http(addr, "GET", "/healthz", None, &[]);
    assert_eq!((status, nsid_header(&head)), (200, None));
}

const DNS_MESSAGE: &str = "application/dns-message";
