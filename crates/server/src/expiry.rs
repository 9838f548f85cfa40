//! Active expiry: Redis's background sampling of keys with a TTL, so an expired key that no
//! command meets still goes (and its memory with it). Every [`EXPIRY_CYCLE_MS`] each core
//! gives each database of the tenants homed on it one cycle, run in a turn of the tenant's
//! lane there (`turn`; no hand-off) and charged to the tenant like any work: it samples [`SAMPLE_KEYS`] objects, and runs `EXISTS` over those whose header
//! says they expired. That is the lazy path: the executor deletes an expired key it meets,
//! at a version, in an OCC transaction, so the log and replicas carry the delete and a key
//! written again meanwhile is not touched. As in Redis, a round that found at least a
//! quarter of its keys with a TTL expired is followed by another, up to
//! [`MAX_ROUNDS_PER_CYCLE`].
//!
//! Unlike Redis, ferry keeps no index of the keys with a TTL: the sample is of all keys, so
//! a database where few keys have one expires them more slowly in the background (they
//! still read as absent at once).

use std::sync::Arc;
use std::time::{Duration, Instant};

use bytes::Bytes;

use ferry_resp::Command;

use crate::node::{Node, TenantState};
use crate::resp_job::data_command;

/// Time between two cycles (Redis's `hz` 10).
pub const EXPIRY_CYCLE_MS: u64 = 100;

/// Objects sampled per round.
pub const SAMPLE_KEYS: usize = 32;

/// Most rounds one cycle of one database runs: bounds its work.
pub const MAX_ROUNDS_PER_CYCLE: usize = 16;

/// A round that found at least this share (in percent) of its keys with a TTL expired is
/// followed by another (Redis's `ACTIVE_EXPIRE_CYCLE_ACCEPTABLE_STALE`-like rule).
const REPEAT_WHEN_EXPIRED_PERCENT: usize = 25;

/// On core `core`'s runtime: starts a cycle for the tenants homed there every
/// [`EXPIRY_CYCLE_MS`] until the node stops (or the core's runtime goes, with a replaced
/// core).
pub(crate) async fn run(node: Arc<Node>, core: usize) {
    let mut ticker = tokio::time::interval(Duration::from_millis(EXPIRY_CYCLE_MS));
    ticker.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        ticker.tick().await;
        if node.pool.is_shutting_down() {
            return;
        }
        let now_ms = crate::store_ctx::unix_time_us() / 1000;
        for tenant in node.tenants.values().filter(|tenant| tenant.home == core) {
            // The eviction policies' LRU clock moves with the same cycle (Redis's cron).
            tenant.store.set_clock_ms(now_ms);
            for table in tenant.store.table_names() {
                if !crate::database::is_database(&table) {
                    continue;
                }
                // In a turn of the tenant's lane here; a full queue skips a cycle.
                let Ok(turn) = crate::turn::take(&node, core, tenant, false).await else {
                    continue;
                };
                let started = Instant::now();
                sweep(&node, tenant, &table);
                crate::turn::charge(&node, core, tenant, started.elapsed().as_nanos() as u64);
                drop(turn);
            }
        }
    }
}

/// One cycle over `table`, on the tenant's worker: how many expired keys it deleted.
pub(crate) fn sweep(node: &Node, tenant: &TenantState, table: &str) -> usize {
    let mut deleted = 0;
    for _ in 0..MAX_ROUNDS_PER_CYCLE {
        let now_us = crate::store_ctx::unix_time_us();
        let now_ms = now_us / 1000;
        let sample = tenant.store.sample(table, SAMPLE_KEYS, rand::random());
        let mut with_ttl = 0;
        let mut words = vec![Bytes::from_static(b"EXISTS")];
        for info in sample {
            let Some(expires_at_ms) = info.expires_at_ms else {
                continue;
            };
            with_ttl += 1;
            if expires_at_ms <= now_ms {
                words.push(info.key);
            }
        }
        let expired = words.len() - 1;
        if expired > 0 {
            // The executor checks each key again in its transaction and deletes only the
            // ones still expired; keys this node does not own are refused, not touched.
            data_command(node.cluster.as_deref(), tenant, table, &Command::Data(words), true);
            deleted += expired;
        }
        if with_ttl == 0 || expired * 100 < with_ttl * REPEAT_WHEN_EXPIRED_PERCENT {
            break;
        }
    }
    deleted
}
