//! `ferry load`: put a built-in function's data set into a running node.

use std::time::Instant;

use bytes::Bytes;

use ferry_func::builtins::{aggregate, auth, traverse, ycsbt};

use crate::connect::ConnectArgs;
use crate::CmdResult;

/// Largest data set accepted by `ferry load` (objects).
const MAX_LOAD_OBJECTS: u64 = 100_000_000;

/// The social application's data set.
const SOCIAL: &str = "social";

/// Most social vertices one load generates (about 67 KiB each, held in memory at once).
const MAX_SOCIAL_VERTICES: u64 = 100_000;

/// Flags of `ferry load`.
#[derive(clap::Args)]
pub struct LoadArgs {
    #[command(flatten)]
    connect: ConnectArgs,
    /// Which data set: traverse, ycsbt, aggregate, auth or social (the social graph's four
    /// tables and one auth user per vertex).
    dataset: String,
    /// Objects to load (nodes, accounts, samples, users or social vertices). Default: 100000
    /// (auth: 1000, social: 2000; a social vertex is about 67 KiB).
    #[arg(long)]
    keys: Option<u64>,
    /// Bytes per value (not auth). Default: traverse 64, ycsbt 100, aggregate 16.
    #[arg(long)]
    value_size: Option<usize>,
    /// Seed of the data set's pseudo-random content.
    #[arg(long, default_value_t = 1)]
    seed: u64,
    /// scrypt cost (log2 N) of the auth data set.
    #[arg(long, default_value_t = auth::DEFAULT_LOG_N)]
    log_n: u8,
}

pub fn run(args: LoadArgs) -> CmdResult {
    let keys = args.keys.unwrap_or(match args.dataset.as_str() {
        auth::NAME => 1000,
        SOCIAL => 2000,
        _ => 100_000,
    });
    if keys == 0 || keys > MAX_LOAD_OBJECTS {
        return Err(format!("--keys must be 1..={MAX_LOAD_OBJECTS}").into());
    }
    if args.log_n == 0 || args.log_n > auth::MAX_LOG_N {
        return Err(format!("--log-n must be 1..={}", auth::MAX_LOG_N).into());
    }
    if args.dataset == SOCIAL {
        if keys > MAX_SOCIAL_VERTICES {
            return Err(format!("--keys must be at most {MAX_SOCIAL_VERTICES} for social").into());
        }
        let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build()?;
        return runtime.block_on(async move {
            let client = args.connect.connect(1).await?;
            let started = Instant::now();
            let written = ferry_bench::load::load_social(&client, keys, args.log_n, args.seed).await?;
            println!(
                "loaded {written} objects of {keys} social vertices in {:.2} s",
                started.elapsed().as_secs_f64()
            );
            Ok(())
        });
    }
    let (table, objects): (&'static str, Vec<(Bytes, Bytes)>) = match args.dataset.as_str() {
        traverse::NAME => (
            traverse::TABLE,
            traverse::dataset(keys, args.value_size.unwrap_or(64), args.seed).collect(),
        ),
        ycsbt::NAME => (
            ycsbt::TABLE,
            ycsbt::dataset(keys, args.value_size.unwrap_or(100), args.seed).collect(),
        ),
        aggregate::NAME => (
            aggregate::TABLE,
            aggregate::dataset(keys, args.value_size.unwrap_or(16), args.seed).collect(),
        ),
        auth::NAME => {
            let users: Result<Vec<_>, _> = auth::dataset(keys, args.log_n, args.seed).collect();
            (auth::TABLE, users?)
        }
        other => {
            return Err(format!("unknown data set {other:?}: use traverse, ycsbt, aggregate, auth or social").into())
        }
    };
    let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build()?;
    runtime.block_on(async move {
        let client = args.connect.connect(1).await?;
        let started = Instant::now();
        let written = ferry_bench::load::load_dataset(&client, table, objects).await?;
        println!(
            "loaded {written} objects into table {table:?} in {:.2} s",
            started.elapsed().as_secs_f64()
        );
        Ok(())
    })
}
