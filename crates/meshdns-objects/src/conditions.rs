//! Status conditions, and the one rule for their `lastTransitionTime`: it is "the last time
//! the condition transitioned from one status to another" (metav1.Condition), so it moves when
//! the status changes and only then; a change of reason, message or generation keeps it. The
//! Connector's `IrohDNSPublished` ([`set_condition`]), the ClusterMesh's conditions
//! ([`crate::ClusterMeshStatus::stamped`]) and the DNSZone and DNSRecordSet statuses
//! `meshdns serve --write-status` plans (`meshdns_sources::status`) all keep it by
//! [`transition_time`].

use k8s_openapi::apimachinery::pkg::apis::meta::v1::{Condition, Time};
use k8s_openapi::jiff::Timestamp;

/// The `lastTransitionTime` of a condition whose status is now `status`, given the condition
/// of the same type it replaces, if any (`before`: its status and its time). The time before
/// is kept while the status stays the same; otherwise, or when there was none, it is `now`.
pub fn transition_time<T: Clone>(before: Option<(&str, Option<&T>)>, status: &str, now: &T) -> T {
    match before {
        Some((was, Some(since))) if was == status => since.clone(),
        _ => now.clone(),
    }
}

/// The conditions after setting `want` (matched by type), its time by [`transition_time`].
/// Returns `None` when nothing would change (same status, reason, message and observed
/// generation), so the caller writes nothing.
pub fn set_condition(current: &[Condition], want: Condition) -> Option<Vec<Condition>> {
    let mut out = current.to_vec();
    match out.iter_mut().find(|c| c.type_ == want.type_) {
        Some(have) => {
            if have.status == want.status
                && have.reason == want.reason
                && have.message == want.message
                && have.observed_generation == want.observed_generation
            {
                return None;
            }
            let since = transition_time(
                Some((have.status.as_str(), Some(&have.last_transition_time))),
                &want.status,
                &want.last_transition_time,
            );
            *have = Condition {
                last_transition_time: since,
                ..want
            };
        }
        None => out.push(want),
    }
    Some(out)
}

/// A condition stamped `now`.
pub fn condition(
    type_: &str,
    status: &str,
    reason: &str,
    message: &str,
    generation: Option<i64>,
    now: Timestamp,
) -> Condition {
    Condition {
        type_: type_.to_string(),
        status: status.to_string(),
        reason: reason.to_string(),
        message: message.to_string(),
        observed_generation: generation,
        last_transition_time: Time(now),
    }
}

/// Now, as metav1.Time is written (RFC 3339, whole seconds): the time of new condition
/// transitions in the statuses `meshdns serve --write-status` writes and `render status`
/// prints.
pub fn now() -> String {
    Timestamp::now().strftime("%Y-%m-%dT%H:%M:%SZ").to_string()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn at(secs: i64) -> Timestamp {
        Timestamp::from_second(secs).unwrap()
    }

    #[test]
    fn the_transition_time_moves_with_the_status_only() {
        let was = condition("Ready", "True", "A", "a", Some(1), at(10));
        let same_status = condition("Ready", "True", "B", "b", Some(2), at(20));
        let got = set_condition(std::slice::from_ref(&was), same_status).unwrap();
        assert_eq!(got[0].last_transition_time, Time(at(10)));
        assert_eq!(
            (got[0].reason.as_str(), got[0].observed_generation),
            ("B", Some(2))
        );
        let flipped = condition("Ready", "False", "B", "b", Some(2), at(30));
        let got = set_condition(&got, flipped).unwrap();
        assert_eq!(got[0].last_transition_time, Time(at(30)));
        let unchanged = condition("Ready", "False", "B", "b", Some(2), at(40));
        assert_eq!(set_condition(&got, unchanged), None);
        let other = condition("Other", "True", "C", "c", None, at(50));
        assert_eq!(set_condition(&got, other).unwrap().len(), 2);
        // A condition read without a time gets `now`, whatever its status.
        assert_eq!(transition_time(Some(("True", None)), "True", &7), 7);
        assert_eq!(transition_time(None, "True", &7), 7);
    }
}
