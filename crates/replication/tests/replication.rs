//! A primary and a replica in one process, each with its own data dir, log and store,
//! linked over loopback: records arrive in order at the same offsets and install the same
//! state; `--ack replica` holds replies until the replica has the records; a replica that
//! fell behind a trimmed log is told to resync, and a copy of the primary's snapshots and
//! log recovers to the primary's state; a replica whose log is past its primary's (the
//! primary lost its disk) starts over on its own but keeps its log where a config group
//! can promote it; a wrong token is refused; TLS works.

use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use tokio::net::TcpListener;
use tokio::sync::watch;

use ferry_replication::{
    copy_from_primary, follow, needs_copy, Apply, FollowerExit, FollowerStatus, OnAhead, Source, Upstream,
};
use ferry_store::TenantStore;
use ferry_wal::record::{decode, next_frame};
use ferry_wal::{replay, DataDir, FsyncMode, Tenants, Wal, WalConfig, WalError};

const TOKEN: &[u8] = b"replication-secret";
const TENANT: u32 = 1;

/// A fresh directory for one test, removed when the returned guard drops.
fn temp_dir(name: &str) -> tempfile::TempDir {
    tempfile::Builder::new()
        .prefix(&format!("ferry-replication-{name}-"))
        .tempdir()
        .unwrap()
}

/// A node's log and its one tenant's store.
struct Node {
    wal: Arc<Wal>,
    store: Arc<TenantStore>,
}

fn open(dir: &Path) -> Node {
    let data = DataDir::lock(dir).unwrap();
    let store = Arc::new(TenantStore::new(1 << 30));
    let restored = ferry_wal::load_snapshots(&data, |_| Some(&*store)).unwrap();
    let recovered = replay(&data, &restored, |_, commit| {
        store
            .recover_commit(commit.version, &commit.writes)
            .map_err(|err| WalError::Replay {
                lsn: 0,
                why: err.to_string(),
            })
    })
    .unwrap();
    let config = WalConfig {
        fsync: FsyncMode::No,
        segment_bytes: 8192,
        ..WalConfig::default()
    };
    let wal = Arc::new(Wal::open(data, config, &recovered).unwrap());
    Node { wal, store }
}

fn primary(dir: &Path) -> Node {
    let node = open(dir);
    node.store
        .attach_journal(node.wal.journal(ferry_proto::TenantId(TENANT)))
        .ok()
        .unwrap();
    node
}

fn replica(dir: &Path) -> Node {
    let node = open(dir);
    node.wal.set_read_only(Some("a test replica".into()));
    node.store
        .attach_journal(node.wal.journal(ferry_proto::TenantId(TENANT)))
        .ok()
        .unwrap();
    node
}

struct Installer(Arc<Wal>, Arc<TenantStore>);

impl Apply for Installer {
    fn apply(&self, lsn: u64, frame: &[u8]) -> Result<(), String> {
        let (payload, _) = next_frame(frame).map_err(|err| err.to_string())?;
        let commit = decode(payload).map_err(|err| err.to_string())?;
        assert_eq!(commit.tenant, ferry_proto::TenantId(TENANT));
        self.1
            .replicate(commit.version, &commit.writes, || self.0.append_frames(lsn, frame))
            .map_err(|err| err.to_string())
    }
}

struct OneTenant(Arc<TenantStore>);

impl Tenants for OneTenant {
    fn each(
        &self,
        each: &mut dyn FnMut(ferry_proto::TenantId, &TenantStore) -> Result<(), WalError>,
    ) -> Result<(), WalError> {
        each(ferry_proto::TenantId(TENANT), &self.0)
    }
}

async fn serve(node: &Node, tls: Option<ferry_net::tls::Acceptor>) -> (String, watch::Sender<bool>, Arc<Source>) {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap().to_string();
    let (stop, stopped) = watch::channel(false);
    let source = Arc::new(Source::new(Arc::clone(&node.wal), Bytes::from_static(TOKEN), tls));
    tokio::spawn(ferry_replication::serve(listener, Arc::clone(&source), stopped));
    (addr, stop, source)
}

fn upstream(addr: &str) -> Upstream {
    Upstream {
        addr: addr.to_string(),
        token: Bytes::from_static(TOKEN),
        tls: None,
    }
}

fn start_following(upstream: Upstream, node: &Node) -> (watch::Sender<bool>, tokio::task::JoinHandle<FollowerExit>) {
    start_following_with(upstream, node, OnAhead::Resync)
}

fn start_following_with(
    upstream: Upstream,
    node: &Node,
    on_ahead: OnAhead,
) -> (watch::Sender<bool>, tokio::task::JoinHandle<FollowerExit>) {
    let (stop, stopped) = watch::channel(false);
    let apply: Arc<dyn Apply> = Arc::new(Installer(Arc::clone(&node.wal), Arc::clone(&node.store)));
    let task = tokio::spawn(follow(
        upstream,
        Arc::clone(&node.wal),
        apply,
        Arc::new(FollowerStatus::default()),
        on_ahead,
        stopped,
    ));
    (stop, task)
}

fn put(store: &TenantStore, key: &str, value: &str) -> u64 {
    store.put("t", key.as_bytes(), value.as_bytes()).unwrap()
}

/// Waits (generously) until the replica's log reaches the primary's end.
async fn caught_up(primary: &Node, replica: &Node) {
    for _ in 0..2000 {
        primary.wal.sync_now().unwrap();
        if replica.wal.appended_lsn() == primary.wal.appended_lsn() {
            return;
        }
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    panic!(
        "replica at {} never reached the primary's {}",
        replica.wal.appended_lsn(),
        primary.wal.appended_lsn()
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_replica_installs_the_primarys_commits_at_the_same_offsets() {
    let p_dir = temp_dir("same-primary");
    let p = primary(p_dir.path());
    let r_dir = temp_dir("same-replica");
    let r = replica(r_dir.path());
    let (addr, _serving, source) = serve(&p, None).await;
    for i in 0..200 {
        put(&p.store, &format!("k{}", i % 50), &format!("v{i}"));
    }
    let (stop, task) = start_following(upstream(&addr), &r);
    caught_up(&p, &r).await;
    // Writes while it follows arrive too, deletes included.
    p.store.delete("t", b"k3").unwrap();
    let last = put(&p.store, "late", "x");
    caught_up(&p, &r).await;
    assert_eq!(r.store.table_snapshot("t"), p.store.table_snapshot("t"));
    assert_eq!(r.store.get("t", b"late").unwrap().unwrap().0, last);
    // The replica refuses writes of its own; the copied log stays the primary's.
    let refused = r.store.put("t", b"mine", b"1").unwrap_err();
    assert!(refused.to_string().contains("READONLY"), "{refused}");
    // Its next pull acknowledged everything.
    tokio::time::sleep(Duration::from_millis(50)).await;
    assert_eq!(
        source.replica_acked_lsn.load(std::sync::atomic::Ordering::Relaxed),
        p.wal.appended_lsn()
    );
    stop.send(true).unwrap();
    assert_eq!(task.await.unwrap(), FollowerExit::Stopped);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn with_replica_acks_required_a_reply_waits_for_the_replica() {
    let p_dir = temp_dir("ack-primary");
    let p = primary(p_dir.path());
    let r_dir = temp_dir("ack-replica");
    let r = replica(r_dir.path());
    let (addr, _serving, _source) = serve(&p, None).await;
    p.wal.gate().require_replica(true);
    put(&p.store, "k", "v");
    let gate = Arc::clone(p.wal.gate());
    let reply = tokio::spawn(async move { gate.pass().await });
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert!(!reply.is_finished(), "a reply left before any replica had the write");
    let (_stop, _task) = start_following(upstream(&addr), &r);
    tokio::time::timeout(Duration::from_secs(20), reply)
        .await
        .expect("the reply is released once the replica has the write")
        .unwrap()
        .unwrap();
    assert_eq!(r.store.get("t", b"k").unwrap().unwrap().1.as_ref(), b"v");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_replica_behind_a_trimmed_log_resyncs_from_a_copy() {
    let primary_dir = temp_dir("trim-primary");
    let primary_dir = primary_dir.path();
    let p = primary(primary_dir);
    let (addr, _serving, _source) = serve(&p, None).await;

    // A replica that copied the beginning, then went away.
    let stale_dir = temp_dir("trim-stale");
    let stale_dir = stale_dir.path();
    let stale = replica(stale_dir);
    put(&p.store, "first", "1");
    let (stop, task) = start_following(upstream(&addr), &stale);
    caught_up(&p, &stale).await;
    stop.send(true).unwrap();
    task.await.unwrap();

    // Many writes, then a checkpoint that removes the log the replica needs.
    let value = "x".repeat(500);
    for i in 0..400 {
        put(&p.store, &format!("k{}", i % 100), &format!("{i}{value}"));
    }
    let report = p.wal.checkpoint(&OneTenant(Arc::clone(&p.store)), &|| true).unwrap();
    assert!(report.segments_removed > 0, "{report:?}");
    put(&p.store, "after", "snapshot");

    let (_stop, task) = start_following(upstream(&addr), &stale);
    let exit = tokio::time::timeout(Duration::from_secs(20), task)
        .await
        .unwrap()
        .unwrap();
    assert!(
        matches!(exit, FollowerExit::Resync(ref why) if why.contains("starts at")),
        "{exit:?}"
    );

    // The copy: snapshots and log, then an ordinary recovery, then following again.
    drop(stale);
    let copy_dir = temp_dir("trim-copy");
    let copy_dir = copy_dir.path();
    let data = DataDir::lock(copy_dir).unwrap();
    assert!(needs_copy(&data).unwrap());
    // A replica gets only what the primary's log holds (written, here): a reply would
    // have flushed it.
    p.wal.sync_now().unwrap();
    let copied = copy_from_primary(&data, &upstream(&addr)).await.unwrap();
    assert_eq!(copied.snapshots, 1);
    assert!(copied.log_from > 0, "{copied:?}");
    assert!(!needs_copy(&data).unwrap());
    data.release();
    drop(data);
    let fresh = replica(copy_dir);
    assert_eq!(fresh.wal.appended_lsn(), p.wal.appended_lsn());
    assert_eq!(fresh.store.table_snapshot("t"), p.store.table_snapshot("t"));
    let (_stop, _task) = start_following(upstream(&addr), &fresh);
    put(&p.store, "later", "too");
    caught_up(&p, &fresh).await;
    assert_eq!(fresh.store.table_snapshot("t"), p.store.table_snapshot("t"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_replica_past_an_emptied_primary_keeps_its_log_when_told_to_hold() {
    // The replica copied a primary that then lost its disk and came back empty.
    let first_dir = temp_dir("ahead-old-primary");
    let first = primary(first_dir.path());
    let (old_addr, old_serving, _source) = serve(&first, None).await;
    let r_dir = temp_dir("ahead-replica");
    let r = replica(r_dir.path());
    let (stop, task) = start_following(upstream(&old_addr), &r);
    for i in 0..20 {
        put(&first.store, &format!("k{i}"), "acked");
    }
    caught_up(&first, &r).await;
    stop.send(true).unwrap();
    assert_eq!(task.await.unwrap(), FollowerExit::Stopped);
    old_serving.send(true).unwrap();
    let emptied_dir = temp_dir("ahead-emptied-primary");
    let emptied = primary(emptied_dir.path());
    let (addr, _serving, _source) = serve(&emptied, None).await;
    let end = r.wal.appended_lsn();
    assert!(end > 0);

    // Held: it keeps asking, keeps every record, and stops only when told to.
    let (stop, task) = start_following_with(upstream(&addr), &r, OnAhead::Hold);
    tokio::time::sleep(Duration::from_millis(1_000)).await;
    assert!(!task.is_finished(), "a held replica gave up its log");
    assert_eq!(r.wal.appended_lsn(), end);
    assert!(!r.wal.data_dir().path().join(ferry_replication::RESYNC_MARKER).exists());
    stop.send(true).unwrap();
    assert_eq!(task.await.unwrap(), FollowerExit::Stopped);
    assert_eq!(r.store.get("t", b"k7").unwrap().unwrap().1.as_ref(), b"acked");

    // On its own it starts over from the (empty) primary.
    let (_stop, task) = start_following(upstream(&addr), &r);
    let exit = tokio::time::timeout(Duration::from_secs(20), task)
        .await
        .unwrap()
        .unwrap();
    assert!(
        matches!(exit, FollowerExit::Resync(ref why) if why.contains("past the primary's")),
        "{exit:?}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_wrong_token_is_refused() {
    let p_dir = temp_dir("token-primary");
    let p = primary(p_dir.path());
    let (addr, _serving, source) = serve(&p, None).await;
    let wrong = Upstream {
        token: Bytes::from_static(b"guess"),
        ..upstream(&addr)
    };
    let refused = wrong.connect().await.err().expect("refused");
    assert!(refused.to_string().contains("wrong replication token"), "{refused}");
    assert_eq!(source.replicas.load(std::sync::atomic::Ordering::Relaxed), 0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn replication_runs_over_tls() {
    let pki_dir = temp_dir("tls-pki");
    let pki_dir = pki_dir.path();
    let pki = ferry_net::tls::testing::Pki::generate(pki_dir).unwrap();
    let server = ferry_net::tls::ServerTls {
        identity: pki.node.clone(),
        client_auth: ferry_net::tls::ClientAuth::Required { ca: pki.ca.clone() },
    }
    .load()
    .unwrap();
    let connections = ferry_net::connections::Connections::new(8, 8, Duration::from_secs(5));
    let acceptor = ferry_net::tls::Acceptor::new(server, connections);
    let p_dir = temp_dir("tls-primary");
    let p = primary(p_dir.path());
    let r_dir = temp_dir("tls-replica");
    let r = replica(r_dir.path());
    let (addr, _serving, _source) = serve(&p, Some(acceptor)).await;
    put(&p.store, "k", "over tls");

    // Without a certificate the primary asks for, the link is refused.
    let anonymous = ferry_net::tls::ClientTls {
        ca: pki.ca.clone(),
        identity: None,
    };
    let refused = Upstream {
        tls: Some(anonymous.load().unwrap()),
        ..upstream(&addr)
    };
    assert!(refused.connect().await.is_err());

    let client = ferry_net::tls::ClientTls {
        ca: pki.ca.clone(),
        identity: Some(pki.node.clone()),
    };
    let over_tls = Upstream {
        tls: Some(client.load().unwrap()),
        ..upstream(&addr)
    };
    let (_stop, _task) = start_following(over_tls, &r);
    caught_up(&p, &r).await;
    assert_eq!(r.store.get("t", b"k").unwrap().unwrap().1.as_ref(), b"over tls");
}
