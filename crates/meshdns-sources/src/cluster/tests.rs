use super::*;

fn objects(yaml: &str) -> Vec<crate::manifests::Manifest> {
    crate::manifests::objects("test.yaml", yaml).unwrap()
}

fn settings(kinds: &[Kind]) -> ClusterSettings {
    ClusterSettings {
        kinds: kinds.iter().copied().collect(),
        default_ttl: 60,
        ..ClusterSettings::default()
    }
}

/// The records as `name ttl TYPE data` lines, sorted.
fn lines(read: &ClusterRecords) -> Vec<String> {
    let mut out: Vec<String> = read
        .records
        .iter()
        .map(|(r, _)| format!("{} {} {} {}", r.name, r.ttl, r.data.rtype(), r.data))
        .collect();
    out.sort();
    out
}

/// The problems, sorted.
fn problems(read: &ClusterRecords) -> Vec<String> {
    let mut out: Vec<String> = read.problems.iter().map(ToString::to_string).collect();
    out.sort();
    out
}

const SERVICES: &str = r#"
apiVersion: v1
kind: Service
metadata:
  name: web
  namespace: shop
  creationTimestamp: "2026-01-01T00:00:00Z"
  annotations:
    external-dns.alpha.kubernetes.io/hostname: "web.example.org, www.example.org"
    external-dns.alpha.kubernetes.io/internal-hostname: web.internal.example.org
    external-dns.alpha.kubernetes.io/ttl: 5m
spec:
  type: LoadBalancer
  clusterIP: 10.96.0.10
  clusterIPs: [10.96.0.10, "fd00::10"]
status:
  loadBalancer:
    ingress:
    - ip: 192.0.2.10
    - ip: "2001:db8::10"
---
apiVersion: v1
kind: Service
metadata:
  name: api
  namespace: shop
  creationTimestamp: "2026-01-02T00:00:00Z"
  annotations:
    external-dns.kubernetes.io/hostname: api.example.org
    external-dns.kubernetes.io/ttl: "30"
spec:
  type: LoadBalancer
  externalIPs: [198.51.100.7]
status:
  loadBalancer:
    ingress:
    - hostname: lb-123.elb.example.net
---
apiVersion: v1
kind: Service
metadata:
  name: db
  namespace: shop
  annotations:
    external-dns.alpha.kubernetes.io/hostname: db.example.org
    external-dns.alpha.kubernetes.io/internal-hostname: db.internal.example.org
spec:
  clusterIP: 10.96.0.20
---
apiVersion: v1
kind: Service
metadata:
  name: cache
  namespace: shop
  annotations:
    external-dns.alpha.kubernetes.io/hostname: cache.example.org
spec:
  clusterIP: None
  selector: {app: cache}
---
apiVersion: discovery.k8s.io/v1
kind: EndpointSlice
metadata:
  name: cache-abc
  namespace: shop
  labels: {kubernetes.io/service-name: cache}
addressType: IPv4
endpoints:
- addresses: [10.1.0.1]
  hostname: cache-0
  conditions: {ready: true}
- addresses: [10.1.0.2]
  hostname: cache-1
- addresses: [10.1.0.3]
  hostname: cache-2
  conditions: {ready: false}
---
apiVersion: v1
kind: Service
metadata:
  name: hidden
  namespace: shop
  annotations:
    meshdns.io/ignore: "true"
    external-dns.alpha.kubernetes.io/hostname: hidden.example.org
spec:
  type: LoadBalancer
status:
  loadBalancer:
    ingress: [{ip: 192.0.2.99}]
"#;

#[test]
fn services_of_each_type_give_their_names() {
    let read = read("m", &objects(SERVICES), &settings(&[Kind::Service]));
    assert_eq!(
        lines(&read),
        [
            "api.example.org. 30 A 198.51.100.7",
            "cache-0.cache.example.org. 60 A 10.1.0.1",
            "cache-1.cache.example.org. 60 A 10.1.0.2",
            "cache.example.org. 60 A 10.1.0.1",
            "cache.example.org. 60 A 10.1.0.2",
            "db.internal.example.org. 60 A 10.96.0.20",
            "web.example.org. 300 A 192.0.2.10",
            "web.example.org. 300 AAAA 2001:db8::10",
            "web.internal.example.org. 300 A 10.96.0.10",
            "web.internal.example.org. 300 AAAA fd00::10",
            "www.example.org. 300 A 192.0.2.10",
            "www.example.org. 300 AAAA 2001:db8::10",
        ]
    );
    // The ClusterIP Service's hostname name is not published without --kube-source-internal,
    // and it says why; the ignored one is not read at all.
    assert_eq!(
        problems(&read),
        [
            "m: Service shop/db spec.type: a ClusterIP Service's addresses are published at its hostname names only with --kube-source-internal (internal-hostname names always)"
        ]
    );
    assert_eq!(read.verdicts.len(), 4);
    assert_eq!(read.verdicts[0].label(), "Service shop/web");
    assert!(!read.verdicts.iter().any(|v| v.name == "hidden"));

    let mut internal = settings(&[Kind::Service]);
    internal.internal = true;
    let read = super::read("m", &objects(SERVICES), &internal);
    assert!(lines(&read).contains(&"db.example.org. 60 A 10.96.0.20".to_string()));
    assert!(read.problems.is_empty(), "{:?}", read.problems);
}

#[test]
fn an_endpoint_going_ready_or_away_changes_the_names() {
    let mut text = SERVICES.replace("conditions: {ready: false}", "conditions: {ready: true}");
    let read = read("m", &objects(&text), &settings(&[Kind::Service]));
    assert!(lines(&read).contains(&"cache-2.cache.example.org. 60 A 10.1.0.3".to_string()));
    // publishNotReadyAddresses serves them whatever their condition.
    text = SERVICES.replace(
        "selector: {app: cache}",
        "selector: {app: cache}\n  publishNotReadyAddresses: true",
    );
    let read = super::read("m", &objects(&text), &settings(&[Kind::Service]));
    assert!(lines(&read).contains(&"cache.example.org. 60 A 10.1.0.3".to_string()));
}

#[test]
fn default_names_filters_and_bad_fields() {
    let mut s = settings(&[Kind::Service]);
    s.default_names = Some(Name::parse("cluster.example.org.", None).unwrap());
    s.namespaces = vec!["shop".into()];
    let text = format!(
        "{SERVICES}\n---\n{}",
        r#"
apiVersion: v1
kind: Service
metadata:
  name: other
  namespace: elsewhere
spec:
  type: LoadBalancer
status:
  loadBalancer:
    ingress: [{ip: 192.0.2.50}]
---
apiVersion: v1
kind: Service
metadata:
  name: broken
  namespace: shop
  labels: {tier: edge}
  annotations:
    external-dns.alpha.kubernetes.io/hostname: "ok.example.org,bad!name.example.org"
    external-dns.alpha.kubernetes.io/ttl: soon
spec:
  type: LoadBalancer
status:
  loadBalancer:
    ingress: [{ip: 192.0.2.300}, {ip: 192.0.2.51}]
"#
    );
    let read = read("m", &objects(&text), &s);
    let l = lines(&read);
    assert!(l.contains(&"web.shop.cluster.example.org. 300 A 192.0.2.10".to_string()));
    assert!(l.contains(&"cache.shop.cluster.example.org. 60 A 10.1.0.1".to_string()));
    assert!(l.contains(&"ok.example.org. 60 A 192.0.2.51".to_string()));
    assert!(l.contains(&"broken.shop.cluster.example.org. 60 A 192.0.2.51".to_string()));
    assert!(
        !l.iter()
            .any(|l| l.contains("elsewhere") || l.contains("192.0.2.50"))
    );
    let p = problems(&read);
    assert!(p.contains(&"m: Service shop/broken metadata.annotations[external-dns.alpha.kubernetes.io/hostname]: \"bad!name.example.org\" is not a host name (labels of letters, digits, '-' and '_', a '*' only as the first label)".to_string()), "{p:?}");
    assert!(p.iter().any(|p| p.starts_with("m: Service shop/broken metadata.annotations[external-dns.alpha.kubernetes.io/ttl]: \"soon\" is not a TTL")), "{p:?}");
    assert!(p.contains(&"m: Service shop/broken status.loadBalancer.ingress[0].ip: \"192.0.2.300\" is not an IP address".to_string()), "{p:?}");
    // A label selector keeps only the matching.
    s.selector = Selector::parse("tier=edge").unwrap();
    let read = super::read("m", &objects(&text), &s);
    assert_eq!(read.verdicts.len(), 1);
    assert_eq!(read.verdicts[0].name, "broken");
}

const INGRESSES: &str = r#"
apiVersion: networking.k8s.io/v1
kind: Ingress
metadata:
  name: shop
  namespace: shop
  creationTimestamp: "2026-01-01T00:00:00Z"
spec:
  ingressClassName: nginx
  rules:
  - host: shop.example.org
  - host: "*.shop.example.org"
  - {}
status:
  loadBalancer:
    ingress: [{ip: 192.0.2.20}]
---
apiVersion: networking.k8s.io/v1
kind: Ingress
metadata:
  name: blog
  namespace: blog
  creationTimestamp: "2026-01-02T00:00:00Z"
  annotations:
    kubernetes.io/ingress.class: traefik
    external-dns.alpha.kubernetes.io/target: edge.example.net
    external-dns.alpha.kubernetes.io/hostname: news.example.org
spec:
  rules:
  - host: blog.example.org
status:
  loadBalancer:
    ingress: [{ip: 192.0.2.21}]
"#;

#[test]
fn ingresses_give_their_hosts_with_class_filter_and_target() {
    let read = read("m", &objects(INGRESSES), &settings(&[Kind::Ingress]));
    assert_eq!(
        lines(&read),
        [
            "*.shop.example.org. 60 A 192.0.2.20",
            "blog.example.org. 60 CNAME edge.example.net.",
            "news.example.org. 60 CNAME edge.example.net.",
            "shop.example.org. 60 A 192.0.2.20",
        ]
    );
    let mut s = settings(&[Kind::Ingress]);
    s.ingress_classes = vec!["traefik".into()];
    let read = super::read("m", &objects(INGRESSES), &s);
    assert_eq!(read.verdicts.len(), 2);
    assert_eq!(
        lines(&read),
        [
            "blog.example.org. 60 CNAME edge.example.net.",
            "news.example.org. 60 CNAME edge.example.net.",
        ]
    );
    // Services are not read unless named.
    assert!(read.verdicts.iter().all(|v| v.kind == "Ingress"));
}

#[test]
fn conflicts_merge_addresses_and_give_a_cname_to_the_older() {
    let text = r#"
apiVersion: v1
kind: Service
metadata:
  name: a
  namespace: x
  creationTimestamp: "2026-01-01T00:00:00Z"
  annotations: {external-dns.alpha.kubernetes.io/hostname: "rr.example.org,c.example.org"}
spec: {type: LoadBalancer}
status: {loadBalancer: {ingress: [{ip: 192.0.2.1}]}}
---
apiVersion: networking.k8s.io/v1
kind: Ingress
metadata:
  name: b
  namespace: x
  creationTimestamp: "2026-01-02T00:00:00Z"
spec:
  rules: [{host: rr.example.org}, {host: c.example.org}, {host: alias.example.org}]
status: {loadBalancer: {ingress: [{ip: 192.0.2.2}, {ip: 192.0.2.1}]}}
---
apiVersion: networking.k8s.io/v1
kind: Ingress
metadata:
  name: c
  namespace: x
  creationTimestamp: "2026-01-03T00:00:00Z"
  annotations: {external-dns.alpha.kubernetes.io/target: lb.example.net}
spec:
  rules: [{host: c.example.org}, {host: alias.example.org}]
---
apiVersion: networking.k8s.io/v1
kind: Ingress
metadata:
  name: d
  namespace: x
  creationTimestamp: "2025-12-01T00:00:00Z"
  annotations: {external-dns.alpha.kubernetes.io/target: old.example.net}
spec:
  rules: [{host: alias.example.org}]
"#;
    let read = read(
        "m",
        &objects(text),
        &settings(&[Kind::Service, Kind::Ingress]),
    );
    assert_eq!(
        lines(&read),
        [
            "alias.example.org. 60 CNAME old.example.net.",
            "c.example.org. 60 A 192.0.2.1",
            "c.example.org. 60 A 192.0.2.2",
            "rr.example.org. 60 A 192.0.2.1",
            "rr.example.org. 60 A 192.0.2.2",
        ]
    );
    assert_eq!(
        problems(&read),
        [
            "m: Ingress x/b alias.example.org.: Conflict: alias.example.org. is a CNAME to old.example.net. from Ingress x/d, which is older",
            "m: Ingress x/c alias.example.org.: Conflict: alias.example.org. is a CNAME to old.example.net. from Ingress x/d, which is older",
            "m: Ingress x/c c.example.org.: Conflict: c.example.org. has addresses from Service x/a, which is older; a CNAME to lb.example.net. cannot join them",
        ]
    );
    // c lost every name it gave; b keeps the two it shares.
    let names = |n: &str| {
        read.verdicts
            .iter()
            .find(|v| v.name == n)
            .unwrap()
            .names
            .iter()
            .map(ToString::to_string)
            .collect::<Vec<_>>()
    };
    assert!(names("c").is_empty());
    assert_eq!(names("b"), ["rr.example.org.", "c.example.org."]);
}

#[test]
fn kinds_parse() {
    assert_eq!(Kind::parse("Service"), Ok(Kind::Service));
    assert_eq!(Kind::parse("ingress"), Ok(Kind::Ingress));
    assert_eq!(Kind::parse("DNSEndpoint"), Ok(Kind::DnsEndpoint));
    assert_eq!(
        Kind::parse("pods"),
        Err("\"pods\" is not a source kind (service, ingress, httproute, grpcroute, tlsroute, dnsendpoint)".into())
    );
}

#[test]
fn dnsendpoints_give_records_of_every_type_served() {
    let text = r#"
apiVersion: externaldns.k8s.io/v1alpha1
kind: DNSEndpoint
metadata: {name: records, namespace: dns, creationTimestamp: "2026-01-01T00:00:00Z", generation: 3}
spec:
  endpoints:
  - {dnsName: www.example.org, recordType: A, targets: [192.0.2.1, 192.0.2.2], recordTTL: 120}
  - {dnsName: www.example.org, recordType: AAAA, targets: ["2001:db8::1"]}
  - {dnsName: www.example.org, recordType: TXT, targets: ["v=spf1 -all", "\"quoted\" \"two\""]}
  - {dnsName: alias.example.org, recordType: CNAME, targets: [www.example.org]}
  - {dnsName: example.org, recordType: MX, targets: ["10 mail.example.org"]}
  - {dnsName: _sip._tcp.example.org, recordType: SRV, targets: ["1 2 5060 sip.example.org."]}
  - {dnsName: example.org, recordType: CAA, targets: ["0 issue \"letsencrypt.org\""]}
  - {dnsName: bad.example.org, recordType: A, targets: ["192.0.2.300", "2001:db8::1", "192.0.2.9"]}
  - {dnsName: nope.example.org, recordType: NAPTR, targets: ["x"]}
  - {dnsName: weighted.example.org, recordType: A, targets: [192.0.2.7], setIdentifier: blue}
  - {dnsName: "bad name", recordType: A, targets: [192.0.2.8]}
"#;
    let read = read("m", &objects(text), &settings(&[Kind::DnsEndpoint]));
    assert_eq!(
        lines(&read),
        [
            "_sip._tcp.example.org. 60 SRV 1 2 5060 sip.example.org.",
            "alias.example.org. 60 CNAME www.example.org.",
            "bad.example.org. 60 A 192.0.2.9",
            "example.org. 60 CAA 0 issue \"letsencrypt.org\"",
            "example.org. 60 MX 10 mail.example.org.",
            "weighted.example.org. 60 A 192.0.2.7",
            "www.example.org. 120 A 192.0.2.1",
            "www.example.org. 120 A 192.0.2.2",
            "www.example.org. 60 AAAA 2001:db8::1",
            "www.example.org. 60 TXT \"quoted\" \"two\"",
            "www.example.org. 60 TXT \"v=spf1 -all\"",
        ]
    );
    let p = problems(&read);
    assert_eq!(p.len(), 5, "{p:?}");
    for want in [
        "m: DNSEndpoint dns/records spec.endpoints[7].targets[0]: \"192.0.2.300\" is not A data",
        "m: DNSEndpoint dns/records spec.endpoints[7].targets[1]: \"2001:db8::1\" is not an IPv4 address",
        "m: DNSEndpoint dns/records spec.endpoints[8].recordType: \"NAPTR\" is not served",
        "m: DNSEndpoint dns/records spec.endpoints[9].setIdentifier: routing policies",
        "m: DNSEndpoint dns/records spec.endpoints[10].dnsName:",
    ] {
        assert!(p.iter().any(|l| l.starts_with(want)), "{want}\n{p:?}");
    }
}

const GATEWAYS: &str = r#"
apiVersion: gateway.networking.k8s.io/v1
kind: Gateway
metadata: {name: edge, namespace: infra}
spec:
  gatewayClassName: envoy
  listeners:
  - {name: https, hostname: "*.example.org", port: 443, protocol: HTTPS, allowedRoutes: {namespaces: {from: All}}}
  - {name: tls, hostname: tls.example.org, port: 8443, protocol: TLS, allowedRoutes: {namespaces: {from: All}}}
  - {name: local, port: 80, protocol: HTTP}
status:
  addresses: [{type: IPAddress, value: 192.0.2.30}, {value: "2001:db8::30"}]
---
apiVersion: gateway.networking.k8s.io/v1
kind: HTTPRoute
metadata: {name: app, namespace: shop}
spec:
  parentRefs: [{name: edge, namespace: infra, sectionName: https}]
  hostnames: [app.example.org, app.example.net]
status:
  parents:
  - parentRef: {name: edge, namespace: infra, sectionName: https}
    conditions: [{type: Accepted, status: "True"}]
---
apiVersion: gateway.networking.k8s.io/v1
kind: HTTPRoute
metadata: {name: wild, namespace: shop}
spec:
  parentRefs: [{name: edge, namespace: infra}]
  hostnames: ["*.apps.example.org", "Beta.Example.org"]
status:
  parents:
  - parentRef: {name: edge, namespace: infra}
    conditions: [{type: Accepted, status: "True"}]
---
apiVersion: gateway.networking.k8s.io/v1
kind: HTTPRoute
metadata: {name: pending, namespace: shop}
spec:
  parentRefs: [{name: edge, namespace: infra}]
  hostnames: [pending.example.org]
status:
  parents:
  - parentRef: {name: edge, namespace: infra}
    conditions: [{type: Accepted, status: "False", reason: NotAllowedByListeners}]
---
apiVersion: gateway.networking.k8s.io/v1
kind: HTTPRoute
metadata: {name: plain, namespace: shop}
spec:
  parentRefs: [{name: edge, namespace: infra, sectionName: local}]
  hostnames: [plain.example.org]
status:
  parents:
  - parentRef: {name: edge, namespace: infra, sectionName: local}
    conditions: [{type: Accepted, status: "True"}]
---
apiVersion: gateway.networking.k8s.io/v1alpha2
kind: TLSRoute
metadata: {name: tls, namespace: shop}
spec:
  parentRefs: [{name: edge, namespace: infra, sectionName: tls}]
  hostnames: [tls.example.org]
status:
  parents:
  - parentRef: {name: edge, namespace: infra, sectionName: tls}
    conditions: [{type: Accepted, status: "True"}]
---
apiVersion: gateway.networking.k8s.io/v1
kind: GRPCRoute
metadata: {name: nohosts, namespace: shop}
spec:
  parentRefs: [{name: edge, namespace: infra}]
status:
  parents:
  - parentRef: {name: edge, namespace: infra}
    conditions: [{type: Accepted, status: "True"}]
"#;

#[test]
fn routes_take_their_gateways_addresses_at_names_narrowed_to_the_listeners() {
    let kinds = [Kind::HttpRoute, Kind::GrpcRoute, Kind::TlsRoute];
    let read = read("m", &objects(GATEWAYS), &settings(&kinds));
    assert_eq!(
        lines(&read),
        [
            "*.apps.example.org. 60 A 192.0.2.30",
            "*.apps.example.org. 60 AAAA 2001:db8::30",
            "app.example.org. 60 A 192.0.2.30",
            "app.example.org. 60 AAAA 2001:db8::30",
            "beta.example.org. 60 A 192.0.2.30",
            "beta.example.org. 60 AAAA 2001:db8::30",
            "tls.example.org. 60 A 192.0.2.30",
            "tls.example.org. 60 AAAA 2001:db8::30",
        ]
    );
    assert_eq!(
        problems(&read),
        [
            "m: HTTPRoute shop/app spec.hostnames[1]: app.example.net matches no listener of the Gateways that accepted this route (hostname, protocol, sectionName, port, allowedRoutes)",
            "m: HTTPRoute shop/pending status.parents[0]: Gateway infra/edge has not accepted this route (condition Accepted is not True): no names through it",
            "m: HTTPRoute shop/plain spec.hostnames[0]: plain.example.org matches no listener of the Gateways that accepted this route (hostname, protocol, sectionName, port, allowedRoutes)",
        ]
    );
    // Only the kinds named; a Gateway class not named attaches nothing.
    let read = super::read("m", &objects(GATEWAYS), &settings(&[Kind::TlsRoute]));
    assert_eq!(lines(&read).len(), 2);
    let mut s = settings(&kinds);
    s.gateway_classes = vec!["istio".into()];
    assert!(super::read("m", &objects(GATEWAYS), &s).records.is_empty());
}

#[test]
fn one_load_balancer_host_name_behind_two_ingresses_is_one_cname_and_empty_annotations_are_absent()
{
    let text = r#"
apiVersion: networking.k8s.io/v1
kind: Ingress
metadata:
  name: a
  namespace: x
  creationTimestamp: "2026-01-01T00:00:00Z"
  annotations:
    external-dns.kubernetes.io/target: ""
    external-dns.alpha.kubernetes.io/target: lb.example.net
spec: {rules: [{host: app.example.org}]}
---
apiVersion: networking.k8s.io/v1
kind: Ingress
metadata: {name: b, namespace: x, creationTimestamp: "2026-01-02T00:00:00Z"}
spec: {rules: [{host: app.example.org}]}
status: {loadBalancer: {ingress: [{hostname: lb.example.net}]}}
"#;
    let read = read("m", &objects(text), &settings(&[Kind::Ingress]));
    assert_eq!(lines(&read), ["app.example.org. 60 CNAME lb.example.net."]);
    assert!(read.problems.is_empty(), "{:?}", read.problems);
    assert!(read.verdicts.iter().all(|v| v.names.len() == 1));
}

#[test]
fn a_cached_reading_reads_again_only_what_changed_and_what_it_depends_on() {
    let versioned = |text: &str| -> Vec<crate::manifests::Manifest> {
        let mut objs = objects(text);
        for (i, o) in objs.iter_mut().enumerate() {
            std::sync::Arc::make_mut(o)["metadata"]["resourceVersion"] =
                serde_json::json!(format!("{}", i + 1));
        }
        objs
    };
    let s = settings(&[Kind::Service]);
    let mut cache = ReadCache::default();
    let mut objs = versioned(SERVICES);
    let first = read_cached("m", &objs, &s, &mut cache);
    assert_eq!(first, read("m", &objs, &s));
    // Same versions, same reading (from the cache).
    assert_eq!(read_cached("m", &objs, &s, &mut cache), first);
    // A Service's new address under a new version is read again.
    let web = std::sync::Arc::make_mut(&mut objs[0]);
    web["status"]["loadBalancer"]["ingress"][0]["ip"] = serde_json::json!("192.0.2.99");
    web["metadata"]["resourceVersion"] = serde_json::json!("100");
    let moved = read_cached("m", &objs, &s, &mut cache);
    assert!(lines(&moved).contains(&"web.example.org. 300 A 192.0.2.99".to_string()));
    // A headless Service's slice changes (the Service does not): its names follow.
    let slice = objs
        .iter()
        .position(|o| o["kind"] == "EndpointSlice")
        .unwrap();
    let changed = std::sync::Arc::make_mut(&mut objs[slice]);
    changed["endpoints"][2]["conditions"]["ready"] = serde_json::json!(true);
    changed["metadata"]["resourceVersion"] = serde_json::json!("101");
    let ready = read_cached("m", &objs, &s, &mut cache);
    assert!(lines(&ready).contains(&"cache-2.cache.example.org. 60 A 10.1.0.3".to_string()));
    assert_eq!(ready, read("m", &objs, &s));
}

#[test]
fn a_listener_takes_the_kinds_it_names_and_each_parent_status_counts_for_its_own_section() {
    let text = r#"
apiVersion: gateway.networking.k8s.io/v1
kind: Gateway
metadata: {name: edge, namespace: infra}
spec:
  gatewayClassName: envoy
  listeners:
  - {name: grpc-only, hostname: "*.example.org", port: 443, protocol: HTTPS,
     allowedRoutes: {namespaces: {from: All}, kinds: [{kind: GRPCRoute}]}}
  - {name: web, hostname: "web.example.org", port: 8443, protocol: HTTPS,
     allowedRoutes: {namespaces: {from: All}}}
status:
  addresses: [{value: 192.0.2.30}]
---
apiVersion: gateway.networking.k8s.io/v1
kind: Gateway
metadata: {name: other, namespace: infra}
spec:
  gatewayClassName: istio
  listeners: [{name: any, port: 443, protocol: HTTPS, allowedRoutes: {namespaces: {from: All}}}]
status:
  addresses: [{value: 192.0.2.99}]
---
apiVersion: gateway.networking.k8s.io/v1
kind: HTTPRoute
metadata: {name: app, namespace: shop}
spec:
  parentRefs: [{name: edge, namespace: infra, sectionName: grpc-only}, {name: edge, namespace: infra, sectionName: web}]
  hostnames: [app.example.org, web.example.org]
status:
  parents:
  # Its own section accepted it, but the listener takes GRPCRoutes only.
  - parentRef: {name: edge, namespace: infra, sectionName: grpc-only}
    conditions: [{type: Accepted, status: "True"}]
  # Not what the spec names (no sectionName): not counted.
  - parentRef: {name: edge, namespace: infra}
    conditions: [{type: Accepted, status: "True"}]
  - parentRef: {name: edge, namespace: infra, sectionName: web}
    conditions: [{type: Accepted, status: "True"}]
---
apiVersion: gateway.networking.k8s.io/v1
kind: GRPCRoute
metadata: {name: rpc, namespace: shop}
spec:
  parentRefs: [{name: edge, namespace: infra, sectionName: grpc-only}, {name: other, namespace: infra}]
  hostnames: [rpc.example.org, rpc.example.net]
status:
  parents:
  - parentRef: {name: edge, namespace: infra, sectionName: grpc-only}
    conditions: [{type: Accepted, status: "True"}]
  # A Gateway of a class not read: nothing through it, and nothing said about it (nor about
  # rpc.example.net, which only its listener takes).
  - parentRef: {name: other, namespace: infra}
    conditions: [{type: Accepted, status: "False"}]
"#;
    let mut s = settings(&[Kind::HttpRoute, Kind::GrpcRoute]);
    s.gateway_classes = vec!["envoy".into()];
    let read = read("m", &objects(text), &s);
    assert_eq!(
        lines(&read),
        [
            "rpc.example.org. 60 A 192.0.2.30",
            "web.example.org. 60 A 192.0.2.30",
        ]
    );
    assert_eq!(
        problems(&read),
        [
            "m: HTTPRoute shop/app spec.hostnames[0]: app.example.org matches no listener of the Gateways that accepted this route (hostname, protocol, sectionName, port, allowedRoutes)",
        ]
    );
    let app = read.verdicts.iter().find(|v| v.name == "app").unwrap();
    assert_eq!(app.problems[0].reason, super::Reason::NotAttached);
}

#[test]
fn bad_gateway_addresses_and_targets_are_reported_alone() {
    let text = r#"
apiVersion: gateway.networking.k8s.io/v1
kind: Gateway
metadata: {name: edge, namespace: infra}
spec:
  gatewayClassName: envoy
  listeners: [{name: web, port: 80, protocol: HTTP, allowedRoutes: {namespaces: {from: All}}}]
status:
  addresses:
  - {type: Hostname, value: "not a host!"}
  - {type: NamedAddress, value: pool-1}
  - {value: 192.0.2.300}
  - {value: 192.0.2.31}
---
apiVersion: gateway.networking.k8s.io/v1
kind: HTTPRoute
metadata: {name: app, namespace: shop}
spec:
  parentRefs: [{name: edge, namespace: infra}]
  hostnames: [app.example.org]
status:
  parents:
  - parentRef: {name: edge, namespace: infra}
    conditions: [{type: Accepted, status: "True"}]
---
apiVersion: networking.k8s.io/v1
kind: Ingress
metadata:
  name: shop
  namespace: shop
  annotations: {external-dns.kubernetes.io/target: "192.0.2.40,bad target!"}
spec: {rules: [{host: shop.example.org}]}
"#;
    let read = read(
        "m",
        &objects(text),
        &settings(&[Kind::HttpRoute, Kind::Ingress]),
    );
    assert_eq!(
        lines(&read),
        [
            "app.example.org. 60 A 192.0.2.31",
            "shop.example.org. 60 A 192.0.2.40",
        ]
    );
    let p = problems(&read);
    for want in [
        "m: HTTPRoute shop/app Gateway infra/edge status.addresses[0]: \"not a host!\" is not a host name",
        "m: HTTPRoute shop/app Gateway infra/edge status.addresses[1]: an address of type NamedAddress is not served",
        "m: HTTPRoute shop/app Gateway infra/edge status.addresses[2]: \"192.0.2.300\" is not an IP address",
        "m: Ingress shop/shop metadata.annotations[external-dns.kubernetes.io/target]: \"badtarget!\"",
    ] {
        assert!(p.iter().any(|l| l.starts_with(want)), "{want}\n{p:#?}");
    }
    let app = read.verdicts.iter().find(|v| v.name == "app").unwrap();
    let reasons: Vec<_> = app.problems.iter().map(|p| p.reason).collect();
    assert_eq!(
        reasons,
        [
            super::Reason::InvalidField,
            super::Reason::Unsupported,
            super::Reason::InvalidField
        ]
    );
}
