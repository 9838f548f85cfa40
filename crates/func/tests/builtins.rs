//! The built-ins against a minimal in-memory `Ctx`: their logic, argument checks and data
//! sets, independent of either real runtime.

use std::collections::HashMap;

use bytes::Bytes;
use ferry_func::builtins::{aggregate, auth, traverse, ycsbt};
use ferry_func::memory::{block_on, MemoryCtx as MapCtx};
use ferry_func::{FnError, Registry};

fn invoke(ctx: &mut MapCtx, name: &str, args: Bytes) -> Result<Bytes, FnError> {
    ctx.args = args;
    let function = Registry::with_builtins().get(name).unwrap();
    block_on(function(ctx))
}

fn u64_at(bytes: &[u8], index: usize) -> u64 {
    u64::from_le_bytes(bytes[index * 8..index * 8 + 8].try_into().unwrap())
}

#[test]
fn traverse_follows_pointers_depth_times() {
    let data: Vec<_> = traverse::dataset(100, 32, 7)
        .map(|(k, v)| (traverse::TABLE, k, v))
        .collect();
    let next: HashMap<u64, u64> = data.iter().map(|(_, k, v)| (u64_at(k, 0), u64_at(v, 0))).collect();
    let mut ctx = MapCtx::new(data);
    let args = traverse::TraverseArgs {
        start: 5,
        depth: 3,
        compute_ns: 100,
    };
    let result = invoke(&mut ctx, "traverse", args.encode()).unwrap();
    assert_eq!(u64_at(&result, 0), next[&next[&next[&5]]]);
    assert_eq!(u64_at(&result, 1), 3 * 32);
    // A start node outside the data set is a dangling pointer, reported as a failure.
    let missing = traverse::TraverseArgs {
        start: 1000,
        depth: 1,
        compute_ns: 0,
    };
    assert!(matches!(
        invoke(&mut ctx, "traverse", missing.encode()),
        Err(FnError::Failed(_))
    ));
}

#[test]
fn bad_arguments_are_typed_errors() {
    let mut ctx = MapCtx::new([]);
    for name in ["traverse", "ycsbt", "aggregate", "auth"] {
        let err = invoke(&mut ctx, name, Bytes::from_static(b"\x01")).unwrap_err();
        assert!(matches!(err, FnError::BadArgs(_)), "{name}: {err}");
    }
    let too_deep = traverse::TraverseArgs {
        start: 0,
        depth: traverse::MAX_DEPTH + 1,
        compute_ns: 0,
    };
    assert!(matches!(
        invoke(&mut ctx, "traverse", too_deep.encode()),
        Err(FnError::BadArgs(_))
    ));
    let too_slow = ycsbt::YcsbtArgs::Read {
        account: 0,
        compute_ns: u64::MAX,
    };
    assert!(matches!(
        invoke(&mut ctx, "ycsbt", too_slow.encode()),
        Err(FnError::BadArgs(_))
    ));
}

#[test]
fn ycsbt_transfers_conserve_the_total_and_refuse_overdrafts() {
    let data: Vec<_> = ycsbt::dataset(4, 16, 1).map(|(k, v)| (ycsbt::TABLE, k, v)).collect();
    let mut ctx = MapCtx::new(data);
    let transfer = |from, to, amount| {
        ycsbt::YcsbtArgs::Transfer {
            from,
            to,
            amount,
            compute_ns: 0,
        }
        .encode()
    };
    let result = invoke(&mut ctx, "ycsbt", transfer(0, 1, 10)).unwrap();
    assert_eq!(result[0], ycsbt::TRANSFER_APPLIED);
    assert_eq!(u64_at(&result[1..], 0), ycsbt::INITIAL_BALANCE - 10);
    assert_eq!(u64_at(&result[1..], 1), ycsbt::INITIAL_BALANCE + 10);
    let result = invoke(&mut ctx, "ycsbt", transfer(2, 3, ycsbt::INITIAL_BALANCE + 1)).unwrap();
    assert_eq!(result[0], ycsbt::TRANSFER_INSUFFICIENT);
    let read = invoke(
        &mut ctx,
        "ycsbt",
        ycsbt::YcsbtArgs::Read {
            account: 1,
            compute_ns: 0,
        }
        .encode(),
    )
    .unwrap();
    assert_eq!(u64_at(&read, 0), ycsbt::INITIAL_BALANCE + 10);
    let total: u64 = (0..4u64)
        .map(|a| {
            u64_at(
                &ctx.data[&(ycsbt::TABLE.to_string(), Bytes::copy_from_slice(&a.to_le_bytes()))],
                0,
            )
        })
        .sum();
    assert_eq!(total, 4 * ycsbt::INITIAL_BALANCE);
}

#[test]
fn aggregate_reduces_the_samples_it_finds() {
    let data: Vec<_> = aggregate::dataset(10, 8, 3)
        .map(|(k, v)| (aggregate::TABLE, k, v))
        .collect();
    let samples: Vec<u64> = data.iter().map(|(_, _, v)| u64_at(v, 0)).collect();
    let mut ctx = MapCtx::new(data);
    let args = aggregate::AggregateArgs {
        keys: vec![1, 2, 3, 99],
        compute_ns: 0,
    };
    let result = invoke(&mut ctx, "aggregate", args.encode()).unwrap();
    let wanted = &samples[1..4];
    assert_eq!(u64_at(&result, 0), wanted.iter().sum::<u64>());
    assert_eq!(u64_at(&result, 1), *wanted.iter().min().unwrap());
    assert_eq!(u64_at(&result, 2), *wanted.iter().max().unwrap());
    assert_eq!(u64_at(&result, 3), 3);
}

#[test]
fn auth_accepts_the_right_password_only() {
    let data: Vec<_> = auth::dataset(2, 4, 9)
        .map(|r| r.unwrap())
        .map(|(k, v)| (auth::TABLE, k, v))
        .collect();
    let mut ctx = MapCtx::new(data);
    let check = |user, password| auth::AuthArgs { user, password }.encode();
    assert_eq!(
        &invoke(&mut ctx, "auth", check(auth::username(1), auth::password(1))).unwrap()[..],
        &[auth::AUTH_OK]
    );
    assert_eq!(
        &invoke(&mut ctx, "auth", check(auth::username(1), auth::password(0))).unwrap()[..],
        &[auth::AUTH_DENIED]
    );
    assert_eq!(
        &invoke(
            &mut ctx,
            "auth",
            check(Bytes::from_static(b"nobody"), auth::password(0))
        )
        .unwrap()[..],
        &[auth::AUTH_DENIED]
    );
    // A stored hash demanding an enormous scrypt cost is refused before hashing.
    let greedy = "$scrypt$ln=24,r=8,p=1$c2FsdHNhbHRzYWx0$YWJjZGVmZ2hpamtsbW5vcHFyc3R1dnd4eXowMTIzNDU";
    ctx.data.insert(
        (auth::TABLE.to_string(), Bytes::from_static(b"greedy")),
        Bytes::from_static(greedy.as_bytes()),
    );
    let err = invoke(
        &mut ctx,
        "auth",
        check(Bytes::from_static(b"greedy"), auth::password(0)),
    )
    .unwrap_err();
    assert!(err.to_string().contains("above the limits"), "{err}");
}

#[test]
fn datasets_are_deterministic() {
    let a: Vec<_> = traverse::dataset(50, 64, 11).collect();
    let b: Vec<_> = traverse::dataset(50, 64, 11).collect();
    let c: Vec<_> = traverse::dataset(50, 64, 12).collect();
    assert_eq!(a, b);
    assert_ne!(a, c);
    assert!(a.iter().all(|(_, v)| v.len() == 64));
}

#[test]
fn calibrated_spin_scales_with_the_requested_time() {
    use ferry_func::work;
    let rate = work::calibrate(|work| {
        let start = std::time::Instant::now();
        work();
        start.elapsed().as_nanos() as u64
    });
    assert!(rate > 0);
    assert_eq!(work::iters_per_ms(), rate);
    // Generous margin: 20 ms of work must take well over 5 ms even on a fast machine, and
    // the spin is CPU work, so it cannot take less than what was asked by much.
    let start = std::time::Instant::now();
    work::spin_ns(20_000_000);
    assert!(
        start.elapsed() >= std::time::Duration::from_millis(5),
        "{:?}",
        start.elapsed()
    );
}
