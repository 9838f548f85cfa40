//! TLS end to end against real `ferry` processes: the ferry protocol (`ferry kv`), RESP
//! (`redis-cli --tls` and redis-py with `ssl=True`, each skipped with a printed reason
//! where it is not installed) and `/metrics` (a rustls client) over TLS; a client that
//! distrusts the node, one speaking without TLS, and, where client certificates are
//! required, one presenting none or one from another CA, each refused with a clear error,
//! logged and counted by the node; and `cluster up` with TLS on every listener and every
//! link between its processes.

use std::io::{Read, Write};
use std::net::TcpStream;
use std::path::Path;
use std::process::{Command, Output};
use std::time::Duration;

use ferry_net::tls::pem::Identity;
use ferry_net::tls::rustls;
use ferry_net::tls::rustls::pki_types::ServerName;
use ferry_net::tls::testing::Pki;
use ferry_net::tls::ClientTls;

use crate::cluster_cli::ClusterUp;
use crate::server_cli::Server;

/// Longest a test waits on one socket operation.
const PATIENCE: Duration = Duration::from_secs(10);

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

/// A fresh test PKI of its own for test `name`, removed when the test ends.
struct Certs(Pki);

impl std::ops::Deref for Certs {
    type Target = Pki;
    fn deref(&self) -> &Pki {
        &self.0
    }
}

impl Drop for Certs {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0.dir);
    }
}

fn pki(name: &str) -> Certs {
    let dir = std::env::temp_dir().join(format!("ferry-tls-cli-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    Certs(Pki::generate(&dir).unwrap())
}

fn path(path: &Path) -> &str {
    path.to_str().expect("temp paths are UTF-8")
}

/// The RESP and metrics addresses a server announces after its `listening on` line.
fn resp_and_metrics(server: &mut Server) -> (String, String) {
    let mut next = |prefix: &str| {
        let line = server.stdout.next().unwrap().unwrap();
        line.strip_prefix(prefix)
            .unwrap_or_else(|| panic!("expected {prefix:?}, got {line:?}"))
            .to_string()
    };
    let resp = next("resp on ");
    let metrics = next("metrics on ");
    (resp, metrics)
}

/// `redis-cli` with TLS support, if installed.
fn redis_cli() -> Option<Command> {
    let help = Command::new("redis-cli").arg("--help").output().ok()?;
    if !String::from_utf8_lossy(&help.stdout).contains("--tls") {
        eprintln!("skipped the redis-cli part: this redis-cli has no TLS support");
        return None;
    }
    Some(Command::new("redis-cli"))
}

/// Runs redis-cli against the RESP `addr` over TLS trusting `ca`, presenting `identity`,
/// signed in as tenant 1.
fn redis_cli_tls(addr: &str, ca: &Path, identity: Option<&Identity>, command: &[&str]) -> Option<Output> {
    let mut cli = redis_cli()?;
    let (host, port) = addr.rsplit_once(':').unwrap();
    cli.args(["-h", host, "-p", port, "--tls", "--cacert", path(ca), "--user", "1"])
        .env("REDISCLI_AUTH", "ferry");
    if let Some(identity) = identity {
        cli.args(["--cert", path(&identity.cert), "--key", path(&identity.key)]);
    }
    Some(cli.args(command).output().unwrap())
}

/// A Python with the redis package, if there is one (`.ci/run` installs it when it can).
fn python_with_redis() -> Option<String> {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
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
        eprintln!("skipped the redis-py part: `{python} -c 'import redis'` failed (pip install redis)");
        return None;
    }
    Some(python)
}

/// redis-py over TLS (`ssl=True`, trusting `ca`, presenting `identity`): SET then GET of
/// a key, as tenant 1. Prints `got VALUE`, or the exception's type and message.
const REDIS_PY: &str = r#"
import sys, redis
host, port, ca, cert, key = sys.argv[1:6]
extra = {"ssl_certfile": cert, "ssl_keyfile": key} if cert else {}
try:
    r = redis.Redis(host=host, port=int(port), username="1", password="ferry", ssl=True,
                    ssl_ca_certs=ca, socket_timeout=10, **extra)
    r.set("py-key", "over tls")
    print("got", r.get("py-key").decode())
except Exception as err:
    print(type(err).__name__, err)
"#;

fn redis_py_tls(python: &str, addr: &str, ca: &Path, identity: Option<&Identity>) -> String {
    let (host, port) = addr.rsplit_once(':').unwrap();
    let (cert, key) = identity.map_or(("", ""), |id| (path(&id.cert), path(&id.key)));
    let output = Command::new(python)
        .args(["-c", REDIS_PY, host, port, path(ca), cert, key])
        .output()
        .unwrap();
    text(&output)
}

/// `GET /metrics` over TLS with a rustls client trusting `ca` and presenting `identity`:
/// the whole answer, or why there is none.
fn scrape_tls(addr: &str, ca: &Path, identity: Option<&Identity>) -> Result<String, String> {
    let config = ClientTls {
        ca: ca.to_path_buf(),
        identity: identity.cloned(),
    }
    .load()
    .unwrap();
    let name = ServerName::try_from("127.0.0.1").unwrap();
    let connection = rustls::ClientConnection::new(config, name).unwrap();
    let tcp = TcpStream::connect(addr).unwrap();
    tcp.set_read_timeout(Some(PATIENCE)).unwrap();
    let mut stream = rustls::StreamOwned::new(connection, tcp);
    stream
        .write_all(b"GET /metrics HTTP/1.1\r\nHost: x\r\n\r\n")
        .map_err(|err| err.to_string())?;
    let mut page = String::new();
    stream.read_to_string(&mut page).map_err(|err| err.to_string())?;
    Ok(page)
}

/// One counter's value in a scrape.
fn counter(page: &str, name: &str) -> u64 {
    page.lines()
        .find_map(|line| line.strip_prefix(&format!("{name} ")))
        .unwrap_or_else(|| panic!("no {name} in {page}"))
        .trim()
        .parse()
        .unwrap()
}

/// `ferry kv` against `addr` with extra flags (TLS ones).
fn kv(addr: &str, flags: &[&str], command: &[&str]) -> Output {
    ferry()
        .args(["kv", "--server", addr])
        .args(flags)
        .args(command)
        .output()
        .unwrap()
}

#[test]
fn a_tls_node_serves_redis_cli_redis_py_ferry_kv_and_metrics_and_refuses_clients_that_distrust_it() {
    let pki = pki("server-auth");
    // TLS from the config file: the route a deployment takes.
    let config = pki.dir.join("node.toml");
    std::fs::write(
        &config,
        format!(
            "tls_cert = {:?}\ntls_key = {:?}\n",
            path(&pki.node.cert),
            path(&pki.node.key)
        ),
    )
    .unwrap();
    let mut server = Server::start(&[
        "--config",
        path(&config),
        "--resp",
        "127.0.0.1:0",
        "--metrics",
        "127.0.0.1:0",
    ]);
    let (resp, metrics) = resp_and_metrics(&mut server);
    let ca = ["--tls-ca", path(&pki.ca)];

    // The ferry protocol.
    let put = kv(&server.addr, &ca, &["put", "t", "k", "secret"]);
    assert!(put.status.success(), "{}", text(&put));
    let get = kv(&server.addr, &ca, &["get", "t", "k"]);
    assert!(text(&get).starts_with("secret"), "{}", text(&get));
    let plain = kv(&server.addr, &[], &["get", "t", "k"]);
    assert!(
        !plain.status.success() && text(&plain).contains("the node speaks TLS and this client does not"),
        "{}",
        text(&plain)
    );
    let plain_node = Server::start(&[]);
    let mismatch = kv(&plain_node.addr, &ca, &["get", "t", "k"]);
    assert!(text(&mismatch).contains("does it serve TLS?"), "{}", text(&mismatch));
    let distrust = kv(&server.addr, &["--tls-ca", path(&pki.other_ca)], &["get", "t", "k"]);
    assert!(
        !distrust.status.success() && text(&distrust).contains("UnknownIssuer"),
        "{}",
        text(&distrust)
    );

    // RESP: redis-cli and redis-py.
    if let Some(ping) = redis_cli_tls(&resp, &pki.ca, None, &["PING"]) {
        assert_eq!(String::from_utf8_lossy(&ping.stdout).trim(), "PONG", "{}", text(&ping));
        let set = redis_cli_tls(&resp, &pki.ca, None, &["SET", "greeting", "hello"]).unwrap();
        assert_eq!(String::from_utf8_lossy(&set.stdout).trim(), "OK", "{}", text(&set));
        let get = redis_cli_tls(&resp, &pki.ca, None, &["GET", "greeting"]).unwrap();
        assert_eq!(String::from_utf8_lossy(&get.stdout).trim(), "hello", "{}", text(&get));
        let distrust = redis_cli_tls(&resp, &pki.other_ca, None, &["PING"]).unwrap();
        assert!(
            !distrust.status.success() && text(&distrust).contains("certificate verify failed"),
            "{}",
            text(&distrust)
        );
        let (host, port) = resp.rsplit_once(':').unwrap();
        let plain = Command::new("redis-cli")
            .args(["-h", host, "-p", port, "--user", "1", "PING"])
            .env("REDISCLI_AUTH", "ferry")
            .output()
            .unwrap();
        assert!(
            !String::from_utf8_lossy(&plain.stdout).contains("PONG"),
            "a plain-text redis-cli was served: {}",
            text(&plain)
        );
    }
    if let Some(python) = python_with_redis() {
        let out = redis_py_tls(&python, &resp, &pki.ca, None);
        assert_eq!(out.trim(), "got over tls", "{out}");
        let distrust = redis_py_tls(&python, &resp, &pki.other_ca, None);
        assert!(distrust.contains("CERTIFICATE_VERIFY_FAILED"), "{distrust}");
    }

    // Metrics over HTTPS; plain HTTP gets no page.
    let page = scrape_tls(&metrics, &pki.ca, None).unwrap();
    assert!(page.starts_with("HTTP/1.1 200 OK"), "{page}");
    assert!(counter(&page, "ferry_node_tls_handshake_failures_total") >= 1, "{page}");
    let mut plain = TcpStream::connect(&metrics).unwrap();
    plain.set_read_timeout(Some(PATIENCE)).unwrap();
    plain.write_all(b"GET /metrics HTTP/1.1\r\nHost: x\r\n\r\n").unwrap();
    let mut answer = Vec::new();
    let _ = plain.read_to_end(&mut answer);
    assert!(!answer.starts_with(b"HTTP"), "plain HTTP was answered");
}

#[test]
fn where_client_certificates_are_required_a_missing_or_foreign_one_is_refused_clearly() {
    let pki = pki("client-auth");
    let mut server = Server::start(&[
        "--resp",
        "127.0.0.1:0",
        "--metrics",
        "127.0.0.1:0",
        "--tls-cert",
        path(&pki.node.cert),
        "--tls-key",
        path(&pki.node.key),
        "--tls-client-ca",
        path(&pki.ca),
        "--tls-require-client-cert",
    ]);
    let (resp, metrics) = resp_and_metrics(&mut server);
    let client = [
        "--tls-ca",
        path(&pki.ca),
        "--tls-cert",
        path(&pki.client.cert),
        "--tls-key",
        path(&pki.client.key),
    ];
    let mut refused = 0;

    // The ferry protocol: the client's own error says why.
    let put = kv(&server.addr, &client, &["put", "t", "k", "v"]);
    assert!(put.status.success(), "{}", text(&put));
    let none = kv(&server.addr, &client[..2], &["get", "t", "k"]);
    assert!(
        !none.status.success() && text(&none).contains("CertificateRequired"),
        "{}",
        text(&none)
    );
    let stranger = [
        "--tls-ca",
        path(&pki.ca),
        "--tls-cert",
        path(&pki.stranger.cert),
        "--tls-key",
        path(&pki.stranger.key),
    ];
    let foreign = kv(&server.addr, &stranger, &["get", "t", "k"]);
    assert!(
        !foreign.status.success() && text(&foreign).contains("UnknownCA"),
        "{}",
        text(&foreign)
    );
    refused += 2;

    // redis-cli: served with the CA's client certificate, refused without one or with a
    // foreign one (redis-cli itself says only "I/O error"; the node's log says why).
    if let Some(set) = redis_cli_tls(&resp, &pki.ca, Some(&pki.client), &["SET", "greeting", "hi"]) {
        assert_eq!(String::from_utf8_lossy(&set.stdout).trim(), "OK", "{}", text(&set));
        let get = redis_cli_tls(&resp, &pki.ca, Some(&pki.client), &["GET", "greeting"]).unwrap();
        assert_eq!(String::from_utf8_lossy(&get.stdout).trim(), "hi", "{}", text(&get));
        for identity in [None, Some(&pki.stranger)] {
            let get = redis_cli_tls(&resp, &pki.ca, identity, &["GET", "greeting"]).unwrap();
            assert!(
                !get.status.success() && !String::from_utf8_lossy(&get.stdout).contains("hi"),
                "{}",
                text(&get)
            );
        }
        // redis-cli tries twice before it gives up.
        refused += 4;
    }
    // redis-py: its errors name the alert.
    if let Some(python) = python_with_redis() {
        let out = redis_py_tls(&python, &resp, &pki.ca, Some(&pki.client));
        assert_eq!(out.trim(), "got over tls", "{out}");
        let none = redis_py_tls(&python, &resp, &pki.ca, None);
        assert!(none.contains("CERTIFICATE_REQUIRED"), "{none}");
        let foreign = redis_py_tls(&python, &resp, &pki.ca, Some(&pki.stranger));
        assert!(foreign.contains("UNKNOWN_CA"), "{foreign}");
        refused += 2;
    }

    // Metrics: the certificate is required there too, and the refusals are counted.
    assert!(
        scrape_tls(&metrics, &pki.ca, None).is_err(),
        "scraped without a certificate"
    );
    refused += 1;
    let page = scrape_tls(&metrics, &pki.ca, Some(&pki.client)).unwrap();
    assert!(page.starts_with("HTTP/1.1 200 OK"), "{page}");
    let counted = counter(&page, "ferry_node_tls_handshake_failures_total");
    assert!(
        counted >= refused,
        "{counted} failed handshakes counted, {refused} refused"
    );

    // The node's log names each refusal's reason.
    let _ = server.child.kill();
    let _ = server.child.wait();
    let mut log = String::new();
    server.child.stderr.take().unwrap().read_to_string(&mut log).unwrap();
    assert!(log.contains("TLS handshake failed: peer sent no certificates"), "{log}");
    assert!(
        log.contains("TLS handshake failed: invalid peer certificate: UnknownIssuer"),
        "{log}"
    );
}

#[test]
fn cluster_up_speaks_tls_on_every_listener_and_every_link_with_client_certificates() {
    let pki = pki("cluster");
    let scratch = tempfile::Builder::new()
        .prefix("ferry-tls-cli-cluster-up-")
        .tempdir()
        .unwrap();
    let dir = scratch.path();
    let up = ClusterUp::start(
        dir,
        &[
            "--storage-nodes",
            "2",
            "--compute-nodes",
            "1",
            "--policy",
            "kv",
            "--tls-cert",
            path(&pki.node.cert),
            "--tls-key",
            path(&pki.node.key),
            "--tls-client-ca",
            path(&pki.ca),
            "--tls-require-client-cert",
            "--tls-ca",
            path(&pki.ca),
        ],
    );
    let cluster = up.json();
    let gateway = cluster["gateway"].as_str().unwrap().to_string();
    let client = [
        "--tls-ca",
        path(&pki.ca),
        "--tls-cert",
        path(&pki.client.cert),
        "--tls-key",
        path(&pki.client.key),
    ];
    // Data operations go through the gateway's links to both storage nodes.
    for key in ["hello", "foo"] {
        let put = kv(&gateway, &client, &["put", "t", key, "world"]);
        assert!(put.status.success(), "{}", text(&put));
        let get = kv(&gateway, &client, &["get", "t", key]);
        assert!(text(&get).starts_with("world"), "{}", text(&get));
    }
    // Ship data (`--policy kv`): the gateway's link to the compute node, and the compute
    // node's links to the storage nodes.
    let load = ferry()
        .args(["load", "--server", &gateway])
        .args(client)
        .args(["traverse", "--keys", "500"])
        .output()
        .unwrap();
    assert!(load.status.success(), "{}", text(&load));
    let invoke = kv(&gateway, &client, &["invoke", "traverse", "start=7,depth=3"]);
    assert!(invoke.status.success(), "{}", text(&invoke));
    let compute_metrics = cluster["compute_nodes"][0]["metrics"].as_str().unwrap();
    let page = scrape_tls(compute_metrics, &pki.ca, Some(&pki.client)).unwrap();
    assert!(counter(&page, "ferry_compute_invocations_total") >= 1, "{page}");

    // Every listener refuses a client without a certificate.
    let storage = cluster["storage_nodes"][0]["addr"].as_str().unwrap();
    let refused = kv(storage, &client[..2], &["get", "t", "hello"]);
    assert!(text(&refused).contains("CertificateRequired"), "{}", text(&refused));
    let gateway_metrics = cluster["gateway_metrics"].as_str().unwrap();
    assert!(scrape_tls(gateway_metrics, &pki.ca, None).is_err());
    drop(up);
    let _ = std::fs::remove_dir_all(dir);
}

#[test]
fn bad_tls_settings_stop_the_start_with_an_error_naming_the_file() {
    let pki = pki("bad-files");
    let start = |flags: &[&str]| {
        ferry()
            .args(["server", "--listen", "127.0.0.1:0", "--tenant", "1:ferry"])
            .args(flags)
            .output()
            .unwrap()
    };
    let missing = start(&["--tls-cert", "/nonexistent/node.pem", "--tls-key", path(&pki.node.key)]);
    assert!(
        !missing.status.success() && text(&missing).contains("TLS: cannot read /nonexistent/node.pem"),
        "{}",
        text(&missing)
    );
    // The client's key with the node's certificate.
    let mismatched = start(&["--tls-cert", path(&pki.node.cert), "--tls-key", path(&pki.client.key)]);
    assert!(
        !mismatched.status.success()
            && text(&mismatched).contains(&format!(
                "certificate {} with key {}: the key is not the certificate's",
                path(&pki.node.cert),
                path(&pki.client.key)
            )),
        "{}",
        text(&mismatched)
    );
    let not_a_ca = start(&[
        "--tls-cert",
        path(&pki.node.cert),
        "--tls-key",
        path(&pki.node.key),
        "--tls-client-ca",
        path(&pki.node.key),
    ]);
    assert!(
        !not_a_ca.status.success() && text(&not_a_ca).contains("holds no PEM certificate"),
        "{}",
        text(&not_a_ca)
    );
    let alone = start(&["--tls-require-client-cert"]);
    assert!(
        !alone.status.success() && text(&alone).contains("need --tls-cert and --tls-key"),
        "{}",
        text(&alone)
    );
}
