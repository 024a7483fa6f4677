//! The checks behind each fuzz target (`fuzz_targets/*.rs` are one line each). Every target
//! takes any bytes; a panic (including an arithmetic overflow: the fuzz profile keeps overflow
//! checks) or a failed assertion is a finding. What each target asserts beyond "no panic" is
//! written beside it.

use std::collections::{BTreeMap, BTreeSet};
use std::net::IpAddr;
use std::sync::LazyLock;

use hickory_proto::op::{Message, MessageType, ResponseCode};
use meshdns_sources::{FileKind, ParseSettings, SourceInput};
use meshdns_zone::{AnswerConfig, BuildDefaults, Catalog, Name, Transport};
use serde_json::Value;

const HEADER_LEN: usize = 12;

/// The zone every query is answered from: one of each served type, a delegation with glue, a
/// wildcard, a CNAME chain (in and out of zone), names that share labels for compression, a
/// TXT set too big for 512 bytes, DNAMEs (to the apex, in a loop, out of zone, and one whose
/// substitution overflows a name), and SVCB/HTTPS whose targets bring addresses.
const ZONE: &str = r#"
$ORIGIN example.net.
$TTL 60
@        IN SOA  ns1 hostmaster ( 2026112301 1h 10m 1w 30 )
         IN NS   ns1
         IN NS   ns2.example.org.
         IN MX   10 mail
         IN CAA  0 issue "letsencrypt.org"
         IN TXT  "v=spf1 -all"
ns1      IN A    192.0.2.1
         IN AAAA 2001:db8::1
mail     IN A    192.0.2.25
www      IN CNAME host
alias    IN CNAME www
out      IN CNAME elsewhere.example.org.
loop1    IN CNAME loop2
loop2    IN CNAME loop1
host     IN A    198.51.100.7
         IN A    198.51.100.8
         IN AAAA 2001:db8:1::7
*.apps   IN A    198.51.100.80
         IN TXT  "wildcard"
_sip._udp IN SRV 0 5 5060 host
7.100.51.198.in-addr IN PTR host
sub      IN NS   ns.sub
ns.sub   IN A    192.0.2.53
empty.nonterminal.deep IN A 192.0.2.9
d        IN DNAME example.net.
dl       IN DNAME dl2
dl2      IN DNAME dl
dout     IN DNAME example.org.
dlong    IN DNAME aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa.aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa.aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa.aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa.example.net.
svc      IN HTTPS 1 host alpn=h2
front    IN HTTPS 0 svc
self     IN SVCB 1 . port=853
         IN A    192.0.2.10
big      IN TXT  "0123456789012345678901234567890123456789012345678901234567890123456789012345678901234567890123456789"
         IN TXT  "1123456789012345678901234567890123456789012345678901234567890123456789012345678901234567890123456789"
         IN TXT  "2123456789012345678901234567890123456789012345678901234567890123456789012345678901234567890123456789"
         IN TXT  "3123456789012345678901234567890123456789012345678901234567890123456789012345678901234567890123456789"
         IN TXT  "4123456789012345678901234567890123456789012345678901234567890123456789012345678901234567890123456789"
         IN TXT  "5123456789012345678901234567890123456789012345678901234567890123456789012345678901234567890123456789"
"#;

fn defaults() -> BuildDefaults {
    BuildDefaults {
        default_ttl: 300,
        serial: 1,
    }
}

fn name(text: &str) -> Name {
    Name::parse(text, None).expect("a valid name")
}

static CATALOG: LazyLock<Catalog> = LazyLock::new(|| {
    let kind = FileKind::ZoneFile {
        origin: Some(name("example.net.")),
        views: Vec::new(),
    };
    let loaded = meshdns_sources::load(
        "fuzz.zone",
        &kind,
        ZONE.as_bytes(),
        &ParseSettings::default(),
        defaults(),
    )
    .expect("the fuzz zone parses");
    assert!(loaded.problems.is_empty(), "{:?}", loaded.problems);
    Catalog::from_zones(loaded.compiled.zones)
});

/// `answer()` on any bytes, over UDP and a stream: a reply, when there is one, re-decodes with
/// hickory-proto, echoes the ID, is a response, carries the rcode `answer()` reported, has the
/// header counts hickory finds, fits the UDP limit, and repeats the query's question as hickory
/// reads it. A query answered NOERROR or NXDOMAIN must be one hickory can decode.
pub fn answer(data: &[u8]) {
    for transport in [Transport::Udp, Transport::Stream] {
        let mut out = Vec::new();
        let outcome = meshdns_zone::answer(
            &CATALOG,
            data,
            transport,
            &AnswerConfig::default(),
            &mut out,
        );
        if !outcome.reply {
            assert!(out.is_empty(), "a dropped query left bytes in the buffer");
            continue;
        }
        check_reply(data, &out, outcome.rcode, transport);
    }
    // The oversized-datagram path takes the start of any datagram.
    let mut out = Vec::new();
    let outcome = meshdns_zone::answer_oversized(data, &mut out);
    if outcome.reply {
        let reply = Message::from_vec(&out).expect("an oversized reply decodes");
        assert_eq!(reply.metadata.response_code, ResponseCode::FormErr);
        assert_eq!(out.len(), HEADER_LEN);
    }
}

fn check_reply(query: &[u8], out: &[u8], rcode: u16, transport: Transport) {
    let reply = match Message::from_vec(out) {
        Ok(m) => m,
        Err(e) => panic!("our reply does not decode ({e}): {out:02x?}"),
    };
    assert_eq!(reply.metadata.id, u16::from_be_bytes([query[0], query[1]]));
    assert_eq!(reply.metadata.message_type, MessageType::Response);
    assert_eq!(u16::from(reply.metadata.response_code), rcode, "rcode");
    let count = |at: usize| usize::from(u16::from_be_bytes([out[at], out[at + 1]]));
    assert_eq!(count(4), reply.queries.len(), "QDCOUNT");
    assert_eq!(count(6), reply.answers.len(), "ANCOUNT");
    assert_eq!(count(8), reply.authorities.len(), "NSCOUNT");
    let opt = usize::from(reply.edns.is_some()) + usize::from(reply.signature.is_some());
    assert_eq!(count(10), reply.additionals.len() + opt, "ARCOUNT");
    if transport == Transport::Udp {
        // 512 without EDNS; with it, at most what both sides accept (and never under 512).
        let limit = match reply.edns {
            None => 512,
            Some(_) => usize::from(AnswerConfig::default().edns_payload),
        };
        assert!(out.len() <= limit, "a {}-byte UDP reply", out.len());
    }
    // hickory's own reading of the query's header and question (only those: hickory refuses
    // some additional records, such as an empty RDATA of an unknown type, that a server may
    // ignore).
    let asked = question_of(query);
    if let Some(question) = reply.queries.first() {
        let asked = asked
            .as_ref()
            .unwrap_or_else(|e| panic!("we echoed a question hickory cannot read ({e})"));
        assert_eq!(asked.name(), question.name(), "question name");
        assert_eq!(asked.query_type(), question.query_type(), "question type");
        assert_eq!(
            asked.query_class(),
            question.query_class(),
            "question class"
        );
    }
    let answered = matches!(
        reply.metadata.response_code,
        ResponseCode::NoError | ResponseCode::NXDomain
    );
    if answered && let Err(e) = asked {
        panic!("answered a query whose question hickory-proto refuses ({e}): {query:02x?}");
    }
}

/// The query's first question, read by hickory-proto after its header.
fn question_of(query: &[u8]) -> Result<hickory_proto::op::Query, String> {
    use hickory_proto::op::{Header, Query};
    use hickory_proto::serialize::binary::{BinDecodable, BinDecoder};
    let mut decoder = BinDecoder::new(query);
    let header = Header::read(&mut decoder).map_err(|e| e.to_string())?;
    if header.counts.queries == 0 {
        return Err("no question".into());
    }
    Query::read(&mut decoder).map_err(|e| e.to_string())
}

/// The settings records files are read with: Tailscale names go under `ts.net.`; manifests'
/// cluster objects of every kind are read, with default names under `cluster.example.org.`.
fn parse_settings() -> ParseSettings {
    use meshdns_sources::cluster::{ClusterSettings, Kind};
    ParseSettings {
        default_ttl: 60,
        tailscale_zones: vec![name("ts.net.")],
        cluster: ClusterSettings {
            kinds: Kind::ALL.iter().map(|(_, k)| *k).collect(),
            default_names: Some(name("cluster.example.org.")),
            default_ttl: 60,
            ..ClusterSettings::default()
        },
    }
}

/// The ranges whose reverse zones are made from what is served.
fn reverse_ranges() -> Vec<meshdns_zone::Cidr> {
    ["192.0.2.0/24", "10.0.0.0/9", "2001:db8::/30"]
        .iter()
        .map(|r| r.parse().expect("a range"))
        .collect()
}

/// The records-file readers (the first byte picks the kind: detected from the content, an RFC
/// 1035 zone file with or without an origin, or Kubernetes manifests, the cluster's own objects
/// of every kind included; Tailscale and meshdns JSON/YAML are detected), then compiling and
/// assembling what they read (names placed in `example.org.` and `cluster.example.org.`, and
/// reverse zones made). Whatever compiles is
/// served: the SOA and every name's A, AAAA and TXT answers re-decode with hickory-proto.
/// Reading is deterministic: the same bytes give the same problems.
pub fn records(data: &[u8]) {
    let Some((&selector, bytes)) = data.split_first() else {
        return;
    };
    let kind = match selector % 4 {
        0 => FileKind::Auto,
        1 => FileKind::ZoneFile {
            origin: Some(name("example.net.")),
            views: Vec::new(),
        },
        2 => FileKind::ZoneFile {
            origin: None,
            views: Vec::new(),
        },
        _ => FileKind::Manifests,
    };
    let settings = parse_settings();
    let first = meshdns_sources::load("fuzz", &kind, bytes, &settings, defaults());
    let again = meshdns_sources::load("fuzz", &kind, bytes, &settings, defaults());
    let (loaded, again) = match (first, again) {
        (Ok(a), Ok(b)) => (a, b),
        (Err(a), Err(b)) => {
            assert_eq!(
                a.to_string(),
                b.to_string(),
                "the same bytes, another error"
            );
            return;
        }
        _ => panic!("the same bytes loaded once and failed once"),
    };
    let problems = |l: &meshdns_sources::Loaded| -> Vec<String> {
        l.problems.iter().map(ToString::to_string).collect()
    };
    assert_eq!(problems(&loaded), problems(&again), "problems differ");
    let input = SourceInput {
        label: "fuzz",
        compiled: &loaded.compiled,
    };
    let declared = [name("example.org."), name("cluster.example.org.")];
    // The reverse zones, and a catalog zone listing every zone.
    let generated = meshdns_sources::Generated {
        reverse: reverse_ranges(),
        catalog: Some(name("catalog.invalid.")),
    };
    let (catalog, _) = meshdns_sources::assemble(&[input], &declared, &generated, defaults());
    let mut queried = 0;
    for zone in &loaded.compiled.zones {
        for (owner, qtype) in zone_names(zone) {
            if queried == 64 {
                return;
            }
            queried += 1;
            let query = query_bytes(&owner, qtype);
            let mut out = Vec::new();
            let outcome = meshdns_zone::answer(
                &catalog,
                &query,
                Transport::Stream,
                &AnswerConfig::default(),
                &mut out,
            );
            assert!(outcome.reply, "no reply to a well-formed query");
            check_reply(&query, &out, outcome.rcode, Transport::Stream);
        }
    }
}

/// Names to ask about in a zone: its origin (SOA, NS) and every owner (A, AAAA, TXT, MX).
fn zone_names(zone: &meshdns_zone::Zone) -> Vec<(Vec<u8>, u16)> {
    let mut out = vec![
        (zone.origin().wire().to_vec(), 6),
        (zone.origin().wire().to_vec(), 2),
    ];
    for node in zone.nodes() {
        for qtype in [1, 28, 16, 15] {
            out.push((node.name().to_vec(), qtype));
        }
    }
    out
}

/// A query for `owner` (wire format) and `qtype`, with EDNS.
fn query_bytes(owner: &[u8], qtype: u16) -> Vec<u8> {
    let mut q = vec![0x12, 0x34, 0x01, 0x00, 0, 1, 0, 0, 0, 0, 0, 1];
    q.extend_from_slice(owner);
    q.extend_from_slice(&qtype.to_be_bytes());
    q.extend_from_slice(&1u16.to_be_bytes());
    q.extend_from_slice(&[0, 0, 41, 0x10, 0, 0, 0, 0, 0, 0, 0]);
    q
}

static PKARR_SECRET: LazyLock<iroh_base::SecretKey> =
    LazyLock::new(|| iroh_base::SecretKey::from_bytes(&[7; 32]));

/// A pkarr relay payload: the first byte picks whether the rest is a whole payload (signature,
/// timestamp, DNS message: almost always refused at the signature) or a DNS message the target
/// signs, so the packet reader past the signature is reached. An accepted packet also reads
/// back from the store with the same records, and its records are servable names.
pub fn pkarr(data: &[u8]) {
    use meshdns_iroh::pkarr::{PAYLOAD_HEADER, SignedPacket};
    let Some((&selector, rest)) = data.split_first() else {
        return;
    };
    let key = PKARR_SECRET.public();
    let payload = if selector & 1 == 0 {
        rest.to_vec()
    } else {
        let timestamp_us: u64 = 1_700_000_000_000_000;
        let mut signable = format!("3:seqi{timestamp_us}e1:v{}:", rest.len()).into_bytes();
        signable.extend_from_slice(rest);
        let mut payload = PKARR_SECRET.sign(&signable).to_bytes().to_vec();
        payload.extend_from_slice(&timestamp_us.to_be_bytes());
        payload.extend_from_slice(rest);
        payload
    };
    let origin = name("example.net.");
    if let Ok(stored) = SignedPacket::from_stored(&key, &payload) {
        let _ = stored.records(&origin);
        let _ = stored.min_ttl();
    }
    let Ok(signed) = SignedPacket::from_relay_payload(&key, &payload) else {
        return;
    };
    assert_eq!(signed.payload(), payload.as_slice());
    assert_eq!(signed.dns_message(), &payload[PAYLOAD_HEADER..]);
    let records = signed.records(&origin);
    let stored = SignedPacket::from_stored(&key, &payload).expect("an accepted packet reloads");
    assert_eq!(
        format!("{records:?}"),
        format!("{:?}", stored.records(&origin)),
        "records differ after a reload"
    );
    let _ = signed.published();
}

static TSIG_KEY: LazyLock<meshdns_xfr::tsig::Key> = LazyLock::new(|| {
    meshdns_xfr::tsig::Key::new(
        name("xfr-key."),
        meshdns_xfr::tsig::Algorithm::HmacSha256,
        b"0123456789abcdef0123456789abcdef",
    )
});

/// A message as a secondary or primary receives it: parsed, TSIG-checked, fed to the transfer
/// reader (as AXFR and as IXFR from serial 1), applied when incremental, and read as a NOTIFY
/// acknowledgement and as a signed transfer reply.
pub fn xfr(data: &[u8]) {
    use meshdns_xfr::{message, notify, secondary, tsig};
    let Ok(msg) = message::parse(data) else {
        return;
    };
    let _ = tsig::check(&msg, std::slice::from_ref(&*TSIG_KEY), 1_700_000_000);
    let mut verifier = tsig::ReplyVerifier::new(&TSIG_KEY, vec![0; 32]);
    let _ = verifier.check(&msg);
    let _ = notify::is_ack(data, msg.id, &name("example.net."));
    for r in msg
        .answers
        .iter()
        .chain(&msg.authority)
        .chain(&msg.additional)
    {
        let _ = msg.soa_serial(r);
        if let Some(rr) = secondary::record(&msg, r) {
            let _ = secondary::soa_serial(&rr.rdata);
        }
    }
    update(data, &msg);
    for asked in [None, Some(1)] {
        let mut reader = secondary::ReplyReader::new();
        if reader.feed(&msg, asked).is_err() {
            continue;
        }
        match reader.finish() {
            Ok(secondary::Received::Incremental(deltas, _)) => {
                let _ = secondary::apply(&BTreeSet::new(), &deltas);
            }
            Ok(secondary::Received::Full(rrs)) => {
                let held: BTreeSet<_> = rrs.into_iter().collect();
                let _ = secondary::apply(&held, &[]);
            }
            _ => {}
        }
    }
}

/// An UPDATE (RFC 2136): its sections read, checked and applied to a zone of one record (and
/// to the result again), and answered whole under a policy granting the fuzz key.
fn update(data: &[u8], msg: &meshdns_xfr::message::Message<'_>) {
    use meshdns_xfr::update::{self, Rrsets, UpdatePolicy, ZoneIs};
    let zone = |origin: &[u8]| {
        let mut z = Rrsets::new();
        z.insert((origin.to_vec(), 1), (60, vec![vec![192, 0, 2, 1]]));
        z
    };
    if let Ok(req) = update::read(msg)
        && let Ok((next, _)) = update::process(&req, &zone(&req.zone))
    {
        let _ = update::process(&req, &next);
    }
    let policy = UpdatePolicy {
        keys: vec![TSIG_KEY.clone()],
        grants: vec![(TSIG_KEY.name.clone(), None)],
    };
    let _ = update::respond(
        &policy,
        data,
        1_700_000_000,
        |_| ZoneIs::Updatable,
        |_| true,
        |req| update::process(req, &zone(&req.zone)).map(|_| ()),
    );
}

/// A TSIG key file (`key "name" { algorithm …; secret "…"; };`): read twice, the same answer.
pub fn keys(data: &[u8]) {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    let first = meshdns_xfr::tsig::parse_key_file("fuzz.key", text);
    let again = meshdns_xfr::tsig::parse_key_file("fuzz.key", text);
    match (first, again) {
        (Ok(a), Ok(b)) => assert_eq!(format!("{a:?}"), format!("{b:?}")),
        (Err(a), Err(b)) => assert_eq!(a, b),
        _ => panic!("the same key file read two ways"),
    }
}

fn iroh_settings() -> meshdns_iroh::connector::IrohSettings {
    meshdns_iroh::connector::IrohSettings {
        zone_namespace: "dns".into(),
        zone_name: "iroh".into(),
        record_prefix: "_iroh".into(),
        record_suffix: String::new(),
        ttl: 30,
    }
}

/// The iroh Connector planner on objects read from JSON (a list, or one object): each object
/// that reads as a Connector is planned twice with the same result, and its record set is
/// claimed against the one planned before it (shared keys exercise the claim).
pub fn iroh_plan(data: &[u8]) {
    use meshdns_iroh::connector::{Decision, RecordSetPlan, claim, plan};
    let objects = match serde_json::from_slice::<Value>(data) {
        Ok(Value::Array(list)) => list,
        Ok(one) => vec![one],
        Err(_) => return,
    };
    let settings = iroh_settings();
    let mut owned: BTreeMap<String, RecordSetPlan> = BTreeMap::new();
    for o in objects {
        let Ok(c) = serde_json::from_value::<meshdns_objects::Connector>(o) else {
            continue;
        };
        let class = Some(meshdns_iroh::connector::IROH_CLASSES[0].to_string());
        let input = c.to_input(class, "fuzz");
        let first = plan(&input, &settings);
        assert_eq!(
            first,
            plan(&input, &settings),
            "the planner is not deterministic"
        );
        if let Decision::Publish(p) = first {
            let existing = owned.get(&p.name).map(|o| (&o.labels, &o.annotations));
            let action = claim(&input.uid, existing);
            assert_eq!(action, claim(&input.uid, existing));
            let _ = meshdns_objects::dns::iroh_record_set(&p);
            owned.entry(p.name.clone()).or_insert(p);
        }
    }
}

/// The mesh planner on `{"meshes": [{"name", "spec"}], "nodes": {cluster: [Node]}}` read from
/// JSON: planned twice with the same result, then the Peers for every target (merged and
/// enriched), the node record sets and the status, as the controller and `render mesh` use them.
pub fn mesh_plan(data: &[u8]) {
    use meshdns_mesh::MeshSpec;
    use meshdns_mesh::plan::{
        ClusterNodes, discovered_endpoints, enrich, merge_same_key, plan_meshes,
    };
    use meshdns_objects::ClusterMeshSpec;
    use meshdns_objects::core::Node;
    let Ok(Value::Object(top)) = serde_json::from_slice::<Value>(data) else {
        return;
    };
    let meshes: Vec<(String, ClusterMeshSpec)> = match top.get("meshes") {
        Some(Value::Array(list)) => list
            .iter()
            .filter_map(|m| {
                let name = m.get("name")?.as_str()?.to_string();
                let spec = serde_json::from_value(m.get("spec")?.clone()).ok()?;
                Some((name, spec))
            })
            .collect(),
        _ => return,
    };
    let nodes: BTreeMap<String, Vec<Node>> = top
        .get("nodes")
        .and_then(|n| serde_json::from_value(n.clone()).ok())
        .unwrap_or_default();
    let planned: Vec<MeshSpec> = meshes.iter().map(|(_, s)| s.to_plan()).collect();
    let specs: Vec<(&str, &MeshSpec)> = meshes
        .iter()
        .zip(&planned)
        .map(|((n, _), s)| (n.as_str(), s))
        .collect();
    let lookup = |_: &str, cluster: &str| match nodes.get(cluster) {
        Some(list) => ClusterNodes::Listed(list.iter().map(Node::to_plan).collect()),
        None => ClusterNodes::Unavailable("not listed".into()),
    };
    let plans = plan_meshes(&specs, &lookup);
    assert_eq!(
        format!("{plans:?}"),
        format!("{:?}", plan_meshes(&specs, &lookup)),
        "the mesh planner is not deterministic"
    );
    let targets: BTreeSet<&str> = plans
        .iter()
        .flat_map(|p| p.sources.iter().map(|s| s.cluster.as_str()))
        .collect();
    for target in targets {
        let wanted: Vec<_> = plans.iter().flat_map(|p| p.peers_for(target)).collect();
        let listed: Vec<_> = nodes
            .get(target)
            .map(|l| l.iter().map(Node::to_plan).collect())
            .unwrap_or_default();
        let _ = enrich(merge_same_key(wanted), &discovered_endpoints(&listed));
    }
    for ((_, spec), plan) in meshes.iter().zip(&plans) {
        let _ = meshdns_objects::ClusterMeshStatus::from_plan(&plan.status(Some(1)));
        let _ = plan.bootstrapping();
        if let Some(dns) = &spec.dns {
            for set in meshdns_mesh::dns::node_record_sets(plan, &dns.to_plan()) {
                let _ = meshdns_objects::dns::node_record_set(&set, "fuzz");
            }
        }
    }
}

/// What reaches the HTTP and TLS listeners before any DNS: forwarded-for headers from a
/// trusted proxy (the client address must be the peer or one the headers name), a
/// `--trusted-proxy` value, a certificate's DER validity, a PEM certificate and key pair, and
/// the pkarr peers' push bodies, catch-up pages (which must encode back to the same bytes) and
/// `have=` lists.
pub fn http(data: &[u8]) {
    use meshdns_server::relay::client_address;
    use meshdns_zone::Cidr;
    let Some((&selector, rest)) = data.split_first() else {
        return;
    };
    match selector % 7 {
        0 => {
            let mut headers = http::HeaderMap::new();
            let (a, b) = rest.split_at(rest.len() / 2);
            for (header, value) in [("x-forwarded-for", a), ("forwarded", b)] {
                if let Ok(v) = http::HeaderValue::from_bytes(value) {
                    headers.insert(header, v);
                }
            }
            let peer: IpAddr = [127, 0, 0, 1].into();
            let trusted: Vec<Cidr> = vec!["127.0.0.0/8".parse().expect("a CIDR")];
            let client = client_address(peer, &headers, &trusted);
            let text = String::from_utf8_lossy(rest).to_lowercase();
            assert!(
                client == peer || text.contains(&client.to_string()) || client.is_ipv6(),
                "{client} is neither the peer nor in the headers"
            );
        }
        1 => {
            if let Ok(text) = std::str::from_utf8(rest)
                && let Ok(cidr) = text.parse::<Cidr>()
            {
                let shown = cidr.to_string();
                let again: Cidr = shown.parse().expect("a CIDR's own text parses");
                assert_eq!(again.to_string(), shown);
            }
        }
        2 => {
            if let Some((from, until)) = meshdns_server::tls::validity(rest) {
                assert_eq!(meshdns_server::tls::not_after(rest), Some(until));
                let _ = from;
            }
        }
        4 => {
            if let Some(frames) = meshdns_server::replicate::decode_push(rest) {
                let size: usize = frames.iter().map(|(_, _, p)| 42 + p.len()).sum();
                assert_eq!(size, rest.len(), "every byte is in a frame");
            }
        }
        5 => {
            if let Some(entries) = meshdns_server::replicate::decode_page(rest) {
                let page = meshdns_server::replicate::Page {
                    entries,
                    ..Default::default()
                };
                assert_eq!(meshdns_server::replicate::encode_page(&page), rest);
            }
        }
        6 => {
            if let Ok(text) = std::str::from_utf8(rest)
                && let Some(have) = meshdns_server::replicate::parse_have(text)
            {
                assert!(have.len() <= 1024);
            }
        }
        3 => {
            let files = meshdns_server::tls::CertFiles {
                cert: "fuzz.crt".into(),
                key: "fuzz.key".into(),
            };
            let at = rest.iter().position(|&b| b == 0).unwrap_or(rest.len());
            let (cert, key) = rest.split_at(at);
            let _ = files.parse(cert, key.get(1..).unwrap_or_default());
        }
        _ => unreachable!("a selector modulo 7"),
    }
}
