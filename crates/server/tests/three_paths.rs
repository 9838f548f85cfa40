//! Every data command of the command table, run three ways in lockstep: over RESP (in
//! place on the node, database 0), in a Lua function on the node (`redis.pcall` through
//! FCALL, database 1) and in the same function run on the app side by the Rust client
//! (remote reads, OCC commit; database 2). Each gives the same reply (after Redis's Lua
//! conversions, which RESP2 replies survive unchanged), and every key ends with the same
//! value. The run covers each data command of the table at least once.

use crate::common;

use std::collections::BTreeSet;
use std::time::Duration;

use bytes::Bytes;
use common::*;
use ferry_lua::fcall::reply_of;
use ferry_lua::FcallArgs;
use ferry_resp::Reply;
use ferry_value::{Entry, DEFAULT_ENCODINGS};

const LIBRARY: &str =
    "#!lua name=paths\nredis.register_function('run', function(keys, args) return redis.pcall(unpack(args)) end)";

/// The commands, in order; `~` marks one whose answer depends on the time or on a random
/// pick, compared by its shape only (a count, or an array's length).
const COMMANDS: &[&str] = &[
    // Strings.
    "SET s1 hello",
    "GET s1",
    "SETNX s1 other",
    "SETNX s2 fresh",
    "SETEX s3 100 v",
    "PSETEX s4 100000 v",
    "GETSET s2 newer",
    "MSET m1 a m2 b",
    "MGET m1 m2 nothing",
    "MSETNX m1 x m3 y",
    "MSETNX m3 x m4 y",
    "APPEND s1 _world",
    "STRLEN s1",
    "GETRANGE s1 0 4",
    "SUBSTR s1 -5 -1",
    "SETRANGE s1 2 XY",
    "SET n 10",
    "INCR n",
    "DECR n",
    "INCRBY n 5",
    "DECRBY n 3",
    "INCRBYFLOAT n 1.5",
    "INCR s1",
    "GETDEL m4",
    "GETEX m3 PERSIST",
    "LCS s1 s2",
    "SET lcs1 ohmytext",
    "SET lcs2 mynewtext",
    "LCS lcs1 lcs2 IDX MINMATCHLEN 3 WITHMATCHLEN",
    "LCS lcs1 lcs2 LEN",
    // Bits.
    "SETBIT b 7 1",
    "SETBIT b 100 1",
    "SETBIT b 100 0",
    "GETBIT b 7",
    "GETBIT b 10000",
    "SETBIT s1 1 2",
    "BITCOUNT b",
    "BITCOUNT s1 1 -2 BIT",
    "BITPOS b 1",
    "BITPOS b 0 1 -1 BYTE",
    "BITPOS nothing 0",
    "BITOP XOR bx b s1",
    "BITOP NOT bn b",
    "BITOP AND b2 nothing",
    // Keys and expiry.
    "EXISTS s1 m1 nothing",
    "TOUCH s1 nothing",
    "TYPE s1",
    "RENAME m1 r1",
    "RENAMENX r1 m2",
    "COPY r1 c1",
    "DEL c1 nothing",
    "UNLINK m2",
    "EXPIRE r1 1000",
    "PEXPIRE r1 2000000 GT",
    "EXPIREAT r1 4102444800",
    "PEXPIREAT r1 4102444800000 LT",
    "~TTL r1",
    "~PTTL r1",
    "EXPIRETIME r1",
    "PEXPIRETIME r1",
    "PERSIST r1",
    "~TIME",
    // Hashes.
    "HSET h f1 v1 f2 v2 f3 3",
    "HMSET h f4 v4",
    "HSETNX h f1 nope",
    "HGET h f1",
    "HMGET h f1 nothing f2",
    "HDEL h f2 nothing",
    "HLEN h",
    "HSTRLEN h f1",
    "HEXISTS h f4",
    "HGETALL h",
    "HKEYS h",
    "HVALS h",
    "HINCRBY h f3 7",
    "HINCRBYFLOAT h f3 0.5",
    "HINCRBY h f1 1",
    "~HRANDFIELD h 2",
    "HSCAN h 0",
    "GET h",
    "LCS lcs1 h",
    "SETBIT h 1 1",
    // Lists.
    "LPUSH l a b c",
    "RPUSH l d e",
    "LPUSHX l z",
    "RPUSHX nolist z",
    "LPOP l",
    "RPOP l 2",
    "LLEN l",
    "LRANGE l 0 -1",
    "LINDEX l -1",
    "LSET l 0 B",
    "LINSERT l BEFORE a x",
    "LREM l 1 x",
    "LTRIM l 0 1",
    "RPUSH l a b c a",
    "LPOS l a RANK 2",
    "LMOVE l l2 LEFT RIGHT",
    "RPOPLPUSH l l2",
    "LMPOP 2 nothing l2 LEFT COUNT 1",
    // Blocking pops with something to pop (or a short timeout): a script's do not wait.
    "RPUSH bq a b c d e",
    "BLPOP nothing bq 0",
    "BRPOP bq 0",
    "BLMOVE bq bq2 LEFT RIGHT 0",
    "BRPOPLPUSH bq2 bq 0",
    "BLMPOP 0 1 bq RIGHT COUNT 2",
    "BLPOP nothing 0.01",
    "BLMOVE nothing bq LEFT LEFT 0.01",
    "LSET l 99 no",
    // Sets.
    "SADD st a b c 1 2",
    "SADD st2 b c d",
    "SREM st 1",
    "SCARD st",
    "SISMEMBER st a",
    "SMISMEMBER st a zz",
    "SMEMBERS st2",
    "SINTER st st2",
    "SUNION st st2",
    "SDIFF st st2",
    "SINTERSTORE si st st2",
    "SUNIONSTORE su st st2",
    "SDIFFSTORE sd st st2",
    "SINTERCARD 2 st st2 LIMIT 1",
    "~SPOP su",
    "~SRANDMEMBER su 2",
    "SMOVE st st2 a",
    "SSCAN st2 0",
    // Sorted sets.
    "ZADD z 1 a 2 b 3 c 4 d",
    "ZADD z XX CH GT 5 a",
    "ZADD z NX INCR 1 e",
    "ZINCRBY z 2.5 b",
    "ZSCORE z b",
    "ZMSCORE z a nothing",
    "ZCARD z",
    "ZRANK z c",
    "ZREVRANK z c",
    "ZCOUNT z (1 +inf",
    "ZRANGE z 0 -1 WITHSCORES",
    "ZREVRANGE z 0 1",
    "ZRANGEBYSCORE z -inf 4 LIMIT 1 2",
    "ZREVRANGEBYSCORE z +inf (2",
    "ZADD lex 0 a 0 b 0 c 0 d",
    "ZLEXCOUNT lex [b +",
    "ZRANGEBYLEX lex (a [c",
    "ZREVRANGEBYLEX lex + [b",
    "ZRANGESTORE zcopy z 0 2",
    "ZREM z e nothing",
    "ZREMRANGEBYRANK zcopy 0 0",
    "ZREMRANGEBYSCORE z 5 5",
    "ZREMRANGEBYLEX lex - (b",
    "ZPOPMIN z",
    "ZPOPMAX z 2",
    "ZMPOP 1 lex MIN COUNT 2",
    "ZADD bz 1 a 2 b 3 c 4 d",
    "BZPOPMIN bz 0",
    "BZPOPMAX nothing bz 0",
    "BZMPOP 0 1 bz MAX COUNT 1",
    "BZPOPMIN nothing 0.01",
    "~ZRANDMEMBER z 2 WITHSCORES",
    "ZADD z2 1 x 2 y",
    "ZUNION 2 z z2 WITHSCORES",
    "ZINTER 2 z zcopy",
    "ZDIFF 2 z z2",
    "ZUNIONSTORE zu 2 z z2 WEIGHTS 1 2",
    "ZINTERSTORE zi 2 zu z2 AGGREGATE MAX",
    "ZDIFFSTORE zd 2 zu z2",
    "ZINTERCARD 2 zu z2",
    "ZSCAN zu 0",
    "ZADD st 1 a",
];

/// A reply as RESP2 shows it, or an error's text: how the three paths are compared.
fn shown(reply: Reply) -> String {
    match reply {
        Reply::Double(value) => format!(
            "{:?}",
            Reply::Bulk(Bytes::from(ferry_resp::reply::format_double(value)))
        ),
        Reply::Map(pairs) | Reply::Pairs(pairs) => {
            let flat: Vec<Reply> = pairs.into_iter().flat_map(|(k, v)| [k, v]).collect();
            shown(Reply::Array(flat))
        }
        Reply::Array(items) => format!("[{}]", items.into_iter().map(shown).collect::<Vec<_>>().join(", ")),
        other => format!("{other:?}"),
    }
}

/// What a shape-only comparison keeps of a reply: its kind and length.
fn shape(reply: &str) -> String {
    let depth = reply.chars().filter(|c| *c == ',').count();
    format!("{}:{}", reply.chars().next().unwrap_or(' '), depth)
}

/// A RESP reply from a redis-rs connection, as ferry's `Reply`.
fn reply_of_value(result: redis::RedisResult<redis::Value>) -> Reply {
    fn convert(value: redis::Value) -> Reply {
        match value {
            redis::Value::Nil => Reply::Null,
            redis::Value::Int(n) => Reply::Integer(n),
            redis::Value::BulkString(bytes) => Reply::Bulk(Bytes::from(bytes)),
            redis::Value::SimpleString(text) => Reply::Simple(text),
            redis::Value::Okay => Reply::Simple("OK".into()),
            redis::Value::Array(items) => Reply::Array(items.into_iter().map(convert).collect()),
            other => panic!("a RESP2 reply: {other:?}"),
        }
    }
    match result {
        Ok(value) => convert(value),
        Err(err) => Reply::Error(
            format!("{} {}", err.code().unwrap_or(""), err.detail().unwrap_or(""))
                .trim()
                .to_string(),
        ),
    }
}

/// A set's size (0 for any other type).
fn set_size(value: &ferry_value::Value) -> usize {
    match value {
        ferry_value::Value::Set(set) => set.len(),
        _ => 0,
    }
}

#[test]
fn every_data_command_answers_alike_over_resp_in_a_script_and_on_the_app_side() {
    let server = resp_node();
    let addr = server.resp_addr().unwrap();
    let connect = |db: u32| {
        let client = redis::Client::open(format!("redis://{TENANT_A}:{TOKEN_A}@{addr}/{db}")).unwrap();
        client.get_connection_with_timeout(Duration::from_secs(10)).unwrap()
    };
    let (mut direct, mut scripted) = (connect(0), connect(1));
    let _: String = redis::cmd("FUNCTION")
        .arg("LOAD")
        .arg(LIBRARY)
        .query(&mut direct)
        .unwrap();
    let runtime = tokio::runtime::Runtime::new().unwrap();
    let app = runtime.block_on(client_a(&server));

    let mut covered = BTreeSet::new();
    let mut keys_seen = BTreeSet::new();
    // Keys a random pick wrote (SPOP): the three paths popped different members, so these
    // are compared by type and size only.
    let mut randomly_written = BTreeSet::new();
    for line in COMMANDS {
        let (shape_only, line) = match line.strip_prefix('~') {
            Some(rest) => (true, rest),
            None => (false, *line),
        };
        let words: Vec<&str> = line.split(' ').collect();
        covered.insert(words[0].to_ascii_lowercase());
        let as_bytes: Vec<Bytes> = words.iter().map(|w| Bytes::copy_from_slice(w.as_bytes())).collect();
        keys_seen.extend(ferry_resp::table::keys_of(&as_bytes));
        if shape_only && words[0] == "SPOP" {
            randomly_written.extend(ferry_resp::table::keys_of(&as_bytes));
        }

        let over_resp = shown(reply_of_value(redis::cmd(words[0]).arg(&words[1..]).query(&mut direct)));
        let in_script = shown(reply_of_value(
            redis::cmd("FCALL").arg("run").arg(0).arg(&words).query(&mut scripted),
        ));
        let call = FcallArgs {
            function: "run".into(),
            table: "db2".into(),
            keys: Vec::new(),
            args: as_bytes.clone(),
            read_only: false,
        };
        let local = runtime
            .block_on(app.invoke_local(&call.invocation_name(), call.encode().unwrap()))
            .unwrap();
        let on_app_side = shown(reply_of(&local.result));
        if shape_only {
            assert_eq!(
                shape(&over_resp),
                shape(&in_script),
                "{line}: RESP {over_resp} vs script {in_script}"
            );
            assert_eq!(shape(&in_script), shape(&on_app_side), "{line}: script vs app side");
        } else {
            assert_eq!(over_resp, in_script, "{line}: RESP vs a script on the node");
            assert_eq!(
                in_script, on_app_side,
                "{line}: a script on the node vs on the app side"
            );
        }
    }

    // Every key ends the same in the three databases (expiry times aside: each path set
    // its own from its own clock).
    for key in &keys_seen {
        let values: Vec<Option<Entry>> = ["db0", "db1", "db2"]
            .iter()
            .map(|table| {
                runtime
                    .block_on(app.get(table, key))
                    .unwrap()
                    .map(|got| Entry::decode(&got.value, &DEFAULT_ENCODINGS).value)
                    .map(Entry::new)
            })
            .collect();
        if randomly_written.contains(key) {
            let sizes: Vec<Option<(&str, usize)>> = values
                .iter()
                .map(|entry| {
                    entry
                        .as_ref()
                        .map(|entry| (entry.value.type_name(), set_size(&entry.value)))
                })
                .collect();
            assert_eq!(sizes[0], sizes[1], "{key:?}'s type and size over RESP vs in a script");
            assert_eq!(
                sizes[1], sizes[2],
                "{key:?}'s type and size on the node vs on the app side"
            );
            continue;
        }
        assert_eq!(values[0], values[1], "{key:?} over RESP vs in a script");
        assert_eq!(
            values[1], values[2],
            "{key:?} in a script on the node vs on the app side"
        );
    }

    // The run covers every data command scripts may call.
    let missing: Vec<&str> = ferry_resp::table::COMMANDS
        .iter()
        .filter(|spec| spec.is(ferry_resp::table::KEYSPACE) && !spec.is(ferry_resp::table::NO_SCRIPT))
        .map(|spec| spec.name)
        .filter(|name| !covered.contains(*name))
        .collect();
    assert!(missing.is_empty(), "data commands the run does not cover: {missing:?}");
}
