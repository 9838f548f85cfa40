//! `ferry cluster up` as a user runs it: the JSON it writes, `ferry kv` and `ferry load`
//! against the gateway, a scrape of every process's metrics, and a clean stop on SIGTERM.

use std::io::{Read, Write};
use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};

fn ferry() -> Command {
    Command::new(env!("CARGO_BIN_EXE_ferry"))
}

fn text(output: &Output) -> String {
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

fn alive(pid: u64) -> bool {
    std::path::Path::new(&format!("/proc/{pid}")).exists()
        && !std::fs::read_to_string(format!("/proc/{pid}/stat")).is_ok_and(|stat| stat.contains(") Z "))
}

#[test]
fn cluster_up_serves_kv_load_and_metrics_and_stops_on_sigterm() {
    let dir = std::env::temp_dir().join(format!("ferry-cluster-cli-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let json_path = dir.join("cluster.json");
    let mut up = ferry()
        .args([
            "cluster",
            "up",
            "--storage-nodes",
            "2",
            "--compute-nodes",
            "1",
            "--json",
        ])
        .arg(&json_path)
        .arg("--dir")
        .arg(&dir)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let deadline = Instant::now() + Duration::from_secs(60);
    while !json_path.exists() {
        assert!(Instant::now() < deadline, "no cluster JSON within 60 s");
        assert!(up.try_wait().unwrap().is_none(), "cluster up exited early");
        std::thread::sleep(Duration::from_millis(50));
    }
    let cluster: serde_json::Value = serde_json::from_str(&std::fs::read_to_string(&json_path).unwrap()).unwrap();
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
    assert!(scrape(&processes[3].0).contains("ferry_gateway_requests{op=\"put\",status=\"ok\"}"));

    // SAFETY: kill(2) on our own child's pid.
    unsafe { libc::kill(up.id() as libc::pid_t, libc::SIGTERM) };
    let status = up.wait().unwrap();
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
    let _ = std::fs::remove_dir_all(&dir);
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
