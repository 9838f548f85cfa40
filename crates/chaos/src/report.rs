//! What a run did, counted from its records, and the checker's verdict on its history.

use crate::record::{self, Finished, Record, Seen, Via};
use crate::ChaosError;

/// What a run did and what the checker found.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ChaosReport {
    /// Invocations recorded (the final read included).
    pub invocations: usize,
    /// Acknowledged as committed.
    pub committed: usize,
    /// Failed, with nothing applied.
    pub failed: usize,
    /// Outcome unknown to the client.
    pub unknown: usize,
    /// Committed invocations by where they finished: on the node, here, here after a pushback.
    pub remote: usize,
    /// See `remote`.
    pub local: usize,
    /// See `remote`.
    pub pushed_back: usize,
    /// Attempts beyond the first (OCC conflicts retried, on either side).
    pub retries: u64,
    /// Connections the proxy cut.
    pub cuts: u64,
    /// Workers the watchdog replaced (in a crash run: by the last node process).
    pub worker_replacements: u64,
    /// Times the node was killed with SIGKILL and restarted (crash runs; in a cluster run,
    /// storage nodes killed).
    pub crashes: u64,
    /// Slot moves of the hot keys' slot (cluster runs).
    pub moves: u64,
    /// Failovers: the hot slot's primary stopped until its replica took over (cluster runs).
    pub failovers: u64,
    /// Partitions: the hot slot's primary cut off the config group, its clients still
    /// reaching it, until its replica took over (cluster runs).
    pub partitions: u64,
    /// The hot slot's primary cut off its clients, both ways (cluster runs).
    pub client_partitions: u64,
    /// The link between the hot slot's primary and its clients open one way only: the
    /// requests arrive and no answer comes back, or the reverse (cluster runs).
    pub one_way_partitions: u64,
    /// The hot slot's primary cut off its replicas, both ways or one way (cluster runs).
    pub replication_partitions: u64,
    /// Storage nodes killed with their data dir deleted (a lost disk; cluster runs).
    pub disks_lost: u64,
    /// Acknowledged writes the final read does not see (each would also be a violation).
    pub lost_writes: usize,
    /// Invocations the checker placed in its graph.
    pub judged: usize,
    /// RESP transactions recorded (counted among `invocations` too, and by outcome among
    /// `committed`, `failed` and `unknown`).
    pub resp: usize,
    /// RESP transactions acknowledged as committed (EXEC answered its replies).
    pub resp_committed: usize,
    /// RESP transactions placed in the checker's graph.
    pub resp_judged: usize,
    /// Reads and writes of judged RESP transactions left out of the graph: no version
    /// could be placed for them ([`crate::resolve`]).
    pub resp_unplaced: usize,
    /// Why the history is not strictly serializable, if it is not.
    pub violation: Option<String>,
}

impl ChaosReport {
    /// The faults of a cluster run, counted, for a line of output.
    pub fn cluster_faults(&self) -> String {
        format!(
            "{} slot moves, {} failovers, {} partitions from the config group, {} from the clients, {} one-way, \
             {} from the replicas, {} storage nodes killed, {} disks lost",
            self.moves,
            self.failovers,
            self.partitions,
            self.client_partitions,
            self.one_way_partitions,
            self.replication_partitions,
            self.crashes,
            self.disks_lost
        )
    }

    /// Adds `other`'s counts to this one's (the totals of several runs).
    pub fn add(&mut self, other: &ChaosReport) {
        self.invocations += other.invocations;
        self.committed += other.committed;
        self.failed += other.failed;
        self.unknown += other.unknown;
        self.judged += other.judged;
        self.resp += other.resp;
        self.resp_committed += other.resp_committed;
        self.resp_judged += other.resp_judged;
        self.resp_unplaced += other.resp_unplaced;
        self.crashes += other.crashes;
        self.moves += other.moves;
        self.failovers += other.failovers;
        self.partitions += other.partitions;
        self.client_partitions += other.client_partitions;
        self.one_way_partitions += other.one_way_partitions;
        self.replication_partitions += other.replication_partitions;
        self.disks_lost += other.disks_lost;
        self.lost_writes += other.lost_writes;
    }
}

/// The report of a run's records, with the checker's verdict.
pub(crate) fn judge(records: &[Record], cuts: u64, replacements: u64, crashes: u64) -> Result<ChaosReport, ChaosError> {
    let mut report = summarize(records);
    report.cuts = cuts;
    report.worker_replacements = replacements;
    report.crashes = crashes;
    let history = record::history(records)?;
    report.lost_writes = record::lost_writes(&history);
    let resp = record::resp_judged(records, &history);
    report.resp_judged = resp.judged;
    report.resp_unplaced = resp.unplaced;
    let verdict = ferry_check::check(&history);
    report.judged = verdict.judged;
    report.violation = verdict.violation.map(|v| v.to_string());
    Ok(report)
}

/// The counts of `records`, by outcome and by where they ran.
fn summarize(records: &[Record]) -> ChaosReport {
    let mut report = ChaosReport {
        invocations: records.len(),
        ..ChaosReport::default()
    };
    for r in records {
        if r.via == Via::Resp {
            report.resp += 1;
            report.resp_committed += usize::from(matches!(r.seen, Seen::Executed { .. }));
        }
        match r.seen {
            Seen::Executed { .. } => report.committed += 1,
            Seen::Committed { finished, retries, .. } => {
                report.committed += 1;
                report.retries += u64::from(retries);
                match finished {
                    Finished::Remote => report.remote += 1,
                    Finished::Local => report.local += 1,
                    Finished::PushedBack => report.pushed_back += 1,
                }
            }
            Seen::Failed => report.failed += 1,
            Seen::Unknown => report.unknown += 1,
        }
    }
    report
}
