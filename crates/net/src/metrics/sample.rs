//! One reported value: what it counts, whose it is, and whether it only grows.
//!
//! A process reports its values once, as samples; the protocol's `stats` answer names
//! each one `SCOPE.NAME` or `SCOPE.ID.NAME` ([`Sample::stat`]), and the metrics endpoint
//! encodes each as the family `ferry_SCOPE_NAME`, labelled `{SCOPE="ID"}` when the scope
//! has ids ([`Sample::family`]).

use ferry_proto::StatEntry;
use ferry_proto::TenantId;

/// Whether a value only grows (a counter) or goes up and down (a gauge).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Kind {
    /// Only grows while the process runs.
    Counter,
    /// Goes up and down.
    Gauge,
}

/// Whose value it is.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Scope {
    /// The process itself: `node`, `gateway`, `compute`, `config`.
    Process(&'static str),
    /// One tenant.
    Tenant(TenantId),
    /// One worker (a storage node's core, by index).
    Worker(usize),
    /// One function, by name.
    Function(String),
}

impl Scope {
    /// The scope's name, and the id of its member if it has members.
    fn parts(&self) -> (&'static str, Option<String>) {
        match self {
            Scope::Process(process) => (process, None),
            Scope::Tenant(id) => ("tenant", Some(id.to_string())),
            Scope::Worker(index) => ("worker", Some(index.to_string())),
            Scope::Function(name) => ("function", Some(name.clone())),
        }
    }
}

/// One reported value.
#[derive(Clone, Debug)]
pub struct Sample {
    /// Whose.
    pub scope: Scope,
    /// What (no dots: `requests`, `used_bytes`).
    pub name: &'static str,
    /// Counter or gauge.
    pub kind: Kind,
    /// The value now.
    pub value: u64,
}

impl Sample {
    /// A counter's value.
    pub fn counter(scope: Scope, name: &'static str, value: u64) -> Sample {
        Sample {
            scope,
            name,
            kind: Kind::Counter,
            value,
        }
    }

    /// A gauge's value.
    pub fn gauge(scope: Scope, name: &'static str, value: u64) -> Sample {
        Sample {
            scope,
            name,
            kind: Kind::Gauge,
            value,
        }
    }

    /// As the protocol's `stats` answers it: `SCOPE.NAME` or `SCOPE.ID.NAME`.
    pub fn stat(&self) -> StatEntry {
        let name = match self.scope.parts() {
            (scope, None) => format!("{scope}.{}", self.name),
            (scope, Some(id)) => format!("{scope}.{id}.{}", self.name),
        };
        StatEntry {
            name,
            value: self.value,
        }
    }

    /// How `stats` names the samples of its family: `SCOPE.NAME` or `SCOPE.ID.NAME`.
    pub fn stat_pattern(&self) -> String {
        match self.scope.parts() {
            (scope, None) => format!("{scope}.{}", self.name),
            (scope, Some(_)) => format!("{scope}.ID.{}", self.name),
        }
    }

    /// Its metric family (`ferry_SCOPE_NAME`) and, for a scope with members, its label.
    pub fn family(&self) -> (String, Option<(&'static str, String)>) {
        let (scope, id) = self.scope.parts();
        (format!("ferry_{scope}_{}", self.name), id.map(|id| (scope, id)))
    }
}

/// The `stats` answer of `samples`.
pub fn stats(samples: &[Sample]) -> Vec<StatEntry> {
    samples.iter().map(Sample::stat).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_sample_names_its_stat_and_its_family_from_its_scope() {
        let tenant = Sample::counter(Scope::Tenant(TenantId(3)), "requests", 5);
        assert_eq!(tenant.stat().name, "tenant.3.requests");
        assert_eq!(tenant.stat_pattern(), "tenant.ID.requests");
        assert_eq!(
            tenant.family(),
            ("ferry_tenant_requests".to_string(), Some(("tenant", "3".to_string())))
        );
        let node = Sample::gauge(Scope::Process("node"), "epoch", 7);
        assert_eq!(node.stat().name, "node.epoch");
        assert_eq!(node.stat().value, 7);
        assert_eq!(node.family(), ("ferry_node_epoch".to_string(), None));
        // A function's name may hold dots; it stays whole in the stat and in the label.
        let function = Sample::counter(Scope::Function("lib.fn".into()), "calls_local", 1);
        assert_eq!(function.stat().name, "function.lib.fn.calls_local");
        assert_eq!(function.family().1, Some(("function", "lib.fn".to_string())));
    }
}
