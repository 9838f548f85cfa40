//! What the Lua VM costs, in process (no node, no network: the function over an
//! in-memory `Ctx`), on this machine:
//!
//! - the native `traverse` against the Lua `walk` of `examples/lua/traverse.lua` on the
//!   same data set, per invocation and per access;
//! - how long the instruction budget and the memory cap take to stop hostile functions.
//!
//! `cargo run --release -p ferry-lua --example vm_cost`

use std::time::{Duration, Instant};

use bytes::Bytes;
use ferry_func::builtins::traverse::{self, TraverseArgs};
use ferry_func::memory::{block_on, MemoryCtx};
use ferry_func::Registry;
use ferry_lua::catalog::{self, LoadArgs};
use ferry_lua::FcallArgs;

const NODES: u64 = 10_000;
const DEPTH: u32 = 10;
const INVOCATIONS: u64 = 20_000;
const RUNS: usize = 5;

const HOSTILE: &str = include_str!("../../../examples/lua/hostile.lua");

fn load(registry: &Registry, ctx: &mut MemoryCtx, code: &str) {
    ctx.args = LoadArgs {
        replace: false,
        code: Bytes::copy_from_slice(code.as_bytes()),
    }
    .encode();
    block_on(registry.get(catalog::LOAD).expect("lua.load")(ctx)).expect("library loads");
}

fn fcall_args(function: &str, table: &str, keys: Vec<Bytes>, args: Vec<Bytes>) -> FcallArgs {
    FcallArgs {
        function: function.into(),
        table: table.into(),
        keys,
        args,
        read_only: false,
    }
}

/// Median over `RUNS` of the time per invocation of `name` with arguments from `args`.
fn time_per_call(registry: &Registry, ctx: &mut MemoryCtx, name: &str, args: impl Fn(u64) -> Bytes) -> Duration {
    let function = registry.get(name).expect("registered");
    let mut runs: Vec<Duration> = (0..RUNS)
        .map(|_| {
            let started = Instant::now();
            for i in 0..INVOCATIONS {
                ctx.args = args(i);
                block_on(function(ctx)).expect("invocation succeeds");
            }
            started.elapsed() / INVOCATIONS as u32
        })
        .collect();
    runs.sort();
    runs[RUNS / 2]
}

fn main() {
    let registry = ferry_lua::registry();
    let mut ctx = MemoryCtx::new(traverse::dataset(NODES, 100, 1).map(|(k, v)| (traverse::TABLE, k, v)));
    load(&registry, &mut ctx, include_str!("../../../examples/lua/traverse.lua"));
    let start = |i: u64| (i * 7919) % NODES;
    let mut native = Vec::new();
    let mut lua = Vec::new();
    for depth in [1, DEPTH] {
        native.push(time_per_call(&registry, &mut ctx, traverse::NAME, |i| {
            TraverseArgs {
                start: start(i),
                depth,
                compute_ns: 0,
            }
            .encode()
        }));
        let walk = fcall_args("walk", traverse::TABLE, vec![], vec![]);
        lua.push(time_per_call(&registry, &mut ctx, &walk.invocation_name(), |i| {
            fcall_args(
                "walk",
                traverse::TABLE,
                vec![traverse::key(start(i))],
                vec![Bytes::from(depth.to_string())],
            )
            .encode()
            .expect("encodes")
        }));
    }
    // Cost = fixed + depth × per access: the slope between depth 1 and DEPTH.
    let split = |times: &[Duration]| {
        let per_access = (times[1].as_nanos() as f64 - times[0].as_nanos() as f64) / f64::from(DEPTH - 1);
        (times[0].as_nanos() as f64 - per_access, per_access)
    };
    let (native_fixed, native_access) = split(&native);
    let (lua_fixed, lua_access) = split(&lua);
    println!(
        "traverse over {NODES} nodes, median of {RUNS} runs of {INVOCATIONS} invocations at depths 1 and {DEPTH}:"
    );
    println!("  native Rust: {native_fixed:>7.0} ns per invocation + {native_access:>5.0} ns per access");
    println!("  Lua walk:    {lua_fixed:>7.0} ns per invocation + {lua_access:>5.0} ns per access");
    println!(
        "  the VM's price: {:.0} ns per invocation + {:.0} ns per access",
        lua_fixed - native_fixed,
        lua_access - native_access
    );

    load(&registry, &mut ctx, HOSTILE);
    for function in ["spin", "sneaky", "hog"] {
        let call = fcall_args(function, "db0", vec![], vec![]);
        ctx.args = call.encode().expect("encodes");
        let started = Instant::now();
        let result = block_on(registry.get(&call.invocation_name()).expect("family")(&mut ctx));
        println!(
            "{function}: stopped after {:?}: {}",
            started.elapsed(),
            result.unwrap_err()
        );
    }
}
