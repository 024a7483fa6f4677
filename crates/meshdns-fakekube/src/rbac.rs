//! Kubernetes RBAC, as the API server's authorizer applies it, for holding a component to the
//! rules we ship in `deploy/`.
//!
//! A [`Policy`] is read from RBAC manifests (ServiceAccount, Role, ClusterRole, RoleBinding,
//! ClusterRoleBinding): the rules bound to one ServiceAccount, each with the namespace its
//! binding grants it in (or the whole cluster, for a ClusterRoleBinding). A request's
//! [`Attributes`] (verb, API group, resource, subresource, namespace, name) are derived from its
//! method, path and query as the API server derives them. [`crate::FakeKube::enforce`] then
//! answers 403 to what the policy does not allow and records which grant allowed the rest, so
//! a test can fail on a request the rules deny and on a rule nothing exercises.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::sync::Mutex;

use serde_json::Value;

/// What a request asks for, as RBAC sees it.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub struct Attributes {
    /// `get`, `list`, `watch`, `create`, `update`, `patch`, `delete`, `deletecollection`.
    pub verb: String,
    /// API group, empty for the core group.
    pub group: String,
    /// Plural resource name.
    pub resource: String,
    /// `status`, or empty.
    pub subresource: String,
    /// Namespace, `None` for cluster-scoped requests (and lists across all namespaces).
    pub namespace: Option<String>,
    /// Object name, `None` for collections and creates.
    pub name: Option<String>,
}

impl std::fmt::Display for Attributes {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let resource = if self.subresource.is_empty() {
            self.resource.clone()
        } else {
            format!("{}/{}", self.resource, self.subresource)
        };
        let group = if self.group.is_empty() {
            "core"
        } else {
            &self.group
        };
        write!(f, "{} {group} {resource}", self.verb)?;
        if let Some(name) = &self.name {
            write!(f, " {name:?}")?;
        }
        match &self.namespace {
            Some(ns) => write!(f, " in namespace {ns:?}"),
            None => write!(f, " cluster-wide"),
        }
    }
}

/// The RBAC attributes of a resource request; `None` for non-resource paths (`/version`,
/// discovery), which every authenticated client may read.
pub fn attributes(method: &str, path: &str, query: &str) -> Option<Attributes> {
    let segs: Vec<&str> = path.trim_matches('/').split('/').collect();
    let (group, rest) = match segs.as_slice() {
        ["api", _v, rest @ ..] => (String::new(), rest),
        ["apis", g, _v, rest @ ..] => (g.to_string(), rest),
        _ => return None,
    };
    let (namespace, rest) = match rest {
        ["namespaces", ns, rest @ ..] if !rest.is_empty() => (Some(ns.to_string()), rest),
        _ => (None, rest),
    };
    let resource = rest.first()?.to_string();
    let name = rest.get(1).map(|s| s.to_string());
    let subresource = rest.get(2).map(|s| s.to_string()).unwrap_or_default();
    let watch = query
        .split('&')
        .any(|p| p == "watch=true" || p == "watch=1");
    let verb = match (method, name.is_some()) {
        ("GET", true) => "get",
        ("GET", false) if watch => "watch",
        ("GET", false) => "list",
        ("POST", _) => "create",
        ("PUT", _) => "update",
        ("PATCH", _) => "patch",
        ("DELETE", true) => "delete",
        ("DELETE", false) => "deletecollection",
        _ => return None,
    };
    Some(Attributes {
        verb: verb.to_string(),
        group,
        resource,
        subresource,
        namespace,
        name,
    })
}

/// One (verb, resource) a rule grants: the unit a test must see exercised.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub struct Grant {
    /// `Role/NAME` or `ClusterRole/NAME`.
    pub role: String,
    /// The rule's index within its role.
    pub rule: usize,
    /// The verb.
    pub verb: String,
    /// `group/resource[/subresource]` (`core` for the core group).
    pub resource: String,
}

impl std::fmt::Display for Grant {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "{} rule {}: {} {}",
            self.role, self.rule, self.verb, self.resource
        )
    }
}

#[derive(Debug, Clone)]
struct Rule {
    role: String,
    index: usize,
    groups: Vec<String>,
    resources: Vec<String>,
    names: Vec<String>,
    verbs: Vec<String>,
    /// Where the binding grants it: a namespace, or `None` for the whole cluster.
    scope: Option<String>,
}

fn any(list: &[String], want: &str) -> bool {
    list.iter().any(|x| x == "*" || x == want)
}

impl Rule {
    fn grant(&self, a: &Attributes) -> Option<Grant> {
        if let Some(scope) = &self.scope
            && a.namespace.as_deref() != Some(scope.as_str())
        {
            return None;
        }
        let resource = if a.subresource.is_empty() {
            a.resource.clone()
        } else {
            format!("{}/{}", a.resource, a.subresource)
        };
        let named =
            self.names.is_empty() || a.name.as_ref().is_some_and(|n| self.names.contains(n));
        (any(&self.verbs, &a.verb)
            && any(&self.groups, &a.group)
            && any(&self.resources, &resource)
            && named)
            .then(|| Grant {
                role: self.role.clone(),
                rule: self.index,
                verb: a.verb.clone(),
                resource: qualified(&a.group, &resource),
            })
    }

    fn grants(&self) -> impl Iterator<Item = Grant> + '_ {
        self.verbs.iter().flat_map(move |verb| {
            self.groups.iter().flat_map(move |group| {
                self.resources.iter().map(move |resource| Grant {
                    role: self.role.clone(),
                    rule: self.index,
                    verb: verb.clone(),
                    resource: qualified(group, resource),
                })
            })
        })
    }
}

fn qualified(group: &str, resource: &str) -> String {
    let group = if group.is_empty() { "core" } else { group };
    format!("{group}/{resource}")
}

/// The rules bound to one ServiceAccount.
#[derive(Debug, Clone)]
pub struct Policy {
    /// What the policy is called in messages (the ServiceAccount, and the files).
    pub name: String,
    rules: Vec<Rule>,
}

/// The repository's `deploy/` directory.
pub fn deploy_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../deploy")
}

fn strings(v: &Value) -> Vec<String> {
    v.as_array()
        .map(|a| {
            a.iter()
                .filter_map(Value::as_str)
                .map(str::to_string)
                .collect()
        })
        .unwrap_or_default()
}

impl Policy {
    /// Reads RBAC manifests (paths relative to `deploy/`) and keeps the rules bound to the
    /// ServiceAccount `account`. Objects without a namespace are placed in `namespace`, as
    /// `kubectl apply -n` (or kustomize's `namespace:`) would place them. Panics, naming the
    /// file, on what it cannot read: a test of the shipped rules should stop there.
    pub fn load(files: &[&str], account: &str, namespace: &str) -> Policy {
        let mut objects = Vec::new();
        for file in files {
            let path = deploy_dir().join(file);
            let text = std::fs::read_to_string(&path)
                .unwrap_or_else(|e| panic!("{}: {e}", path.display()));
            for doc in serde_yaml::Deserializer::from_str(&text) {
                let value: Value = serde::Deserialize::deserialize(doc)
                    .unwrap_or_else(|e| panic!("{}: {e}", path.display()));
                if !value.is_null() {
                    objects.push(value);
                }
            }
        }
        let ns_of = |o: &Value| {
            o["metadata"]["namespace"]
                .as_str()
                .unwrap_or(namespace)
                .to_string()
        };
        let name_of = |o: &Value| o["metadata"]["name"].as_str().unwrap_or("").to_string();
        let role = |kind: &str, name: &str, ns: Option<&str>| {
            objects.iter().find(|o| {
                o["kind"] == kind
                    && name_of(o) == name
                    && (kind == "ClusterRole" || Some(ns_of(o).as_str()) == ns)
            })
        };
        let mut rules = Vec::new();
        for binding in &objects {
            let kind = binding["kind"].as_str().unwrap_or("");
            if kind != "RoleBinding" && kind != "ClusterRoleBinding" {
                continue;
            }
            // A subject in `default` (or in none) is the install's: kustomize's `namespace:`
            // rewrites exactly those. Another namespace must be the install's already.
            let ours = |s: &Value| {
                s["kind"] == "ServiceAccount"
                    && s["name"] == account
                    && match s["namespace"].as_str() {
                        None | Some("default") => true,
                        Some(ns) => ns == namespace,
                    }
            };
            let bound = binding["subjects"]
                .as_array()
                .into_iter()
                .flatten()
                .any(ours);
            if !bound {
                continue;
            }
            let scope = (kind == "RoleBinding").then(|| ns_of(binding));
            let ref_kind = binding["roleRef"]["kind"].as_str().unwrap_or("");
            let ref_name = binding["roleRef"]["name"].as_str().unwrap_or("");
            let found = role(ref_kind, ref_name, scope.as_deref()).unwrap_or_else(|| {
                panic!(
                    "{files:?}: {kind} {} refers to {ref_kind} {ref_name}, which is not there",
                    name_of(binding)
                )
            });
            for (index, r) in found["rules"].as_array().into_iter().flatten().enumerate() {
                rules.push(Rule {
                    role: format!("{ref_kind}/{ref_name}"),
                    index,
                    groups: strings(&r["apiGroups"]),
                    resources: strings(&r["resources"]),
                    names: strings(&r["resourceNames"]),
                    verbs: strings(&r["verbs"]),
                    scope: scope.clone(),
                });
            }
        }
        assert!(
            !rules.is_empty(),
            "{files:?}: no rules are bound to ServiceAccount {account}"
        );
        Policy {
            name: format!("{account} ({})", files.join(", ")),
            rules,
        }
    }

    /// The grant that allows the request, if any.
    pub fn allows(&self, a: &Attributes) -> Option<Grant> {
        self.rules.iter().find_map(|r| r.grant(a))
    }

    /// Every (verb, resource) the policy grants, rule by rule.
    pub fn grants(&self) -> BTreeSet<Grant> {
        self.rules.iter().flat_map(Rule::grants).collect()
    }
}

/// Grants used so far by every fake server of this process. A grant is named by its role, so
/// a ClusterRole shared by several installs (the controller's own cluster and a remote one)
/// counts as exercised by either.
static USED: Mutex<BTreeSet<Grant>> = Mutex::new(BTreeSet::new());

pub(crate) fn record_use(grant: Grant) {
    USED.lock().unwrap_or_else(|e| e.into_inner()).insert(grant);
}

/// The grants of `policy` that no request to any fake server of this process has used yet,
/// leaving out roles for which `skip` is true (exercised by another test binary).
pub fn unused(policy: &Policy, skip: impl Fn(&str) -> bool) -> Vec<Grant> {
    let used = USED.lock().unwrap_or_else(|e| e.into_inner());
    policy
        .grants()
        .into_iter()
        .filter(|g| !skip(&g.role) && !used.contains(g))
        .collect()
}

/// Panics, listing them, when grants of `policy` (outside the roles `skip` leaves out) have
/// not been used by any request yet: least privilege checked the other way round.
pub fn assert_all_exercised(policy: &Policy, skip: impl Fn(&str) -> bool) {
    let unused = unused(policy, skip);
    assert!(
        unused.is_empty(),
        "{}: rules no scenario exercises:\n  {}",
        policy.name,
        unused
            .iter()
            .map(ToString::to_string)
            .collect::<Vec<_>>()
            .join("\n  ")
    );
}
