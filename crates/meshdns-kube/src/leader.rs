//! Leader election through a `coordination.k8s.io/v1` Lease, as client-go's leaderelection
//! does it: the holder renews `renewTime`; another replica takes the Lease over once
//! `renewTime + leaseDurationSeconds` has passed. Every write carries the resourceVersion it
//! read, so two candidates never both win. kube-rs has no elector of its own.

use std::time::Duration;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::MicroTime;
use k8s_openapi::jiff::{SignedDuration, Timestamp};
use kube::Client;
use kube::api::{Api, ObjectMeta, PostParams};
use meshdns_objects::core::{Lease, LeaseSpec};
use tokio_util::sync::CancellationToken;
use tracing::{info, warn};

use crate::{Error, is_conflict};

/// Which Lease, who we are, and the timings.
#[derive(Debug, Clone)]
pub struct Election {
    /// Namespace of the Lease.
    pub namespace: String,
    /// Lease name (one per controller: `meshdns-iroh`, `meshdns-mesh`).
    pub name: String,
    /// This replica's identity (pod name, else host name and pid).
    pub identity: String,
    /// How long a Lease stays valid without renewal.
    pub lease_duration: Duration,
    /// How often the holder renews.
    pub renew_every: Duration,
}

impl Election {
    /// A Lease with client-go's default timings (15 s valid, renewed every 5 s).
    pub fn new(namespace: &str, name: &str) -> Election {
        let identity = std::env::var("POD_NAME").unwrap_or_else(|_| {
            let host = std::fs::read_to_string("/proc/sys/kernel/hostname")
                .map(|h| h.trim().to_string())
                .unwrap_or_else(|_| "meshdns".into());
            format!("{host}-{}", std::process::id())
        });
        Election {
            namespace: namespace.to_string(),
            name: name.to_string(),
            identity,
            lease_duration: Duration::from_secs(15),
            renew_every: Duration::from_secs(5),
        }
    }
}

/// Tries once to take or renew the Lease. `Ok(true)`: we hold it now.
pub async fn try_acquire(client: &Client, e: &Election) -> Result<bool, Error> {
    let api = Api::<Lease>::namespaced(client.clone(), &e.namespace);
    let now = Timestamp::now();
    let duration = i32::try_from(e.lease_duration.as_secs()).unwrap_or(i32::MAX);
    let Some(mut lease) = api.get_opt(&e.name).await? else {
        let lease = Lease {
            metadata: ObjectMeta {
                name: Some(e.name.clone()),
                namespace: Some(e.namespace.clone()),
                ..Default::default()
            },
            spec: Some(LeaseSpec {
                holder_identity: Some(e.identity.clone()),
                lease_duration_seconds: Some(duration),
                acquire_time: Some(MicroTime(now)),
                renew_time: Some(MicroTime(now)),
                lease_transitions: Some(0),
                ..Default::default()
            }),
        };
        return match api.create(&PostParams::default(), &lease).await {
            Ok(_) => Ok(true),
            Err(err) if is_conflict(&err) => Ok(false),
            Err(err) => Err(err.into()),
        };
    };
    let spec = lease.spec.clone().unwrap_or_default();
    let ours = spec.holder_identity.as_deref() == Some(e.identity.as_str());
    let valid_for =
        SignedDuration::from_secs(i64::from(spec.lease_duration_seconds.unwrap_or(duration)));
    let expired = spec
        .renew_time
        .as_ref()
        .map(|t| t.0)
        .is_none_or(|t| t.checked_add(valid_for).unwrap_or(t) < now);
    if !ours
        && !expired
        && spec
            .holder_identity
            .as_deref()
            .is_some_and(|h| !h.is_empty())
    {
        return Ok(false);
    }
    let mut next = spec;
    if !ours {
        next.holder_identity = Some(e.identity.clone());
        next.acquire_time = Some(MicroTime(now));
        next.lease_transitions = Some(next.lease_transitions.unwrap_or(0) + 1);
    }
    next.lease_duration_seconds = Some(duration);
    next.renew_time = Some(MicroTime(now));
    lease.spec = Some(next);
    match api.replace(&e.name, &PostParams::default(), &lease).await {
        Ok(_) => Ok(true),
        Err(err) if is_conflict(&err) => Ok(false),
        Err(err) => Err(err.into()),
    }
}

/// Waits until this replica holds the Lease (or `shutdown` is cancelled: `false`), then
/// renews it in the background; if renewing fails for a whole lease duration, `lost` is
/// cancelled so the caller stops acting as leader.
pub async fn lead(
    client: Client,
    e: Election,
    shutdown: CancellationToken,
) -> Option<CancellationToken> {
    loop {
        match try_acquire(&client, &e).await {
            Ok(true) => break,
            Ok(false) => {}
            Err(err) => warn!(error = %err, lease = %e.name, "leader election"),
        }
        tokio::select! {
            _ = shutdown.cancelled() => return None,
            _ = tokio::time::sleep(e.renew_every) => {}
        }
    }
    info!(lease = %e.name, identity = %e.identity, "leading");
    let lost = CancellationToken::new();
    let signal = lost.clone();
    tokio::spawn(async move {
        let mut last_ok = tokio::time::Instant::now();
        loop {
            tokio::select! {
                _ = shutdown.cancelled() => return,
                _ = tokio::time::sleep(e.renew_every) => {}
            }
            match try_acquire(&client, &e).await {
                Ok(true) => last_ok = tokio::time::Instant::now(),
                Ok(false) => {
                    warn!(lease = %e.name, "leadership taken over");
                    signal.cancel();
                    return;
                }
                Err(err) => warn!(error = %err, lease = %e.name, "renewing the lease"),
            }
            if last_ok.elapsed() > e.lease_duration {
                warn!(lease = %e.name, "lease not renewed in time; stepping down");
                signal.cancel();
                return;
            }
        }
    });
    Some(lost)
}
