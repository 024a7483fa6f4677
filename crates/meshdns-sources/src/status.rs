//! The `status` dns-operator writes on DNSZones and DNSRecordSets, from meshdns's reading of
//! them ([`crate::manifests::read`]), so `kubectl get dnsrecordsets` and everything that waits
//! on `Programmed` work when meshdns serves the zones. Pure: the objects (with their current
//! status), the verdicts, the served zones' name servers and the time in, the statuses out.
//!
//! - DNSRecordSet: `Accepted` (its DNSZone exists and its type is served: else `Pending` or
//!   `InvalidDNSRecordSet`), `Programmed` (every owner name served: `All records programmed`,
//!   else `Pending`), and per owner name, as written, in `recordSets[]`: `Programmed`, or why
//!   not (`NotOwner`, `InvalidDNSRecordSet`, `Conflict`).
//! - DNSZone: `Accepted` and `Programmed` (or `DNSZoneInUse` / `InvalidDNSZone`),
//!   `recordCount` (the DNSRecordSets of its namespace that reference it) and `nameservers`.
//!
//! A condition keeps its `lastTransitionTime` while its status stays the same (a new reason
//! or message keeps it too), by the one rule every condition meshdns writes follows
//! ([`meshdns_objects::conditions::transition_time`], the Kubernetes convention, and what
//! dns-operator does through apimachinery's `meta.SetStatusCondition`). So an unchanged
//! reading plans the status already written: a writer compares and writes nothing.

use std::collections::{HashMap, HashSet};

use meshdns_objects::conditions::transition_time;
use meshdns_zone::{Name, RType, Zone};
use serde_json::{Value, json};

use crate::cluster::{ObjectProblem, ObjectVerdict};
use crate::manifests::{Manifest, Refusal, Verdicts};

/// The NS names served at `zone`'s apex: a DNSZone's `status.nameservers`.
pub fn nameservers(zone: &Zone) -> Vec<String> {
    zone.node(zone.origin().wire())
        .and_then(|apex| apex.get(RType::NS))
        .map(|ns| ns.decoded().iter().map(ToString::to_string).collect())
        .unwrap_or_default()
}

/// One object's planned status.
#[derive(Debug, Clone, PartialEq)]
pub struct StatusPlan {
    /// `DNSZone` or `DNSRecordSet`.
    pub kind: &'static str,
    /// Namespace.
    pub namespace: String,
    /// Name.
    pub name: String,
    /// The whole `status` to write.
    pub status: Value,
    /// Whether it differs from the object's current status.
    pub changed: bool,
}

fn text<'a>(v: &'a Value, path: &[&str]) -> &'a str {
    path.iter()
        .try_fold(v, |v, k| v.get(*k))
        .and_then(Value::as_str)
        .unwrap_or("")
}

fn find<'a>(objects: &'a [Manifest], kind: &str, ns: &str, name: &str) -> Option<&'a Value> {
    objects
        .iter()
        .find(|o| {
            text(o, &["kind"]) == kind
                && text(o, &["metadata", "namespace"]) == ns
                && text(o, &["metadata", "name"]) == name
        })
        .map(|o| &**o)
}

/// A condition, keeping the current one's transition time while its status stays the same
/// ([`transition_time`]).
fn condition(current: &Value, kind: &str, ok: Outcome<'_>, generation: &Value, now: &str) -> Value {
    let (status, reason, message) = match ok {
        Ok((reason, message)) => ("True", reason, message),
        Err((reason, message)) => ("False", reason, message),
    };
    let before = current
        .as_array()
        .and_then(|c| c.iter().find(|c| c["type"] == kind));
    let since = transition_time(
        before.map(|b| {
            let since = b.get("lastTransitionTime").filter(|t| !t.is_null());
            (b["status"].as_str().unwrap_or(""), since)
        }),
        status,
        &json!(now),
    );
    let mut c = json!({"type": kind, "status": status, "reason": reason, "message": message,
        "lastTransitionTime": since});
    if !generation.is_null() {
        c["observedGeneration"] = generation.clone();
    }
    c
}

type Outcome<'a> = Result<(&'a str, &'a str), (&'a str, &'a str)>;

/// The top-level `Accepted` and `Programmed` conditions every object gets.
fn conditions(
    was: &Value,
    accepted: Outcome<'_>,
    programmed: Outcome<'_>,
    generation: &Value,
    now: &str,
) -> Value {
    json!([
        condition(was, "Accepted", accepted, generation, now),
        condition(was, "Programmed", programmed, generation, now),
    ])
}

impl StatusPlan {
    /// The object with only its identity and this status: what `meshdns render status`
    /// prints.
    pub fn document(&self) -> Value {
        let api_version = match self.kind {
            "DNSEndpoint" => meshdns_objects::gateway::DNSENDPOINT_API_VERSION,
            _ => meshdns_objects::DNS_API_VERSION,
        };
        json!({
            "apiVersion": api_version,
            "kind": self.kind,
            "metadata": {"name": self.name, "namespace": self.namespace},
            "status": self.status,
        })
    }

    fn new(
        kind: &'static str,
        namespace: &str,
        name: &str,
        current: &Value,
        status: Value,
    ) -> Self {
        StatusPlan {
            kind,
            namespace: namespace.to_string(),
            name: name.to_string(),
            changed: !same(current, &status),
            status,
        }
    }
}

fn refusal(r: &Option<Refusal>) -> Result<(), (&str, &str)> {
    match r {
        None => Ok(()),
        Some((reason, message)) => Err((reason, message.as_str())),
    }
}

/// The statuses of every DNSZone and DNSRecordSet the verdicts cover. `nameservers` gives the
/// NS names served at a zone's apex; `now` is the RFC 3339 time for new transitions.
pub fn plan(
    verdicts: &Verdicts,
    objects: &[Manifest],
    nameservers: impl Fn(&Name) -> Vec<String>,
    now: &str,
) -> Vec<StatusPlan> {
    let mut out = Vec::new();
    for z in &verdicts.zones {
        let Some(object) = find(objects, "DNSZone", &z.namespace, &z.name) else {
            continue;
        };
        let current = &object["status"];
        let generation = &object["metadata"]["generation"];
        let was = &current["conditions"];
        let accepted = refusal(&z.refused).map(|()| ("Accepted", "Accepted by meshdns"));
        let programmed = match &z.origin {
            Some(_) => Ok(("Programmed", "Zone served by meshdns")),
            None => Err(("Pending", "Not accepted")),
        };
        let record_count = objects
            .iter()
            .filter(|o| {
                text(o, &["kind"]) == "DNSRecordSet"
                    && text(o, &["metadata", "namespace"]) == z.namespace
                    && text(o, &["spec", "dnsZoneRef", "name"]) == z.name
            })
            .count();
        let mut status = json!({
            "conditions": conditions(was, accepted, programmed, generation, now),
            "recordCount": record_count,
        });
        if let Some(origin) = &z.origin {
            status["nameservers"] = json!(nameservers(origin));
        }
        out.push(StatusPlan::new(
            "DNSZone",
            &z.namespace,
            &z.name,
            current,
            status,
        ));
    }
    for s in &verdicts.sets {
        let Some(object) = find(objects, "DNSRecordSet", &s.namespace, &s.name) else {
            continue;
        };
        let current = &object["status"];
        let generation = &object["metadata"]["generation"];
        let was = &current["conditions"];
        let accepted = refusal(&s.refused).map(|()| ("Accepted", "Accepted by meshdns"));
        let served = s.names.iter().filter(|(_, r)| r.is_none()).count();
        let pending = format!("{served} of {} names programmed", s.names.len());
        let programmed = if s.refused.is_some() {
            Err(("Pending", "Not accepted"))
        } else if served == s.names.len() && served > 0 {
            Ok(("Programmed", "All records programmed"))
        } else {
            Err(("Pending", pending.as_str()))
        };
        let record_sets: Vec<Value> = s
            .names
            .iter()
            .map(|(name, why)| {
                let before = current["recordSets"]
                    .as_array()
                    .and_then(|r| r.iter().find(|r| r["name"] == name.as_str()))
                    .map(|r| &r["conditions"])
                    .unwrap_or(&Value::Null);
                let ok = refusal(why).map(|()| ("Programmed", "Record served by meshdns"));
                json!({"name": name,
                    "conditions": [condition(before, "Programmed", ok, generation, now)]})
            })
            .collect();
        let mut status =
            json!({"conditions": conditions(was, accepted, programmed, generation, now)});
        if !record_sets.is_empty() {
            status["recordSets"] = json!(record_sets);
        }
        out.push(StatusPlan::new(
            "DNSRecordSet",
            &s.namespace,
            &s.name,
            current,
            status,
        ));
    }
    out
}

/// The `status.observedGeneration` external-dns writes on each DNSEndpoint it reads, planned
/// for every DNSEndpoint among `verdicts` (those read: filters applied), from its
/// `metadata.generation`; unchanged once the status says it.
pub fn endpoint_plans(verdicts: &[ObjectVerdict], objects: &[Manifest]) -> Vec<StatusPlan> {
    let current: HashMap<(&str, &str), &Value> = objects
        .iter()
        .filter(|o| {
            text(o, &["kind"]) == "DNSEndpoint"
                && text(o, &["apiVersion"]) == meshdns_objects::gateway::DNSENDPOINT_API_VERSION
        })
        .map(|o| {
            let key = (
                text(o, &["metadata", "namespace"]),
                text(o, &["metadata", "name"]),
            );
            (key, &o["status"])
        })
        .collect();
    verdicts
        .iter()
        .filter(|v| v.kind == "DNSEndpoint")
        .filter_map(|v| {
            let generation = v.generation?;
            let status = current.get(&(v.namespace.as_str(), v.name.as_str()))?;
            Some(StatusPlan::new(
                "DNSEndpoint",
                &v.namespace,
                &v.name,
                status,
                json!({ "observedGeneration": generation }),
            ))
        })
        .collect()
}

/// What is at fault in an object and was recorded as an Event, by object (its label and uid).
pub type Recorded = HashMap<(String, Option<String>), HashSet<ObjectProblem>>;

/// The problems of the cluster's objects not recorded as Events yet, in the verdicts' order
/// (oldest object first). A problem that went and came back is new again: see
/// [`forget_resolved`].
pub fn unrecorded<'a>(
    verdicts: &'a [ObjectVerdict],
    recorded: &Recorded,
) -> Vec<(&'a ObjectVerdict, &'a ObjectProblem)> {
    let mut out = Vec::new();
    for v in verdicts.iter().filter(|v| !v.problems.is_empty()) {
        let seen = recorded.get(&(v.label(), v.uid.clone()));
        for p in &v.problems {
            if !seen.is_some_and(|s| s.contains(p)) {
                out.push((v, p));
            }
        }
    }
    out
}

/// Keeps in `recorded` only what is still at fault (an object gone, or a problem resolved, is
/// forgotten: if it comes back it is recorded again).
pub fn forget_resolved(verdicts: &[ObjectVerdict], recorded: &mut Recorded) {
    let now: HashMap<(String, Option<String>), &[ObjectProblem]> = verdicts
        .iter()
        .filter(|v| !v.problems.is_empty())
        .map(|v| ((v.label(), v.uid.clone()), v.problems.as_slice()))
        .collect();
    recorded.retain(|key, seen| {
        let Some(problems) = now.get(key) else {
            return false;
        };
        seen.retain(|p| problems.contains(p));
        !seen.is_empty()
    });
}

/// Whether the current status already says what `want` says (keys `want` does not set are
/// another writer's and are left alone).
fn same(current: &Value, want: &Value) -> bool {
    match (current, want) {
        (Value::Object(c), Value::Object(w)) => w
            .iter()
            .all(|(k, v)| same(c.get(k).unwrap_or(&Value::Null), v)),
        _ => current == want,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::manifests::{objects, read};

    const NOW: &str = "2026-11-22T00:00:00Z";

    fn planned(text: &str) -> (Vec<Manifest>, Vec<StatusPlan>) {
        let objects = objects("m.yaml", text).unwrap();
        let (_, verdicts) = read("m.yaml", &objects, &Default::default());
        let plans = plan(&verdicts, &objects, |o| vec![format!("ns.{o}")], NOW);
        (objects, plans)
    }

    fn of<'a>(plans: &'a [StatusPlan], kind: &str, name: &str) -> &'a Value {
        &plans
            .iter()
            .find(|p| p.kind == kind && p.name == name)
            .unwrap_or_else(|| panic!("no {kind} {name}"))
            .status
    }

    fn cond<'a>(status: &'a Value, kind: &str) -> (&'a str, &'a str) {
        let c = status["conditions"]
            .as_array()
            .unwrap()
            .iter()
            .find(|c| c["type"] == kind)
            .unwrap();
        (c["status"].as_str().unwrap(), c["reason"].as_str().unwrap())
    }

    fn name_reason<'a>(status: &'a Value, name: &str) -> &'a str {
        status["recordSets"]
            .as_array()
            .unwrap()
            .iter()
            .find(|r| r["name"] == name)
            .unwrap_or_else(|| panic!("no {name} in {status}"))["conditions"][0]["reason"]
            .as_str()
            .unwrap()
    }

    const OBJECTS: &str = "
apiVersion: dns.networking.miloapis.com/v1alpha1
kind: DNSZone
metadata: {name: z, namespace: dns, creationTimestamp: '2026-01-01T00:00:00Z', generation: 1}
spec: {domainName: example.org, dnsZoneClassName: powerdns}
---
apiVersion: dns.networking.miloapis.com/v1alpha1
kind: DNSZone
metadata: {name: z2, namespace: dns, creationTimestamp: '2026-02-01T00:00:00Z'}
spec: {domainName: example.org, dnsZoneClassName: powerdns}
---
apiVersion: dns.networking.miloapis.com/v1alpha1
kind: DNSRecordSet
metadata: {name: owner, namespace: dns, creationTimestamp: '2026-01-02T00:00:00Z', generation: 4}
spec:
  dnsZoneRef: {name: z}
  recordType: A
  records:
  - {name: www, a: {content: 192.0.2.1}}
  - {name: api, a: {content: 192.0.2.2}}
---
apiVersion: dns.networking.miloapis.com/v1alpha1
kind: DNSRecordSet
metadata: {name: loser, namespace: dns, creationTimestamp: '2026-01-03T00:00:00Z'}
spec:
  dnsZoneRef: {name: z}
  recordType: A
  records:
  - {name: www, a: {content: 192.0.2.9}}
  - {name: mail, a: {content: 192.0.2.3}}
  - {name: bad, a: {content: not-an-ip}}
---
apiVersion: dns.networking.miloapis.com/v1alpha1
kind: DNSRecordSet
metadata: {name: alias, namespace: dns, creationTimestamp: '2026-01-04T00:00:00Z'}
spec:
  dnsZoneRef: {name: z}
  recordType: CNAME
  records:
  - {name: api, cname: {content: www.example.org}}
  - {name: docs, cname: {content: www.example.org}}
---
apiVersion: dns.networking.miloapis.com/v1alpha1
kind: DNSRecordSet
metadata: {name: orphan, namespace: dns}
spec:
  dnsZoneRef: {name: missing}
  recordType: A
  records: [{name: x, a: {content: 192.0.2.4}}]
";

    #[test]
    fn owners_losers_invalid_entries_and_conflicts_get_dns_operators_conditions() {
        let (_, plans) = planned(OBJECTS);
        let owner = of(&plans, "DNSRecordSet", "owner");
        assert_eq!(cond(owner, "Accepted"), ("True", "Accepted"));
        assert_eq!(cond(owner, "Programmed"), ("True", "Programmed"));
        assert_eq!(name_reason(owner, "www"), "Programmed");
        assert_eq!(owner["conditions"][0]["observedGeneration"], 4);

        let loser = of(&plans, "DNSRecordSet", "loser");
        assert_eq!(cond(loser, "Accepted"), ("True", "Accepted"));
        assert_eq!(cond(loser, "Programmed"), ("False", "Pending"));
        assert_eq!(name_reason(loser, "www"), "NotOwner");
        assert_eq!(name_reason(loser, "mail"), "Programmed");
        assert_eq!(name_reason(loser, "bad"), "InvalidDNSRecordSet");

        let alias = of(&plans, "DNSRecordSet", "alias");
        assert_eq!(
            name_reason(alias, "api"),
            "Conflict",
            "CNAME beside the older A"
        );
        assert_eq!(name_reason(alias, "docs"), "Programmed");

        let orphan = of(&plans, "DNSRecordSet", "orphan");
        assert_eq!(cond(orphan, "Accepted"), ("False", "Pending"));
        assert!(orphan.get("recordSets").is_none());

        let zone = of(&plans, "DNSZone", "z");
        assert_eq!(cond(zone, "Accepted"), ("True", "Accepted"));
        assert_eq!(cond(zone, "Programmed"), ("True", "Programmed"));
        assert_eq!(zone["recordCount"], 3);
        assert_eq!(zone["nameservers"], json!(["ns.example.org."]));
        let second = of(&plans, "DNSZone", "z2");
        assert_eq!(cond(second, "Accepted"), ("False", "DNSZoneInUse"));
        assert!(second.get("nameservers").is_none());
    }

    #[test]
    fn a_written_status_plans_no_change_and_keeps_its_transition_times() {
        let (objects, plans) = planned(OBJECTS);
        assert!(plans.iter().all(|p| p.changed), "nothing written yet");
        // Write them, as the API server would store them, with another writer's key beside.
        let written: Vec<Manifest> = objects
            .into_iter()
            .map(|o| {
                let mut o = Manifest::unwrap_or_clone(o);
                if let Some(p) = plans.iter().find(|p| {
                    p.kind == text(&o, &["kind"]) && p.name == text(&o, &["metadata", "name"])
                }) {
                    o["status"] = p.status.clone();
                    o["status"]["someoneElse"] = json!(1);
                }
                Manifest::new(o)
            })
            .collect();
        let (_, verdicts) = read("m.yaml", &written, &Default::default());
        let again = plan(
            &verdicts,
            &written,
            |o| vec![format!("ns.{o}")],
            "2026-12-01T00:00:00Z",
        );
        assert!(again.iter().all(|p| !p.changed), "{again:#?}");
        assert!(
            again
                .iter()
                .all(|p| !p.status.to_string().contains("2026-12-01"))
        );
    }

    /// One rule for `lastTransitionTime` (the Kubernetes convention): a new reason or message
    /// with the same status keeps it; a new status moves it.
    #[test]
    fn the_transition_time_is_kept_across_a_reason_or_message_change_and_moves_with_the_status() {
        const LATER: &str = "2026-12-01T00:00:00Z";
        let (objects, plans) = planned(OBJECTS);
        let mut written: Vec<Manifest> = objects
            .into_iter()
            .map(|o| {
                let mut o = Manifest::unwrap_or_clone(o);
                if let Some(p) = plans.iter().find(|p| {
                    p.kind == text(&o, &["kind"]) && p.name == text(&o, &["metadata", "name"])
                }) {
                    o["status"] = p.status.clone();
                }
                Manifest::new(o)
            })
            .collect();
        for o in written.iter_mut().map(Manifest::make_mut) {
            match text(o, &["metadata", "name"]) {
                // Accepted stays False: Pending (no DNSZone) becomes InvalidDNSRecordSet.
                "orphan" => {
                    o["spec"]["dnsZoneRef"]["name"] = json!("z");
                    o["spec"]["recordType"] = json!("BOGUS");
                }
                // `bad` is served now: its own condition turns True, and the set's
                // Programmed stays False with a new message (2 of 3 names).
                "loser" => o["spec"]["records"][2]["a"]["content"] = json!("192.0.2.5"),
                _ => {}
            }
        }
        let (_, verdicts) = read("m.yaml", &written, &Default::default());
        let again = plan(&verdicts, &written, |o| vec![format!("ns.{o}")], LATER);
        let at = |c: &Value| c["lastTransitionTime"].as_str().unwrap().to_string();
        let top = |status: &Value, kind: &str| {
            status["conditions"]
                .as_array()
                .unwrap()
                .iter()
                .find(|c| c["type"] == kind)
                .unwrap()
                .clone()
        };

        let orphan = of(&again, "DNSRecordSet", "orphan");
        assert_eq!(cond(orphan, "Accepted"), ("False", "InvalidDNSRecordSet"));
        assert_eq!(
            at(&top(orphan, "Accepted")),
            NOW,
            "reason changed, status not"
        );

        let loser = of(&again, "DNSRecordSet", "loser");
        let programmed = top(loser, "Programmed");
        assert_eq!(
            (
                programmed["status"].as_str(),
                programmed["message"].as_str()
            ),
            (Some("False"), Some("2 of 3 names programmed"))
        );
        assert_eq!(at(&programmed), NOW, "message changed, status not");
        let bad = loser["recordSets"]
            .as_array()
            .unwrap()
            .iter()
            .find(|r| r["name"] == "bad")
            .unwrap()["conditions"][0]
            .clone();
        assert_eq!(bad["status"], "True");
        assert_eq!(at(&bad), LATER, "status changed");
    }

    fn cluster(text: &str, kinds: &str) -> (Vec<Manifest>, Verdicts) {
        let objects = objects("m.yaml", text).unwrap();
        let settings = crate::cluster::ClusterSettings {
            kinds: kinds
                .split(',')
                .map(|k| crate::cluster::Kind::parse(k).unwrap())
                .collect(),
            default_ttl: 300,
            ..Default::default()
        };
        let (_, verdicts) = read("m.yaml", &objects, &settings);
        (objects, verdicts)
    }

    #[test]
    fn a_dns_endpoint_has_its_generation_observed_once() {
        let text = r#"
apiVersion: externaldns.k8s.io/v1alpha1
kind: DNSEndpoint
metadata: {name: new, namespace: dns, generation: 3}
spec: {endpoints: [{dnsName: a.example.org, recordType: A, targets: [192.0.2.1]}]}
---
apiVersion: externaldns.k8s.io/v1alpha1
kind: DNSEndpoint
metadata: {name: seen, namespace: dns, generation: 2}
spec: {endpoints: [{dnsName: b.example.org, recordType: A, targets: [192.0.2.2]}]}
status: {observedGeneration: 2}
---
apiVersion: externaldns.k8s.io/v1alpha1
kind: DNSEndpoint
metadata: {name: ignored, namespace: dns, generation: 1, annotations: {meshdns.io/ignore: "true"}}
spec: {endpoints: []}
"#;
        let (objects, verdicts) = cluster(text, "dnsendpoint");
        let plans = endpoint_plans(&verdicts.objects, &objects);
        let shown: Vec<(&str, &Value, bool)> = plans
            .iter()
            .map(|p| (p.name.as_str(), &p.status, p.changed))
            .collect();
        assert_eq!(
            shown,
            [
                ("new", &json!({"observedGeneration": 3}), true),
                ("seen", &json!({"observedGeneration": 2}), false),
            ]
        );
        assert_eq!(
            plans[0].document()["apiVersion"],
            "externaldns.k8s.io/v1alpha1"
        );
    }

    #[test]
    fn each_problem_of_an_object_is_recorded_once_and_again_when_it_comes_back() {
        let bad = r#"
apiVersion: networking.k8s.io/v1
kind: Ingress
metadata: {name: web, namespace: shop, uid: u-1}
spec: {rules: [{host: "bad_name!"}, {host: web.example.org}]}
status: {loadBalancer: {ingress: [{ip: 192.0.2.300}, {ip: 192.0.2.1}]}}
"#;
        let (_, verdicts) = cluster(bad, "ingress");
        let mut recorded = Recorded::default();
        let due = unrecorded(&verdicts.objects, &recorded);
        let fields: Vec<&str> = due.iter().map(|(_, p)| p.field.as_str()).collect();
        assert_eq!(
            fields,
            ["spec.rules[0].host", "status.loadBalancer.ingress[0].ip"]
        );
        // The first recorded only (the budget ran out): the other is still due.
        let (v, p) = due[0];
        recorded
            .entry((v.label(), v.uid.clone()))
            .or_default()
            .insert(p.clone());
        let due = unrecorded(&verdicts.objects, &recorded);
        assert_eq!(due.len(), 1);
        assert_eq!(due[0].1.field, "status.loadBalancer.ingress[0].ip");

        // The host is fixed: forgotten; nothing is due. It comes back: due again.
        let fixed = bad.replace("\"bad_name!\"", "shop.example.org");
        let (_, now) = cluster(&fixed, "ingress");
        forget_resolved(&now.objects, &mut recorded);
        assert!(recorded.is_empty(), "{recorded:?}");
        let (_, again) = cluster(bad, "ingress");
        assert_eq!(unrecorded(&again.objects, &recorded).len(), 2);

        // Another object with the same name (a new uid) is another object.
        let (_, mut verdicts) = cluster(bad, "ingress");
        for (v, p) in unrecorded(&verdicts.objects, &Recorded::default()) {
            recorded
                .entry((v.label(), v.uid.clone()))
                .or_default()
                .insert(p.clone());
        }
        verdicts.objects[0].uid = Some("u-2".into());
        assert_eq!(unrecorded(&verdicts.objects, &recorded).len(), 2);
        forget_resolved(&verdicts.objects, &mut recorded);
        assert!(recorded.is_empty());
    }
}
