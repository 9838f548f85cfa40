//! The `ferry` binary as users run it: server, kv, load, bench-kv, and bad flags.

use std::io::{BufRead, BufReader};
use std::process::{Child, Command, Output, Stdio};

fn ferry() -> Command {
    Command::new(env!("CARGO_BIN_EXE_ferry"))
}

/// A `ferry server` child, stopped with SIGTERM when dropped.
pub(crate) struct Server {
    pub(crate) child: Child,
    pub(crate) addr: String,
    /// The rest of its stdout, after the `listening on` line.
    pub(crate) stdout: std::io::Lines<BufReader<std::process::ChildStdout>>,
}

impl Server {
    pub(crate) fn start(extra: &[&str]) -> Server {
        let mut child = ferry()
            .args([
                "server",
                "--listen",
                "127.0.0.1:0",
                "--tenant",
                "1:ferry",
                "--spin-iters-per-ms",
                "1000000",
            ])
            .args(extra)
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        let mut stdout = BufReader::new(child.stdout.take().unwrap()).lines();
        let first = stdout.next().unwrap().unwrap();
        let addr = first
            .strip_prefix("listening on ")
            .unwrap_or_else(|| panic!("first line must announce the address, got {first:?}"))
            .trim()
            .to_string();
        assert!(addr.starts_with("127.0.0.1:") && !addr.ends_with(":0"), "{addr}");
        Server { child, addr, stdout }
    }

    pub(crate) fn kv(&self, args: &[&str]) -> Output {
        ferry()
            .args(["kv", "--server", &self.addr])
            .args(args)
            .output()
            .unwrap()
    }

    fn stop(mut self) -> std::process::ExitStatus {
        // SAFETY: kill(2) on our own child's pid.
        unsafe { libc::kill(self.child.id() as libc::pid_t, libc::SIGTERM) };
        let status = self.child.wait().unwrap();
        std::mem::forget(self);
        status
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn stdout(output: &Output) -> String {
    String::from_utf8_lossy(&output.stdout).into_owned()
}

fn stderr(output: &Output) -> String {
    String::from_utf8_lossy(&output.stderr).into_owned()
}

#[test]
fn server_announces_its_port_and_kv_pokes_it() {
    let server = Server::start(&["--cores", "2"]);
    let put = server.kv(&["put", "users", "alice", "hello world"]);
    assert!(put.status.success(), "{}", stderr(&put));
    assert!(stdout(&put).starts_with("OK version"), "{}", stdout(&put));

    let get = server.kv(&["get", "users", "alice"]);
    assert!(get.status.success());
    assert!(stdout(&get).starts_with("hello world\n(version"), "{}", stdout(&get));

    let missing = server.kv(&["get", "users", "bob"]);
    assert!(!missing.status.success(), "a missing key exits non-zero");
    assert!(stdout(&missing).contains("not found"));

    let load = ferry()
        .args(["load", "--server", &server.addr, "traverse", "--keys", "500"])
        .output()
        .unwrap();
    assert!(load.status.success(), "{}", stderr(&load));
    assert!(stdout(&load).contains("loaded 500 objects"), "{}", stdout(&load));
    let remote = server.kv(&["invoke", "traverse", "start=7,depth=3,compute=1us", "--remote"]);
    let local = server.kv(&["invoke", "traverse", "start=7,depth=3,compute=1us", "--local"]);
    assert!(
        remote.status.success() && local.status.success(),
        "{}{}",
        stderr(&remote),
        stderr(&local)
    );
    let first_line = |o: &Output| stdout(o).lines().next().unwrap_or_default().to_string();
    assert!(first_line(&remote).starts_with("reached node"), "{}", stdout(&remote));
    assert_eq!(first_line(&remote), first_line(&local), "same result on both sides");
    assert!(stdout(&remote).contains("(Remote,") && stdout(&local).contains("(Local,"));

    let deleted = server.kv(&["delete", "users", "alice"]);
    assert!(deleted.status.success());
    let stats = server.kv(&["stats"]);
    assert!(stdout(&stats).contains("tenant.1.requests"), "{}", stdout(&stats));

    let status = server.stop();
    assert!(status.success(), "SIGTERM is a graceful, successful exit: {status:?}");
}

#[test]
fn fn_loads_lists_and_calls_a_lua_library_on_both_sides() {
    let server = Server::start(&[]);
    let library = concat!(env!("CARGO_MANIFEST_DIR"), "/../../examples/lua/traverse.lua");
    let fn_cmd = |args: &[&str]| {
        ferry()
            .args(["fn", "--server", &server.addr])
            .args(args)
            .output()
            .unwrap()
    };
    let load = fn_cmd(&["load", library]);
    assert!(load.status.success(), "{}", stderr(&load));
    assert_eq!(stdout(&load).trim(), "graph");
    let again = fn_cmd(&["load", library]);
    assert!(!again.status.success() && stderr(&again).contains("Library 'graph' already exists"));
    assert!(fn_cmd(&["load", "--replace", library]).status.success());
    let graph = fn_cmd(&["call", "load_graph", "0", "100", "100"]);
    assert_eq!(stdout(&graph).trim(), "(integer) 100", "{}", stderr(&graph));
    let remote = fn_cmd(&["call", "traverse", "--keys", "node:000000000007", "5"]);
    let local = fn_cmd(&["call", "traverse", "--local", "--keys", "node:000000000007", "5"]);
    assert!(
        stdout(&remote).starts_with("node:0000000"),
        "{}{}",
        stdout(&remote),
        stderr(&remote)
    );
    assert_eq!(stdout(&remote), stdout(&local), "the same reply on both sides");
    let list = fn_cmd(&["list", "--pattern", "gr*"]);
    assert!(
        stdout(&list).contains("library_name") && stdout(&list).contains("no-writes"),
        "{}",
        stdout(&list)
    );
    let missing = fn_cmd(&["call", "nope"]);
    assert!(!missing.status.success() && stderr(&missing).contains("Function not found"));
    let unreadable = fn_cmd(&["load", "/nonexistent/lib.lua"]);
    assert!(!unreadable.status.success() && stderr(&unreadable).contains("/nonexistent/lib.lua"));
    assert!(fn_cmd(&["delete", "graph"]).status.success());
    let gone = fn_cmd(&["call", "traverse", "--keys", "node:000000000007", "5"]);
    assert!(!gone.status.success() && stderr(&gone).contains("Function not found"));
    server.stop();
}

#[test]
fn bad_flags_and_unreachable_servers_fail_with_a_message() {
    let cases: Vec<(Vec<&str>, &str)> = vec![
        (
            vec!["server", "--listen", "127.0.0.1:0", "--cores", "0", "--tenant", "1:x"],
            "cores",
        ),
        (vec!["server", "--listen", "127.0.0.1:0"], "no tenants"),
        (
            vec!["server", "--listen", "127.0.0.1:0", "--tenant", "x:y"],
            "tenant id must be a number",
        ),
        (
            vec![
                "server",
                "--listen",
                "127.0.0.1:0",
                "--tenant",
                "1:x",
                "--cpu-set",
                "4000",
            ],
            "does not exist",
        ),
        (
            vec![
                "server",
                "--listen",
                "127.0.0.1:0",
                "--tenant",
                "1:x",
                "--invoke-budget",
                "soon",
            ],
            "duration",
        ),
        (
            vec!["server", "--listen", "127.0.0.1:0", "--tenant", "1:x", "--keep-warm"],
            "--cpu-set",
        ),
        (vec!["server", "--config", "/nonexistent/ferry.toml"], "cannot read"),
        (vec!["kv", "--server", "127.0.0.1:1", "get", "t", "k"], "cannot connect"),
        (
            vec!["kv", "--server", "127.0.0.1:1", "invoke", "traverse", "depth=x"],
            "depth",
        ),
        (vec!["load", "--server", "127.0.0.1:1", "nonsense"], "unknown data set"),
        (vec!["bench-kv", "--client-cpus", "4000"], "does not exist"),
        (vec!["bench-kv", "--server-cpus", "1", "--client-cpus", "1"], "overlap"),
        (vec!["bench-kv", "--runs", "0"], "--runs"),
    ];
    for (args, expected) in cases {
        let output = ferry().args(&args).output().unwrap();
        assert!(!output.status.success(), "{args:?} should fail");
        let message = stderr(&output);
        assert!(
            message.contains(expected),
            "{args:?}: expected {expected:?} in {message:?}"
        );
        assert!(!message.contains("panicked"), "{args:?} panicked: {message}");
    }
}

#[test]
fn wrong_token_is_refused_with_a_clear_error() {
    let server = Server::start(&[]);
    let output = ferry()
        .args(["kv", "--server", &server.addr, "--token", "guess", "get", "t", "k"])
        .output()
        .unwrap();
    assert!(!output.status.success());
    assert!(stderr(&output).contains("unauthorized"), "{}", stderr(&output));
}

#[test]
fn bench_kv_runs_end_to_end_in_its_short_form() {
    let json = std::env::temp_dir().join(format!("ferry-bench-kv-{}.json", std::process::id()));
    let output = ferry()
        .args([
            "bench-kv",
            "--duration",
            "150ms",
            "--warmup",
            "20ms",
            "--runs",
            "1",
            "--keys",
            "200",
        ])
        .args(["--json", json.to_str().unwrap()])
        .output()
        .unwrap();
    assert!(output.status.success(), "{}", stderr(&output));
    let table = stdout(&output);
    for phase in ["get ", "get@load", "invoke-noop ", "invoke-noop@load"] {
        assert!(table.contains(phase), "{phase} missing from {table}");
    }
    let report: serde_json::Value = serde_json::from_str(&std::fs::read_to_string(&json).unwrap()).unwrap();
    let medians = report["medians"].as_array().unwrap();
    assert_eq!(medians.len(), 4);
    for phase in medians {
        assert!(phase["throughput_ops"].as_f64().unwrap() > 0.0, "{phase}");
    }
    let _ = std::fs::remove_file(json);
}

/// A map of two nodes: this one (s1, slots 0-8191) and s2, which is never contacted.
fn cluster_map_file(name: &str, text: &str) -> std::path::PathBuf {
    let path = std::env::temp_dir().join(format!("ferry-map-{}-{name}.toml", std::process::id()));
    std::fs::write(&path, text).unwrap();
    path
}

const TWO_NODE_MAP: &str = "[[node]]\nid = \"s1\"\naddr = \"127.0.0.1:7701\"\nslots = [\"0-8191\"]\n\n\
                            [[node]]\nid = \"s2\"\naddr = \"127.0.0.1:7702\"\nslots = [\"8192-16383\"]\n";

#[test]
fn a_cluster_node_serves_its_slots_and_answers_moved_for_others() {
    let map = cluster_map_file("good", TWO_NODE_MAP);
    let server = Server::start(&["--cluster-map", map.to_str().unwrap(), "--node-id", "s1"]);
    // "hello" is slot 866 (s1's), "foo" slot 12182 (s2's).
    let put = server.kv(&["put", "t", "hello", "v"]);
    assert!(put.status.success(), "{}", stderr(&put));
    let moved = server.kv(&["put", "t", "foo", "v"]);
    assert!(!moved.status.success());
    assert!(
        stderr(&moved).contains("moved 12182 s2 127.0.0.1:7702"),
        "{}",
        stderr(&moved)
    );
    server.stop();
    // A node missing from the map, a map with a gap, and half of the flag pair are refused.
    let gap = cluster_map_file("gap", &TWO_NODE_MAP.replace("8192-16383", "8192-16000"));
    for (args, expected) in [
        (
            vec!["--cluster-map", map.to_str().unwrap(), "--node-id", "s9"],
            "not in the cluster map",
        ),
        (
            vec!["--cluster-map", gap.to_str().unwrap(), "--node-id", "s1"],
            "slots 16001-16383 are served by no node",
        ),
        (vec!["--cluster-map", map.to_str().unwrap()], "--node-id"),
    ] {
        let output = ferry()
            .args(["server", "--listen", "127.0.0.1:0", "--tenant", "1:ferry"])
            .args(&args)
            .output()
            .unwrap();
        assert!(!output.status.success(), "{args:?} started");
        assert!(stderr(&output).contains(expected), "{args:?}: {}", stderr(&output));
    }
    let _ = std::fs::remove_file(map);
    let _ = std::fs::remove_file(gap);
}

#[test]
fn the_metrics_address_is_announced_after_the_data_address() {
    let mut server = Server::start(&["--metrics", "127.0.0.1:0"]);
    let second = server.stdout.next().unwrap().unwrap();
    let metrics = second.strip_prefix("metrics on ").unwrap_or_else(|| panic!("{second}"));
    assert!(
        metrics.starts_with("127.0.0.1:") && !metrics.ends_with(":0"),
        "{metrics}"
    );
}

#[test]
fn the_resp_address_is_announced_right_after_the_data_address_and_speaks_redis() {
    use std::io::{Read, Write};
    let mut server = Server::start(&["--resp", "127.0.0.1:0", "--metrics", "127.0.0.1:0"]);
    let second = server.stdout.next().unwrap().unwrap();
    let resp = second.strip_prefix("resp on ").unwrap_or_else(|| panic!("{second}"));
    let third = server.stdout.next().unwrap().unwrap();
    assert!(third.starts_with("metrics on "), "{third}");
    let mut stream = std::net::TcpStream::connect(resp).unwrap();
    stream
        .set_read_timeout(Some(std::time::Duration::from_secs(10)))
        .unwrap();
    stream
        .write_all(b"AUTH ferry\r\nSET greeting hello\r\nGET greeting\r\nQUIT\r\n")
        .unwrap();
    let mut reply = String::new();
    stream.read_to_string(&mut reply).unwrap();
    assert_eq!(reply, "+OK\r\n+OK\r\n$5\r\nhello\r\n+OK\r\n");
    // The same object through the ferry protocol: database 0 is the table db0.
    let get = server.kv(&["get", "db0", "greeting"]);
    assert!(String::from_utf8_lossy(&get.stdout).starts_with("hello"), "{get:?}");
}

/// `examples/redis_client.py` (Python's redis package) against a node's RESP port, where
/// Python has the package (`examples/run_redis_client.sh` installs it into `.venv-redis`).
#[test]
fn the_python_redis_example_passes_where_python_has_the_package() {
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    let venv = root.join(".venv-redis/bin/python");
    let python = if venv.exists() {
        venv.display().to_string()
    } else {
        "python3".to_string()
    };
    let has_package = Command::new(&python)
        .args(["-c", "import redis"])
        .output()
        .is_ok_and(|out| out.status.success());
    if !has_package {
        eprintln!("skipped: no Python with the redis package (examples/run_redis_client.sh installs one)");
        return;
    }
    let mut server = Server::start(&["--resp", "127.0.0.1:0"]);
    let second = server.stdout.next().unwrap().unwrap();
    let resp = second.strip_prefix("resp on ").unwrap_or_else(|| panic!("{second}"));
    let port = resp.rsplit_once(':').unwrap().1;
    let output = Command::new(&python)
        .arg(root.join("examples/redis_client.py"))
        .args(["--port", port])
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert!(output.status.success() && stdout.contains("checks passed"), "{stdout}");
}
