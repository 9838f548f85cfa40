//! EVAL, EVALSHA, their `_RO` forms and SCRIPT through a Redis client, Redis's Lua helpers
//! (setresp, sha1hex, error_reply, status_reply), and the Redis Functions tutorial's
//! library (examples/lua/mylib.lua) giving Redis's answers.

use crate::common;

use std::collections::BTreeMap;
use std::time::{SystemTime, UNIX_EPOCH};

use common::*;
use redis::{Commands, Value};

fn node() -> ferry_server::ServerHandle {
    resp_node()
}

fn connect(server: &ferry_server::ServerHandle) -> redis::Connection {
    resp_connect(server, TENANT_A, TOKEN_A)
}

/// Redis's name for `return 1`.
const RETURN_ONE_SHA: &str = "e0e1f9fabfc9d4800c877a703b823ac0578ff8db";

#[test]
fn eval_runs_a_script_and_evalsha_finds_it_by_its_sha1() {
    let server = node();
    let mut con = connect(&server);
    let reply: String = redis::cmd("EVAL")
        .arg("redis.call('SET', KEYS[1], ARGV[1]) return redis.call('GET', KEYS[1])")
        .arg(1)
        .arg("k")
        .arg("v")
        .query(&mut con)
        .unwrap();
    assert_eq!(reply, "v");
    let err = redis::cmd("EVALSHA")
        .arg(RETURN_ONE_SHA)
        .arg(0)
        .query::<i64>(&mut con)
        .unwrap_err();
    assert_eq!(err.code(), Some("NOSCRIPT"), "{err}");
    let sha: String = redis::cmd("SCRIPT")
        .arg("LOAD")
        .arg("return 1")
        .query(&mut con)
        .unwrap();
    assert_eq!(sha, RETURN_ONE_SHA);
    assert_eq!(
        redis::cmd("EVALSHA")
            .arg(RETURN_ONE_SHA.to_uppercase())
            .arg(0)
            .query::<i64>(&mut con)
            .unwrap(),
        1
    );
    // An EVAL'd script is kept too, as in Redis.
    let script = "return tonumber(ARGV[1]) + 1";
    assert_eq!(
        redis::cmd("EVAL")
            .arg(script)
            .arg(0)
            .arg(41)
            .query::<i64>(&mut con)
            .unwrap(),
        42
    );
    let exists: Vec<i64> = redis::cmd("SCRIPT")
        .arg("EXISTS")
        .arg(ferry_lua::script::sha1_hex(script.as_bytes()))
        .arg("ffffffffffffffffffffffffffffffffffffffff")
        .query(&mut con)
        .unwrap();
    assert_eq!(exists, vec![1, 0]);
    // As client libraries run scripts: EVALSHA, and EVAL when the node says NOSCRIPT.
    let () = redis::cmd("SCRIPT").arg("FLUSH").query(&mut con).unwrap();
    let exists: Vec<i64> = redis::cmd("SCRIPT")
        .arg("EXISTS")
        .arg(RETURN_ONE_SHA)
        .query(&mut con)
        .unwrap();
    assert_eq!(exists, vec![0]);
    let counter = "return redis.call('INCRBY', KEYS[1], ARGV[1])";
    let sha = ferry_lua::script::sha1_hex(counter.as_bytes());
    let invoke = |con: &mut redis::Connection| -> i64 {
        match redis::cmd("EVALSHA").arg(&sha).arg(1).arg("n").arg(5).query(con) {
            Err(err) if err.code() == Some("NOSCRIPT") => redis::cmd("EVAL")
                .arg(counter)
                .arg(1)
                .arg("n")
                .arg(5)
                .query(con)
                .unwrap(),
            other => other.unwrap(),
        }
    };
    assert_eq!(invoke(&mut con), 5);
    assert_eq!(invoke(&mut con), 10);
    let exists: Vec<i64> = redis::cmd("SCRIPT").arg("EXISTS").arg(&sha).query(&mut con).unwrap();
    assert_eq!(exists, vec![1]);
}

#[test]
fn script_errors_read_only_forms_and_bad_input_are_refused_with_reasons() {
    let server = node();
    let mut con = connect(&server);
    let eval = |con: &mut redis::Connection, words: &[&str]| {
        let mut cmd = redis::cmd(words[0]);
        for word in &words[1..] {
            cmd.arg(*word);
        }
        cmd.query::<Value>(con)
    };
    let err = eval(&mut con, &["EVAL_RO", "return redis.call('SET', 'x', 'y')", "0"]).unwrap_err();
    assert!(err.to_string().contains("Write commands are not allowed"), "{err}");
    assert_eq!(con.get::<_, Option<String>>("x").unwrap(), None);
    let () = con.set("x", "1").unwrap();
    assert_eq!(
        eval(&mut con, &["EVAL_RO", "return redis.call('GET', KEYS[1])", "1", "x"]).unwrap(),
        Value::BulkString(b"1".to_vec())
    );
    // A script flagged no-writes cannot write even under EVAL.
    assert!(eval(
        &mut con,
        &["EVAL", "#!lua flags=no-writes\nreturn redis.call('DEL', 'x')", "0"]
    )
    .is_err());
    assert!(eval(&mut con, &["EVAL", "this is not lua", "0"])
        .unwrap_err()
        .to_string()
        .contains("compiling"));
    assert!(eval(&mut con, &["EVAL", "#!python\nreturn 1", "0"]).is_err());
    assert!(eval(&mut con, &["EVAL", "return 1", "-1"]).is_err());
    assert!(eval(&mut con, &["EVAL", "return 1", "2", "only-one"]).is_err());
    assert_eq!(
        eval(&mut con, &["EVALSHA", "not-a-sha", "0"]).unwrap_err().code(),
        Some("NOSCRIPT")
    );
    assert!(eval(&mut con, &["SCRIPT", "LOAD", "syntax error here"]).is_err());
    assert!(eval(&mut con, &["SCRIPT", "BOGUS"]).is_err());
    assert_eq!(eval(&mut con, &["SCRIPT", "KILL"]).unwrap_err().code(), Some("NOTBUSY"));
    assert_eq!(
        eval(&mut con, &["EVAL", "return redis.error_reply('MY custom')", "0"])
            .unwrap_err()
            .code(),
        Some("MY")
    );
    assert_eq!(
        eval(&mut con, &["EVAL", "return redis.status_reply('FINE')", "0"]).unwrap(),
        Value::SimpleString("FINE".into())
    );
    assert_eq!(
        eval(&mut con, &["EVAL", "return redis.sha1hex('')", "0"]).unwrap(),
        Value::BulkString(b"da39a3ee5e6b4b0d3255bfef95601890afd80709".to_vec())
    );
    // A runaway script ends at the node's CPU time limit, and the node goes on.
    assert!(eval(&mut con, &["EVAL", "while true do end", "0"]).is_err());
    assert_eq!(eval(&mut con, &["EVAL", "return 7", "0"]).unwrap(), Value::Int(7));
}

#[test]
fn setresp_3_gives_a_script_maps_and_nil_as_redis_does() {
    let server = node();
    let mut con = connect(&server);
    let _: i64 = con.hset("h", "f", "v").unwrap();
    let script = "redis.setresp(3) local m = redis.call('HGETALL', KEYS[1]) \
                  local absent = redis.call('GET', 'absent') \
                  return {m['map']['f'], tostring(absent)}";
    let got: Vec<String> = redis::cmd("EVAL").arg(script).arg(1).arg("h").query(&mut con).unwrap();
    assert_eq!(got, vec!["v", "nil"]);
    // Without it, RESP2's flat form and false.
    let script = "local m = redis.call('HGETALL', KEYS[1]) return {m[1], m[2], tostring(redis.call('GET', 'absent'))}";
    let got: Vec<String> = redis::cmd("EVAL").arg(script).arg(1).arg("h").query(&mut con).unwrap();
    assert_eq!(got, vec!["f", "v", "false"]);
    assert!(redis::cmd("EVAL")
        .arg("redis.setresp(4)")
        .arg(0)
        .query::<Value>(&mut con)
        .is_err());
}

#[test]
fn the_redis_functions_tutorial_library_gives_redis_answers() {
    let server = node();
    let mut con = connect(&server);
    let code = std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/../../examples/lua/mylib.lua")).unwrap();
    let name: String = redis::cmd("FUNCTION").arg("LOAD").arg(&code).query(&mut con).unwrap();
    assert_eq!(name, "mylib");
    let before = SystemTime::now().duration_since(UNIX_EPOCH).unwrap().as_secs();
    let added: i64 = redis::cmd("FCALL")
        .arg("my_hset")
        .arg(1)
        .arg("myhash")
        .arg("myfield")
        .arg("some value")
        .arg("another_field")
        .arg("another value")
        .query(&mut con)
        .unwrap();
    assert_eq!(added, 3, "the two fields and _last_modified_");
    let flat: Vec<String> = redis::cmd("FCALL")
        .arg("my_hgetall")
        .arg(1)
        .arg("myhash")
        .query(&mut con)
        .unwrap();
    let fields: BTreeMap<String, String> = flat.chunks(2).map(|p| (p[0].clone(), p[1].clone())).collect();
    assert_eq!(
        fields,
        BTreeMap::from([
            ("another_field".to_string(), "another value".to_string()),
            ("myfield".to_string(), "some value".to_string()),
        ])
    );
    let modified: String = redis::cmd("FCALL")
        .arg("my_hlastmodified")
        .arg(1)
        .arg("myhash")
        .query(&mut con)
        .unwrap();
    let modified: u64 = modified.parse().unwrap();
    assert!(modified >= before && modified <= before + 60, "{modified} vs {before}");
    // Redis answers `-Hash key name not provided` (redis-rs reads "Hash" as its code).
    let err = redis::cmd("FCALL")
        .arg("my_hset")
        .arg(0)
        .query::<Value>(&mut con)
        .unwrap_err();
    assert!(err.to_string().contains("key name not provided"), "{err}");
    let err = redis::cmd("FCALL")
        .arg("my_hgetall")
        .arg(2)
        .arg("a")
        .arg("b")
        .query::<Value>(&mut con)
        .unwrap_err();
    assert!(err.to_string().contains("one key name is allowed"), "{err}");
}

#[test]
fn scripts_have_redis_preloaded_cjson_and_bit_libraries() {
    let server = node();
    let mut con = connect(&server);
    let eval = |con: &mut redis::Connection, script: &str| -> Value {
        redis::cmd("EVAL").arg(script).arg(0).query(con).unwrap()
    };
    assert_eq!(
        eval(&mut con, "return cjson.encode({1, 2, {a = 'b'}})"),
        Value::BulkString(br#"[1,2,{"a":"b"}]"#.to_vec())
    );
    assert_eq!(
        eval(&mut con, "local t = cjson.decode('{\"n\":[10,20]}') return t.n[2]"),
        Value::Int(20)
    );
    // LuaBitOp's answers (the ones its manual gives).
    assert_eq!(eval(&mut con, "return bit.tobit(0xffffffff)"), Value::Int(-1));
    assert_eq!(eval(&mut con, "return bit.bnot(0)"), Value::Int(-1));
    assert_eq!(eval(&mut con, "return bit.band(0x12345678, 0xff)"), Value::Int(0x78));
    assert_eq!(eval(&mut con, "return bit.lshift(1, 31)"), Value::Int(-2147483648));
    assert_eq!(eval(&mut con, "return bit.rshift(-1, 28)"), Value::Int(15));
    assert_eq!(eval(&mut con, "return bit.arshift(-256, 4)"), Value::Int(-16));
    assert_eq!(
        eval(&mut con, "return bit.tohex(-1, -4)"),
        Value::BulkString(b"FFFF".to_vec())
    );
    assert_eq!(eval(&mut con, "return bit.bswap(0x12345678)"), Value::Int(0x78563412));
    // Read-only, like every library table.
    assert!(redis::cmd("EVAL")
        .arg("bit.band = nil")
        .arg(0)
        .query::<Value>(&mut con)
        .is_err());
    assert!(redis::cmd("EVAL")
        .arg("return cjson.decode('{broken')")
        .arg(0)
        .query::<Value>(&mut con)
        .is_err());
}

#[test]
fn function_dump_and_restore_carry_the_libraries_with_redis_policies() {
    let server = node();
    let mut con = connect(&server);
    let mylib = std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/../../examples/lua/mylib.lua")).unwrap();
    let other = "#!lua name=other\nredis.register_function('answer', function() return 42 end)";
    let _: String = redis::cmd("FUNCTION").arg("LOAD").arg(&mylib).query(&mut con).unwrap();
    let payload: Vec<u8> = redis::cmd("FUNCTION").arg("DUMP").query(&mut con).unwrap();
    let () = redis::cmd("FUNCTION").arg("FLUSH").query(&mut con).unwrap();
    let () = redis::cmd("FUNCTION")
        .arg("RESTORE")
        .arg(&payload)
        .query(&mut con)
        .unwrap();
    let _: i64 = redis::cmd("FCALL")
        .arg("my_hset")
        .arg(1)
        .arg("h")
        .arg("f")
        .arg("v")
        .query(&mut con)
        .unwrap();
    // APPEND (the default) refuses a library already there, and changes nothing.
    let err = redis::cmd("FUNCTION")
        .arg("RESTORE")
        .arg(&payload)
        .query::<Value>(&mut con)
        .unwrap_err();
    assert!(err.to_string().contains("already exists"), "{err}");
    let () = redis::cmd("FUNCTION")
        .arg("RESTORE")
        .arg(&payload)
        .arg("REPLACE")
        .query(&mut con)
        .unwrap();
    // A damaged payload is refused and the loaded libraries stay.
    let mut damaged = payload.clone();
    let middle = damaged.len() / 2;
    damaged[middle] ^= 0x20;
    let err = redis::cmd("FUNCTION")
        .arg("RESTORE")
        .arg(&damaged)
        .arg("FLUSH")
        .query::<Value>(&mut con)
        .unwrap_err();
    assert!(err.to_string().contains("checksum"), "{err}");
    assert!(redis::cmd("FUNCTION")
        .arg("RESTORE")
        .arg("not a payload")
        .query::<Value>(&mut con)
        .is_err());
    assert!(redis::cmd("FUNCTION")
        .arg("RESTORE")
        .arg(&payload)
        .arg("SIDEWAYS")
        .query::<Value>(&mut con)
        .is_err());
    let _: i64 = redis::cmd("FCALL")
        .arg("my_hset")
        .arg(1)
        .arg("h")
        .arg("f")
        .arg("w")
        .query(&mut con)
        .unwrap();
    // FLUSH: only the payload's libraries remain.
    let _: String = redis::cmd("FUNCTION").arg("LOAD").arg(other).query(&mut con).unwrap();
    let () = redis::cmd("FUNCTION")
        .arg("RESTORE")
        .arg(&payload)
        .arg("FLUSH")
        .query(&mut con)
        .unwrap();
    let err = redis::cmd("FCALL")
        .arg("answer")
        .arg(0)
        .query::<Value>(&mut con)
        .unwrap_err();
    assert!(err.to_string().contains("Function not found"), "{err}");
    let listed: Vec<Value> = redis::cmd("FUNCTION").arg("LIST").query(&mut con).unwrap();
    assert_eq!(listed.len(), 1, "mylib alone");
}

/// Runs `call` (a looping FCALL or EVAL) on its own connection while another connection
/// sends `kill` until it answers OK or the call ends; the call's error and whether the kill
/// answered OK. A runaway call ends at the node's CPU time limit (100 ms here) anyway, so
/// a round may end before any kill found it running.
fn race_a_kill(server: &ferry_server::ServerHandle, call: &[&str], kill: &[&str]) -> (String, bool) {
    let mut runner = connect(server);
    let mut killer = connect(server);
    let call: Vec<String> = call.iter().map(|word| word.to_string()).collect();
    let running = std::thread::spawn(move || {
        redis::cmd(&call[0])
            .arg(&call[1..])
            .query::<Value>(&mut runner)
            .map_or_else(|err| err.to_string(), |value| format!("{value:?}"))
    });
    let mut killed = false;
    while !running.is_finished() {
        if redis::cmd(kill[0]).arg(&kill[1..]).query::<String>(&mut killer).is_ok() {
            killed = true;
            break;
        }
    }
    (running.join().unwrap(), killed)
}

#[test]
fn function_kill_and_script_kill_stop_a_running_call_of_their_kind() {
    // Rounds a kill may miss its call in (it ran out of its budget first): each round
    // gives the killer the call's whole run, so one of them finds it.
    const MAX_ROUNDS: usize = 30;
    let server = node();
    let mut con = connect(&server);
    let _: String = redis::cmd("FUNCTION")
        .arg("LOAD")
        .arg(include_str!("../../../examples/lua/hostile.lua"))
        .query(&mut con)
        .unwrap();
    for (call, kill) in [
        (&["FCALL", "spin", "0"][..], &["FUNCTION", "KILL"][..]),
        (&["EVAL", "while true do end", "0"][..], &["SCRIPT", "KILL"][..]),
    ] {
        let mut stopped = false;
        for _ in 0..MAX_ROUNDS {
            let (error, killed) = race_a_kill(&server, call, kill);
            if killed {
                assert!(error.contains("killed by user"), "{call:?} after {kill:?}: {error}");
                stopped = true;
                break;
            }
            assert!(error.contains("budget"), "{call:?} ended alone: {error}");
        }
        assert!(stopped, "{kill:?} never found {call:?} running in {MAX_ROUNDS} rounds");
        // Nothing runs now: both answer NOTBUSY, and the library serves on.
        for nothing in [["FUNCTION", "KILL"], ["SCRIPT", "KILL"]] {
            let refused = redis::cmd(nothing[0]).arg(nothing[1]).query::<String>(&mut con);
            assert_eq!(refused.unwrap_err().code(), Some("NOTBUSY"));
        }
        let fine: i64 = redis::cmd("FCALL").arg("fine").arg(1).arg("k").query(&mut con).unwrap();
        assert!(fine > 0);
    }
}
