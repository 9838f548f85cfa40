//! `ferry load`: put a built-in function's data set into a running node. The data sets
//! and the loading are `ferry-datasets`'; this is the flags.

use std::time::Instant;

use ferry_datasets::catalog::MAX_LOAD_OBJECTS;
use ferry_datasets::{Dataset, LoadSpec};
use ferry_func::builtins::auth;

use crate::connect::ConnectArgs;
use crate::CmdResult;

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
    let dataset = Dataset::parse(&args.dataset)?;
    let keys = args.keys.unwrap_or(dataset.default_objects());
    if keys == 0 || keys > MAX_LOAD_OBJECTS {
        return Err(format!("--keys must be 1..={MAX_LOAD_OBJECTS}").into());
    }
    if keys > dataset.max_objects() {
        return Err(format!(
            "--keys must be at most {} for {}",
            dataset.max_objects(),
            dataset.name()
        )
        .into());
    }
    if args.log_n == 0 || args.log_n > auth::MAX_LOG_N {
        return Err(format!("--log-n must be 1..={}", auth::MAX_LOG_N).into());
    }
    let spec = LoadSpec {
        dataset,
        objects: keys,
        value_bytes: args.value_size,
        seed: args.seed,
        log_n: args.log_n,
    };
    let tables = spec.build()?;
    let table = tables.first().map_or("", |table| table.name);
    let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build()?;
    runtime.block_on(async move {
        let client = args.connect.connect(1).await?;
        let started = Instant::now();
        let written = ferry_datasets::load_tables(&client, tables).await?;
        let seconds = started.elapsed().as_secs_f64();
        match dataset {
            Dataset::Social => println!("loaded {written} objects of {keys} social vertices in {seconds:.2} s"),
            _ => println!("loaded {written} objects into table {table:?} in {seconds:.2} s"),
        }
        Ok(())
    })
}
