//! The clients that invoke [`crate::program::NAME`]: their programs, where each
//! invocation goes (remote, local, pushable), and what each one saw, recorded.

use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Instant;

use rand::Rng;
use rand_chacha::ChaCha8Rng;

use ferry_client::{Client, ClientConfig, ClientError};

use crate::program::{self, Program, Step};
use crate::record::{Finished, Record, Seen, Via};
use crate::{typed, ChaosConfig, ChaosError, Shared, MAX_STALLS_PER_RUN, STALL_MS};

/// Where a client sends an invocation.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Route {
    /// Run on the node.
    Remote,
    /// Run here, on the client.
    Local,
    /// Run on the node, which may hand it back to run here.
    Pushable,
}

/// A function client's invocations until the deadline.
pub(crate) async fn client_loop(
    client_id: u64,
    config: ClientConfig,
    mut rng: ChaCha8Rng,
    chaos: ChaosConfig,
    shared: Arc<Shared>,
) -> Result<Vec<Record>, ChaosError> {
    let mut records = Vec::new();
    let mut client: Option<Client> = None;
    let mut seq = 0u64;
    while Instant::now() < shared.deadline {
        let connected = match &client {
            Some(c) => c.clone(),
            None => match Client::connect(config.clone()).await {
                Ok(c) => {
                    client = Some(c.clone());
                    c
                }
                // The proxy may cut the hello itself: try again.
                Err(_) => continue,
            },
        };
        let route = random_route(&mut rng);
        let tag = program::next_tag(client_id, &mut seq);
        let program = random_program(&mut rng, tag, route, &chaos, &shared);
        records.push(invoke(client_id, &connected, &program, route, &shared).await?);
    }
    Ok(records)
}

/// Where an invocation goes: remote, local or pushable, equally often.
pub(crate) fn random_route(rng: &mut impl Rng) -> Route {
    match rng.gen_range(0..3) {
        0 => Route::Remote,
        1 => Route::Local,
        _ => Route::Pushable,
    }
}

/// A random program of 1 to 4 distinct hot keys, with compute and, rarely, a stall.
pub(crate) fn random_program(
    rng: &mut ChaCha8Rng,
    tag: u64,
    route: Route,
    chaos: &ChaosConfig,
    shared: &Shared,
) -> Program {
    let mut keys: Vec<u8> = (0..chaos.keys).collect();
    let touched = rng.gen_range(1..=4);
    let mut steps = Vec::new();
    for _ in 0..touched {
        let k = keys.swap_remove(rng.gen_range(0..keys.len()));
        steps.push(match rng.gen_range(0..10) {
            0..=3 => Step::Read(k),
            4..=5 if typed::kind(k) == typed::Kind::Str => Step::Write(k),
            _ => Step::Rmw(k),
        });
        if rng.gen_bool(0.2) {
            steps.push(Step::Compute(rng.gen_range(10..=200)));
        }
    }
    if route == Route::Remote
        && rng.gen_bool(chaos.stall_probability)
        && shared.stalls.fetch_add(1, Ordering::Relaxed) < MAX_STALLS_PER_RUN
    {
        let at = rng.gen_range(0..=steps.len());
        steps.insert(at, Step::Stall(STALL_MS));
    }
    Program { tag, steps }
}

/// Runs one invocation and records what the client saw.
pub(crate) async fn invoke<B: ferry_client::Backend + ?Sized>(
    client_id: u64,
    client: &B,
    program: &Program,
    route: Route,
    shared: &Shared,
) -> Result<Record, ChaosError> {
    let args = program.encode();
    let invoke_ns = shared.started.elapsed().as_nanos() as u64;
    let result = match route {
        Route::Remote => client.invoke_remote(program::NAME, args).await,
        Route::Local => client.invoke_local(program::NAME, args).await,
        Route::Pushable => client.invoke_pushable(program::NAME, args).await,
    };
    let complete_ns = shared.started.elapsed().as_nanos() as u64;
    let seen = match result {
        Ok(done) => {
            let finished = match (done.placement, done.pushed_back) {
                (_, true) => Finished::PushedBack,
                (ferry_client::Placement::Remote, false) => Finished::Remote,
                _ => Finished::Local,
            };
            let trace = done
                .trace
                .ok_or_else(|| ChaosError::Client("a traced invocation came back without its trace".into()))?;
            let tags = program::decode_result(&done.result)
                .ok_or_else(|| ChaosError::Client(format!("result of {} bytes is not tags", done.result.len())))?;
            Seen::Committed {
                trace,
                tags,
                finished,
                retries: done.cost.attempts.saturating_sub(1),
            }
        }
        Err(ClientError::CommitOutcomeUnknown(_)) => Seen::Unknown,
        Err(
            ClientError::Server { .. }
            | ClientError::Disconnected(_)
            | ClientError::Connect { .. }
            | ClientError::Timeout(_),
        ) => Seen::Failed,
        Err(other) => return Err(ChaosError::Client(other.to_string())),
    };
    Ok(Record {
        client: client_id,
        program: program.clone(),
        invoke_ns,
        complete_ns,
        seen,
        via: Via::Function,
    })
}
