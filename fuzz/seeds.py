#!/usr/bin/env python3
"""Writes the seed corpus (fuzz/corpus/TARGET/NAME) the fuzz targets start from: one valid
example of each input shape the target reads, so libFuzzer mutates real structure rather than
discovering DNS from nothing. Deterministic; rerun after changing it and commit the result.

Usage: fuzz/seeds.py
"""
import hashlib
import json
import os
import struct
import sys

import yaml
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey
from cryptography.hazmat.primitives import serialization

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
sys.path.insert(0, os.path.join(ROOT, "bench"))
from gen_zone import z32_encode  # noqa: E402


def write(target, name, data):
    d = os.path.join(HERE, "corpus", target)
    os.makedirs(d, exist_ok=True)
    if isinstance(data, str):
        data = data.encode()
    with open(os.path.join(d, name), "wb") as f:
        f.write(data)


def wire_name(text):
    out = b""
    for label in text.rstrip(".").split("."):
        if label:
            out += bytes([len(label)]) + label.encode()
    return out + b"\0"


def header(id_, flags, qd, an, ns, ar):
    return struct.pack(">HHHHHH", id_, flags, qd, an, ns, ar)


def opt(payload=1232, options=b"", do=False):
    return b"\0" + struct.pack(">HHBBHH", 41, payload, 0, 0, 0x8000 if do else 0, len(options)) + options


def query(name, qtype, edns=True, flags=0x0100, options=b"", id_=0x1234):
    q = header(id_, flags, 1, 0, 0, 1 if edns else 0) + wire_name(name) + struct.pack(">HH", qtype, 1)
    return q + (opt(options=options) if edns else b"")


def rr(owner, rtype, ttl, rdata, cls=1):
    return owner + struct.pack(">HHIH", rtype, cls, ttl, len(rdata)) + rdata


def txt(*strings):
    return b"".join(bytes([len(s)]) + s.encode() for s in strings)


def answer_seeds():
    for name, qtype, tag in [
        ("host.example.net.", 1, "a"), ("host.example.net.", 28, "aaaa"),
        ("example.net.", 6, "soa"), ("example.net.", 2, "ns"), ("example.net.", 15, "mx"),
        ("example.net.", 257, "caa"), ("www.example.net.", 1, "cname"),
        ("alias.example.net.", 28, "chain"), ("loop1.example.net.", 1, "loop"),
        ("out.example.net.", 1, "out"), ("x.apps.example.net.", 16, "wildcard"),
        ("_sip._udp.example.net.", 33, "srv"), ("7.100.51.198.in-addr.example.net.", 12, "ptr"),
        ("a.b.sub.example.net.", 1, "referral"), ("nonterminal.deep.example.net.", 1, "ent"),
        ("nope.example.net.", 1, "nxdomain"), ("big.example.net.", 16, "big"),
        ("example.org.", 1, "refused"), ("host.example.net.", 255, "any"),
        ("example.net.", 252, "axfr"),
    ]:
        write("answer", f"{tag}-edns", query(name, qtype))
        write("answer", f"{tag}-plain", query(name, qtype, edns=False))
    write("answer", "big-udp512", query("big.example.net.", 16, edns=False))
    write("answer", "padding", query("host.example.net.", 1, options=struct.pack(">HH", 12, 4) + b"\0" * 4))
    write("answer", "cookie", query("host.example.net.", 1, options=struct.pack(">HH", 10, 8) + b"abcdefgh"))
    write("answer", "do-bit", query("host.example.net.", 1)[:-11] + opt(do=True))
    # A compression pointer in the question (to the header: refused), NOTIFY and a response.
    write("answer", "pointer", header(1, 0x0100, 1, 0, 0, 0) + b"\x04host\xc0\x0c" + struct.pack(">HH", 1, 1))
    write("answer", "notify", query("example.net.", 6, flags=0x2400, edns=False))
    write("answer", "response", query("host.example.net.", 1, flags=0x8100, edns=False))
    write("answer", "edns-version", query("host.example.net.", 1)[:-11] + b"\0" + struct.pack(">HHBBHH", 41, 1232, 0, 1, 0, 0))
    write("answer", "mixed-case", query("HoSt.ExAmPlE.NeT.", 1))


def records_seeds():
    ex = os.path.join(ROOT, "examples", "quickstart")
    with open(os.path.join(ex, "example.net.zone"), "rb") as f:
        zone = f.read()
    write("records", "zonefile-auto", b"\0" + zone)
    write("records", "zonefile-origin", b"\1" + b"$TTL 60\n@ IN SOA ns1 hostmaster 1 3600 600 604800 30\n"
          b"  IN NS ns1\nns1 IN A 192.0.2.1\nwww 300 IN CNAME ns1\n_s._tcp IN SRV 0 5 443 www\n"
          b"@ IN MX 10 mail\n@ IN CAA 0 issue \"ca.example\"\ntxt IN TXT \"a b\" c \"\\065\\\"\"\n"
          b"(paren) IN A 192.0.2.2\n*.w IN AAAA 2001:db8::1\n$INCLUDE other\n")
    write("records", "zonefile-noorigin", b"\2$ORIGIN example.org.\n@ 60 IN SOA a b ( 1 2 3 4 5 )\n@ NS a\na A 10.0.0.1\n")
    with open(os.path.join(ex, "records.json"), "rb") as f:
        write("records", "tailscale", b"\0" + f.read())
    native = {
        "zones": [{
            "origin": "example.org.", "ttl": 300,
            "soa": {"mname": "ns1.example.org.", "rname": "hostmaster", "serial": 7, "refresh": "1h",
                    "retry": "10m", "expire": "1w", "minimum": 30, "ttl": 3600},
            "ns": ["ns1.example.org."],
            "records": [
                {"name": "www", "type": "A", "values": ["192.0.2.1", "192.0.2.2"], "ttl": 60},
                {"name": "www", "type": "AAAA", "value": "2001:db8::1"},
                {"name": "@", "type": "MX", "value": "10 mail.example.org."},
                {"name": "api", "type": "CNAME", "value": "www"},
                {"name": "@", "type": "TXT", "values": ["v=spf1 -all", "x" * 300]},
                {"name": "_https._tcp", "type": "SRV", "value": "0 5 443 www"},
                {"name": "@", "type": "CAA", "value": '0 issue "letsencrypt.org"'},
                {"name": "*.apps", "type": "A", "value": "192.0.2.80"},
                {"name": "child", "type": "NS", "value": "ns.child"},
            ],
            "iroh": [{"endpoint": "1f" * 32, "relay": "https://relay.example.org",
                      "addrs": ["192.0.2.10:4433", "[2001:db8::10]:4433"], "userData": "rack-7",
                      "suffix": "nodes", "ttl": 5}],
        }]
    }
    write("records", "native-json", b"\0" + json.dumps(native).encode())
    write("records", "native-yaml", b"\0" + yaml.safe_dump(native).encode())
    manifests = """apiVersion: dns.networking.miloapis.com/v1alpha1
kind: DNSZone
metadata: {name: z, namespace: dns}
spec: {domainName: example.org, dnsZoneClassName: meshdns}
---
apiVersion: dns.networking.miloapis.com/v1alpha1
kind: DNSRecordSet
metadata: {name: z-www, namespace: dns}
spec:
  dnsZoneRef: {name: z}
  recordType: A
  records:
  - {name: www, a: {content: 192.0.2.1}, ttl: 60}
---
apiVersion: dns.networking.miloapis.com/v1alpha1
kind: DNSRecordSet
metadata: {name: z-txt, namespace: dns}
spec:
  dnsZoneRef: {name: z}
  recordType: TXT
  records:
  - {name: "_iroh.x", txt: {content: "relay=https://r.example/"}}
"""
    write("records", "manifests", b"\3" + manifests.encode())
    objects = b""
    for f in ["services.yaml", "ingresses.yaml"]:
        with open(os.path.join(ROOT, "examples", "cluster-objects", f), "rb") as fh:
            objects += fh.read() + b"\n---\n"
    objects += b"""apiVersion: gateway.networking.k8s.io/v1
kind: Gateway
metadata: {name: edge, namespace: infra}
spec:
  listeners: [{name: https, hostname: "*.example.org", port: 443, protocol: HTTPS, allowedRoutes: {namespaces: {from: All}}}]
status: {addresses: [{value: 192.0.2.30}]}
---
apiVersion: gateway.networking.k8s.io/v1
kind: HTTPRoute
metadata: {name: app, namespace: shop}
spec: {parentRefs: [{name: edge, namespace: infra}], hostnames: [app.example.org]}
status: {parents: [{parentRef: {name: edge, namespace: infra}, conditions: [{type: Accepted, status: "True"}]}]}
---
apiVersion: externaldns.k8s.io/v1alpha1
kind: DNSEndpoint
metadata: {name: e, namespace: dns}
spec:
  endpoints:
  - {dnsName: txt.example.org, recordType: TXT, targets: [hello]}
  - {dnsName: example.org, recordType: MX, targets: ["10 mail.example.org"]}
"""
    write("records", "cluster-objects", b"\3" + objects)


PKARR_SEED = bytes([7] * 32)


def pkarr_seeds():
    key = Ed25519PrivateKey.from_private_bytes(PKARR_SEED)
    public = key.public_key().public_bytes(serialization.Encoding.Raw, serialization.PublicFormat.Raw)
    z32 = z32_encode(public)
    owner = wire_name(f"_iroh.{z32}.")
    records = [
        rr(owner, 16, 30, txt("relay=https://relay.example.net./")),
        rr(owner, 16, 30, txt("addr=192.0.2.7:4433")),
        rr(owner, 16, 30, txt("addr=[2001:db8::7]:4433")),
    ]
    message = header(0, 0x8400, 0, len(records), 0, 0) + b"".join(records)
    write("pkarr", "iroh-signed", b"\1" + message)
    a = rr(wire_name(f"{z32}."), 1, 60, bytes([192, 0, 2, 1]))
    aaaa = rr(b"\x03www\xc0\x0c", 28, 60, bytes(16))  # a compression pointer into the header
    write("pkarr", "addresses-signed", b"\1" + header(0, 0x8400, 0, 2, 0, 0) + a + aaaa)
    ts = 1_700_000_000_000_000
    signable = f"3:seqi{ts}e1:v{len(message)}:".encode() + message
    write("pkarr", "iroh-payload", b"\0" + key.sign(signable) + struct.pack(">Q", ts) + message)


def xfr_seeds():
    origin = wire_name("example.net.")
    soa = wire_name("ns1.example.net.") + wire_name("hostmaster.example.net.") + struct.pack(">IIIII", 5, 3600, 600, 604800, 30)
    soa4 = soa[:-20] + struct.pack(">IIIII", 4, 3600, 600, 604800, 30)
    q = origin + struct.pack(">HH", 252, 1)
    axfr = [rr(origin, 6, 60, soa), rr(origin, 2, 60, wire_name("ns1.example.net.")),
            rr(b"\x03ns1\xc0\x0c", 1, 60, bytes([192, 0, 2, 1])), rr(origin, 6, 60, soa)]
    write("xfr", "axfr", header(1, 0x8400, 1, len(axfr), 0, 0) + q + b"".join(axfr))
    q = origin + struct.pack(">HH", 251, 1)
    ixfr = [rr(origin, 6, 60, soa), rr(origin, 6, 60, soa4), rr(b"\x03old\xc0\x0c", 1, 60, bytes(4)),
            rr(origin, 6, 60, soa), rr(b"\x03new\xc0\x0c", 1, 60, bytes(4)), rr(origin, 6, 60, soa)]
    write("xfr", "ixfr", header(2, 0x8400, 1, len(ixfr), 0, 0) + q + b"".join(ixfr))
    write("xfr", "uptodate", header(3, 0x8400, 1, 1, 0, 0) + q + rr(origin, 6, 60, soa))
    write("xfr", "notify-ack", header(4, 0xa400, 1, 0, 0, 0) + origin + struct.pack(">HH", 6, 1))
    alg = wire_name("hmac-sha256.")
    tsig = alg + struct.pack(">HIH", 0, 1_700_000_000, 300) + struct.pack(">H", 32) + bytes(32) + struct.pack(">HHH", 4, 0, 0)
    signed = header(5, 0x8400, 1, 1, 0, 1) + q + rr(origin, 6, 60, soa) + rr(wire_name("xfr-key."), 250, 0, tsig, cls=255)
    write("xfr", "tsig", signed)


def keys_seeds():
    write("keys", "one", 'key "xfr-key." {\n  algorithm hmac-sha256;\n  secret "MDEyMzQ1Njc4OWFiY2RlZjAxMjM0NTY3ODlhYmNkZWY=";\n};\n')
    write("keys", "comments", '# a comment\n// another\n/* block */ key k1 { algorithm hmac-sha512; secret "c2VjcmV0"; };\n'
          'key "k2" { algorithm hmac-sha1; secret "c2VjcmV0"; };\n')


def planner_seeds():
    hexid = "1f8b" * 16
    def connector(name, uid, key, created):
        c = {"apiVersion": "networking.datumapis.com/v1alpha1", "kind": "Connector",
             "metadata": {"name": name, "namespace": "default", "uid": uid, "generation": 2,
                          "creationTimestamp": created},
             "spec": {"connectorClassName": "datum-connect"}}
        if key:
            c["status"] = {"connectionDetails": {"type": "PublicKey", "publicKey": {
                "id": key, "homeRelay": "https://relay.example.com",
                "addresses": [{"address": "2001:db8::1", "port": 9090}, {"address": "192.0.2.1", "port": 8080}]}}}
        return c
    write("iroh_plan", "shared-key", json.dumps([
        connector("laptop", "u1", hexid, "2026-02-01T00:00:00Z"),
        connector("desktop", "u2", hexid.upper(), "2026-01-01T00:00:00Z"),
        connector("pending", "u3", None, "2026-01-01T00:00:00Z"),
        connector("bad", "u4", "abc", "2026-01-01T00:00:00Z"),
    ]))
    mesh_dir = os.path.join(ROOT, "examples", "mesh")
    with open(os.path.join(mesh_dir, "clustermesh.yaml")) as f:
        mesh = yaml.safe_load(f)
    nodes = {}
    for cluster in sorted(os.listdir(os.path.join(mesh_dir, "clusters"))):
        with open(os.path.join(mesh_dir, "clusters", cluster, "nodes.yaml")) as f:
            nodes[cluster] = yaml.safe_load(f)["items"]
    write("mesh_plan", "example", json.dumps({
        "meshes": [{"name": mesh["metadata"]["name"], "spec": mesh["spec"]}], "nodes": nodes}))


def http_seeds():
    write("http", "xff", b"\0" + b"203.0.113.9, 10.0.0.1" + b"for=192.0.2.60;proto=http, for=\"[2001:db8::1]:4711\"")
    write("http", "cidr4", b"\1" + b"10.0.0.0/8")
    write("http", "cidr6", b"\1" + b"2001:db8::/32")
    # A self-signed certificate (DER, then PEM with its key): made once, kept in the repo.
    d = os.path.join(HERE, "corpus", "http")
    if os.path.exists(os.path.join(d, "der")):
        return
    import datetime
    from cryptography import x509
    from cryptography.hazmat.primitives import hashes
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.x509.oid import NameOID
    key = ec.generate_private_key(ec.SECP256R1())
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "dns.example.net")])
    start = datetime.datetime(2026, 11, 23, tzinfo=datetime.timezone.utc)
    cert = (x509.CertificateBuilder().subject_name(name).issuer_name(name)
            .public_key(key.public_key()).serial_number(1)
            .not_valid_before(start).not_valid_after(start + datetime.timedelta(days=365))
            .add_extension(x509.SubjectAlternativeName([x509.DNSName("dns.example.net")]), False)
            .sign(key, hashes.SHA256()))
    write("http", "der", b"\2" + cert.public_bytes(serialization.Encoding.DER))
    pem_key = key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                                serialization.NoEncryption())
    write("http", "pem", b"\3" + cert.public_bytes(serialization.Encoding.PEM) + b"\0" + pem_key)
    # pkarr peers: a push body (key, sequence, length, payload), a catch-up page (sequence,
    # key, origin epoch and sequence, length, payload) and a have= list.
    payload = bytes(range(80))
    write("http", "push", b"\4" + bytes([7] * 32) + struct.pack("!QH", 3, len(payload)) + payload)
    write("http", "page", b"\5" + struct.pack("!Q", 9) + bytes([8] * 32) + bytes([1] * 16)
          + struct.pack("!QH", 4, len(payload)) + payload)
    write("http", "have", b"\6" + b"0101010101010101010101010101010a:12,ffffffffffffffffffffffffffffffff:18446744073709551615")

answer_seeds()
records_seeds()
pkarr_seeds()
xfr_seeds()
keys_seeds()
planner_seeds()
http_seeds()
