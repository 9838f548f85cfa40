//! The flags `ferry sim` and `ferry sim-sweep` share: the cluster, its costs, the workload
//! and the SLO, and how they layer: the model's defaults, then a measured machine
//! (`--profile FILE`), then every cost, RTT or stall flag given explicitly, which wins.
//! The cost flags are therefore `Option`s: a flag left out must not overwrite the profile
//! with a default.

use std::path::{Path, PathBuf};

use ferry_control::Nanos;
use ferry_experiment::model::{ClusterModel, Sharding, RTT_DEFAULT};
use ferry_experiment::profile::Profile;
use ferry_experiment::{parse_workload, ExperimentError};
use ferry_sim::{Arrivals, Slo};
use ferry_spec::parse_duration;

/// What the flag parsing of a scenario returns: a typed error of the model, or one of a
/// profile file, both printed as `error: ...` by `main`.
pub type ArgsResult<T> = Result<T, Box<dyn std::error::Error + Send + Sync>>;

/// Flags shared by `ferry sim` and `ferry sim-sweep`: the cluster, workload and SLO.
#[derive(clap::Args, Debug)]
pub struct ScenarioArgs {
    /// App (compute) nodes; requests go to them in turn.
    #[arg(long, default_value_t = 1, allow_negative_numbers = true)]
    app_nodes: i64,
    /// Storage nodes; each request's data lives on one, by the hash of its key.
    #[arg(long, default_value_t = 1, allow_negative_numbers = true)]
    storage_nodes: i64,
    /// Cores of each app node.
    #[arg(long, default_value_t = 8, allow_negative_numbers = true)]
    app_cores: i64,
    /// Cores of each storage node.
    #[arg(long, default_value_t = 8, allow_negative_numbers = true)]
    storage_cores: i64,
    /// Skewed data (Pyxis §VI-F): the i-th function of the workload touches only the first
    /// i storage nodes, so the first node is the hottest. Without it keys hash evenly.
    #[arg(long)]
    skew: bool,
    /// A machine profile written by `ferry calibrate`: its CPU costs, RTT and stalls replace
    /// the model's defaults; the cost, RTT and stall flags below, where given, still win.
    #[arg(long)]
    profile: Option<PathBuf>,
    /// Network round-trip time (e.g. 10us) [default: 10us, or the profile's].
    #[arg(long, allow_hyphen_values = true)]
    rtt: Option<String>,
    /// Bandwidth of each node's link, in Gb/s (a node sends one message at a time).
    #[arg(long, default_value_t = 25.0, allow_negative_numbers = true)]
    bandwidth_gbps: f64,
    /// Workload: light | medium | heavy | traverse:depth=N,compute=DUR[,size=B][,dist=exp]
    /// (mixes with '+' and '@weight') | bimodal:a=PRESET,b=PRESET,period=DUR.
    #[arg(long, default_value = "medium", allow_hyphen_values = true)]
    workload: String,
    /// The p99 latency SLO (e.g. 200us), for every function.
    #[arg(long, default_value = "200us", allow_hyphen_values = true)]
    slo_p99: String,
    /// Pyxis' slowdown SLO instead of --slo-p99: each function's p99 at most K times its
    /// service time (its mean unloaded latency on the faster placement, at least 5 us).
    #[arg(long, allow_negative_numbers = true, conflicts_with = "slo_p99")]
    slo_slowdown: Option<f64>,
    /// Seed of all randomness; the same seed gives byte-identical output.
    #[arg(long, default_value_t = 1)]
    seed: u64,
    /// Arrival process behind the rate limiter: poisson or paced.
    #[arg(long, default_value = "poisson")]
    arrivals: String,
    /// App CPU per message handled (e.g. 300ns).
    #[arg(long, allow_hyphen_values = true)]
    app_msg_cost: Option<String>,
    /// App CPU to start a function locally.
    #[arg(long, allow_hyphen_values = true)]
    app_invoke_cost: Option<String>,
    /// App CPU per payload byte received, in ns (e.g. 0.05; default 0).
    #[arg(long, allow_negative_numbers = true)]
    app_byte_cost: Option<f64>,
    /// Storage CPU per request message handled.
    #[arg(long, allow_hyphen_values = true)]
    storage_msg_cost: Option<String>,
    /// Storage CPU to dispatch an invoke.
    #[arg(long, allow_hyphen_values = true)]
    storage_invoke_cost: Option<String>,
    /// Storage CPU per table lookup.
    #[arg(long, allow_hyphen_values = true)]
    storage_get_cost: Option<String>,
    /// Storage CPU per payload byte sent, in ns (e.g. 0.02; default 0).
    #[arg(long, allow_negative_numbers = true)]
    storage_byte_cost: Option<f64>,
    /// Slowdown of function compute on the storage node.
    #[arg(long, allow_negative_numbers = true)]
    storage_compute_factor: Option<f64>,
    /// Node-wide stalls per second per node (0 disables them).
    #[arg(long, allow_negative_numbers = true)]
    stall_rate_hz: Option<f64>,
    /// Mean length of one stall (e.g. 16us).
    #[arg(long, allow_hyphen_values = true)]
    stall_mean: Option<String>,
    /// Spread of the stalls' lengths, standard deviation over mean, in [0, 1] (1, the
    /// default: exponential; 0: every stall of the mean length).
    #[arg(long, allow_negative_numbers = true)]
    stall_length_cv: Option<f64>,
}

/// Largest accepted slowdown SLO factor.
const SLOWDOWN_MAX: f64 = 1e6;

/// Parses a duration flag, naming the flag in the error.
pub fn duration(flag: &str, value: &str) -> Result<Nanos, ExperimentError> {
    parse_duration(value).map_err(|source| ExperimentError::Spec {
        flag: flag.to_string(),
        source,
    })
}

fn cores(which: &'static str, n: i64) -> Result<u32, ExperimentError> {
    if n < 1 || n > ferry_experiment::model::CORES_MAX as i64 {
        return Err(ExperimentError::Cores {
            which,
            value: n,
            max: ferry_experiment::model::CORES_MAX,
        });
    }
    Ok(n as u32)
}

/// Loads `--profile FILE`, if given.
pub fn load_profile(path: Option<&Path>) -> ArgsResult<Option<Profile>> {
    Ok(path.map(ferry_experiment::profile::load).transpose()?)
}

impl ScenarioArgs {
    /// The profile given with `--profile`, if any.
    pub fn profile(&self) -> ArgsResult<Option<Profile>> {
        load_profile(self.profile.as_deref())
    }

    /// The `--profile` path, if any (for the commands that print a reproducing command).
    pub fn profile_path(&self) -> Option<&Path> {
        self.profile.as_deref()
    }

    /// The cluster: the model's defaults, then the profile, then the explicit flags.
    pub fn cluster(&self) -> ArgsResult<ClusterModel> {
        let nodes = |name: &str, n: i64| -> Result<u32, ExperimentError> {
            u32::try_from(n)
                .ok()
                .filter(|n| (1..=ferry_experiment::model::NODES_MAX).contains(n))
                .ok_or_else(|| ExperimentError::OutOfRange {
                    name: name.to_string(),
                    range: "[1, 1024]",
                    value: n.to_string(),
                })
        };
        let mut cl = ClusterModel {
            app_nodes: nodes("--app-nodes", self.app_nodes)?,
            storage_nodes: nodes("--storage-nodes", self.storage_nodes)?,
            sharding: if self.skew { Sharding::Staircase } else { Sharding::Hash },
            app_cores: cores("--app-cores", self.app_cores)?,
            storage_cores: cores("--storage-cores", self.storage_cores)?,
            rtt: RTT_DEFAULT,
            bandwidth_gbps: self.bandwidth_gbps,
            ..ClusterModel::default()
        };
        if let Some(profile) = self.profile()? {
            profile.apply(&mut cl);
        }
        self.apply_explicit(&mut cl)?;
        cl.validate()?;
        Ok(cl)
    }

    /// Applies every cost, RTT and stall flag given on the command line.
    fn apply_explicit(&self, cl: &mut ClusterModel) -> Result<(), ExperimentError> {
        let set = |slot: &mut u64, flag: &str, v: &Option<String>| -> Result<(), ExperimentError> {
            if let Some(v) = v {
                *slot = duration(flag, v)?.0;
            }
            Ok(())
        };
        let costs = &mut cl.costs;
        set(&mut costs.app_msg_ns, "--app-msg-cost", &self.app_msg_cost)?;
        set(&mut costs.app_invoke_ns, "--app-invoke-cost", &self.app_invoke_cost)?;
        set(&mut costs.storage_msg_ns, "--storage-msg-cost", &self.storage_msg_cost)?;
        set(
            &mut costs.storage_invoke_ns,
            "--storage-invoke-cost",
            &self.storage_invoke_cost,
        )?;
        set(&mut costs.storage_get_ns, "--storage-get-cost", &self.storage_get_cost)?;
        for (slot, flag, value) in [
            (&mut costs.app_byte_ns, "--app-byte-cost", self.app_byte_cost),
            (
                &mut costs.storage_byte_ns,
                "--storage-byte-cost",
                self.storage_byte_cost,
            ),
            (
                &mut costs.storage_compute_factor,
                "--storage-compute-factor",
                self.storage_compute_factor,
            ),
            (&mut cl.stall_rate_hz, "--stall-rate-hz", self.stall_rate_hz),
        ] {
            if let Some(v) = value {
                if !v.is_finite() {
                    return Err(ExperimentError::OutOfRange {
                        name: flag.into(),
                        range: "a finite number",
                        value: v.to_string(),
                    });
                }
                *slot = v;
            }
        }
        if let Some(r) = &self.rtt {
            cl.rtt = duration("--rtt", r)?;
        }
        if let Some(m) = &self.stall_mean {
            cl.stall_mean = duration("--stall-mean", m)?;
        }
        if let Some(cv) = self.stall_length_cv {
            cl.stall_length_cv = cv;
        }
        Ok(())
    }

    /// The workload, parsed and checked.
    pub fn workload(&self) -> Result<ferry_experiment::Workload, ExperimentError> {
        let w = parse_workload(&self.workload).map_err(|source| ExperimentError::Spec {
            flag: "--workload".into(),
            source,
        })?;
        w.validate()?;
        Ok(w)
    }

    fn slo(&self) -> Result<Slo, ExperimentError> {
        let latency = duration("--slo-p99", &self.slo_p99)?;
        if latency == Nanos::ZERO {
            return Err(ExperimentError::OutOfRange {
                name: "--slo-p99".into(),
                range: "(0, ∞)",
                value: self.slo_p99.clone(),
            });
        }
        Ok(Slo::p99(latency))
    }

    /// The SLO and the workload's per-function SLOs: with `--slo-slowdown K` each function's
    /// own, and the strictest of them as the policy's reference SLO.
    pub fn slos(
        &self,
        cluster: &ClusterModel,
        workload: &mut ferry_experiment::Workload,
    ) -> Result<Slo, ExperimentError> {
        let Some(k) = self.slo_slowdown else {
            return self.slo();
        };
        if !(k.is_finite() && k > 1.0 && k <= SLOWDOWN_MAX) {
            return Err(ExperimentError::OutOfRange {
                name: "--slo-slowdown".into(),
                range: "(1, 1000000]",
                value: k.to_string(),
            });
        }
        workload.set_slowdown_slo(cluster, k);
        let strictest = workload
            .functions
            .iter()
            .filter_map(|f| f.slo)
            .min()
            .unwrap_or(Nanos::ZERO);
        Ok(Slo::p99(strictest))
    }

    /// The arrival process.
    pub fn arrivals(&self) -> Result<Arrivals, ExperimentError> {
        match self.arrivals.as_str() {
            "poisson" => Ok(Arrivals::Poisson),
            "paced" => Ok(Arrivals::Paced),
            other => Err(ExperimentError::OutOfRange {
                name: "--arrivals".into(),
                range: "{poisson, paced}",
                value: other.to_string(),
            }),
        }
    }

    /// The seed of every run.
    pub fn seed(&self) -> u64 {
        self.seed
    }
}

/// Most X values `--x` takes (a sweep's step of 0.01 gives as many).
const X_LIST_MAX: usize = 101;

/// Parses `--x`: one X or a comma-separated list, each in [0, 1].
pub fn parse_x_list(text: &str) -> Result<Vec<f64>, ExperimentError> {
    let bad = || ExperimentError::OutOfRange {
        name: "--x".into(),
        range: "1 to 101 comma-separated numbers in [0, 1]",
        value: text.to_string(),
    };
    let xs = text
        .split(',')
        .map(|x| x.trim().parse::<f64>().ok().filter(|x| (0.0..=1.0).contains(x)))
        .collect::<Option<Vec<f64>>>()
        .ok_or_else(bad)?;
    if xs.is_empty() || xs.len() > X_LIST_MAX {
        return Err(bad());
    }
    Ok(xs)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn x_lists_are_numbers_in_the_unit_interval() {
        assert_eq!(parse_x_list("0,0.5, 1").unwrap(), vec![0.0, 0.5, 1.0]);
        assert_eq!(parse_x_list("0.25").unwrap(), vec![0.25]);
        for bad in ["", "1.5", "-0.1", "a", "0,,1", "NaN"] {
            assert!(parse_x_list(bad).is_err(), "{bad}");
        }
    }
}
