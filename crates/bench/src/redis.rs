//! The Redis peer (benchmark only): what users would otherwise run.
//!
//! The same `traverse` logic exists twice: as a Redis 7 Function in Lua, called with FCALL
//! (ship compute), and as client-side Rust over GETs pipelined on one connection (ship
//! data). Both are wrapped as a [`Backend`], so ferry's own load generator, policies and
//! pinning drive Redis exactly as they drive ferry. A minimal pipelined RESP connection
//! lives here because the load generator must stay ferry's, not a Redis library's; it
//! encodes commands and decodes replies with `ferry-resp`, as ferry's own RESP side does.
//!
//! Differences to keep in mind when comparing: the Redis side has no transactions (the
//! traversal is read-only, so none are needed), and its emulated compute runs in Lua at a
//! calibrated iteration count while the client's runs in Rust.

use std::collections::VecDeque;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use bytes::{Buf, BufMut, Bytes, BytesMut};
use parking_lot::Mutex;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;
use tokio::sync::{oneshot, Notify};
use tokio::task::JoinHandle;

use ferry_client::{Backend, BackendFuture, ClientError, Invocation, InvokeCost, Placement};
use ferry_func::builtins::traverse::{self, TraverseArgs};
use ferry_proto::Status;
use ferry_resp::Reply;

use crate::BenchError;

/// Bytes requested from the socket per read.
const READ_CHUNK_BYTES: usize = 64 * 1024;

/// Keys of the graph: `g:<id>`, values `<next> <padding>` (decimal, then spaces and
/// letters up to the object size), so the Lua side can parse them cheaply.
pub const KEY_PREFIX: &str = "g:";

/// Name of the Redis function library.
pub const LIBRARY: &str = "ferry";

/// The Lua library: `ferry_traverse` (the traversal) and `ferry_spin` (calibration).
pub const LUA_LIBRARY: &str = r#"#!lua name=ferry
local function spin(iterations)
  local x = 0
  for i = 1, iterations do x = x + i end
  return x
end
redis.register_function('ferry_spin', function(keys, args)
  spin(tonumber(args[1]))
  return 1
end)
redis.register_function('ferry_traverse', function(keys, args)
  local node = tonumber(args[1])
  local depth = tonumber(args[2])
  local iterations = tonumber(args[3])
  local bytes = 0
  for i = 1, depth do
    local value = redis.call('GET', 'g:' .. node)
    if not value then
      return redis.error_reply('dangling pointer: node ' .. node .. ' does not exist')
    end
    spin(iterations)
    bytes = bytes + #value
    node = tonumber(string.match(value, '^(%d+)'))
  end
  return {node, bytes}
end)
"#;

fn protocol(message: impl Into<String>) -> ClientError {
    ClientError::Protocol(message.into())
}

/// Appends a command in RESP form.
pub use ferry_resp::command::encode_request as encode_command;

type Waiter = oneshot::Sender<Result<Reply, ClientError>>;

struct ConnShared {
    /// Encoded commands not yet written, and their waiters in the same order: RESP
    /// answers strictly in order, so the queue pairs them.
    outbox: Mutex<(BytesMut, VecDeque<Waiter>)>,
    ready: Notify,
    dead: AtomicBool,
}

impl ConnShared {
    fn die(&self, why: &str) {
        self.dead.store(true, Ordering::SeqCst);
        let waiters: Vec<Waiter> = self.outbox.lock().1.drain(..).collect();
        for waiter in waiters {
            let _ = waiter.send(Err(ClientError::Disconnected(why.to_string())));
        }
        self.ready.notify_one();
    }
}

/// One pipelined RESP connection.
pub struct RespConn {
    shared: Arc<ConnShared>,
    tasks: [JoinHandle<()>; 2],
}

impl Drop for RespConn {
    fn drop(&mut self) {
        for task in &self.tasks {
            task.abort();
        }
    }
}

impl RespConn {
    /// Connects to `host:port`.
    pub async fn connect(addr: &str) -> Result<RespConn, ClientError> {
        let stream = TcpStream::connect(addr).await.map_err(|err| ClientError::Connect {
            addr: addr.to_string(),
            message: err.to_string(),
        })?;
        let _ = stream.set_nodelay(true);
        let (mut reader, mut writer) = stream.into_split();
        let shared = Arc::new(ConnShared {
            outbox: Mutex::new((BytesMut::new(), VecDeque::new())),
            ready: Notify::new(),
            dead: AtomicBool::new(false),
        });
        let read_shared = Arc::clone(&shared);
        let reader_task = tokio::spawn(async move {
            // What has been read and not yet decoded: replies are sliced off its front
            // without a copy; an unfinished one's bytes are carried into the next read.
            let mut pending = Bytes::new();
            loop {
                loop {
                    match Reply::decode_prefix(&pending) {
                        Ok(Some((value, used))) => {
                            pending.advance(used);
                            let waiter = read_shared.outbox.lock().1.pop_front();
                            match waiter {
                                Some(waiter) => {
                                    let _ = waiter.send(Ok(value));
                                }
                                None => return read_shared.die("Redis answered a command nobody sent"),
                            }
                        }
                        Ok(None) => break,
                        Err(err) => return read_shared.die(&err.to_string()),
                    }
                }
                let mut buf = BytesMut::with_capacity(pending.len() + READ_CHUNK_BYTES);
                buf.extend_from_slice(&pending);
                match reader.read_buf(&mut buf).await {
                    Ok(0) => return read_shared.die("Redis closed the connection"),
                    Ok(_) => pending = buf.freeze(),
                    Err(err) => return read_shared.die(&err.to_string()),
                }
            }
        });
        let write_shared = Arc::clone(&shared);
        let writer_task = tokio::spawn(async move {
            let mut spare = BytesMut::with_capacity(READ_CHUNK_BYTES);
            loop {
                std::mem::swap(&mut write_shared.outbox.lock().0, &mut spare);
                if !spare.is_empty() {
                    if let Err(err) = writer.write_all(&spare).await {
                        return write_shared.die(&err.to_string());
                    }
                    spare.clear();
                    continue;
                }
                if write_shared.dead.load(Ordering::SeqCst) {
                    return;
                }
                write_shared.ready.notified().await;
            }
        });
        Ok(RespConn {
            shared,
            tasks: [reader_task, writer_task],
        })
    }

    /// Queues one command now and returns the future of its answer (a Redis error is
    /// `Ok(Reply::Error)`). Queueing happens before the first poll, so several commands
    /// issued back to back are pipelined in order.
    pub fn send(
        &self,
        args: &[&[u8]],
    ) -> impl std::future::Future<Output = Result<Reply, ClientError>> + Send + 'static {
        let receiver = if self.shared.dead.load(Ordering::SeqCst) {
            None
        } else {
            let (sender, receiver) = oneshot::channel();
            let was_empty = {
                let mut outbox = self.shared.outbox.lock();
                let was_empty = outbox.0.is_empty();
                encode_command(args, &mut outbox.0);
                outbox.1.push_back(sender);
                was_empty
            };
            if was_empty {
                self.shared.ready.notify_one();
            }
            Some(receiver)
        };
        async move {
            match receiver {
                Some(receiver) => receiver
                    .await
                    .map_err(|_| ClientError::Disconnected("connection to Redis lost".into()))?,
                None => Err(ClientError::Disconnected("connection to Redis lost".into())),
            }
        }
    }

    /// Sends one command and waits for its answer.
    pub async fn call(&self, args: &[&[u8]]) -> Result<Reply, ClientError> {
        self.send(args).await
    }
}

/// Turns a Redis error reply into the failure a ferry function would report.
fn redis_error(message: String) -> ClientError {
    ClientError::Server {
        status: Status::FunctionFailed,
        message,
    }
}

fn integer(value: &Reply) -> Option<u64> {
    match value {
        Reply::Integer(n) if *n >= 0 => Some(*n as u64),
        _ => None,
    }
}

/// The node id at the head of a stored value.
fn next_node(value: &[u8]) -> Option<u64> {
    let end = value.iter().position(|b| !b.is_ascii_digit()).unwrap_or(value.len());
    std::str::from_utf8(&value[..end]).ok()?.parse().ok()
}

/// Encodes a traversal result as ferry's `traverse` does (node, bytes read; 16 bytes LE).
fn traverse_result(node: u64, bytes: u64) -> Bytes {
    let mut out = BytesMut::with_capacity(16);
    out.put_u64_le(node);
    out.put_u64_le(bytes);
    out.freeze()
}

/// Redis as a [`Backend`]: `traverse` remote is FCALL, local is GETs plus Rust compute.
pub struct RedisBackend {
    conn: RespConn,
    /// Lua loop iterations per nanosecond of emulated work, calibrated on the server.
    lua_iterations_per_ns: f64,
}

impl RedisBackend {
    /// Wraps a connection with a calibration from [`calibrate_lua`].
    pub fn new(conn: RespConn, lua_iterations_per_ns: f64) -> RedisBackend {
        RedisBackend {
            conn,
            lua_iterations_per_ns,
        }
    }

    async fn traverse_remote(&self, args: Bytes) -> Result<Invocation, ClientError> {
        let started = Instant::now();
        let parsed = TraverseArgs::decode(&args).map_err(|err| redis_error(err.to_string()))?;
        let iterations = (parsed.compute_ns as f64 * self.lua_iterations_per_ns).round() as u64;
        let (start, depth, iterations) = (
            parsed.start.to_string(),
            parsed.depth.to_string(),
            iterations.to_string(),
        );
        let answer = self
            .conn
            .call(&[
                b"FCALL",
                b"ferry_traverse",
                b"0",
                start.as_bytes(),
                depth.as_bytes(),
                iterations.as_bytes(),
            ])
            .await?;
        let (node, bytes) = match answer {
            Reply::Array(items) if items.len() == 2 => match (integer(&items[0]), integer(&items[1])) {
                (Some(node), Some(bytes)) => (node, bytes),
                _ => return Err(protocol("ferry_traverse answered non-integers")),
            },
            Reply::Error(message) => return Err(redis_error(message)),
            other => return Err(protocol(format!("unexpected FCALL answer {other:?}"))),
        };
        Ok(Invocation {
            result: traverse_result(node, bytes),
            placement: Placement::Remote,
            pushed_back: false,
            trace: None,
            latency: started.elapsed(),
            cost: InvokeCost {
                round_trips: 1,
                attempts: 1,
                bytes_returned: 16,
                ..InvokeCost::default()
            },
        })
    }

    async fn traverse_local(&self, args: Bytes) -> Result<Invocation, ClientError> {
        let started = Instant::now();
        let parsed = TraverseArgs::decode(&args).map_err(|err| redis_error(err.to_string()))?;
        let mut node = parsed.start;
        let mut bytes = 0u64;
        let mut cost = InvokeCost {
            attempts: 1,
            ..InvokeCost::default()
        };
        for _ in 0..parsed.depth {
            let key = format!("{KEY_PREFIX}{node}");
            cost.round_trips += 1;
            let value = match self.conn.call(&[b"GET", key.as_bytes()]).await? {
                Reply::Bulk(value) => value,
                Reply::Null => return Err(redis_error(format!("dangling pointer: node {node} does not exist"))),
                Reply::Error(message) => return Err(redis_error(message)),
                other => return Err(protocol(format!("unexpected GET answer {other:?}"))),
            };
            let computed = Instant::now();
            ferry_func::work::spin_ns(parsed.compute_ns);
            cost.app_cpu_ns += computed.elapsed().as_nanos() as u64;
            bytes += value.len() as u64;
            cost.bytes_returned += value.len() as u64;
            node = next_node(&value).ok_or_else(|| protocol("graph value does not start with a node id"))?;
        }
        Ok(Invocation {
            result: traverse_result(node, bytes),
            placement: Placement::Local,
            pushed_back: false,
            trace: None,
            latency: started.elapsed(),
            cost,
        })
    }
}

fn only_traverse(function: &str) -> Result<(), ClientError> {
    if function == traverse::NAME {
        Ok(())
    } else {
        Err(ClientError::Server {
            status: Status::UnknownFunction,
            message: format!("the Redis peer implements only traverse, not {function:?}"),
        })
    }
}

impl Backend for RedisBackend {
    fn invoke_remote<'a>(&'a self, function: &'a str, args: Bytes) -> BackendFuture<'a> {
        Box::pin(async move {
            only_traverse(function)?;
            self.traverse_remote(args).await
        })
    }

    fn invoke_local<'a>(&'a self, function: &'a str, args: Bytes) -> BackendFuture<'a> {
        Box::pin(async move {
            only_traverse(function)?;
            self.traverse_local(args).await
        })
    }
}

fn expect_ok(answer: Reply, what: &str) -> Result<(), BenchError> {
    match answer {
        Reply::Error(message) => Err(BenchError::Server(format!("Redis refused {what}: {message}"))),
        _ => Ok(()),
    }
}

/// Loads the function library (replacing an older version).
pub async fn install_library(conn: &RespConn) -> Result<(), BenchError> {
    let answer = conn
        .call(&[b"FUNCTION", b"LOAD", b"REPLACE", LUA_LIBRARY.as_bytes()])
        .await?;
    expect_ok(answer, "FUNCTION LOAD (Redis 7 or newer is needed)")
}

/// Lua iterations in one calibration call: long enough (~ms) to dwarf the round trip.
const CALIBRATION_ITERATIONS: u64 = 2_000_000;

/// Calibration calls; the fastest wins.
const CALIBRATION_ROUNDS: usize = 5;

/// Measures how many Lua loop iterations Redis runs per nanosecond.
pub async fn calibrate_lua(conn: &RespConn) -> Result<f64, BenchError> {
    let iterations = CALIBRATION_ITERATIONS.to_string();
    let mut best = Duration::MAX;
    for _ in 0..CALIBRATION_ROUNDS {
        let started = Instant::now();
        let answer = conn
            .call(&[b"FCALL", b"ferry_spin", b"0", iterations.as_bytes()])
            .await?;
        expect_ok(answer, "FCALL ferry_spin")?;
        best = best.min(started.elapsed());
    }
    Ok(CALIBRATION_ITERATIONS as f64 / best.as_nanos().max(1) as f64)
}

/// Commands pipelined per batch while loading.
const LOAD_BATCH: usize = 512;

/// Writes ferry's traverse graph (same next pointers) as `g:<id>` keys.
pub async fn load_graph(conn: &RespConn, nodes: u64, value_bytes: usize, seed: u64) -> Result<(), BenchError> {
    let mut pending = Vec::with_capacity(LOAD_BATCH);
    for (key, value) in traverse::dataset(nodes, value_bytes, seed) {
        let id = u64::from_le_bytes(key[..8].try_into().expect("8-byte keys"));
        let next = u64::from_le_bytes(value[..8].try_into().expect("values start with 8 bytes"));
        let mut text = format!("{next} ");
        while text.len() < value_bytes {
            text.push('x');
        }
        pending.push((format!("{KEY_PREFIX}{id}"), text));
        if pending.len() == LOAD_BATCH {
            set_all(conn, std::mem::take(&mut pending)).await?;
        }
    }
    set_all(conn, pending).await
}

async fn set_all(conn: &RespConn, pairs: Vec<(String, String)>) -> Result<(), BenchError> {
    let calls: Vec<_> = pairs
        .iter()
        .map(|(key, value)| conn.send(&[b"SET", key.as_bytes(), value.as_bytes()]))
        .collect();
    for call in calls {
        expect_ok(call.await?, "SET")?;
    }
    Ok(())
}

/// The Redis server's process id, from `INFO server`, to measure its CPU use.
pub async fn server_pid(conn: &RespConn) -> Option<u32> {
    let Reply::Bulk(info) = conn.call(&[b"INFO", b"server"]).await.ok()? else {
        return None;
    };
    String::from_utf8_lossy(&info)
        .lines()
        .find_map(|line| line.strip_prefix("process_id:"))
        .and_then(|pid| pid.trim().parse().ok())
}

/// `host:port` of a `redis://host:port` target.
pub fn parse_target(target: &str) -> Result<String, BenchError> {
    let rest = target
        .strip_prefix("redis://")
        .ok_or_else(|| BenchError::Invalid(format!("target {target:?}: expected redis://HOST:PORT")))?;
    let rest = rest.trim_end_matches('/');
    if rest.is_empty() || !rest.contains(':') {
        return Err(BenchError::Invalid(format!(
            "target {target:?}: expected redis://HOST:PORT"
        )));
    }
    Ok(rest.to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn commands_are_encoded_as_redis_reads_them() {
        let mut out = BytesMut::new();
        encode_command(&[b"GET", b"k"], &mut out);
        assert_eq!(&out[..], b"*2\r\n$3\r\nGET\r\n$1\r\nk\r\n");
    }

    #[test]
    fn targets_and_values_parse() {
        assert_eq!(parse_target("redis://127.0.0.1:6379").unwrap(), "127.0.0.1:6379");
        assert!(parse_target("http://x:1").is_err());
        assert!(parse_target("redis://nohost").is_err());
        assert_eq!(next_node(b"123 xxxx"), Some(123));
        assert_eq!(next_node(b"x"), None);
    }
}
