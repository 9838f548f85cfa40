//! What a config member tells Prometheus and its orchestrator (`ferry config --metrics`):
//! its view of the group as samples, and ready while it knows a leader (a member without
//! one cannot get a configuration change committed, nor a storage node its lease).

use std::sync::Arc;

use ferry_net::metrics::{Endpoints, Readiness, Sample, Scope};

use crate::member::Member;

/// The metrics listener's endpoints for `member`.
pub fn endpoints(member: Arc<Member>) -> Endpoints {
    let asked = Arc::clone(&member);
    Endpoints {
        metrics: Arc::new(move || ferry_net::metrics::exposition(samples(&member), None)),
        ready: Arc::new(move || match asked.status().leader {
            Some(_) => Readiness::Ready,
            None => Readiness::NotReady("no leader known to this member".into()),
        }),
    }
}

/// The member's view of the group: `config.term`, `config.leader` (its id, 0 for none),
/// `config.is_leader`, `config.members`, `config.last_applied` and `config.epoch`.
fn samples(member: &Member) -> Vec<Sample> {
    const CONFIG: Scope = Scope::Process("config");
    let status = member.status();
    vec![
        Sample::gauge(CONFIG, "term", status.term),
        Sample::gauge(CONFIG, "leader", status.leader.unwrap_or(0)),
        Sample::gauge(CONFIG, "is_leader", u64::from(status.leader == Some(status.id))),
        Sample::gauge(CONFIG, "members", status.members.len() as u64),
        Sample::gauge(CONFIG, "last_applied", status.last_applied.unwrap_or(0)),
        Sample::gauge(CONFIG, "epoch", status.epoch),
    ]
}
