//! `balance` driven by synthetic completions: each period of 5 ms completes what the rate
//! admits (200 requests at most), each request costing what `costs` says, its latency low
//! under a knee and far over the SLO above it; every 200 ms the driver reports the sides'
//! busy CPU as `busy` says.

use super::*;
use crate::placement::load_model::LoadModel;
use crate::policy::Costs;

const SLO_NS: f64 = 5e6;

const CORES: Capacity = Capacity {
    app_cores: 1.0,
    storage_cores: 1.0,
    links: None,
};

/// Medium work on real processes: local 19.6 µs app and 11.8 µs storage in 2 round
/// trips, remote 12.2 µs app and 23.2 µs storage.
fn medium(_f: FnId, p: Placement) -> (u64, u64) {
    match p {
        Placement::Local => (19_600, 11_800),
        Placement::Remote => (12_200, 23_200),
    }
}

/// What a drive needs to know of the machine.
struct Machine {
    /// Each request's (app, storage) CPU as its costs report it.
    costs: fn(FnId, Placement) -> (u64, u64),
    /// How many times the CPU each side is really busy is what its costs account for.
    hidden: (f64, f64),
    /// The rate above which windows are over the SLO.
    knee_ops: f64,
    /// Functions taking turns.
    functions: u32,
    /// Busy CPU of each side since the last report, ns.
    busy: std::cell::Cell<(f64, f64)>,
}

fn machine() -> Machine {
    Machine {
        costs: medium,
        hidden: (1.0, 1.0),
        knee_ops: 30_000.0,
        functions: 1,
        busy: Default::default(),
    }
}

/// Drives `p` from period `from` for `periods` of 5 ms on `m`.
fn drive(p: &mut Balance, m: &Machine, from: u64, periods: u64) {
    let period = Nanos::from_ms(5);
    let (mut app_busy, mut storage_busy) = m.busy.get();
    for k in from..from + periods {
        let now = Nanos(period.0 * k);
        let n = ((p.rate_ops() * period.as_secs_f64()) as u64).clamp(1, 200);
        let over = p.rate_ops() > m.knee_ops;
        for i in 0..n {
            let at = Nanos(now.0.saturating_sub(4_000_000) + i * 20_000);
            let fn_id = FnId((i as u32) % m.functions);
            let placement = p.place(at, fn_id);
            let (app, storage) = (m.costs)(fn_id, placement);
            app_busy += app as f64 * m.hidden.0;
            storage_busy += storage as f64 * m.hidden.1;
            let latency = if over && i % 10 == 0 {
                3 * SLO_NS as u64
            } else {
                300_000
            };
            p.on_completion(
                Nanos(at.0 + latency),
                &Completion {
                    fn_id,
                    placement,
                    latency_ns: latency,
                    costs: Costs {
                        app_cpu_ns: app,
                        storage_cpu_ns: storage,
                        bytes_moved: 0,
                        round_trips: if placement == Placement::Local { 2 } else { 1 },
                    },
                    pushed_back: false,
                },
            );
        }
        if k % 40 == 0 {
            p.on_busy(
                now,
                &Busy {
                    span_ns: 200_000_000,
                    app_ns: Some(std::mem::take(&mut app_busy) as u64),
                    storage_ns: Some(std::mem::take(&mut storage_busy) as u64),
                },
            );
        }
        p.tick(now);
    }
    m.busy.set((app_busy, storage_busy));
}

/// Drives `p` on `m` until it has placed from the model (or 2 s passed).
fn until_placed(p: &mut Balance, m: &Machine) {
    for k in 1..400 {
        drive(p, m, k, 1);
        if p.state().searches == Some(1) {
            return;
        }
    }
}

fn policy() -> Balance {
    Balance::new(BalanceConfig::new(SLO_NS, CORES, 1), Nanos::ZERO).unwrap()
}

/// The X the load model balances `costs` at, with each side's costs scaled by `hidden`.
fn balanced(costs: fn(FnId, Placement) -> (u64, u64), hidden: (f64, f64)) -> f64 {
    let mut profile = crate::placement::costs::CostProfile::default();
    for placement in [Placement::Local, Placement::Remote] {
        let (app, storage) = costs(FnId(0), placement);
        for _ in 0..100 {
            profile.learn(&Completion::of(FnId(0), placement, 1, app, storage));
        }
    }
    let cores = Capacity::cores(1.0 / hidden.0, 1.0 / hidden.1);
    LoadModel {
        staffing: false,
        ..LoadModel::new(&profile, cores)
    }
    .balanced_x(0.0, 1.0)
    .unwrap()
}

#[test]
fn profiles_then_places_where_the_sides_measured_cpu_balances() {
    let mut p = policy();
    assert_eq!(p.state().rpc_fraction, PROFILE_X);
    until_placed(&mut p, &machine());
    assert_eq!(p.state().searches, Some(1));
    let x = p.state().rpc_fraction;
    assert!((x - balanced(medium, (1.0, 1.0))).abs() < 0.02, "{x}");
}

#[test]
fn the_capture_ratio_moves_x_to_what_the_cpus_really_spend() {
    // The node really spends twice what its costs say (an I/O thread, hand-offs): the
    // balance moves toward the app side, which the costs alone do not see.
    let hidden = Machine {
        hidden: (1.0, 2.0),
        ..machine()
    };
    let mut with = policy();
    until_placed(&mut with, &hidden);
    let mut cfg = BalanceConfig::new(SLO_NS, CORES, 1);
    cfg.parts.capture = false;
    let mut without = Balance::new(cfg, Nanos::ZERO).unwrap();
    until_placed(&mut without, &hidden);
    let (x, x_without) = (with.state().rpc_fraction, without.state().rpc_fraction);
    let (ratio_app, ratio_storage) = with.capture_ratios();
    assert!(
        (ratio_storage / ratio_app - 2.0).abs() < 0.2,
        "{ratio_app} {ratio_storage}"
    );
    assert!((x - balanced(medium, (1.0, 2.0))).abs() < 0.05, "{x}");
    assert!(x < x_without - 0.1, "X {x} with the capture ratio, {x_without} without");
}

#[test]
fn x_moves_without_resetting_the_rate_loop() {
    // After profiling, the move to the predicted X keeps the R loop's capacity and rate
    // (fed forward by the model's ratio); without the feed-forward the loop starts over.
    let rate_after_move = |feed_forward: bool| {
        let mut cfg = BalanceConfig::new(SLO_NS, CORES, 1);
        cfg.parts.feed_forward = feed_forward;
        let mut p = Balance::new(cfg, Nanos::ZERO).unwrap();
        let m = machine();
        let mut before = 0.0;
        for k in 1..2_000 {
            before = p.rate_ops();
            drive(&mut p, &m, k, 1);
            if p.state().searches == Some(1) {
                break;
            }
        }
        (before, p.rate_ops(), p.rate.capacity_ops())
    };
    let (before, after, capacity) = rate_after_move(true);
    assert!(before > 10_000.0, "the loop found a rate first: {before}");
    assert!(after > 0.5 * before, "R {after} after the move, {before} before");
    assert!(capacity.is_some(), "the remembered capacity survives the move");
    let (_, after_reset, capacity_reset) = rate_after_move(false);
    assert!(capacity_reset.is_none() && after_reset <= crate::rate::RATE_INIT_OPS_DEFAULT);
}

#[test]
fn a_steady_workload_is_never_profiled_again() {
    // Costs that wander by ±20 % from period to period (real processes' costs move with
    // the load) never make a new profile, and X stays where it went.
    fn wandering(f: FnId, p: Placement) -> (u64, u64) {
        let (app, storage) = medium(f, p);
        let wobble = 1.0 + 0.2 * ((f.0 as f64 + app as f64).sin());
        ((app as f64 * wobble) as u64, (storage as f64 * (2.0 - wobble)) as u64)
    }
    let m = Machine {
        costs: wandering,
        ..machine()
    };
    let mut p = policy();
    drive(&mut p, &m, 1, 400);
    let x = p.state().rpc_fraction;
    drive(&mut p, &m, 401, 2_000);
    assert_eq!(p.state().searches, Some(1));
    assert!(
        (p.state().rpc_fraction - x).abs() < 0.1,
        "X moved from {x} to {}",
        p.state().rpc_fraction
    );
}

#[test]
fn a_new_function_is_placed_at_the_same_x_without_a_new_profile() {
    let mut p = policy();
    drive(&mut p, &machine(), 1, 400);
    let x = p.state().rpc_fraction;
    // A second function appears: placed half each way until it has its samples, then in
    // the split the same X names; nothing is profiled again.
    let mix = Machine {
        functions: 2,
        ..machine()
    };
    drive(&mut p, &mix, 401, 400);
    assert_eq!(p.state().searches, Some(1));
    assert!(p.placing.costs().ready(1), "the new function has its samples");
    assert!(!p.placing.mix_changed(), "and is placed");
    assert!(
        (p.placing.x() - x).abs() < 0.15,
        "X {} after, {x} before",
        p.placing.x()
    );
}

#[test]
fn where_the_cpus_disagree_x_steps_toward_the_idler_side() {
    // The app side really spends three times its costs (a load generator, the client
    // runtime): after the prediction the steps keep X where the CPUs balance.
    let app_heavy = Machine {
        hidden: (3.0, 1.0),
        ..machine()
    };
    let mut p = policy();
    drive(&mut p, &app_heavy, 1, 1_400);
    let x = p.state().rpc_fraction;
    assert!(x > balanced(medium, (1.0, 1.0)) + 0.1, "X {x}");
}

#[test]
fn bad_config_is_rejected() {
    let mut cfg = BalanceConfig::new(200_000.0, CORES, 1);
    cfg.capacity.app_cores = 0.0;
    assert!(Balance::new(cfg, Nanos::ZERO).is_err());
    assert!(Parts::without(&["nonsense".to_string()]).is_err());
    assert!(!Parts::without(&["capture".to_string()]).unwrap().capture);
    assert!(Parts::without(&["window".to_string()]).unwrap().capture);
}
