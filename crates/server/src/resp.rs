//! The RESP front end of a storage node (`--resp ADDR`): redis-cli, redis-benchmark and the
//! Redis client of any language can use ferry's tables.
//!
//! One task per connection reads whatever has arrived, runs every whole command in it in
//! order, and writes all their replies in one system call (pipelining). Nothing but AUTH,
//! HELLO and QUIT is served before AUTH: the user is the tenant id (`default` is tenant 1)
//! and the password its token. Connections that have not authenticated share the node's
//! pre-authentication bound and hello timeout. In a cluster, keys of other nodes get
//! Redis Cluster's `-MOVED slot host:port`, and keys on several nodes `-CROSSSLOT`.

use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Instant;

use bytes::{Bytes, BytesMut};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::watch;

use ferry_cluster::key_slot;
use ferry_net::preauth::{unauthenticated_over, MAX_FAILED_HELLOS};
use ferry_resp::command::{unknown, SERVED};
use ferry_resp::{Command, Parser, Protocol, Reply};

use crate::node::{Node, TenantState};
use crate::resp_fn::FunctionCall;
use crate::stats::TenantCounters;

/// Bytes requested from the socket per read.
const READ_CHUNK_BYTES: usize = 64 * 1024;

/// Replies buffered before they are written even if more commands are waiting: bounds
/// the memory one pipelining client can make the node hold.
const MAX_PENDING_REPLY_BYTES: usize = 4 * 1024 * 1024;

/// Most databases (`SELECT 0` … `SELECT 1023`), each a table.
pub const MAX_DATABASES: u32 = 1024;

/// The tenant the `default` user (and a one-argument AUTH) stands for.
const DEFAULT_TENANT: u32 = 1;

/// What a connection knows about its peer.
struct Session {
    tenant: Option<Arc<TenantState>>,
    protocol: Protocol,
    table: String,
    failed_auths: u32,
}

/// What to do after a command.
enum After {
    Continue,
    Close,
}

/// Accepts RESP connections until the node shuts down.
pub(crate) async fn serve(node: Arc<Node>, listener: TcpListener, mut shutdown: watch::Receiver<bool>) {
    loop {
        let accepted = tokio::select! {
            accepted = listener.accept() => accepted,
            _ = shutdown.changed() => return,
        };
        let Ok((stream, peer)) = accepted else {
            tokio::time::sleep(std::time::Duration::from_millis(10)).await;
            continue;
        };
        tracing::debug!(%peer, "RESP connection accepted");
        let node = Arc::clone(&node);
        let shutdown = shutdown.clone();
        tokio::spawn(async move {
            node.counters.connections_open.fetch_add(1, Ordering::SeqCst);
            connection(&node, stream, shutdown).await;
            node.counters.connections_open.fetch_sub(1, Ordering::SeqCst);
        });
    }
}

async fn connection(node: &Node, mut stream: TcpStream, mut shutdown: watch::Receiver<bool>) {
    let _ = stream.set_nodelay(true);
    let mut session = Session {
        tenant: None,
        protocol: Protocol::Resp2,
        table: crate::resp_exec::table_of(0),
        failed_auths: 0,
    };
    let mut ticket = Some(node.preauth.admit());
    let hello_deadline = tokio::time::Instant::now() + node.hello_timeout;
    let mut parser = Parser::new();
    let mut input = BytesMut::with_capacity(READ_CHUNK_BYTES);
    let mut output = BytesMut::new();
    // Counts the connection among the authenticated ones once it is.
    let mut counted = false;
    'read: loop {
        input.reserve(READ_CHUNK_BYTES);
        let read = tokio::select! {
            read = stream.read_buf(&mut input) => read,
            _ = shutdown.changed() => break,
            _ = unauthenticated_over(ticket.as_ref(), hello_deadline) => {
                TenantCounters::bump(&node.counters.connections_unauthenticated_closed);
                break;
            }
        };
        if !matches!(read, Ok(n) if n > 0) {
            break;
        }
        loop {
            let args = match parser.next(&mut input) {
                Ok(Some(args)) => args,
                Ok(None) => break,
                Err(err) => {
                    TenantCounters::bump(&node.counters.framing_errors);
                    Reply::Error(format!("ERR {err}")).encode(session.protocol, &mut output);
                    let _ = stream.write_all(&output).await;
                    break 'read;
                }
            };
            let after = handle(node, &mut session, &mut counted, args, &mut output).await;
            if session.tenant.is_some() {
                ticket = None;
            }
            if matches!(after, After::Close) || output.len() >= MAX_PENDING_REPLY_BYTES {
                if stream.write_all(&output).await.is_err() {
                    break 'read;
                }
                output.clear();
                if matches!(after, After::Close) {
                    break 'read;
                }
            }
        }
        if !output.is_empty() {
            if stream.write_all(&output).await.is_err() {
                break;
            }
            output.clear();
        }
    }
    if counted {
        node.counters.connections_authenticated.fetch_sub(1, Ordering::AcqRel);
    }
}

/// Runs one command, appending its reply. FUNCTION and FCALL wait for their invocation
/// on a worker (later commands of the pipeline wait with them: replies keep their order).
async fn handle(node: &Node, session: &mut Session, counted: &mut bool, args: Vec<Bytes>, out: &mut BytesMut) -> After {
    let started = Instant::now();
    let (reply, after) = match Command::parse(args) {
        Err(_) if session.tenant.is_none() => (noauth(), After::Continue),
        Err(reply) => (reply, After::Continue),
        Ok(command) => match (&session.tenant, function_call(node, &session.table, command)) {
            (Some(tenant), Ok(Ok(call))) => {
                let tenant = Arc::clone(tenant);
                let reply = call.run(node, &tenant).await;
                reply.encode(session.protocol, out);
                // The worker counted the invocation and its CPU.
                return After::Continue;
            }
            (Some(_), Ok(Err(refusal))) => (refusal, After::Continue),
            (None, Ok(_)) => (noauth(), After::Continue),
            (_, Err(command)) => run(node, session, counted, command),
        },
    };
    reply.encode(session.protocol, out);
    if let Some(tenant) = &session.tenant {
        let cpu_ns = started.elapsed().as_nanos() as u64;
        tenant.counters.cpu_ns.fetch_add(cpu_ns, Ordering::Relaxed);
        TenantCounters::bump(&tenant.counters.requests);
    }
    after
}

/// FUNCTION and FCALL as a call to run (or, in a cluster, the refusal of an FCALL whose
/// keys are elsewhere); any other command is given back.
fn function_call(node: &Node, table: &str, command: Command) -> Result<Result<FunctionCall, Reply>, Command> {
    match command {
        Command::Function(sub) => Ok(Ok(FunctionCall::function(sub))),
        Command::FCall { .. } => {
            if let Some(refusal) = misrouted(node, &command) {
                return Ok(Err(refusal));
            }
            let Command::FCall {
                function,
                keys,
                args,
                read_only,
            } = command
            else {
                unreachable!("matched above")
            };
            Ok(Ok(FunctionCall::fcall(function, keys, args, read_only, table)))
        }
        other => Err(other),
    }
}

/// Before AUTH, an unknown command is still refused for want of authentication (as
/// Redis does), so nothing about the command set leaks before it.
fn noauth() -> Reply {
    Reply::Error("NOAUTH Authentication required.".into())
}

fn run(node: &Node, session: &mut Session, counted: &mut bool, command: Command) -> (Reply, After) {
    let reply = match command {
        Command::Quit => return (Reply::ok(), After::Close),
        Command::Auth { user, password } => {
            let reply = auth(node, session, counted, user.as_ref(), &password);
            if session.tenant.is_none() && session.failed_auths >= MAX_FAILED_HELLOS {
                return (reply, After::Close);
            }
            reply
        }
        Command::Hello {
            protocol,
            auth: credentials,
        } => {
            let version = match protocol.as_deref() {
                None => None,
                Some(b"2") => Some(Protocol::Resp2),
                Some(b"3") => Some(Protocol::Resp3),
                Some(_) => {
                    return (
                        Reply::Error("NOPROTO unsupported protocol version".into()),
                        After::Continue,
                    )
                }
            };
            if let Some((user, password)) = credentials {
                let reply = auth(node, session, counted, Some(&user), &password);
                if session.tenant.is_none() {
                    return (reply, After::Continue);
                }
            }
            if session.tenant.is_none() {
                return (noauth(), After::Continue);
            }
            if let Some(version) = version {
                session.protocol = version;
            }
            hello_reply(node, session.protocol)
        }
        _ if session.tenant.is_none() => noauth(),
        Command::Ping(None) => Reply::Simple("PONG".into()),
        Command::Ping(Some(message)) | Command::Echo(message) => Reply::Bulk(message),
        Command::Select(index) => match std::str::from_utf8(&index).ok().and_then(|i| i.parse::<u32>().ok()) {
            Some(index) if index < MAX_DATABASES => {
                session.table = crate::resp_exec::table_of(index);
                Reply::ok()
            }
            _ => Reply::err(format!("DB index is out of range (0 to {})", MAX_DATABASES - 1)),
        },
        Command::CommandInfo(args) => command_info(&args),
        Command::Info => Reply::Bulk(Bytes::from(format!(
            "# Server\r\nredis_version:7.2.0\r\nferry_version:{}\r\nredis_mode:{}\r\n",
            env!("CARGO_PKG_VERSION"),
            if node.cluster.is_some() {
                "cluster"
            } else {
                "standalone"
            }
        ))),
        Command::Client(sub) => match &sub[..] {
            b"SETNAME" | b"SETINFO" => Reply::ok(),
            _ => unknown(&[Bytes::from_static(b"CLIENT"), sub]),
        },
        Command::Cluster(sub) => cluster(node, &sub),
        data => {
            let tenant = session.tenant.as_ref().expect("checked above");
            if let Some(refusal) = misrouted(node, &data) {
                refusal
            } else {
                crate::resp_exec::execute(tenant, &session.table, data)
            }
        }
    };
    (reply, After::Continue)
}

fn auth(node: &Node, session: &mut Session, counted: &mut bool, user: Option<&Bytes>, password: &Bytes) -> Reply {
    let tenant_id = match user.map(|u| &u[..]) {
        None | Some(b"default") => Some(DEFAULT_TENANT),
        Some(user) => std::str::from_utf8(user).ok().and_then(|u| u.parse::<u32>().ok()),
    };
    let tenant = tenant_id
        .and_then(|id| node.tenants.get(&id))
        .filter(|tenant| tenant.token_matches(password));
    let Some(tenant) = tenant else {
        session.failed_auths += 1;
        return Reply::Error("WRONGPASS invalid username-password pair or user is disabled.".into());
    };
    if !*counted {
        let admitted = node
            .counters
            .connections_authenticated
            .fetch_update(Ordering::AcqRel, Ordering::Acquire, |n| {
                (n < node.max_connections as u64).then_some(n + 1)
            })
            .is_ok();
        if !admitted {
            node.counters.connections_refused.fetch_add(1, Ordering::Relaxed);
            return Reply::err(format!("max number of clients reached ({})", node.max_connections));
        }
        *counted = true;
    }
    session.tenant = Some(Arc::clone(tenant));
    Reply::ok()
}

fn hello_reply(node: &Node, protocol: Protocol) -> Reply {
    let proto = match protocol {
        Protocol::Resp2 => 2,
        Protocol::Resp3 => 3,
    };
    Reply::Map(vec![
        (Reply::text("server"), Reply::text("redis")),
        (Reply::text("version"), Reply::text("7.2.0")),
        (Reply::text("proto"), Reply::Integer(proto)),
        (Reply::text("id"), Reply::Integer(0)),
        (
            Reply::text("mode"),
            Reply::text(if node.cluster.is_some() {
                "cluster"
            } else {
                "standalone"
            }),
        ),
        (Reply::text("role"), Reply::text("master")),
        (Reply::text("modules"), Reply::Array(Vec::new())),
    ])
}

/// COMMAND, COMMAND COUNT, COMMAND DOCS and COMMAND INFO: enough for clients that probe
/// (each command's name with arity and flags unknown, as Redis allows).
fn command_info(args: &[Bytes]) -> Reply {
    let sub = args.first().map(|a| String::from_utf8_lossy(a).to_ascii_uppercase());
    match sub.as_deref() {
        Some("COUNT") => Reply::Integer(SERVED.len() as i64),
        Some("DOCS") => Reply::Map(Vec::new()),
        Some("INFO") | None => Reply::Array(
            SERVED
                .iter()
                .map(|name| Reply::Array(vec![Reply::text(*name), Reply::Integer(-1)]))
                .collect(),
        ),
        Some(_) => Reply::err("unknown COMMAND subcommand"),
    }
}

/// In a cluster, Redis Cluster's refusals for keys this node does not serve.
fn misrouted(node: &Node, command: &Command) -> Option<Reply> {
    let role = node.cluster.as_ref()?;
    let keys: Vec<&[u8]> = match command {
        Command::Get(key) | Command::Set { key, .. } | Command::IncrBy { key, .. } => vec![&key[..]],
        Command::Del(keys) | Command::Exists(keys) | Command::MGet(keys) => keys.iter().map(|k| &k[..]).collect(),
        Command::MSet(pairs) => pairs.iter().map(|(k, _)| &k[..]).collect(),
        Command::FCall { keys, .. } => keys.iter().map(|k| &k[..]).collect(),
        _ => return None,
    };
    if role.map.single_owner(keys.iter().copied()).is_err() {
        return Some(Reply::Error(
            "CROSSSLOT Keys in request don't hash to the same slot".into(),
        ));
    }
    let key = keys.first()?;
    let owner = role.map.owner(key);
    if owner.id == role.node_id {
        return None;
    }
    Some(match &owner.resp {
        Some(resp) => Reply::Error(format!("MOVED {} {resp}", key_slot(key))),
        // Sending a Redis client to the node's ferry-protocol port would be worse.
        None => Reply::Error(format!(
            "CLUSTERDOWN slot {} is served by node {}, which has no RESP address in the cluster map",
            key_slot(key),
            owner.id
        )),
    })
}

/// CLUSTER SLOTS and CLUSTER SHARDS from the cluster map (nodes without a RESP address in
/// the map are left out: a Redis client could not talk to them).
fn cluster(node: &Node, sub: &[u8]) -> Reply {
    let Some(role) = &node.cluster else {
        return Reply::err("This instance has cluster support disabled");
    };
    let with_resp = role.map.nodes().iter().filter_map(|n| {
        let resp = n.resp.as_ref()?;
        let (host, port) = resp.rsplit_once(':')?;
        Some((n, host.to_string(), port.parse::<i64>().ok()?))
    });
    match sub {
        b"SLOTS" => Reply::Array(
            with_resp
                .flat_map(|(n, host, port)| {
                    n.slots.iter().map(move |&(lo, hi)| {
                        Reply::Array(vec![
                            Reply::Integer(i64::from(lo)),
                            Reply::Integer(i64::from(hi)),
                            Reply::Array(vec![
                                Reply::text(host.clone()),
                                Reply::Integer(port),
                                Reply::text(n.id.clone()),
                            ]),
                        ])
                    })
                })
                .collect(),
        ),
        b"SHARDS" => Reply::Array(
            with_resp
                .map(|(n, host, port)| {
                    let slots = n
                        .slots
                        .iter()
                        .flat_map(|&(lo, hi)| [Reply::Integer(i64::from(lo)), Reply::Integer(i64::from(hi))])
                        .collect();
                    let member = Reply::Map(vec![
                        (Reply::text("id"), Reply::text(n.id.clone())),
                        (Reply::text("port"), Reply::Integer(port)),
                        (Reply::text("ip"), Reply::text(host.clone())),
                        (Reply::text("endpoint"), Reply::text(host)),
                        (Reply::text("role"), Reply::text("master")),
                        (Reply::text("replication-offset"), Reply::Integer(0)),
                        (Reply::text("health"), Reply::text("online")),
                    ]);
                    Reply::Map(vec![
                        (Reply::text("slots"), Reply::Array(slots)),
                        (Reply::text("nodes"), Reply::Array(vec![member])),
                    ])
                })
                .collect(),
        ),
        _ => Reply::err("only CLUSTER SLOTS and CLUSTER SHARDS are served"),
    }
}
