//! Clients that speak RESP to the node under test: each transaction is one MULTI/EXEC
//! whose reads and writes of the hot keys are all inside it (the node runs it in place,
//! atomically, under the keys' locks), recorded like an invocation and judged with them.
//!
//! The reads and writes are [`typed`]'s, so a tag means the same whichever way it was
//! written; every write reads its key first, in the same MULTI, which is what lets
//! [`crate::resolve`] place RESP writes among the versions. MULTI and the commands go
//! first; EXEC only once each is `QUEUED`: a connection lost before EXEC is sent is a
//! transaction that surely did nothing, one lost after it an unknown outcome. An error
//! instead of EXEC's array (`EXECABORT`) means nothing ran; an error inside the array
//! means a command this harness built was wrong, and ends the run.

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::{Duration, Instant};

use bytes::{Buf, Bytes, BytesMut};
use rand::Rng;
use rand_chacha::ChaCha8Rng;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

use ferry_resp::Reply;

use crate::program::{self, key, Program, Step};
use crate::record::{Record, Seen, Via};
use crate::typed::{self, Answer, Kind};
use crate::{ChaosConfig, ChaosError, Shared, REQUEST_TIMEOUT, TENANT, TOKEN};

/// One client in this many speaks RESP (the last of each group of four), so RESP
/// transactions meet function invocations on the same keys all through a run.
pub const RESP_CLIENT_EVERY: u64 = 4;

/// Share of RESP transactions that only read (the rest read and write some keys).
const READ_ONLY_SHARE: f64 = 0.2;

/// Chance that a key a writing transaction touches is only read.
const READ_SHARE: f64 = 0.4;

/// Most hot keys one transaction touches (as a function's program).
const MAX_KEYS_PER_TRANSACTION: usize = 4;

/// Most bytes of replies waited for without one whole: every reply here is far
/// smaller, so more is a stream gone wrong.
const MAX_REPLY_BYTES: usize = 64 * 1024;

/// Bytes read from the socket at a time.
const READ_CHUNK_BYTES: usize = 4 * 1024;

/// Pause before connecting again after a failed attempt (the node may be restarting).
const RECONNECT_PAUSE: Duration = Duration::from_millis(20);

/// Whether client `client` of a run speaks RESP.
pub(crate) fn speaks_resp(client: u64) -> bool {
    client % RESP_CLIENT_EVERY == RESP_CLIENT_EVERY - 1
}

/// Why a connection is of no more use.
#[derive(Debug)]
enum Broken {
    /// Closed, reset, or no answer in time.
    Lost,
    /// The node answered something no RESP reply is, or something this client never
    /// expects (a harness or node bug: the run ends).
    Bug(String),
}

/// One RESP connection, signed in as the run's tenant.
struct Conn {
    stream: TcpStream,
    /// Bytes received and not yet taken as replies.
    pending: BytesMut,
}

impl Conn {
    async fn connect(addr: SocketAddr) -> Result<Conn, Broken> {
        let stream = tokio::time::timeout(REQUEST_TIMEOUT, TcpStream::connect(addr))
            .await
            .map_err(|_| Broken::Lost)?
            .map_err(|_| Broken::Lost)?;
        let _ = stream.set_nodelay(true);
        let mut conn = Conn {
            stream,
            pending: BytesMut::new(),
        };
        let tenant = TENANT.to_string();
        conn.send(&[vec![
            Bytes::from_static(b"AUTH"),
            Bytes::from(tenant),
            Bytes::from_static(TOKEN.as_bytes()),
        ]])
        .await?;
        match conn.reply().await? {
            Reply::Simple(ok) if ok == "OK" => Ok(conn),
            other => Err(Broken::Bug(format!("AUTH answered {other:?}"))),
        }
    }

    /// Writes `commands` in one go (pipelined).
    async fn send(&mut self, commands: &[Vec<Bytes>]) -> Result<(), Broken> {
        let mut out = BytesMut::new();
        for command in commands {
            let words: Vec<&[u8]> = command.iter().map(|word| &word[..]).collect();
            ferry_resp::command::encode_request(&words, &mut out);
        }
        self.stream.write_all(&out).await.map_err(|_| Broken::Lost)
    }

    /// The next reply, within [`REQUEST_TIMEOUT`].
    async fn reply(&mut self) -> Result<Reply, Broken> {
        let deadline = tokio::time::Instant::now() + REQUEST_TIMEOUT;
        loop {
            if let Some(reply) = take_reply(&mut self.pending).map_err(Broken::Bug)? {
                return Ok(reply);
            }
            let mut chunk = [0u8; READ_CHUNK_BYTES];
            match tokio::time::timeout_at(deadline, self.stream.read(&mut chunk)).await {
                Ok(Ok(0)) | Ok(Err(_)) | Err(_) => return Err(Broken::Lost),
                Ok(Ok(n)) => self.pending.extend_from_slice(&chunk[..n]),
            }
        }
    }
}

/// Takes the first whole reply off the front of `pending`, decoded by ferry's own
/// decoder (`Reply::decode_prefix`).
fn take_reply(pending: &mut BytesMut) -> Result<Option<Reply>, String> {
    let bytes = Bytes::copy_from_slice(pending);
    match Reply::decode_prefix(&bytes) {
        Ok(Some((reply, used))) => {
            pending.advance(used);
            Ok(Some(reply))
        }
        Ok(None) if pending.len() > MAX_REPLY_BYTES => Err(format!("{} bytes hold no whole reply", pending.len())),
        Ok(None) => Ok(None),
        Err(err) => Err(err.to_string()),
    }
}

/// What each queued command's reply must be.
#[derive(Clone, Copy, Debug)]
enum Expect {
    /// A read of a key of this kind: its reply gives a tag.
    Read(Kind),
    /// A write.
    Write(Answer),
}

/// The commands of `program`'s transaction (between MULTI and EXEC) and what each must
/// answer: each key's read, then, for a read-modify-write, its writes.
fn commands(program: &Program) -> Vec<(Vec<Bytes>, Expect)> {
    let mut out = Vec::new();
    for step in &program.steps {
        let (Step::Read(k) | Step::Rmw(k)) = *step else {
            // Invariant: `random_program` makes only reads and read-modify-writes.
            unreachable!("a RESP transaction of {step:?}");
        };
        let kind = typed::kind(k);
        out.push((typed::read_command(kind, &key(k)), Expect::Read(kind)));
        if matches!(step, Step::Rmw(_)) {
            for (command, answer) in typed::queued_write(kind, &key(k), program.tag) {
                out.push((command, Expect::Write(answer)));
            }
        }
    }
    out
}

/// A transaction's program: 1 to [`MAX_KEYS_PER_TRANSACTION`] distinct hot keys, each
/// read, or read and written; some transactions only read.
fn random_program(rng: &mut ChaCha8Rng, tag: u64, chaos: &ChaosConfig) -> Program {
    let mut keys: Vec<u8> = (0..chaos.keys).collect();
    let read_only = rng.gen_bool(READ_ONLY_SHARE);
    let touched = rng.gen_range(1..=MAX_KEYS_PER_TRANSACTION);
    let steps = (0..touched)
        .map(|_| {
            let k = keys.swap_remove(rng.gen_range(0..keys.len()));
            if read_only || rng.gen_bool(READ_SHARE) {
                Step::Read(k)
            } else {
                Step::Rmw(k)
            }
        })
        .collect();
    Program { tag, steps }
}

/// The tags of EXEC's replies, each checked against what its command must answer.
fn tags_of(program: &Program, plan: &[(Vec<Bytes>, Expect)], replies: &[Reply]) -> Result<Vec<u64>, ChaosError> {
    let bug = |why: String| ChaosError::Client(format!("RESP transaction {}: {why}", program.tag));
    if replies.len() != plan.len() {
        return Err(bug(format!(
            "EXEC gave {} replies to {} commands",
            replies.len(),
            plan.len()
        )));
    }
    let mut tags = Vec::new();
    for ((command, expect), reply) in plan.iter().zip(replies) {
        let said = || format!("{} answered {reply:?}", String::from_utf8_lossy(&command[0]));
        match (expect, reply) {
            (_, Reply::Error(_)) => return Err(bug(format!("{} inside EXEC (a harness bug)", said()))),
            (Expect::Read(kind), reply) => tags.push(
                typed::seen(*kind, reply)
                    .map_err(|e| bug(format!("{}: {e}", said())))?
                    .tag,
            ),
            (Expect::Write(Answer::Ok), Reply::Simple(ok)) if ok == "OK" => {}
            (Expect::Write(Answer::Integer), Reply::Integer(_)) => {}
            (Expect::Write(_), _) => return Err(bug(said())),
        }
    }
    Ok(tags)
}

/// Runs `program` as one MULTI/EXEC on `conn`; what the client saw, and whether the
/// connection is still of use.
async fn transact(conn: &mut Conn, program: &Program) -> Result<(Seen, bool), ChaosError> {
    let plan = commands(program);
    let mut queue = vec![vec![Bytes::from_static(b"MULTI")]];
    queue.extend(plan.iter().map(|(command, _)| command.clone()));
    let bug = |why: String| ChaosError::Client(format!("RESP transaction {}: {why}", program.tag));
    // Until EXEC is sent, a lost connection means nothing ran.
    let mut refused = None;
    let queued = async {
        conn.send(&queue).await?;
        for _ in 0..queue.len() {
            match conn.reply().await? {
                Reply::Simple(status) if status == "OK" || status == "QUEUED" => {}
                Reply::Error(why) => refused = Some(why),
                other => return Err(Broken::Bug(format!("MULTI or a queued command answered {other:?}"))),
            }
        }
        Ok(())
    };
    match queued.await {
        Ok(()) => {}
        Err(Broken::Lost) => return Ok((Seen::Failed, false)),
        Err(Broken::Bug(why)) => return Err(bug(why)),
    }
    let executed = async {
        conn.send(&[vec![Bytes::from_static(b"EXEC")]]).await?;
        conn.reply().await
    };
    match executed.await {
        Err(Broken::Lost) => Ok((Seen::Unknown, false)),
        Err(Broken::Bug(why)) => Err(bug(why)),
        // EXECABORT (a command refused while queued), OOM: nothing ran.
        Ok(Reply::Error(_)) => Ok((Seen::Failed, true)),
        Ok(Reply::Array(_)) if refused.is_some() => Err(bug(format!(
            "EXEC ran after a queued command was refused ({})",
            refused.unwrap_or_default()
        ))),
        Ok(Reply::Array(replies)) => Ok((
            Seen::Executed {
                tags: tags_of(program, &plan, &replies)?,
            },
            true,
        )),
        Ok(other) => Err(bug(format!("EXEC answered {other:?}"))),
    }
}

/// A RESP client's transactions until the deadline, on connections to `addr`.
pub(crate) async fn client_loop(
    client: u64,
    addr: SocketAddr,
    mut rng: ChaCha8Rng,
    chaos: ChaosConfig,
    shared: Arc<Shared>,
) -> Result<Vec<Record>, ChaosError> {
    let mut records = Vec::new();
    let mut conn: Option<Conn> = None;
    let mut seq = 0u64;
    while Instant::now() < shared.deadline {
        let connected = match conn.as_mut() {
            Some(connected) => connected,
            None => match Conn::connect(addr).await {
                Ok(connected) => conn.insert(connected),
                // The proxy may cut the sign-in itself, or the node be restarting.
                Err(Broken::Lost) => {
                    tokio::time::sleep(RECONNECT_PAUSE).await;
                    continue;
                }
                Err(Broken::Bug(why)) => return Err(ChaosError::Client(why)),
            },
        };
        let program = random_program(&mut rng, program::next_tag(client, &mut seq), &chaos);
        let invoke_ns = shared.started.elapsed().as_nanos() as u64;
        let (seen, keep) = transact(connected, &program).await?;
        let complete_ns = shared.started.elapsed().as_nanos() as u64;
        if !keep {
            conn = None;
        }
        records.push(Record {
            client,
            program,
            invoke_ns,
            complete_ns,
            seen,
            via: Via::Resp,
        });
    }
    Ok(records)
}

#[cfg(test)]
mod tests {
    use ferry_resp::Protocol;

    use super::*;

    #[test]
    fn replies_are_taken_whole_however_the_bytes_arrive() {
        let replies = vec![
            Reply::Simple("QUEUED".into()),
            Reply::Array(vec![
                Reply::Bulk(Bytes::from_static(b"a\r\nb")),
                Reply::Null,
                Reply::Array(vec![]),
                Reply::Array(vec![Reply::Bulk(Bytes::from_static(b"m")), Reply::Integer(-3)]),
            ]),
            Reply::Error("EXECABORT Transaction discarded".into()),
            Reply::Integer(7),
        ];
        let mut wire = BytesMut::new();
        for reply in &replies {
            reply.encode(Protocol::Resp2, &mut wire);
        }
        let mut pending = BytesMut::new();
        let mut taken = Vec::new();
        for &byte in wire.iter() {
            pending.extend_from_slice(&[byte]);
            while let Some(reply) = take_reply(&mut pending).unwrap() {
                taken.push(reply);
            }
        }
        assert_eq!(taken, replies);
        assert!(pending.is_empty());
    }

    #[test]
    fn bytes_that_are_no_reply_are_refused() {
        assert!(take_reply(&mut BytesMut::from(&b"hello\r\n"[..])).is_err());
        let mut endless = BytesMut::from(&b"*3\r\n"[..]);
        endless.extend_from_slice(&vec![b'x'; MAX_REPLY_BYTES]);
        assert!(take_reply(&mut endless).is_err());
        assert_eq!(take_reply(&mut BytesMut::from(&b"$5\r\nab"[..])).unwrap(), None);
    }

    #[test]
    fn a_transaction_reads_every_key_it_writes_first_and_some_only_read() {
        let chaos = ChaosConfig::new(1, Duration::from_secs(1));
        let mut rng = rand::SeedableRng::seed_from_u64(5);
        let mut read_only = 0;
        for tag in 1..=200 {
            let program = random_program(&mut rng, tag, &chaos);
            let plan = commands(&program);
            assert_eq!(
                plan.iter().filter(|(_, e)| matches!(e, Expect::Read(_))).count(),
                program.reads().count()
            );
            // Each write's key was read earlier in the same transaction.
            for (i, (command, expect)) in plan.iter().enumerate() {
                if matches!(expect, Expect::Write(_)) {
                    assert!(plan[..i]
                        .iter()
                        .any(|(c, e)| matches!(e, Expect::Read(_)) && c[1] == command[1]));
                }
            }
            read_only += usize::from(program.writes().count() == 0);
        }
        assert!(read_only > 20, "{read_only}");
    }
}
