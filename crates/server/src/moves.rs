//! Slot moves at a storage node (`ferry cluster reshard`). The configuration says what
//! moves (`ferry_config::moves`); this node acts on each configuration:
//!
//! - as the destination's primary, it copies the range from the source over a
//!   replication link (`ferry_replication::slots`), then proposes the hand-over at the
//!   epoch the source stopped writes at, or gives the move up with the reason;
//! - as the source's primary, it serves the scan and the log, and on the destination's
//!   request stops taking writes to the range ([`FrozenSlots`]) until a newer
//!   configuration says whether the range moved: if it still serves it there, the move
//!   can no longer finish, so it serves it again.
//!
//! A source that restarts during a move does not know whether it had stopped writes, so
//! it stops them until the next configuration (the destination's copy breaks with the
//! restart, and its give-up is that configuration).

use ferry_proto::TenantId;
use std::collections::HashMap;
use std::sync::Arc;

use bytes::Bytes;
use parking_lot::Mutex;
use tokio::sync::watch;

use ferry_client::config_group::ConfigClient;
use ferry_cluster::key_slot;
use ferry_config::{ClusterConfig, ConfigChange, Epoch, Outcome, SlotMove};
use ferry_replication::slots::{SinkFuture, MOVE_BATCH_BYTES, MOVE_BATCH_OBJECTS};
use ferry_replication::wire::ObjectBatch;
use ferry_replication::{SlotSink, SlotSource};
use ferry_store::WriteRef;
use ferry_wal::record::{decode, next_frame};
use ferry_wal::Wal;

use crate::frozen::FrozenSlots;
use crate::node::TenantState;
use crate::replica::Replication;

/// What a node needs to move slots in and out.
pub(crate) struct Mover {
    pub(crate) node_id: String,
    /// The node's tenants, by id.
    pub(crate) tenants: Vec<(TenantId, Arc<TenantState>)>,
    pub(crate) wal: Arc<Wal>,
    pub(crate) frozen: Arc<FrozenSlots>,
    pub(crate) configs: watch::Receiver<Arc<ClusterConfig>>,
    pub(crate) client: ConfigClient,
    /// For the link to a source (its token and TLS).
    pub(crate) replication: Replication,
    /// Ranges this node stopped writes to, and the epoch each waits past.
    pub(crate) freezes: Mutex<Vec<(u16, u16, Epoch)>>,
    /// The move (its `begun_at`) this node last started copying in.
    pub(crate) importing: Mutex<Option<Epoch>>,
}

/// Whether `node` is the primary of the shard serving all of `first..=last`.
fn serves(config: &ClusterConfig, node: &str, first: u16, last: u16) -> bool {
    config
        .serving_shard(first, last)
        .and_then(|id| config.shards.get(&id))
        .is_some_and(|shard| shard.primary == node)
}

impl Mover {
    /// Acts on a configuration: lifts freezes it settles, starts copying a range moving
    /// here. `first`: the first configuration since the node started.
    pub(crate) fn on_config(self: &Arc<Self>, config: &ClusterConfig, first: bool) {
        {
            let mut freezes = self.freezes.lock();
            freezes.retain(|&(lo, hi, epoch)| {
                if config.epoch <= epoch {
                    return true;
                }
                if serves(config, &self.node_id, lo, hi) {
                    // The hand-over can no longer commit: serve the range again.
                    self.frozen.thaw(lo, hi);
                    tracing::info!(
                        first = lo,
                        last = hi,
                        epoch = config.epoch,
                        "slot move given up; serving the slots again"
                    );
                }
                false
            });
            if let Some(moving) = config.moving.as_ref().filter(|_| first) {
                let source_primary = config.shards.get(&moving.from).map(|shard| &shard.primary);
                if source_primary == Some(&self.node_id) {
                    freezes.push((moving.first, moving.last, config.epoch));
                    self.frozen.freeze(moving.first, moving.last);
                }
            }
        }
        let Some(moving) = &config.moving else { return };
        let destination = config.shards.get(&moving.to).map(|shard| &shard.primary);
        if destination != Some(&self.node_id) {
            return;
        }
        let mut importing = self.importing.lock();
        if *importing == Some(moving.begun_at) {
            return;
        }
        *importing = Some(moving.begun_at);
        let source_addr = config
            .shards
            .get(&moving.from)
            .and_then(|shard| config.nodes.get(&shard.primary))
            .and_then(|node| node.replication.clone());
        tokio::spawn(Arc::clone(self).move_in(moving.clone(), source_addr));
    }

    /// Copies a range in, then proposes the hand-over (or gives the move up).
    async fn move_in(self: Arc<Self>, moving: SlotMove, source_addr: Option<String>) {
        let begun_at = moving.begun_at;
        tracing::info!(first = moving.first, last = moving.last, begun_at, "copying slots in");
        let proposal = match self.copy_in(&moving, source_addr).await {
            Ok(report) => {
                tracing::info!(
                    objects = report.objects,
                    bytes = report.bytes,
                    records = report.records,
                    copy_ms = report.copy_time.as_millis() as u64,
                    frozen_ms = report.frozen_time.as_millis() as u64,
                    "slots copied; proposing the hand-over"
                );
                ConfigChange::FinishMove {
                    begun_at,
                    expected_epoch: report.frozen_epoch,
                }
            }
            Err(why) => ConfigChange::AbortMove { begun_at, why },
        };
        let why = match self.client.propose(proposal.clone()).await {
            Ok(Outcome::Applied { epoch }) if matches!(proposal, ConfigChange::FinishMove { .. }) => {
                tracing::info!(epoch, "slot move done");
                return;
            }
            Ok(Outcome::Applied { .. }) => return,
            Ok(Outcome::Refused(refusal)) => format!("the hand-over was refused: {refusal}"),
            Err(err) => format!("the config group did not answer the hand-over: {err}"),
        };
        // Whatever happened, the move must end: giving up a move that did finish changes
        // nothing (it names the move by its start).
        tracing::warn!("slot move given up: {why}");
        if let Err(err) = self.client.propose(ConfigChange::AbortMove { begun_at, why }).await {
            tracing::error!("cannot give the slot move up: {err}");
        }
    }

    async fn copy_in(
        self: &Arc<Self>,
        moving: &SlotMove,
        source_addr: Option<String>,
    ) -> Result<ferry_replication::ImportReport, String> {
        let addr = source_addr.ok_or("the source has no replication address")?;
        let upstream = self.replication.upstream(&addr).map_err(|err| err.to_string())?;
        // Left frozen if this node once moved these slots away.
        self.frozen.thaw(moving.first, moving.last);
        let configs = self.configs.clone();
        let epoch = move || configs.borrow().epoch;
        let sink: Arc<dyn SlotSink> = Arc::clone(self) as _;
        ferry_replication::import(&upstream, moving.first, moving.last, &epoch, sink)
            .await
            .map_err(|err| format!("copying slots {}-{} from {addr}: {err}", moving.first, moving.last))
    }

    /// Logs and installs `writes` at the source's `version` (the clock moved past it), as
    /// a replica installs its primary's commits. A moved key keeps its versions, so a
    /// client that read it on the source and commits on the destination is validated
    /// against the same numbers (the destination's own clock could otherwise give a moved
    /// key a number the source gave an older value: a lost update), and a history sees
    /// one sequence of versions per key across the move.
    fn install_at(&self, tenant: TenantId, version: u64, writes: &[WriteRef<'_>]) -> Result<(), String> {
        self.tenant(tenant)?
            .store
            .replicate(version, writes, || self.wal.append(tenant, version, writes))
            .map_err(|err| err.to_string())
    }

    fn tenant(&self, id: TenantId) -> Result<&TenantState, String> {
        self.tenants
            .iter()
            .find(|(tenant, _)| *tenant == id)
            .map(|(_, state)| state.as_ref())
            .ok_or_else(|| format!("tenant {id} is not served here: give every node the same tenants"))
    }
}

/// Hands `batch` to `each` if it holds anything, and empties it.
fn flush(batch: &mut ObjectBatch, each: &mut dyn FnMut(ObjectBatch) -> Result<(), String>) -> Result<(), String> {
    if batch.objects.is_empty() {
        return Ok(());
    }
    let full = ObjectBatch {
        tenant: batch.tenant,
        table: batch.table.clone(),
        objects: std::mem::take(&mut batch.objects),
    };
    each(full)
}

/// Every object of the node whose key's slot is in `first..=last`, in batches.
fn scan_range(
    tenants: &[(TenantId, Arc<TenantState>)],
    first: u16,
    last: u16,
    each: &mut dyn FnMut(ObjectBatch) -> Result<(), String>,
) -> Result<(), String> {
    for (id, tenant) in tenants {
        let mut batch = ObjectBatch {
            tenant: *id,
            ..ObjectBatch::default()
        };
        let mut bytes = 0;
        tenant.store.scan(|table, objects| {
            if ferry_cluster::is_node_local(table) {
                return Ok(()); // every node keeps its own catalog: it does not move
            }
            if batch.table != table {
                flush(&mut batch, each)?;
                bytes = 0;
                batch.table = table.to_string();
            }
            for (key, version, value) in objects {
                if !(first..=last).contains(&key_slot(key)) {
                    continue;
                }
                batch.objects.push((key.clone(), *version, value.clone()));
                bytes += key.len() + value.len();
                if bytes >= MOVE_BATCH_BYTES || batch.objects.len() >= MOVE_BATCH_OBJECTS {
                    flush(&mut batch, each)?;
                    bytes = 0;
                }
            }
            Ok::<(), String>(())
        })?;
        flush(&mut batch, each)?;
    }
    Ok(())
}

impl SlotSource for Mover {
    fn scan(
        &self,
        first: u16,
        last: u16,
        each: &mut dyn FnMut(ObjectBatch) -> Result<(), String>,
    ) -> Result<u64, String> {
        // Every tenant is marked before any is scanned; the log is replayed from the
        // earliest mark (records before a tenant's own mark are replayed twice, which
        // sets what they wrote to its last value all the same).
        let log_from = self
            .tenants
            .iter()
            .map(|(_, tenant)| tenant.store.mark(|| self.wal.appended_lsn()).at)
            .min()
            .unwrap_or_else(|| self.wal.appended_lsn());
        // The destination reads the log from there: only what the log holds durably is
        // served, so make it so now rather than at the writer's next flush.
        self.wal.sync_now().map_err(|err| err.to_string())?;
        scan_range(&self.tenants, first, last, each)?;
        Ok(log_from)
    }

    fn freeze(&self, first: u16, last: u16, epoch: u64) -> Result<u64, String> {
        // Under the lock `on_config` lifts freezes with: a configuration past `epoch`
        // either is seen here (and refused) or lifts this freeze after it is set.
        let mut freezes = self.freezes.lock();
        let config = self.configs.borrow().clone();
        if config.epoch > epoch {
            return Err(format!(
                "this node is at epoch {}, past the move's {epoch}: the hand-over could not commit",
                config.epoch
            ));
        }
        if !serves(&config, &self.node_id, first, last) {
            return Err(format!(
                "this node does not serve slots {first}-{last} as their primary"
            ));
        }
        freezes.push((first, last, epoch));
        self.frozen.freeze(first, last);
        drop(freezes);
        // Read under the log's append lock, after the freeze: no later record writes the
        // range. Synced at once, so the destination need not wait for the next flush.
        let end = self.wal.appended_lsn();
        self.wal.sync_now().map_err(|err| err.to_string())?;
        Ok(end)
    }
}

impl SlotSink for Mover {
    fn clear(&self, first: u16, last: u16) -> Result<u64, String> {
        let mut found: HashMap<(u32, String), Vec<Bytes>> = HashMap::new();
        scan_range(&self.tenants, first, last, &mut |batch| {
            let keys = batch.objects.into_iter().map(|(key, _, _)| key);
            found.entry((batch.tenant.0, batch.table)).or_default().extend(keys);
            Ok(())
        })?;
        let mut cleared = 0;
        for ((tenant, table), keys) in found {
            let store = &self.tenant(TenantId(tenant))?.store;
            for chunk in keys.chunks(MOVE_BATCH_OBJECTS) {
                let deletes: Vec<WriteRef<'_>> = chunk.iter().map(|key| WriteRef::delete(&table, key)).collect();
                store
                    .commit(&[], &deletes)
                    .map_err(|err| format!("clearing what an earlier move left: {err}"))?;
                cleared += chunk.len() as u64;
            }
        }
        Ok(cleared)
    }

    fn install(&self, batch: &ObjectBatch) -> Result<(), String> {
        // One record per version the source gave (objects of one commit share theirs).
        let mut objects: Vec<&(Bytes, u64, Bytes)> = batch.objects.iter().collect();
        objects.sort_by_key(|(_, version, _)| *version);
        for same_version in objects.chunk_by(|a, b| a.1 == b.1) {
            let writes: Vec<WriteRef<'_>> = same_version
                .iter()
                .map(|(key, _, value)| WriteRef::put(&batch.table, key, value))
                .collect();
            self.install_at(batch.tenant, same_version[0].1, &writes)
                .map_err(|err| format!("installing objects of tenant {}: {err}", batch.tenant))?;
        }
        Ok(())
    }

    fn apply(&self, lsn: u64, frame: &[u8], first: u16, last: u16) -> Result<bool, String> {
        let (payload, _) = next_frame(frame).map_err(|err| format!("record at {lsn}: {err}"))?;
        let commit = decode(payload).map_err(|err| format!("record at {lsn}: {err}"))?;
        let writes: Vec<WriteRef<'_>> = commit
            .writes
            .into_iter()
            .filter(|write| !ferry_cluster::is_node_local(write.table) && (first..=last).contains(&key_slot(write.key)))
            .collect();
        if writes.is_empty() {
            return Ok(false);
        }
        self.install_at(commit.tenant, commit.version, &writes)
            .map_err(|err| format!("applying the source's record at {lsn}: {err}"))?;
        Ok(true)
    }

    fn durable(&self) -> SinkFuture<'_> {
        Box::pin(async move {
            self.wal
                .gate()
                .pass()
                .await
                .map_err(|err| format!("the copy is not durable: {err}"))
        })
    }
}

#[cfg(test)]
mod tests {
    use std::sync::atomic::{AtomicBool, Ordering};
    use std::time::Duration;

    use ferry_cluster::ClusterMap;
    use ferry_config::ConfigChange;
    use ferry_replication::Upstream;
    use ferry_store::StoreError;

    use super::*;

    const FIRST: u16 = 16000;
    const LAST: u16 = 16383;
    const TOKEN: &[u8] = b"move-test-token";

    /// Two shards, s1 and s2 (which serves FIRST..=LAST), at epoch 1.
    fn config() -> ClusterConfig {
        let addrs = ["127.0.0.1:1".to_string(), "127.0.0.1:2".to_string()];
        let nodes = ClusterMap::even(&addrs)
            .unwrap()
            .nodes()
            .iter()
            .map(|node| ferry_cluster::NodeEntry {
                replication: Some("127.0.0.1:3".into()),
                ..node.clone()
            })
            .collect();
        let mut config = ClusterConfig::default();
        config.apply(&ConfigChange::Bootstrap { nodes });
        config
    }

    /// A node's mover over a fresh data dir with one tenant (1).
    fn node(name: &str, configs: watch::Receiver<Arc<ClusterConfig>>) -> (Arc<Mover>, crate::durable::Durable) {
        let dir = std::env::temp_dir().join(format!("ferry-moves-{name}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        let tenant = Arc::new(TenantState::for_test(1, 1 << 30));
        let tenants = HashMap::from([(TenantId(1), Arc::clone(&tenant))]);
        let mut durability = crate::durable::Durability::new(dir);
        durability.wal.segment_bytes = 1 << 20;
        let durable = crate::durable::open(&durability, &tenants, None).unwrap();
        let frozen = Arc::new(FrozenSlots::default());
        let filter = Arc::clone(&frozen);
        durable
            .wal
            .set_key_filter(Arc::new(move |key: &[u8]| filter.refusal(key)));
        let mover = Arc::new(Mover {
            node_id: name.into(),
            tenants: vec![(TenantId(1), tenant)],
            wal: Arc::clone(&durable.wal),
            frozen,
            configs,
            client: ConfigClient::new(Vec::new()),
            replication: Replication {
                listen: None,
                primary: None,
                token: String::from_utf8(TOKEN.to_vec()).unwrap(),
                ack: crate::replica::Ack::Primary,
                tls: None,
                primary_epoch: 0,
            },
            freezes: Mutex::default(),
            importing: Mutex::default(),
        });
        (mover, durable)
    }

    /// Keys of the moving range.
    fn keys() -> impl Iterator<Item = String> {
        (0..)
            .map(|i| format!("key-{i}"))
            .filter(|key| (FIRST..=LAST).contains(&key_slot(key.as_bytes())))
    }

    /// The hand-over: writes to the range go on at the source until it learns that the
    /// range moved (here 200 ms after the copy ended, standing for a slow watch). Every
    /// write the source took must be in the destination's copy: it refuses them from the
    /// freeze on (routing, and its log for a write routed before), and they are retried
    /// at the destination once the range is its own.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn no_write_the_source_takes_is_missing_from_the_copy() {
        let (_tx, configs) = watch::channel(Arc::new(config()));
        let (source, source_durable) = node("s2", configs.clone());
        let (destination, destination_durable) = node("s1", configs);
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap().to_string();
        let serving = Arc::new(ferry_replication::Source::new(
            Arc::clone(&source.wal),
            Bytes::from_static(TOKEN),
            None,
        ));
        serving.serve_slots(Arc::clone(&source) as _);
        let (stop_serving, stopped) = watch::channel(false);
        tokio::spawn(ferry_replication::serve(listener, serving, stopped));

        let moved = Arc::new(AtomicBool::new(false));
        let stop = Arc::new(AtomicBool::new(false));
        let writer = std::thread::spawn({
            let (source, destination) = (Arc::clone(&source), Arc::clone(&destination));
            let (moved, stop) = (Arc::clone(&moved), Arc::clone(&stop));
            move || {
                let mut acknowledged = Vec::new();
                for key in keys() {
                    if stop.load(Ordering::Acquire) {
                        break;
                    }
                    loop {
                        let owner = if moved.load(Ordering::Acquire) {
                            &destination
                        } else {
                            &source
                        };
                        // What routing does at the node, then the commit.
                        if owner.frozen.refusal(key.as_bytes()).is_some() {
                            std::thread::sleep(Duration::from_millis(1));
                            continue;
                        }
                        match owner.tenants[0].1.store.put("t", key.as_bytes(), key.as_bytes()) {
                            Ok(_) => break,
                            Err(StoreError::Journal(why)) if why.starts_with("TRYAGAIN") => {
                                std::thread::sleep(Duration::from_millis(1))
                            }
                            Err(err) => panic!("{key}: {err}"),
                        }
                    }
                    acknowledged.push(key);
                }
                acknowledged
            }
        });
        tokio::time::sleep(Duration::from_millis(100)).await;
        let upstream = Upstream {
            addr,
            token: Bytes::from_static(TOKEN),
            tls: None,
        };
        let report = ferry_replication::import(&upstream, FIRST, LAST, &|| 1, Arc::clone(&destination) as _)
            .await
            .unwrap();
        assert!(report.objects > 0, "{report:?}");
        // Keys keep the versions the source gave them once the log is replayed.
        let first_key = keys().next().unwrap();
        let at_source = source.tenants[0]
            .1
            .store
            .get("t", first_key.as_bytes())
            .unwrap()
            .unwrap();
        let at_destination = destination.tenants[0]
            .1
            .store
            .get("t", first_key.as_bytes())
            .unwrap()
            .unwrap();
        assert_eq!(at_destination, at_source);
        assert_eq!(report.frozen_epoch, 1);
        // The source has not learned of the hand-over yet.
        tokio::time::sleep(Duration::from_millis(200)).await;
        moved.store(true, Ordering::Release);
        tokio::time::sleep(Duration::from_millis(50)).await;
        stop.store(true, Ordering::Release);
        let acknowledged = writer.join().unwrap();
        let store = &destination.tenants[0].1.store;
        let missing: Vec<&String> = acknowledged
            .iter()
            .filter(|key| store.get("t", key.as_bytes()).unwrap().is_none())
            .collect();
        assert!(
            missing.is_empty(),
            "{} of {} acknowledged writes are missing from the copy, first {:?}",
            missing.len(),
            acknowledged.len(),
            missing.first()
        );
        // A freeze at an epoch the source has moved past is refused.
        let mut later = config();
        later.epoch = 2;
        let (_tx2, configs2) = watch::channel(Arc::new(later));
        let (stale, stale_durable) = node("s2-stale", configs2);
        assert!(stale.freeze(FIRST, LAST, 1).unwrap_err().contains("past the move's"));
        let _ = stop_serving.send(true);
        for durable in [source_durable, destination_durable, stale_durable] {
            durable.close();
            let _ = std::fs::remove_dir_all(durable.wal.data_dir().path());
        }
    }
}
