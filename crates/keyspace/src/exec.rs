//! Which function serves which data command, and running one over its loaded keys.

use bytes::Bytes;
use ferry_resp::Reply;

use crate::cmd::{bits, expiry, generic, hash, lcs, list, mpop, set, string, zset, Outcome};
use crate::keys::Keys;

/// A data command's implementation.
pub type Handler = fn(&mut Keys, &[Bytes]) -> Outcome;

/// The implementation of the data command `name` (lower case, as in the command table).
pub fn handler(name: &str) -> Option<Handler> {
    Some(match name {
        "get" => string::get,
        "set" => string::set,
        "setnx" => string::setnx,
        "setex" | "psetex" => string::setex,
        "getset" => string::getset,
        "getdel" => string::getdel,
        "getex" => string::getex,
        "mget" => string::mget,
        "mset" => string::mset,
        "msetnx" => string::msetnx,
        "append" => string::append,
        "strlen" => string::strlen,
        "getrange" | "substr" => string::getrange,
        "setrange" => string::setrange,
        "incr" | "decr" | "incrby" | "decrby" => string::incrby,
        "incrbyfloat" => string::incrbyfloat,
        "lcs" => lcs::lcs,
        "setbit" => bits::setbit,
        "getbit" => bits::getbit,
        "bitcount" => bits::bitcount,
        "bitpos" => bits::bitpos,
        "bitop" => bits::bitop,
        "del" | "unlink" => generic::del,
        "exists" => generic::exists,
        "touch" => generic::touch,
        "time" => generic::time,
        "type" => generic::type_of,
        "rename" | "renamenx" => generic::rename,
        "copy" => generic::copy,
        "expire" | "pexpire" | "expireat" | "pexpireat" => expiry::expire,
        "ttl" | "pttl" | "expiretime" | "pexpiretime" => expiry::ttl,
        "persist" => expiry::persist,
        "hset" | "hmset" => hash::hset,
        "hsetnx" => hash::hsetnx,
        "hget" => hash::hget,
        "hmget" => hash::hmget,
        "hdel" => hash::hdel,
        "hlen" => hash::hlen,
        "hstrlen" => hash::hstrlen,
        "hexists" => hash::hexists,
        "hgetall" | "hkeys" | "hvals" => hash::hgetall,
        "hincrby" => hash::hincrby,
        "hincrbyfloat" => hash::hincrbyfloat,
        "hrandfield" => hash::hrandfield,
        "hscan" => hash::hscan,
        "lpush" | "rpush" | "lpushx" | "rpushx" => list::push,
        "lpop" | "rpop" => list::pop,
        "lmpop" => mpop::lmpop,
        "zmpop" => mpop::zmpop,
        "llen" => list::llen,
        "lrange" => list::lrange,
        "lindex" => list::lindex,
        "lset" => list::lset,
        "linsert" => list::linsert,
        "lrem" => list::lrem,
        "ltrim" => list::ltrim,
        "lpos" => list::lpos,
        "lmove" | "rpoplpush" => list::lmove,
        "sadd" => set::sadd,
        "srem" => set::srem,
        "scard" => set::scard,
        "sismember" => set::sismember,
        "smismember" => set::smismember,
        "smembers" => set::smembers,
        "sinter" | "sunion" | "sdiff" => set::algebra,
        "sinterstore" | "sunionstore" | "sdiffstore" => set::algebra_store,
        "sintercard" => set::sintercard,
        "spop" => set::spop,
        "srandmember" => set::srandmember,
        "smove" => set::smove,
        "sscan" => set::sscan,
        "zadd" => zset::zadd,
        "zincrby" => zset::zincrby,
        "zscore" => zset::zscore,
        "zmscore" => zset::zmscore,
        "zcard" => zset::zcard,
        "zrank" | "zrevrank" => zset::zrank,
        "zcount" | "zlexcount" => zset::zcount,
        "zrange" | "zrevrange" | "zrangebyscore" | "zrevrangebyscore" | "zrangebylex" | "zrevrangebylex" => {
            zset::zrange
        }
        "zrangestore" => zset::zrangestore,
        "zrem" => zset::zrem,
        "zremrangebyrank" | "zremrangebyscore" | "zremrangebylex" => zset::zremrange,
        "zpopmin" | "zpopmax" => zset::zpop,
        "zrandmember" => zset::zrandmember,
        "zunion" | "zinter" | "zdiff" | "zunionstore" | "zinterstore" | "zdiffstore" => zset::zalgebra,
        "zintercard" => zset::zintercard,
        "zscan" => zset::zscan,
        _ => return None,
    })
}

/// [`handler`] by the command table's names, found once: a match over a hundred names
/// costs more than the hash of one.
static HANDLERS: std::sync::LazyLock<std::collections::HashMap<&'static str, Handler, ahash::RandomState>> =
    std::sync::LazyLock::new(|| {
        ferry_resp::table::COMMANDS
            .iter()
            .filter_map(|spec| Some((spec.name, handler(spec.name)?)))
            .collect()
    });

/// Runs the data command `words` (arity checked by the command table) over `keys`, which
/// hold every key the table says it names. The reply, error replies included; a command
/// that errs is taken back whole (it changes nothing), and one that leaves a collection
/// empty deletes its key.
pub fn run(words: &[Bytes], keys: &mut Keys) -> Reply {
    let Some(spec) = words.first().and_then(|name| ferry_resp::table::lookup(name)) else {
        return ferry_resp::command::unknown(words);
    };
    run_spec(spec, words, keys)
}

/// [`run`], for a caller that looked the command up already.
pub fn run_spec(spec: &ferry_resp::table::CommandSpec, words: &[Bytes], keys: &mut Keys) -> Reply {
    let Some(handler) = HANDLERS.get(spec.name).copied() else {
        return Reply::err(format!("'{}' is not a data command", spec.name));
    };
    let mark = keys.mark();
    match handler(keys, words) {
        Ok(reply) => {
            keys.settle();
            reply
        }
        Err(error) => {
            keys.rollback_to(&mark);
            error
        }
    }
}
