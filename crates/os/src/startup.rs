//! The start-up lines a ferry process prints on its standard output, once each listener
//! is bound and its data is recovered: a contract with whatever started it (`ferry cluster
//! up`, the benchmarks, the tests, a person), who reads the addresses back. Printed and
//! parsed through this one type, so the two sides cannot drift apart.

use std::fmt;

/// What a start-up line announces.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum StartupKind {
    /// `listening on HOST:PORT`: the process's main listener; always the first line.
    Listening,
    /// `resp on HOST:PORT`: its RESP listener.
    Resp,
    /// `metrics on HOST:PORT`: its metrics and probes.
    Metrics,
    /// `replication on HOST:PORT`: a storage node's replication listener.
    Replication,
    /// `copied the primary: …`: what a new replica copied before it started.
    Copied,
    /// `recovered …`: what a storage node with a data dir recovered.
    Recovered,
    /// `cut …`: the torn or corrupt log tail recovery cut.
    Cut,
}

impl StartupKind {
    /// Every kind, in the order a storage node prints them.
    pub const ALL: [StartupKind; 7] = [
        StartupKind::Listening,
        StartupKind::Resp,
        StartupKind::Metrics,
        StartupKind::Replication,
        StartupKind::Copied,
        StartupKind::Recovered,
        StartupKind::Cut,
    ];

    /// The words the line starts with.
    pub fn prefix(self) -> &'static str {
        match self {
            StartupKind::Listening => "listening on ",
            StartupKind::Resp => "resp on ",
            StartupKind::Metrics => "metrics on ",
            StartupKind::Replication => "replication on ",
            StartupKind::Copied => "copied the primary: ",
            StartupKind::Recovered => "recovered ",
            StartupKind::Cut => "cut ",
        }
    }

    /// A line that a parent waiting for addresses reads past: it tells a person what
    /// happened, no tool waits for it.
    pub fn is_informational(self) -> bool {
        matches!(self, StartupKind::Replication | StartupKind::Copied | StartupKind::Cut)
    }
}

/// One start-up line: its kind and what follows the kind's words (an address, or what
/// was copied, recovered or cut).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct StartupLine {
    /// What it announces.
    pub kind: StartupKind,
    /// The rest of the line.
    pub value: String,
}

impl StartupLine {
    /// A line of `kind` saying `value`.
    pub fn new(kind: StartupKind, value: impl fmt::Display) -> StartupLine {
        StartupLine {
            kind,
            value: value.to_string(),
        }
    }

    /// The start-up line `line` is, if it is one.
    pub fn parse(line: &str) -> Option<StartupLine> {
        StartupKind::ALL.into_iter().find_map(|kind| {
            line.strip_prefix(kind.prefix())
                .map(|value| StartupLine::new(kind, value.trim()))
        })
    }
}

impl fmt::Display for StartupLine {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}{}", self.kind.prefix(), self.value)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_line_reads_back_as_printed_and_other_lines_are_none() {
        for kind in StartupKind::ALL {
            let line = StartupLine::new(kind, "127.0.0.1:7");
            assert_eq!(StartupLine::parse(&line.to_string()), Some(line));
        }
        assert_eq!(
            StartupLine::parse("listening on 127.0.0.1:7700\n"),
            Some(StartupLine::new(StartupKind::Listening, "127.0.0.1:7700"))
        );
        assert_eq!(StartupLine::parse("2026-12-08 WARN something"), None);
        assert!(StartupKind::Copied.is_informational() && !StartupKind::Resp.is_informational());
    }
}
