//! The scenario spaces `ferry sim-suite` draws from, and the drawing itself.
//!
//! A scenario is drawn from its own ChaCha stream (suite seed, scenario index), so scenario
//! `i` of a seed is the same whatever N is, and `ferry sim` can reproduce any one of them
//! from the flags the suite prints ([`SuiteScenario::flags`]).
//!
//! The **default** space (one app node, one storage node, the paper-scale cost model):
//! - app and storage cores: uniform integers in [1, 16], each;
//! - RTT: log-uniform in [2, 50] µs;
//! - one traversal function: depth uniform in [1, 8]; compute per access 0 with probability
//!   1/8, otherwise log-uniform in [50 ns, 50 µs]; object size log-uniform in [64 B, 4 KiB];
//! - SLO p99: log-uniform in [3, 20] × the *unloaded p99* of the better side (the p99 of the
//!   faster placement at 2 % load, measured in the simulator: it includes the node stalls,
//!   which a mean no-load latency misses, so every drawn SLO is feasible);
//! - node stalls: the model's default hiccups (5000/s × 16 µs).
//!
//! The **1+1** space: one app core and one storage core with the costs calibrated against
//! this repository's real loopback 1 + 1 system (docs/BENCHMARKS.md, "Simulator against the
//! real 1 + 1 system"): 73 µs RTT, 5 µs of node CPU per request message, 2 µs per invoke,
//! 0.5 µs per lookup, 4 µs of app CPU per message, 1 µs per local start, no storage
//! slowdown of compute; VM-like node stalls (5/s × 2 ms); the same function and SLO draws.
//!
//! The **wide** space: the default space with larger objects and tighter SLOs, where
//! shipping data costs more and the tail leaves less room: objects log-uniform in
//! [`WIDE_OBJECT_BYTES_RANGE`] (64 B–64 KiB) and the SLO log-uniform in
//! [`WIDE_SLO_FACTOR_RANGE`] (2–20) × the unloaded p99; everything else as the default
//! space draws it.
//!
//! **A profile** (`ferry sim-suite --profile FILE`, [`draw_with`]) makes every drawn
//! scenario that machine: its CPU costs, RTT and stalls replace the space's (with `1+1`,
//! the built-in calibration above; with the others, the paper-scale costs and the drawn
//! RTT, which is still drawn so that every other draw stays the same). The SLO is then drawn
//! against the profiled machine's unloaded p99, and [`SuiteScenario::flags`] prints the
//! profile's values as explicit flags, so each scenario reproduces without the file.
//!
//! The **mixed** space: a cluster of [`MIX_APP_NODES_RANGE`] app nodes and
//! [`MIX_STORAGE_NODES_RANGE`] storage nodes (uniform integers), each with the default
//! space's cores, the default space's network, data hashed evenly over the storage nodes;
//! a mix of [`MIX_TASKS_RANGE`] functions, each drawn as the default space draws its one
//! but with objects log-uniform in [`MIX_OBJECT_BYTES_RANGE`] (up to Pyxis' 48 KB
//! objects, so that shipping data can saturate a storage node's link), in weights
//! log-uniform in [`MIX_WEIGHT_RANGE`] (normalised); the same SLO draw. Its bound is the
//! turning-point bound (`ferry sim-sweep --turning-point`), the per-function optimum.

use ferry_control::{Nanos, Placement};
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;

use crate::error::ExperimentError;
use crate::model::{ClusterModel, CostModel, FunctionSpec, Workload};
use crate::scenario::Slo;
use crate::sweep::{self, SweepConfig};
use ferry_experiment::profile::Profile;
use ferry_experiment::tasks::log_uniform;

/// Fewest and most cores per node in the default space.
pub const CORES_RANGE: (u32, u32) = (1, 16);
/// Shortest and longest RTT in the default space, µs.
pub const RTT_US_RANGE: (f64, f64) = (2.0, 50.0);
/// Shallowest and deepest traversal.
pub const DEPTH_RANGE: (u32, u32) = (1, 8);
/// Smallest non-zero and largest compute per access, ns.
pub const COMPUTE_NS_RANGE: (f64, f64) = (50.0, 50_000.0);
/// Chance that a function does no compute at all (pure data access).
pub const COMPUTE_ZERO_SHARE: f64 = 0.125;
/// Smallest and largest object, bytes.
pub const OBJECT_BYTES_RANGE: (f64, f64) = (64.0, 4096.0);
/// Smallest and largest SLO, as a multiple of the better side's unloaded p99.
pub const SLO_FACTOR_RANGE: (f64, f64) = (3.0, 20.0);

/// Smallest and largest object of the wide space, bytes: up to 64 KiB, Pyxis' aggr-V
/// vector, where a local read ships enough bytes to cost CPU and link time.
pub const WIDE_OBJECT_BYTES_RANGE: (f64, f64) = (64.0, 65_536.0);
/// Smallest and largest SLO of the wide space, as a multiple of the better side's unloaded
/// p99: down to 2×, where the tail has as much room as the unloaded latency itself.
pub const WIDE_SLO_FACTOR_RANGE: (f64, f64) = (2.0, 20.0);

/// Fewest and most functions of a mixed-space scenario.
pub const MIX_TASKS_RANGE: (u32, u32) = (2, 16);
/// Fewest and most app nodes of a mixed-space scenario.
pub const MIX_APP_NODES_RANGE: (u32, u32) = (1, 4);
/// Fewest and most storage nodes of a mixed-space scenario.
pub const MIX_STORAGE_NODES_RANGE: (u32, u32) = (1, 4);
/// Smallest and largest object of a mixed-space function, bytes.
pub const MIX_OBJECT_BYTES_RANGE: (f64, f64) = (64.0, 65_536.0);
/// Smallest and largest relative weight of a function in a mix.
pub const MIX_WEIGHT_RANGE: (f64, f64) = (1.0, 4.0);
/// Load at which the unloaded p99 is measured: low enough that queueing adds ~nothing.
const UNLOADED_LOAD: f64 = 0.02;
/// Completions the unloaded p99 is taken over (40 beyond the p99).
const UNLOADED_SAMPLES: f64 = 4_000.0;

/// Which space to draw from.
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Space {
    /// One app node and one storage node of 1–16 cores each, paper-scale costs.
    Default,
    /// One app core and one storage core with this machine's measured costs.
    #[serde(rename = "1+1")]
    OnePlusOne,
    /// The default space's nodes with a mix of 2–16 functions.
    Mixed,
    /// The default space with objects up to 64 KiB and SLOs down to 2× unloaded.
    Wide,
}

impl Space {
    /// Parses `default`, `1+1`, `mixed` or `wide`.
    pub fn parse(s: &str) -> Result<Space, ExperimentError> {
        match s {
            "default" => Ok(Space::Default),
            "1+1" => Ok(Space::OnePlusOne),
            "mixed" => Ok(Space::Mixed),
            "wide" => Ok(Space::Wide),
            other => Err(ExperimentError::OutOfRange {
                name: "--space".into(),
                range: "{default, 1+1, mixed, wide}",
                value: other.to_string(),
            }),
        }
    }

    /// The name `--space` takes.
    pub fn name(self) -> &'static str {
        match self {
            Space::Default => "default",
            Space::OnePlusOne => "1+1",
            Space::Mixed => "mixed",
            Space::Wide => "wide",
        }
    }

    /// Default policy-run length: long enough that the steady window (the last quarter)
    /// starts after the 1 s convergence target, and on 1 + 1 (10⁴ requests/s, VM stalls of
    /// 2 ms) that it holds ~10 stalls and ~10⁴ completions.
    pub fn duration_default(self) -> Nanos {
        match self {
            Space::Default | Space::Mixed | Space::Wide => Nanos::from_secs(2),
            Space::OnePlusOne => Nanos::from_secs(8),
        }
    }

    fn cluster(self, rng: &mut ChaCha8Rng) -> ClusterModel {
        match self {
            Space::Default | Space::Mixed | Space::Wide => {
                let mut cl = ClusterModel {
                    app_cores: rng.gen_range(CORES_RANGE.0..=CORES_RANGE.1),
                    storage_cores: rng.gen_range(CORES_RANGE.0..=CORES_RANGE.1),
                    rtt: Nanos((log_uniform(rng, RTT_US_RANGE) * 10.0).round() as u64 * 100),
                    ..ClusterModel::default()
                };
                if self == Space::Mixed {
                    cl.app_nodes = rng.gen_range(MIX_APP_NODES_RANGE.0..=MIX_APP_NODES_RANGE.1);
                    cl.storage_nodes = rng.gen_range(MIX_STORAGE_NODES_RANGE.0..=MIX_STORAGE_NODES_RANGE.1);
                }
                cl
            }
            Space::OnePlusOne => one_plus_one_cluster(),
        }
    }
}

/// The 1 + 1 loopback machine as the simulator models it (see the module docs).
pub fn one_plus_one_cluster() -> ClusterModel {
    ClusterModel {
        app_cores: 1,
        storage_cores: 1,
        rtt: Nanos::from_us(73),
        costs: CostModel {
            app_msg_ns: 4_000,
            app_invoke_ns: 1_000,
            storage_msg_ns: 5_000,
            storage_invoke_ns: 2_000,
            storage_get_ns: 500,
            storage_compute_factor: 1.0,
            ..CostModel::default()
        },
        stall_rate_hz: 5.0,
        stall_mean: Nanos::from_ms(2),
        ..ClusterModel::default()
    }
}

/// One drawn scenario: everything but the policy and the run length.
#[derive(Clone, Debug)]
pub struct SuiteScenario {
    /// Position in the suite.
    pub index: usize,
    /// Seed of the simulator's random streams for this scenario's runs.
    pub seed: u64,
    /// Nodes, network, costs.
    pub cluster: ClusterModel,
    /// The workload spec (`traverse:...`), as `--workload` takes it.
    pub workload_spec: String,
    /// The parsed workload.
    pub workload: Workload,
    /// The objective.
    pub slo: Slo,
    /// The unloaded p99 of the better side the SLO was drawn against, ns.
    pub unloaded_p99_ns: f64,
}

/// Draws scenario `index` of the suite seeded `seed` from `space`.
pub fn draw(space: Space, seed: u64, index: usize) -> Result<SuiteScenario, ExperimentError> {
    draw_with(space, None, seed, index)
}

/// Draws scenario `index` of the suite seeded `seed` from `space`, on the machine of
/// `profile` if one is given (see the module docs).
pub fn draw_with(
    space: Space,
    profile: Option<&Profile>,
    seed: u64,
    index: usize,
) -> Result<SuiteScenario, ExperimentError> {
    let mut rng = ChaCha8Rng::seed_from_u64(seed);
    rng.set_stream(index as u64);
    let mut cluster = space.cluster(&mut rng);
    if let Some(p) = profile {
        p.apply(&mut cluster);
        cluster.validate()?;
    }
    let (workload_spec, workload) = if space == Space::Mixed {
        let n = rng.gen_range(MIX_TASKS_RANGE.0..=MIX_TASKS_RANGE.1);
        let elements: Vec<String> = (0..n)
            .map(|_| {
                let (spec, _) = draw_function(&mut rng, MIX_OBJECT_BYTES_RANGE);
                format!("{spec}@{:.3}", log_uniform(&mut rng, MIX_WEIGHT_RANGE))
            })
            .collect();
        let spec = elements.join("+");
        let workload = crate::spec::parse_workload(&spec).map_err(|source| ExperimentError::Spec {
            flag: "--space mixed".into(),
            source,
        })?;
        (spec, workload)
    } else {
        let objects = if space == Space::Wide {
            WIDE_OBJECT_BYTES_RANGE
        } else {
            OBJECT_BYTES_RANGE
        };
        let (spec, f) = draw_function(&mut rng, objects);
        let workload = Workload::single(&spec, f);
        (spec, workload)
    };
    let slo_factors = if space == Space::Wide {
        WIDE_SLO_FACTOR_RANGE
    } else {
        SLO_FACTOR_RANGE
    };
    let slo_factor = log_uniform(&mut rng, slo_factors);
    let sim_seed = rng.gen::<u64>() >> 16;
    let unloaded_p99_ns = [Placement::Local, Placement::Remote]
        .into_iter()
        .map(|p| unloaded_p99_ns(&cluster, &workload, p, sim_seed))
        .collect::<Result<Vec<f64>, ExperimentError>>()?
        .into_iter()
        .fold(f64::INFINITY, f64::min);
    let slo_us = (slo_factor * unloaded_p99_ns / 1e3).ceil();
    Ok(SuiteScenario {
        index,
        seed: sim_seed,
        cluster,
        workload_spec,
        workload,
        slo: Slo::p99(Nanos::from_us(slo_us as u64)),
        unloaded_p99_ns,
    })
}

/// One traversal function as the default space draws it (objects in `object_bytes`), and
/// its spec.
fn draw_function(rng: &mut ChaCha8Rng, object_bytes: (f64, f64)) -> (String, FunctionSpec) {
    let depth = rng.gen_range(DEPTH_RANGE.0..=DEPTH_RANGE.1);
    let compute_ns = if rng.gen_bool(COMPUTE_ZERO_SHARE) {
        0
    } else {
        (log_uniform(rng, COMPUTE_NS_RANGE) / 10.0).round() as u64 * 10
    };
    let size = log_uniform(rng, object_bytes).round() as u64;
    let spec = format!("traverse:depth={depth},compute={compute_ns}ns,size={size}");
    let mut f = FunctionSpec::traverse("traverse", depth, Nanos(compute_ns));
    f.object_bytes = size;
    (spec, f)
}

/// The p99 of one placement at [`UNLOADED_LOAD`] of its capacity.
fn unloaded_p99_ns(cl: &ClusterModel, w: &Workload, p: Placement, seed: u64) -> Result<f64, ExperimentError> {
    let x = if p == Placement::Remote { 1.0 } else { 0.0 };
    let rate = UNLOADED_LOAD * w.capacity_ops(cl, 0, x);
    let mut cfg = SweepConfig::new(cl.clone(), w.clone(), Slo::p99(Nanos::from_secs(1)), seed);
    cfg.measure = Nanos::from_secs_f64(UNLOADED_SAMPLES / rate);
    cfg.warmup = Nanos::ZERO;
    let m = sweep::measure(&cfg, x, rate)?;
    Ok(m.p99_us.map_or(f64::INFINITY, |v| v * 1e3))
}

impl SuiteScenario {
    /// The `ferry sim` flags that reproduce this scenario (add `--policy` and `--duration`).
    pub fn flags(&self) -> String {
        let cl = &self.cluster;
        let c = &cl.costs;
        let mut out = if cl.is_pair() {
            String::new()
        } else {
            format!("--app-nodes {} --storage-nodes {} ", cl.app_nodes, cl.storage_nodes)
        };
        out.push_str(&format!(
            "--app-cores {} --storage-cores {} --rtt {} --workload {} --slo-p99 {} --seed {}",
            cl.app_cores, cl.storage_cores, cl.rtt, self.workload_spec, self.slo.latency, self.seed
        ));
        let d = ClusterModel::default();
        if *c != d.costs {
            out.push_str(&format!(
                " --app-msg-cost {} --app-invoke-cost {} --storage-msg-cost {} --storage-invoke-cost {} \
                 --storage-get-cost {} --storage-compute-factor {}",
                Nanos(c.app_msg_ns),
                Nanos(c.app_invoke_ns),
                Nanos(c.storage_msg_ns),
                Nanos(c.storage_invoke_ns),
                Nanos(c.storage_get_ns),
                c.storage_compute_factor
            ));
        }
        if c.app_byte_ns != d.costs.app_byte_ns || c.storage_byte_ns != d.costs.storage_byte_ns {
            out.push_str(&format!(
                " --app-byte-cost {} --storage-byte-cost {}",
                c.app_byte_ns, c.storage_byte_ns
            ));
        }
        if cl.stall_rate_hz != d.stall_rate_hz || cl.stall_mean != d.stall_mean {
            out.push_str(&format!(
                " --stall-rate-hz {} --stall-mean {}",
                cl.stall_rate_hz, cl.stall_mean
            ));
        }
        if cl.stall_length_cv != d.stall_length_cv {
            out.push_str(&format!(" --stall-length-cv {}", cl.stall_length_cv));
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn draws_stay_in_the_documented_space_and_repeat() {
        for i in 0..12 {
            let s = draw(Space::Default, 7, i).unwrap();
            let cl = &s.cluster;
            assert!((1..=16).contains(&cl.app_cores) && (1..=16).contains(&cl.storage_cores));
            assert!(
                cl.rtt >= Nanos::from_us(2) && cl.rtt <= Nanos::from_us(50),
                "{}",
                cl.rtt
            );
            let f = &s.workload.functions[0];
            assert!((1..=8).contains(&f.accesses));
            assert!(f.compute <= Nanos::from_us(50));
            assert!((64..=4096).contains(&f.object_bytes));
            let factor = s.slo.latency.0 as f64 / s.unloaded_p99_ns;
            assert!((2.99..=20.1).contains(&factor), "SLO factor {factor}");
            // The same (seed, index) gives the same scenario, whatever else was drawn.
            assert_eq!(draw(Space::Default, 7, i).unwrap().flags(), s.flags());
        }
        assert_ne!(
            draw(Space::Default, 7, 0).unwrap().flags(),
            draw(Space::Default, 8, 0).unwrap().flags()
        );
    }

    #[test]
    fn one_plus_one_has_one_core_each_and_the_calibrated_costs() {
        let s = draw(Space::OnePlusOne, 3, 0).unwrap();
        assert_eq!((s.cluster.app_cores, s.cluster.storage_cores), (1, 1));
        assert!(s.flags().contains("--storage-msg-cost 5us"), "{}", s.flags());
        assert!(s.flags().contains("--stall-rate-hz 5"), "{}", s.flags());
        assert!(Space::parse("2+2").is_err());
    }

    #[test]
    fn wide_draws_stay_in_their_space_and_reach_beyond_the_default_one() {
        let (mut big, mut tight) = (0, 0);
        for i in 0..16 {
            let s = draw(Space::Wide, 9, i).unwrap();
            let cl = &s.cluster;
            assert!((1..=16).contains(&cl.app_cores) && (1..=16).contains(&cl.storage_cores));
            let f = &s.workload.functions[0];
            assert!((1..=8).contains(&f.accesses));
            assert!((64..=65_536).contains(&f.object_bytes), "{}", f.object_bytes);
            let factor = s.slo.latency.0 as f64 / s.unloaded_p99_ns;
            // The SLO is rounded up to a whole microsecond.
            assert!((1.99..=20.1).contains(&factor), "SLO factor {factor}");
            big += usize::from(f.object_bytes > 4_096);
            tight += usize::from(factor < 3.0);
            assert_eq!(draw(Space::Wide, 9, i).unwrap().flags(), s.flags());
        }
        // Log-uniform draws: ~1/3 of objects above 4 KiB, ~1/5 of SLOs under 3×.
        assert!(big >= 2 && tight >= 1, "{big} large objects, {tight} tight SLOs");
        assert_eq!(Space::parse("wide").unwrap().name(), "wide");
    }

    #[test]
    fn a_profile_replaces_the_spaces_costs_and_its_flags_say_so() {
        let profile = Profile {
            format: ferry_experiment::profile::PROFILE_FORMAT.into(),
            version: ferry_experiment::profile::PROFILE_VERSION,
            measured_on: "test".into(),
            measured_at: "now".into(),
            rtt_ns: 41_000,
            app_msg_ns: 3_000,
            app_invoke_ns: 900,
            app_byte_ns: 0.125,
            storage_msg_ns: 2_500,
            storage_invoke_ns: 1_200,
            storage_get_ns: 300,
            storage_byte_ns: 0.0625,
            storage_compute_factor: 1.0,
            stall_rate_hz: 2.5,
            stall_mean_ns: 1_500_000,
            stall_length_cv: 0.2,
            notes: vec![],
        };
        let plain = draw(Space::OnePlusOne, 3, 0).unwrap();
        let s = draw_with(Space::OnePlusOne, Some(&profile), 3, 0).unwrap();
        assert_eq!((s.cluster.app_cores, s.cluster.storage_cores), (1, 1));
        assert_eq!(s.workload_spec, plain.workload_spec, "the other draws stay");
        let flags = s.flags();
        for needle in [
            "--rtt 41us",
            "--storage-msg-cost 2.5us",
            "--app-byte-cost 0.125 --storage-byte-cost 0.0625",
            "--stall-rate-hz 2.5 --stall-mean 1.5ms",
            "--stall-length-cv 0.2",
        ] {
            assert!(flags.contains(needle), "{needle} in {flags}");
        }
        // On the default space the profile's RTT replaces the drawn one.
        let d = draw_with(Space::Default, Some(&profile), 3, 1).unwrap();
        assert_eq!(d.cluster.rtt, Nanos::from_us(41));
        assert_eq!(
            d.cluster.app_cores,
            draw(Space::Default, 3, 1).unwrap().cluster.app_cores
        );
    }

    #[test]
    fn a_mixed_scenario_holds_two_to_sixteen_functions_and_reproduces_from_its_flags() {
        for i in 0..20 {
            let s = draw(Space::Mixed, 5, i).unwrap();
            let n = s.workload.functions.len() as u32;
            assert!((MIX_TASKS_RANGE.0..=MIX_TASKS_RANGE.1).contains(&n), "{n}");
            let cl = &s.cluster;
            assert!((1..=4).contains(&cl.app_nodes) && (1..=4).contains(&cl.storage_nodes));
            if !cl.is_pair() {
                assert!(s.flags().starts_with(&format!("--app-nodes {} ", cl.app_nodes)));
            }
            assert!(s
                .workload
                .functions
                .iter()
                .all(|f| (64..=65_536).contains(&f.object_bytes)));
            let again = crate::spec::parse_workload(&s.workload_spec).unwrap();
            assert_eq!(again.functions, s.workload.functions);
            assert!(s.flags().contains(&s.workload_spec));
        }
        assert_eq!(Space::parse("mixed").unwrap().name(), "mixed");
    }
}
