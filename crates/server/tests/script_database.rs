//! The commands over a whole database (KEYS, SCAN, DBSIZE, RANDOMKEY, FLUSHDB, FLUSHALL)
//! and INFO inside scripts: the same answers over RESP, in a function on the node and in the same
//! function run on the app side; a script's own writes show in its listings; and a key
//! another client creates meanwhile is a conflict, never a phantom (scripts that count the
//! keys and add one, run concurrently, each see a different count).

use crate::common;

use std::collections::BTreeSet;
use std::time::Duration;

use bytes::Bytes;
use common::*;
use ferry_lua::fcall::reply_of;
use ferry_lua::FcallArgs;
use ferry_resp::Reply;

const LIBRARY: &str = "#!lua name=dbpaths
redis.register_function('run', function(keys, args) return redis.pcall(unpack(args)) end)
redis.register_function{function_name='ro', callback=function(keys, args) return redis.pcall(unpack(args)) end, flags={'no-writes'}}
redis.register_function('own', function(keys, args)
  redis.call('SET', 'mine', 'x')
  redis.call('DEL', 'gone')
  local listed = redis.call('KEYS', '*')
  table.sort(listed)
  return {listed, redis.call('DBSIZE')}
end)
redis.register_function('flush_then_count', function(keys, args)
  redis.call('FLUSHDB')
  redis.call('SET', 'after', 'x')
  return redis.call('DBSIZE')
end)
redis.register_function('count_and_add', function(keys, args)
  local n = redis.call('DBSIZE')
  redis.call('SET', 'k' .. args[1], n)
  return n
end)";

/// What a function returns, as RESP2 shows it (arrays sorted when `sorted`: a listing's
/// order is the store's).
fn shown(reply: Reply, sorted: bool) -> String {
    match reply {
        Reply::Array(items) if sorted => {
            let mut items: Vec<String> = items.into_iter().map(|item| shown(item, true)).collect();
            items.sort();
            format!("[{}]", items.join(","))
        }
        Reply::Array(items) => format!(
            "[{}]",
            items
                .into_iter()
                .map(|item| shown(item, false))
                .collect::<Vec<_>>()
                .join(",")
        ),
        Reply::Bulk(bytes) => String::from_utf8_lossy(&bytes).into_owned(),
        Reply::Simple(text) => text,
        Reply::Integer(n) => n.to_string(),
        Reply::Error(text) => format!("(error) {text}"),
        other => format!("{other:?}"),
    }
}

fn to_reply(value: redis::Value) -> Reply {
    match value {
        redis::Value::Nil => Reply::Null,
        redis::Value::Int(n) => Reply::Integer(n),
        redis::Value::BulkString(bytes) => Reply::Bulk(Bytes::from(bytes)),
        redis::Value::Array(items) => Reply::Array(items.into_iter().map(to_reply).collect()),
        redis::Value::SimpleString(text) => Reply::Simple(text),
        redis::Value::Okay => Reply::Simple("OK".into()),
        other => panic!("unexpected {other:?}"),
    }
}

/// Runs `words` three ways: over RESP on database 0, through FCALL `function` on
/// database 1, and as the same function run on the app side over database 2.
struct Paths {
    direct: redis::Connection,
    scripted: redis::Connection,
    app: ferry_client::Client,
    runtime: tokio::runtime::Runtime,
}

impl Paths {
    fn new(server: &ferry_server::ServerHandle) -> Paths {
        let addr = server.resp_addr().unwrap();
        let connect = |db: u32| {
            let client = redis::Client::open(format!("redis://{TENANT_A}:{TOKEN_A}@{addr}/{db}")).unwrap();
            client.get_connection_with_timeout(Duration::from_secs(10)).unwrap()
        };
        let (mut direct, scripted) = (connect(0), connect(1));
        let _: String = redis::cmd("FUNCTION")
            .arg("LOAD")
            .arg(LIBRARY)
            .query(&mut direct)
            .unwrap();
        let runtime = tokio::runtime::Runtime::new().unwrap();
        let app = runtime.block_on(client_a(server));
        Paths {
            direct,
            scripted,
            app,
            runtime,
        }
    }

    fn resp(&mut self, words: &[&str]) -> Reply {
        match redis::cmd(words[0]).arg(&words[1..]).query(&mut self.direct) {
            Ok(value) => to_reply(value),
            Err(err) => Reply::Error(format!(
                "{} {}",
                err.code().unwrap_or("ERR"),
                err.detail().unwrap_or("")
            )),
        }
    }

    fn script(&mut self, function: &str, args: &[&str]) -> Reply {
        match redis::cmd("FCALL")
            .arg(function)
            .arg(0)
            .arg(args)
            .query(&mut self.scripted)
        {
            Ok(value) => to_reply(value),
            Err(err) => Reply::Error(format!(
                "{} {}",
                err.code().unwrap_or("ERR"),
                err.detail().unwrap_or("")
            )),
        }
    }

    fn app_side(&mut self, function: &str, args: &[&str]) -> Reply {
        let call = FcallArgs {
            function: function.into(),
            table: "db2".into(),
            keys: Vec::new(),
            args: args.iter().map(|a| Bytes::copy_from_slice(a.as_bytes())).collect(),
            read_only: false,
        };
        let local = self
            .runtime
            .block_on(self.app.invoke_local(&call.invocation_name(), call.encode().unwrap()))
            .unwrap();
        reply_of(&local.result)
    }

    /// The three answers to `words`, compared; `sorted`: as sets.
    fn alike(&mut self, words: &[&str], sorted: bool) -> String {
        let over_resp = shown(self.resp(words), sorted);
        let in_script = shown(self.script("run", words), sorted);
        let on_app_side = shown(self.app_side("run", words), sorted);
        assert_eq!(over_resp, in_script, "{words:?}: RESP vs a script on the node");
        assert_eq!(in_script, on_app_side, "{words:?}: on the node vs on the app side");
        over_resp
    }
}

#[test]
fn database_commands_answer_alike_over_resp_in_a_script_and_on_the_app_side() {
    let server = resp_node();
    let mut paths = Paths::new(&server);
    for words in ["SET s1 a", "SET s2 b", "HSET h f v", "ZADD z 1 m"] {
        let words: Vec<&str> = words.split(' ').collect();
        paths.alike(&words, false);
    }
    // INFO describes the node, the same to a script as to a connection (asked before any
    // key can expire, so active expiry changes no count between the three).
    let keyspace = paths.alike(&["INFO", "keyspace"], false);
    assert!(keyspace.contains("db2:keys=4"), "{keyspace}");
    let server_section = paths.alike(&["INFO", "server"], false);
    assert!(server_section.contains("redis_version:7.2"), "{server_section}");
    paths.alike(&["SET", "gone", "x", "PX", "1"], false);
    std::thread::sleep(Duration::from_millis(20));
    assert_eq!(
        paths.alike(&["KEYS", "*"], true),
        "[h,s1,s2,z]",
        "the expired key is not listed"
    );
    assert_eq!(paths.alike(&["KEYS", "s*"], true), "[s1,s2]");
    let scanned = paths.alike(&["SCAN", "0", "COUNT", "1000"], true);
    assert!(scanned.contains("[h,s1,s2,z]"), "{scanned}");
    assert_eq!(
        paths.alike(&["SCAN", "0", "TYPE", "zset", "COUNT", "1000"], true),
        "[0,[z]]"
    );
    paths.alike(&["DBSIZE"], false);
    let picked = shown(paths.app_side("run", &["RANDOMKEY"]), false);
    assert!(["h", "s1", "s2", "z"].contains(&picked.as_str()), "{picked}");
    // Bad arguments answer alike too.
    paths.alike(&["SCAN", "x"], false);
    paths.alike(&["FLUSHDB", "NOW"], false);

    // A script's own writes show in its listings.
    for (reply, side) in [
        (paths.script("own", &[]), "node"),
        (paths.app_side("own", &[]), "app side"),
    ] {
        assert_eq!(shown(reply, false), "[[h,mine,s1,s2,z],5]", "{side}");
    }

    // FLUSHDB empties the script's database only, and a write after it stays.
    assert_eq!(shown(paths.script("flush_then_count", &[]), false), "1");
    assert_eq!(shown(paths.app_side("flush_then_count", &[]), false), "1");
    assert_eq!(shown(paths.resp(&["DBSIZE"]), false), "4", "database 0 untouched");
    // FLUSHALL in a script empties every database of the tenant.
    assert_eq!(shown(paths.app_side("run", &["FLUSHALL"]), false), "OK");
    assert_eq!(shown(paths.resp(&["DBSIZE"]), false), "0");
    paths.resp(&["SET", "s1", "a"]);
    assert_eq!(shown(paths.script("run", &["FLUSHALL", "ASYNC"]), false), "OK");
    assert_eq!(shown(paths.resp(&["DBSIZE"]), false), "0");
    // A read-only call may not flush.
    let refused = redis::cmd("FCALL_RO")
        .arg("ro")
        .arg(0)
        .arg("FLUSHDB")
        .query::<redis::Value>(&mut paths.scripted);
    assert!(
        format!("{refused:?}").contains("Write commands are not allowed"),
        "{refused:?}"
    );
    let listed = redis::cmd("FCALL_RO")
        .arg("ro")
        .arg(0)
        .arg("DBSIZE")
        .query::<i64>(&mut paths.scripted);
    assert_eq!(listed.unwrap(), 0, "a read-only call lists");
}

#[test]
fn scripts_that_count_keys_and_add_one_each_see_a_different_count() {
    // Each call reads DBSIZE and creates a key of its own (named by the caller, so no read
    // of a key ties two calls together). Serializable runs see 0, 1, 2, … each once; a
    // listing that missed a key created meanwhile (a phantom) gives two calls one count.
    const CALLERS: usize = 4;
    const CALLS_EACH: usize = 100;
    let server = resp_node();
    let paths = Paths::new(&server);
    let runtime = paths.runtime;
    let app = paths.app;
    let addr = server.resp_addr().unwrap();
    let counts: Vec<i64> = std::thread::scope(|scope| {
        let mut handles = Vec::new();
        for caller in 0..CALLERS {
            let (runtime, app) = (&runtime, &app);
            handles.push(scope.spawn(move || {
                let mut counts = Vec::new();
                let node_side = caller == 0;
                let mut conn = redis::Client::open(format!("redis://{TENANT_A}:{TOKEN_A}@{addr}/2"))
                    .unwrap()
                    .get_connection_with_timeout(Duration::from_secs(10))
                    .unwrap();
                for call in 0..CALLS_EACH {
                    let tag = format!("{caller}.{call}");
                    let reply = if node_side {
                        to_reply(
                            redis::cmd("FCALL")
                                .arg("count_and_add")
                                .arg(0)
                                .arg(&tag)
                                .query(&mut conn)
                                .unwrap(),
                        )
                    } else {
                        let args = FcallArgs {
                            function: "count_and_add".into(),
                            table: "db2".into(),
                            keys: Vec::new(),
                            args: vec![Bytes::from(tag)],
                            read_only: false,
                        };
                        // A caller that conflicted more often than the client retries tries again.
                        let local = loop {
                            match runtime.block_on(app.invoke_local(&args.invocation_name(), args.encode().unwrap())) {
                                Ok(local) => break local,
                                Err(ferry_client::ClientError::Server {
                                    status: ferry_proto::Status::TxAbort,
                                    ..
                                }) => continue,
                                Err(err) => panic!("{err}"),
                            }
                        };
                        reply_of(&local.result)
                    };
                    match reply {
                        Reply::Integer(n) => counts.push(n),
                        other => panic!("{other:?}"),
                    }
                }
                counts
            }));
        }
        handles.into_iter().flat_map(|handle| handle.join().unwrap()).collect()
    });
    let distinct: BTreeSet<i64> = counts.iter().copied().collect();
    let total = CALLERS * CALLS_EACH;
    assert_eq!(
        distinct.len(),
        total,
        "{} calls saw a count another call saw too",
        total - distinct.len()
    );
    assert_eq!(distinct.last(), Some(&(total as i64 - 1)));
}
