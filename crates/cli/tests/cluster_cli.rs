//! `ferry cluster up` as a user runs it: the JSON it writes, `ferry kv` and `ferry load`
//! against the gateway, a scrape of every process's metrics, a clean stop on SIGTERM, and a
//! storage node killed with SIGKILL coming back on its data dir and addresses.

use std::io::{BufRead, BufReader, Read, Write};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

pub(crate) fn ferry() -> Command {
    Command::new(env!("CARGO_BIN_EXE_ferry"))
}

pub(crate) fn text(output: &Output) -> String {
    format!(
        "{}{}",
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    )
}

fn scrape(addr: &str) -> String {
    let mut stream = std::net::TcpStream::connect(addr).unwrap();
    stream.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    stream.write_all(b"GET /metrics HTTP/1.1\r\nHost: x\r\n\r\n").unwrap();
    let mut answer = String::new();
    stream.read_to_string(&mut answer).unwrap();
    answer
}

pub(crate) fn alive(pid: u64) -> bool {
    std::path::Path::new(&format!("/proc/{pid}")).exists()
        && !std::fs::read_to_string(format!("/proc/{pid}/stat")).is_ok_and(|stat| stat.contains(") Z "))
}

fn read_json(path: &Path) -> serde_json::Value {
    serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap()
}

/// A `ferry cluster up` run by a test; SIGTERMed and waited for when dropped (a failing
/// test leaves no cluster behind).
pub(crate) struct ClusterUp {
    process: Child,
    json: PathBuf,
    /// Its stdout, line by line.
    pub(crate) lines: mpsc::Receiver<String>,
}

impl ClusterUp {
    /// `cluster up --dir DIR --json DIR/cluster.json` with `flags`; returns once the JSON
    /// is written.
    pub(crate) fn start(dir: &Path, flags: &[&str]) -> ClusterUp {
        std::fs::create_dir_all(dir).unwrap();
        let json = dir.join("cluster.json");
        let mut process = ferry()
            .args(["cluster", "up"])
            .args(flags)
            .arg("--json")
            .arg(&json)
            .arg("--dir")
            .arg(dir)
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        let stdout = process.stdout.take().unwrap();
        let (sender, lines) = mpsc::channel();
        std::thread::spawn(move || {
            for line in BufReader::new(stdout).lines().map_while(Result::ok) {
                let _ = sender.send(line);
            }
        });
        let mut up = ClusterUp { process, json, lines };
        let deadline = Instant::now() + Duration::from_secs(60);
        while !up.json.exists() {
            assert!(Instant::now() < deadline, "no cluster JSON within 60 s");
            assert!(up.process.try_wait().unwrap().is_none(), "cluster up exited early");
            std::thread::sleep(Duration::from_millis(50));
        }
        up
    }

    pub(crate) fn json(&self) -> serde_json::Value {
        read_json(&self.json)
    }

    /// SIGTERM, and how it exited.
    fn stop(&mut self) -> std::process::ExitStatus {
        // SAFETY: kill(2) on our own child's pid.
        unsafe { libc::kill(self.process.id() as libc::pid_t, libc::SIGTERM) };
        self.process.wait().unwrap()
    }
}

impl Drop for ClusterUp {
    fn drop(&mut self) {
        if self.process.try_wait().ok().flatten().is_none() {
            self.stop();
        }
    }
}

#[test]
fn cluster_up_serves_kv_load_and_metrics_and_stops_on_sigterm() {
    let scratch = tempfile::Builder::new().prefix("ferry-cluster-cli-").tempdir().unwrap();
    let dir = scratch.path();
    let mut up = ClusterUp::start(dir, &["--storage-nodes", "2", "--compute-nodes", "1"]);
    let cluster = up.json();
    let gateway = cluster["gateway"].as_str().unwrap().to_string();
    let storage = cluster["storage_nodes"].as_array().unwrap();
    let compute = cluster["compute_nodes"].as_array().unwrap();
    assert_eq!((storage.len(), compute.len()), (2, 1));

    let kv = |args: &[&str]| ferry().args(["kv", "--server", &gateway]).args(args).output().unwrap();
    let put = kv(&["put", "t", "hello", "world"]);
    assert!(put.status.success(), "{}", text(&put));
    let get = kv(&["get", "t", "hello"]);
    assert!(text(&get).starts_with("world"), "{}", text(&get));
    // foo and hello live on different nodes: a multiget of both is refused.
    let spread = kv(&["multiget", "t", "hello", "foo"]);
    assert!(
        !spread.status.success() && text(&spread).contains("cross_slot"),
        "{}",
        text(&spread)
    );
    let load = ferry()
        .args(["load", "--server", &gateway, "traverse", "--keys", "2000"])
        .output()
        .unwrap();
    assert!(load.status.success(), "{}", text(&load));
    let invoke = kv(&["invoke", "traverse", "start=5,depth=8"]);
    assert!(text(&invoke).contains("reached node"), "{}", text(&invoke));
    // The social application: its graph over both nodes, top-k reading across them.
    let social = ferry()
        .args(["load", "--server", &gateway, "social", "--keys", "200"])
        .output()
        .unwrap();
    assert!(social.status.success(), "{}", text(&social));
    for (function, args) in [
        ("social.topk", "vertex=3,k=4"),
        ("social.aggrv", "vertex=7"),
        ("auth", "user=user9,password=password-9"),
    ] {
        let invoke = kv(&["invoke", function, args]);
        assert!(invoke.status.success(), "{function}: {}", text(&invoke));
    }

    // Every storage node speaks RESP; a key of the other node is answered -MOVED to its RESP port.
    let resp = |i: usize| storage[i]["resp"].as_str().unwrap().to_string();
    let mut redis = std::net::TcpStream::connect(resp(0)).unwrap();
    redis.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    redis
        .write_all(b"AUTH ferry\r\nSET hello x\r\nGET hello\r\nSET foo y\r\nQUIT\r\n")
        .unwrap();
    let mut replies = String::new();
    redis.read_to_string(&mut replies).unwrap();
    assert_eq!(
        replies,
        format!("+OK\r\n+OK\r\n$1\r\nx\r\n-MOVED 12182 {}\r\n+OK\r\n", resp(1))
    );

    let processes = storage
        .iter()
        .chain(compute)
        .map(|p| (p["metrics"].as_str().unwrap().to_string(), p["pid"].as_u64().unwrap()))
        .chain([(
            cluster["gateway_metrics"].as_str().unwrap().to_string(),
            cluster["gateway_pid"].as_u64().unwrap(),
        )])
        .collect::<Vec<_>>();
    for (metrics, _) in &processes {
        let answer = scrape(metrics);
        assert!(
            answer.starts_with("HTTP/1.1 200 OK") && answer.contains("# TYPE ferry_"),
            "{answer}"
        );
    }
    assert!(scrape(&processes[3].0).contains("ferry_gateway_requests_total{op=\"put\",status=\"ok\"}"));

    let status = up.stop();
    assert!(status.success(), "{status}");
    let deadline = Instant::now() + Duration::from_secs(20);
    for (_, pid) in &processes {
        while alive(*pid) {
            assert!(
                Instant::now() < deadline,
                "process {pid} still runs after the cluster stopped"
            );
            std::thread::sleep(Duration::from_millis(50));
        }
    }
    let _ = std::fs::remove_dir_all(dir);
}

/// A RESP connection signed in as tenant 1 (token ferry), one command at a time.
pub(crate) struct Resp {
    reader: BufReader<std::net::TcpStream>,
    writer: std::net::TcpStream,
}

impl Resp {
    pub(crate) fn connect(addr: &str) -> Resp {
        let stream = std::net::TcpStream::connect(addr).unwrap();
        stream.set_read_timeout(Some(Duration::from_secs(20))).unwrap();
        let mut resp = Resp {
            reader: BufReader::new(stream.try_clone().unwrap()),
            writer: stream,
        };
        assert_eq!(resp.call(&["AUTH", "ferry"]), "+OK");
        resp
    }

    /// Sends `words` as a RESP array; the reply's first line, or a bulk string's value.
    pub(crate) fn call(&mut self, words: &[&str]) -> String {
        let mut out = format!("*{}\r\n", words.len());
        for word in words {
            out.push_str(&format!("${}\r\n{word}\r\n", word.len()));
        }
        self.writer.write_all(out.as_bytes()).unwrap();
        self.line()
    }

    /// The next reply's first line, or a bulk string's value.
    pub(crate) fn line(&mut self) -> String {
        let mut line = String::new();
        self.reader.read_line(&mut line).unwrap();
        if line.starts_with('$') && !line.starts_with("$-1") {
            let mut value = String::new();
            self.reader.read_line(&mut value).unwrap();
            return value.trim_end().to_string();
        }
        line.trim_end().to_string()
    }

    /// Every line up to the reply `until` (for replies of many lines).
    pub(crate) fn lines_until(&mut self, until: &str) -> String {
        let mut all = String::new();
        loop {
            let mut line = String::new();
            self.reader.read_line(&mut line).unwrap();
            if line.trim_end() == until {
                return all;
            }
            all.push_str(&line);
        }
    }

    /// Writes raw bytes (several commands at once).
    pub(crate) fn send(&mut self, bytes: &[u8]) {
        self.writer.write_all(bytes).unwrap();
    }
}

/// `ferry kv --server SERVER ARGS…`, run to its end.
fn kv(server: &str, args: &[&str]) -> Output {
    ferry().args(["kv", "--server", server]).args(args).output().unwrap()
}

/// Retries `attempt` (which says why it failed) until it succeeds or `timeout` passes.
pub(crate) fn eventually(timeout: Duration, mut attempt: impl FnMut() -> Result<(), String>) {
    let deadline = Instant::now() + timeout;
    loop {
        match attempt() {
            Ok(()) => return,
            Err(why) if Instant::now() >= deadline => panic!("not within {timeout:?}: {why}"),
            Err(_) => std::thread::sleep(Duration::from_millis(100)),
        }
    }
}

#[test]
fn a_storage_node_killed_with_sigkill_comes_back_on_its_data_dir_and_addresses() {
    let scratch = tempfile::Builder::new()
        .prefix("ferry-cluster-restart-")
        .tempdir()
        .unwrap();
    let dir = scratch.path();
    let mut up = ClusterUp::start(
        dir,
        &["--storage-nodes", "2", "--compute-nodes", "1", "--fsync", "always"],
    );
    let before = up.json();
    let storage = before["storage_nodes"].as_array().unwrap().clone();
    for (i, node) in storage.iter().enumerate() {
        let data_dir = dir.join(format!("node-s{}", i + 1));
        assert_eq!(node["data_dir"].as_str(), data_dir.to_str(), "{node}");
        assert!(data_dir.is_dir());
    }
    let gateway = before["gateway"].as_str().unwrap().to_string();
    // hello lives on s1, foo on s2 (see the test above); acknowledged under --fsync always.
    let put = kv(&gateway, &["put", "t", "hello", "world"]);
    assert!(put.status.success(), "{}", text(&put));

    let pid = |cluster: &serde_json::Value, i: usize| cluster["storage_nodes"][i]["pid"].as_u64().unwrap();
    let victim = pid(&before, 0);
    // SAFETY: kill(2) on a pid the cluster's JSON names.
    assert_eq!(unsafe { libc::kill(victim as libc::pid_t, libc::SIGKILL) }, 0);
    // The other node and the gateway go on serving.
    let put = kv(&gateway, &["put", "t", "foo", "bar"]);
    assert!(put.status.success(), "{}", text(&put));

    let mut after = before.clone();
    eventually(Duration::from_secs(60), || {
        if let Ok(Some(status)) = up.process.try_wait() {
            panic!("cluster up exited ({status}) instead of restarting the node");
        }
        after = up.json();
        match pid(&after, 0) {
            pid if pid == victim => Err("s1 still has its old pid in the JSON".into()),
            _ => Ok(()),
        }
    });
    assert!(alive(pid(&after, 0)));
    assert_eq!(pid(&after, 1), pid(&before, 1), "s2 must keep its process");
    for field in ["addr", "resp", "data_dir"] {
        assert_eq!(after["storage_nodes"][0][field], storage[0][field], "{field}");
    }
    for process in [&after["gateway_pid"], &after["compute_nodes"][0]["pid"]] {
        assert!(alive(process.as_u64().unwrap()), "{process} stopped");
    }
    // Printed before the JSON was rewritten.
    let line = std::iter::from_fn(|| up.lines.recv_timeout(Duration::from_secs(10)).ok())
        .find(|line| line.starts_with("storage node s1 exited"))
        .expect("no line about the restart");
    assert!(
        line.contains("restarted on") && line.contains("node-s1") && line.contains("recovered "),
        "{line}"
    );

    // The write survived, served on s1's old address, and the gateway reaches it again
    // (its connection to the killed process is gone: it reconnects on a later request).
    let s1 = storage[0]["addr"].as_str().unwrap();
    let get = kv(s1, &["get", "t", "hello"]);
    assert!(text(&get).starts_with("world"), "{}", text(&get));
    eventually(Duration::from_secs(30), || {
        let get = kv(&gateway, &["get", "t", "hello"]);
        if text(&get).starts_with("world") {
            Ok(())
        } else {
            Err(text(&get))
        }
    });
    let status = up.stop();
    assert!(status.success(), "{status}");
    let _ = std::fs::remove_dir_all(dir);
}

#[test]
fn a_storage_node_that_cannot_start_is_tried_within_its_budget_then_reported_down_and_the_rest_goes_on() {
    let scratch = tempfile::Builder::new()
        .prefix("ferry-cluster-down-")
        .tempdir()
        .unwrap();
    let dir = scratch.path();
    let mut up = ClusterUp::start(dir, &["--storage-nodes", "2", "--compute-nodes", "1"]);
    let before = up.json();
    let gateway = before["gateway"].as_str().unwrap().to_string();
    // foo lives on s2 (see the first test).
    let put = kv(&gateway, &["put", "t", "foo", "bar"]);
    assert!(put.status.success(), "{}", text(&put));

    // s1's process is gone and its data dir is a file now: no start can open it.
    let victim = before["storage_nodes"][0]["pid"].as_u64().unwrap();
    // Frozen first: a running node may create a file while its directory is removed.
    // SAFETY: kill(2) on a pid the cluster's JSON names.
    assert_eq!(unsafe { libc::kill(victim as libc::pid_t, libc::SIGSTOP) }, 0);
    std::fs::remove_dir_all(dir.join("node-s1")).unwrap();
    std::fs::write(dir.join("node-s1"), "not a data dir").unwrap();
    // SAFETY: kill(2) on a pid the cluster's JSON names.
    assert_eq!(unsafe { libc::kill(victim as libc::pid_t, libc::SIGKILL) }, 0);
    let mut after = before.clone();
    eventually(Duration::from_secs(90), || {
        if let Ok(Some(status)) = up.process.try_wait() {
            panic!("cluster up exited ({status}): one node down stopped the cluster");
        }
        after = up.json();
        match after["storage_nodes"][0]["down"].as_str() {
            Some(_) => Ok(()),
            None => Err(format!("s1 not reported down: {}", after["storage_nodes"][0])),
        }
    });
    let why = after["storage_nodes"][0]["down"].as_str().unwrap();
    assert!(why.contains("s1") && why.contains("restarts within"), "{why}");
    assert!(
        after["storage_nodes"][1].get("down").is_none(),
        "{}",
        after["storage_nodes"][1]
    );
    // Every start within the budget was tried (and failed), then it was left down.
    let lines: Vec<String> = std::iter::from_fn(|| up.lines.recv_timeout(Duration::from_secs(10)).ok())
        .take_while(|line| !line.contains("stays down"))
        .filter(|line| line.starts_with("storage node s1 "))
        .collect();
    let failed = lines
        .iter()
        .filter(|line| line.contains("could not be restarted"))
        .count();
    assert_eq!(failed, 5, "{lines:?}");
    // The config group's leader says so too.
    let group = after["config_group"].as_str().unwrap().to_string();
    eventually(Duration::from_secs(30), || {
        let status = ferry()
            .args(["cluster", "status", "--config-group", &group])
            .output()
            .unwrap();
        let shown = text(&status);
        match (
            shown.contains("node s1: down: not heard from"),
            shown.contains("node s2: up"),
        ) {
            (true, true) => Ok(()),
            _ => Err(shown),
        }
    });

    // The rest goes on: the healthy shard serves through the gateway, every other process
    // lives, and only SIGTERM stops the cluster, cleanly.
    std::thread::sleep(Duration::from_secs(1));
    assert!(up.process.try_wait().unwrap().is_none(), "cluster up exited");
    let get = kv(&gateway, &["get", "t", "foo"]);
    assert!(text(&get).starts_with("bar"), "{}", text(&get));
    for process in [
        &after["gateway_pid"],
        &after["compute_nodes"][0]["pid"],
        &after["storage_nodes"][1]["pid"],
    ] {
        assert!(alive(process.as_u64().unwrap()), "{process} stopped");
    }
    let status = up.stop();
    assert!(status.success(), "{status}");
    let _ = std::fs::remove_dir_all(dir);
}

/// The number after `family` in a scrape (0 if it is not there).
fn counter(scrape: &str, family: &str) -> u64 {
    scrape
        .lines()
        .find_map(|line| line.strip_prefix(family)?.trim().parse().ok())
        .unwrap_or(0)
}

#[test]
fn the_gateway_and_a_compute_node_killed_with_sigkill_come_back_on_their_addresses() {
    let scratch = tempfile::Builder::new()
        .prefix("ferry-cluster-front-")
        .tempdir()
        .unwrap();
    let dir = scratch.path();
    // Placed with kv, every invocation runs on the compute node.
    let mut up = ClusterUp::start(dir, &["--storage-nodes", "1", "--compute-nodes", "1", "--policy", "kv"]);
    let before = up.json();
    let gateway = before["gateway"].as_str().unwrap().to_string();
    let load = ferry()
        .args(["load", "--server", &gateway, "traverse", "--keys", "200"])
        .output()
        .unwrap();
    assert!(load.status.success(), "{}", text(&load));

    let pids = |cluster: &serde_json::Value| {
        (
            cluster["gateway_pid"].as_u64().unwrap(),
            cluster["compute_nodes"][0]["pid"].as_u64().unwrap(),
        )
    };
    let (gateway_pid, compute_pid) = pids(&before);
    for victim in [gateway_pid, compute_pid] {
        // SAFETY: kill(2) on a pid the cluster's JSON names.
        assert_eq!(unsafe { libc::kill(victim as libc::pid_t, libc::SIGKILL) }, 0);
    }
    let mut after = before.clone();
    eventually(Duration::from_secs(60), || {
        if let Ok(Some(status)) = up.process.try_wait() {
            panic!("cluster up exited ({status}) instead of restarting the gateway and the compute node");
        }
        after = up.json();
        let (gateway, compute) = pids(&after);
        match gateway != gateway_pid && compute != compute_pid {
            true => Ok(()),
            false => Err(format!("old pids in the JSON: {after}")),
        }
    });
    let (gateway_now, compute_now) = pids(&after);
    assert!(alive(gateway_now) && alive(compute_now));
    for field in ["gateway", "gateway_resp"] {
        assert_eq!(after[field], before[field], "{field}");
    }
    assert_eq!(after["compute_nodes"][0]["addr"], before["compute_nodes"][0]["addr"]);
    assert_eq!(
        after["storage_nodes"][0]["pid"], before["storage_nodes"][0]["pid"],
        "the storage node must keep its process"
    );
    let lines: Vec<String> = std::iter::from_fn(|| up.lines.recv_timeout(Duration::from_secs(10)).ok())
        .filter(|line| line.contains(" exited "))
        .take(2)
        .collect();
    assert!(
        lines
            .iter()
            .any(|line| line.starts_with("gateway exited") && line.contains("restarted (pid"))
            && lines.iter().any(|line| line.starts_with("compute node 1 exited")),
        "{lines:?}"
    );

    // The same gateway address serves again, and ships the data to the restarted compute
    // node (the gateway dials it on its old address).
    eventually(Duration::from_secs(30), || {
        let invoke = kv(&gateway, &["invoke", "traverse", "start=5,depth=8"]);
        match text(&invoke).contains("reached node") {
            true => Ok(()),
            false => Err(text(&invoke)),
        }
    });
    let metrics = scrape(after["compute_nodes"][0]["metrics"].as_str().unwrap());
    assert!(
        counter(&metrics, "ferry_compute_invocations_total") > 0,
        "the restarted compute node ran nothing: {metrics}"
    );
    let status = up.stop();
    assert!(status.success(), "{status}");
    let _ = std::fs::remove_dir_all(dir);
}

#[test]
fn gateway_and_compute_refuse_bad_flags_clearly() {
    let missing_map = ferry()
        .args([
            "gateway",
            "--cluster-map",
            "/nonexistent/map.toml",
            "--tenant",
            "1:ferry",
        ])
        .output()
        .unwrap();
    assert!(!missing_map.status.success());
    assert!(
        text(&missing_map).contains("cannot read --cluster-map"),
        "{}",
        text(&missing_map)
    );
    let no_tenant = ferry().args(["compute", "--cluster-map", "x.toml"]).output().unwrap();
    assert!(!no_tenant.status.success());
    assert!(text(&no_tenant).contains("--tenant"), "{}", text(&no_tenant));
    let bad_policy = ferry()
        .args(["cluster", "up", "--policy", "nonsense"])
        .output()
        .unwrap();
    assert!(!bad_policy.status.success());
    assert!(text(&bad_policy).contains("--policy"), "{}", text(&bad_policy));
    let too_many = ferry()
        .args(["cluster", "up", "--storage-nodes", "0"])
        .output()
        .unwrap();
    assert!(!too_many.status.success() && text(&too_many).contains("--storage-nodes"));
}
