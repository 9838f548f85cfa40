//! A RESP listener for any ferry process that speaks Redis (the storage node, the
//! gateway): connections, pipelining, the pre-authentication bound, and the session
//! commands (AUTH, HELLO, SELECT, PING, ECHO, QUIT, COMMAND, INFO, CONFIG, CLIENT). Everything
//! else a signed-in connection sends goes to the process's [`RespService`].
//!
//! With an [`Acceptor`], connections speak TLS (`redis-cli --tls`, redis-py's `ssl=True`);
//! the connection code is generic over the stream, so plain TCP pays nothing for it.
//!
//! One task per connection reads whatever has arrived, runs every whole command in it in
//! order, and writes all their replies in one system call (pipelining). Nothing but AUTH,
//! HELLO and QUIT is served before AUTH: the user is the tenant id (`default` is tenant 1)
//! and the password its token.

use ferry_proto::TenantId;
use std::future::Future;
use std::pin::Pin;
use std::sync::atomic::Ordering;
use std::sync::{Arc, Mutex};
use std::time::Instant;

use bytes::{Bytes, BytesMut};
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};
use tokio::net::TcpListener;
use tokio::sync::watch;

use ferry_resp::blocking::Blocking;
use ferry_resp::config::{NoTenantParams, Settings, TenantParams};
use ferry_resp::table::{keys_of, COMMANDS};
use ferry_resp::{Command, Parser, Protocol, Reply};

use crate::connections::{Connections, Seat};
use crate::gate::ReplyGate;
use crate::preauth::{unauthenticated_over, Ticket, MAX_FAILED_HELLOS};
use crate::resp_multi::{Multi, MultiState};
use crate::tls::Acceptor;

/// Bytes requested from the socket per read.
const READ_CHUNK_BYTES: usize = 64 * 1024;

/// Most bytes read ahead from a client while its blocking pop waits (Redis, too, reads
/// what a blocked client sends and runs it after); past it the connection is left unread.
const MAX_INPUT_WHILE_BLOCKED_BYTES: usize = 1024 * 1024;

/// Replies buffered before they are written even if more commands are waiting: bounds
/// the memory one pipelining client can make the process hold.
pub const MAX_PENDING_REPLY_BYTES: usize = 4 * 1024 * 1024;

/// Most databases (`SELECT 0` … `SELECT 1023`), each a table; CONFIG GET reports it.
pub const MAX_DATABASES: u32 = ferry_resp::config::DATABASES;

/// The tenant the `default` user (and a one-argument AUTH) stands for.
pub const DEFAULT_TENANT: TenantId = TenantId(1);

/// The table of database `index`.
pub fn table_of(index: u32) -> String {
    ferry_resp::config::database_table(index)
}

/// Most commands of one pipeline handed to the service at once: a batch runs as one unit
/// (a storage node's turn of a core for many commands), and this bounds the work and the
/// replies one batch holds.
pub const MAX_BATCH_COMMANDS: usize = 128;

/// The replies to a batch of commands a service runs, one per command, in order.
pub type RespFuture<'a> = Pin<Box<dyn Future<Output = Vec<Reply>> + Send + 'a>>;

/// A command for the service, with the keys it names by the command table (for a cluster
/// node's `-MOVED` and `-CROSSSLOT`; empty unless [`RespService::routes_by_key`]).
#[derive(Clone, Debug)]
pub struct Queued {
    pub command: Command,
    pub keys: Vec<Bytes>,
    /// The connection said READONLY and this is a plain read (not a function): a
    /// cluster's replica may serve it.
    pub replica_read: bool,
}

/// What a process serves over RESP.
pub trait RespService: Send + Sync + 'static {
    /// A signed-in tenant.
    type Tenant: Send + Sync + 'static;

    /// The tenant `id` if `password` is its token.
    fn sign_in(&self, id: TenantId, password: &[u8]) -> Option<Self::Tenant>;

    /// The process's connections (counters, seats, the pre-authentication bound), shared
    /// with its ferry-protocol door.
    fn connections(&self) -> &Arc<Connections>;

    /// The tenant a connection is signed in as before it sends AUTH, if the process has
    /// one (Redis's `default` user with no password); none by default.
    fn default_tenant(&self) -> Option<Self::Tenant> {
        None
    }

    /// How CLIENT LIST names a connection's tenant (its `user=`), and the set of
    /// connections CLIENT LIST and KILL show: a tenant sees only its own.
    fn tenant_label(&self, _tenant: &Self::Tenant) -> String {
        "default".into()
    }

    /// Whether commands should carry their keys ([`Queued::keys`]): a cluster node routes
    /// by them; a process that does not leaves them empty and saves their copies.
    fn routes_by_key(&self) -> bool {
        false
    }

    /// Runs commands of a signed-in connection over `table` (data, FUNCTION, FCALL,
    /// CLUSTER) in order, as a pipeline delivered them (at most [`MAX_BATCH_COMMANDS`]),
    /// charging them to the tenant itself: one reply per command, in order.
    fn execute<'a>(&'a self, tenant: &'a Self::Tenant, table: &'a str, batch: Vec<Queued>) -> RespFuture<'a>;

    /// Charges a session command (PING, SELECT, …) answered by the listener.
    fn charge(&self, tenant: &Self::Tenant, cpu_ns: u64);

    /// `cluster` for one node of a sharded cluster, `standalone` otherwise (HELLO, INFO).
    fn mode(&self) -> &'static str;

    /// The tenant's value of a per-tenant CONFIG parameter (`maxmemory`,
    /// `maxmemory-policy`); none by default (a process that holds no data).
    fn tenant_param(&self, _tenant: &Self::Tenant, _name: &str) -> Option<String> {
        None
    }

    /// Sets per-tenant CONFIG parameters, all or none; refused by default.
    fn set_tenant_params(&self, _tenant: &Self::Tenant, _pairs: &[(&'static str, String)]) -> Result<(), String> {
        Err("not kept by this process".into())
    }

    /// INFO's sections about the tenant's data (`# Memory`, `# Stats`, `# Keyspace`, in
    /// INFO's text form); none by default.
    fn tenant_info(&self, _tenant: &Self::Tenant) -> String {
        String::new()
    }

    /// Whether the tenant is past its memory limit with no room its policy makes before a
    /// write: commands that may grow memory are then refused before they run, as Redis
    /// refuses `denyoom` commands (`resp_multi::MultiState::refused_when_out_of_memory`).
    /// Never, by default (a process that holds no data; the node holding it refuses).
    fn out_of_memory(&self, _tenant: &Self::Tenant) -> bool {
        false
    }

    /// Resolves when the tenant's data may have changed (a blocking pop then tries again);
    /// by default never, and the pop tries again every
    /// [`crate::resp_blocking::RECHECK_MS`] anyway.
    fn written<'a>(&'a self, _tenant: &'a Self::Tenant) -> Pin<Box<dyn Future<Output = ()> + Send + 'a>> {
        Box::pin(std::future::pending())
    }

    /// The gate replies pass before they are sent, when the process has a write-ahead log:
    /// a reply must not reveal a write before the log holds it.
    fn reply_gate(&self) -> Option<&dyn ReplyGate> {
        None
    }

    /// Whether new connections run on runtimes of the process's own (a storage node's
    /// core loops); only then are their first bytes awaited to choose one.
    fn places_connections(&self) -> bool {
        false
    }

    /// The runtime a new connection's task runs on (a storage node's core loop, where its
    /// commands then run without a hand-off), given the tenant its first command signs in
    /// as, if it is an AUTH or HELLO … AUTH ([`crate::resp_sign_in::signs_in_as`]); `None`: the listener's own.
    fn runtime_for_connection(&self, _signs_in_as: Option<TenantId>) -> Option<tokio::runtime::Handle> {
        None
    }
}

/// What a connection knows about its peer.
pub(crate) struct Session<T> {
    pub(crate) tenant: Option<T>,
    protocol: Protocol,
    pub(crate) table: String,
    failed_auths: u32,
    /// One of the process's authenticated-connection seats, held once signed in.
    seat: Option<Seat>,
    /// READONLY was sent (and no READWRITE since).
    replica_reads: bool,
    /// The listener's CONFIG parameters, shared by its connections.
    settings: Arc<Mutex<Settings>>,
    /// MULTI's queue and the WATCHed keys.
    multi: MultiState,
    /// The database SELECT chose (its table is `table`).
    db: u32,
    /// This connection as CLIENT sees it, and the listener's connections.
    pub(crate) client: Arc<crate::resp_clients::Client>,
    clients: Arc<crate::resp_clients::Clients>,
}

/// What to do after a command.
enum After {
    Continue,
    Close,
}

/// Accepts RESP connections until `shutdown` turns true; with `tls`, each speaks TLS
/// (`redis-cli --tls`; the handshake in the connection's task, within its hello timeout).
pub async fn serve<S: RespService>(
    service: Arc<S>,
    listener: TcpListener,
    tls: Option<Acceptor>,
    shutdown: watch::Receiver<bool>,
) {
    let settings = Arc::new(Mutex::new(Settings::default()));
    let clients = Arc::new(crate::resp_clients::Clients::default());
    let connections_shutdown = shutdown.clone();
    crate::accept::accept_loop(listener, "RESP listener", shutdown, |stream, peer| {
        let open = service.connections().open();
        let service = Arc::clone(&service);
        let mut shutdown = connections_shutdown.clone();
        let tls = tls.clone();
        let settings = Arc::clone(&settings);
        let local = stream
            .local_addr()
            .map_or_else(|_| String::new(), |addr| addr.to_string());
        let registered = clients.register(peer.to_string(), local);
        // Without TLS the first command names the tenant if it signs in, so the connection
        // starts on its home core.
        let placing = Arc::clone(&service);
        let choose = move |first: &[u8]| placing.runtime_for_connection(crate::resp_sign_in::signs_in_as(first));
        let places = service.places_connections();
        crate::place::spawn_placed(stream, places, choose, move |stream| async move {
            let _ = stream.set_nodelay(true);
            let connections = service.connections();
            // Held until the connection signs in: bounds how long and how many may wait, a
            // TLS handshake included.
            let ticket = connections.preauth.admit();
            let hello_deadline = tokio::time::Instant::now() + connections.hello_timeout;
            match tls {
                None => {
                    connection(
                        &*service,
                        stream,
                        ticket,
                        hello_deadline,
                        shutdown,
                        settings,
                        &registered,
                    )
                    .await
                }
                Some(tls) => {
                    let handshake = tls.handshake_before(stream, peer, &ticket, hello_deadline, &mut shutdown);
                    if let Some(stream) = handshake.await {
                        connection(
                            &*service,
                            stream,
                            ticket,
                            hello_deadline,
                            shutdown,
                            settings,
                            &registered,
                        )
                        .await;
                    }
                }
            }
            drop(registered);
            drop(open);
        });
        std::future::ready(())
    })
    .await;
}

async fn connection<S, IO>(
    service: &S,
    mut stream: IO,
    ticket: Ticket,
    hello_deadline: tokio::time::Instant,
    mut shutdown: watch::Receiver<bool>,
    settings: Arc<Mutex<Settings>>,
    registered: &crate::resp_clients::Registered,
) where
    S: RespService,
    IO: AsyncRead + AsyncWrite + Unpin,
{
    let mut session = Session {
        tenant: None,
        protocol: Protocol::Resp2,
        table: table_of(0),
        failed_auths: 0,
        seat: None,
        replica_reads: false,
        settings,
        multi: MultiState::default(),
        db: 0,
        client: Arc::clone(&registered.client),
        clients: Arc::clone(&registered.clients),
    };
    let connections = service.connections();
    if let Some(tenant) = service.default_tenant() {
        // Without a seat it stays unauthenticated, and AUTH says why.
        if let Ok(seat) = connections.take_seat() {
            session.seat = Some(seat);
            session.client.signed_in(service.tenant_label(&tenant));
            session.tenant = Some(tenant);
        }
    }
    // Dropped once the connection signs in.
    let mut ticket = session.tenant.is_none().then_some(ticket);
    // A stranger's commands are held to Redis's small limits until it signs in.
    let mut parser = if session.tenant.is_some() {
        Parser::new()
    } else {
        Parser::before_sign_in()
    };
    let mut input = BytesMut::with_capacity(READ_CHUNK_BYTES);
    let mut output = BytesMut::new();
    let mut batch = Vec::new();
    'read: loop {
        input.reserve(READ_CHUNK_BYTES);
        let read = tokio::select! {
            read = stream.read_buf(&mut input) => read,
            _ = shutdown.changed() => break,
            _ = session.client.kill.notified() => break,
            _ = unauthenticated_over(ticket.as_ref(), hello_deadline) => {
                connections.counters.unauthenticated_closed.fetch_add(1, Ordering::Relaxed);
                break;
            }
        };
        if !matches!(read, Ok(n) if n > 0) {
            break;
        }
        let mut last_command: Option<Bytes> = None;
        loop {
            let args = match parser.next(&mut input) {
                Ok(Some(args)) => {
                    last_command = args.first().cloned();
                    args
                }
                Ok(None) => break,
                Err(err) => {
                    connections.counters.framing_errors.fetch_add(1, Ordering::Relaxed);
                    run_batch(service, &session, &mut batch, &mut output).await;
                    Reply::Error(format!("ERR {err}")).encode(session.protocol, &mut output);
                    let _ = send(service, &mut stream, &output).await;
                    break 'read;
                }
            };
            let after = match handle(service, &mut session, args) {
                Handled::Service(queued) => {
                    batch.push(queued);
                    if batch.len() < MAX_BATCH_COMMANDS {
                        continue;
                    }
                    run_batch(service, &session, &mut batch, &mut output).await;
                    After::Continue
                }
                Handled::Answered(reply, after) => {
                    // Replies keep the order of the commands: the batch before this one first.
                    run_batch(service, &session, &mut batch, &mut output).await;
                    reply.encode(session.protocol, &mut output);
                    after
                }
                Handled::Blocking(blocking, keys) => {
                    run_batch(service, &session, &mut batch, &mut output).await;
                    // What the client sent after it waits, as in Redis; so does a reply
                    // already due.
                    if !output.is_empty() {
                        if !send(service, &mut stream, &output).await {
                            break 'read;
                        }
                        output.clear();
                    }
                    if let Some(name) = &last_command {
                        let resp = if session.protocol == Protocol::Resp3 { 3 } else { 2 };
                        session.client.used(session.db, resp, name);
                    }
                    // While it waits the connection is still read (up to a bound), so a
                    // client that hangs up or is killed ends its pop: a pop left waiting for
                    // a gone client would take an element nobody receives.
                    let waiting = crate::resp_blocking::run(service, &session, blocking, keys);
                    tokio::pin!(waiting);
                    let reply = loop {
                        input.reserve(READ_CHUNK_BYTES);
                        tokio::select! {
                            reply = &mut waiting => break reply,
                            _ = shutdown.changed() => break 'read,
                            _ = session.client.kill.notified() => break 'read,
                            read = stream.read_buf(&mut input), if input.len() < MAX_INPUT_WHILE_BLOCKED_BYTES => {
                                if !matches!(read, Ok(n) if n > 0) {
                                    break 'read;
                                }
                            }
                        }
                    };
                    reply.encode(session.protocol, &mut output);
                    After::Continue
                }
                Handled::Watch(queued, names) => {
                    run_batch(service, &session, &mut batch, &mut output).await;
                    let tenant = session.tenant.as_ref().expect("only a signed-in session watches");
                    let answer = service
                        .execute(tenant, &session.table, vec![queued])
                        .await
                        .pop()
                        .unwrap_or_else(|| Reply::err("no answer to WATCH"));
                    let table = session.table.clone();
                    session
                        .multi
                        .watched_now(&table, names, answer)
                        .encode(session.protocol, &mut output);
                    After::Continue
                }
            };
            if session.tenant.is_some() {
                ticket = None;
                parser.signed_in();
            }
            if matches!(after, After::Close) || output.len() >= MAX_PENDING_REPLY_BYTES {
                if !send(service, &mut stream, &output).await {
                    break 'read;
                }
                output.clear();
                if matches!(after, After::Close) {
                    break 'read;
                }
            }
        }
        run_batch(service, &session, &mut batch, &mut output).await;
        if let Some(name) = &last_command {
            let resp = if session.protocol == Protocol::Resp3 { 3 } else { 2 };
            session.client.used(session.db, resp, name);
        }
        if !output.is_empty() {
            if !send(service, &mut stream, &output).await {
                break;
            }
            output.clear();
        }
    }
    // The seat, if any, goes back as the session drops.
}

/// What became of one command.
enum Handled {
    /// The listener answered it.
    Answered(Reply, After),
    /// It is for the service (only once signed in).
    Service(Queued),
    /// WATCH: for the service now, its answer kept by the session (the keys named).
    Watch(Queued, Vec<Bytes>),
    /// A blocking pop, with the keys it names (for routing).
    Blocking(Blocking, Vec<Bytes>),
}

/// Answers a session command, a refusal or a parse error here; gives the rest to the
/// service's next batch.
fn handle<S: RespService>(service: &S, session: &mut Session<S::Tenant>, args: Vec<Bytes>) -> Handled {
    let started = Instant::now();
    // The keys, by the command table, for a service that routes by them.
    let keys = if service.routes_by_key() {
        keys_of(&args)
    } else {
        Vec::new()
    };
    // Only a connection that asked for READONLY reads from a replica.
    let replica_read = session.replica_reads
        && ferry_resp::table::lookup(&args[0])
            .is_some_and(|spec| spec.is(ferry_resp::table::READ_ONLY) && spec.is(ferry_resp::table::KEYSPACE));
    let command = match Command::parse(args) {
        Ok(command) => command,
        Err(_) if session.tenant.is_none() => return Handled::Answered(noauth(), After::Continue),
        Err(reply) => return Handled::Answered(session.multi.refused(reply), After::Continue),
    };
    if let Some(tenant) = &session.tenant {
        // The tenant's state first: it is two loads, the command's flags a table lookup.
        if service.out_of_memory(tenant) && session.multi.refused_when_out_of_memory(&command) {
            return Handled::Answered(session.multi.out_of_memory(&command), After::Continue);
        }
    }
    let (command, keys) = if session.tenant.is_none() {
        (command, keys)
    } else {
        match session.multi.handle(command, keys, &session.table) {
            Multi::Pass(command, keys) => (command, keys),
            Multi::Answer(reply) => return Handled::Answered(reply, After::Continue),
            Multi::Exec(command, keys) => {
                return Handled::Service(Queued {
                    command,
                    keys,
                    replica_read: false,
                })
            }
            Multi::Watch(command, keys) => {
                let Command::Watch(names) = &command else {
                    unreachable!("Multi::Watch carries WATCH")
                };
                let names = names.clone();
                return Handled::Watch(
                    Queued {
                        command,
                        keys,
                        replica_read: false,
                    },
                    names,
                );
            }
        }
    };
    if let Command::Blocking(blocking) = command {
        return Handled::Blocking(blocking, keys);
    }
    match session_command(service, session, command) {
        Ok((reply, after)) => {
            if let Some(tenant) = &session.tenant {
                service.charge(tenant, started.elapsed().as_nanos() as u64);
            }
            Handled::Answered(reply, after)
        }
        Err(command) => Handled::Service(Queued {
            command,
            keys,
            replica_read,
        }),
    }
}

/// Sends replies once they pass the service's reply gate; false when the connection is
/// done (the peer is gone, or the log failed and the replies are withheld).
async fn send<S: RespService, IO: AsyncWrite + Unpin>(service: &S, stream: &mut IO, output: &[u8]) -> bool {
    if let Some(gate) = service.reply_gate() {
        if gate.pass().await.is_err() {
            return false;
        }
    }
    // The flush is free on plain TCP; TLS may hold written bytes back without it.
    stream.write_all(output).await.is_ok() && stream.flush().await.is_ok()
}

/// Runs the commands gathered for the service, if any, appending their replies. The
/// service may wait (a worker's queue, an FCALL): later commands of the pipeline wait
/// with it, so replies keep their order.
async fn run_batch<S: RespService>(
    service: &S,
    session: &Session<S::Tenant>,
    batch: &mut Vec<Queued>,
    out: &mut BytesMut,
) {
    if batch.is_empty() {
        return;
    }
    let tenant = session
        .tenant
        .as_ref()
        .expect("only a signed-in session queues commands");
    let count = batch.len();
    let replies = service.execute(tenant, &session.table, std::mem::take(batch)).await;
    debug_assert_eq!(replies.len(), count, "one reply per command");
    for reply in replies {
        reply.encode(session.protocol, out);
    }
}

/// Before AUTH, an unknown command is still refused for want of authentication (as
/// Redis does), so nothing about the command set leaks before it.
fn noauth() -> Reply {
    Reply::Error("NOAUTH Authentication required.".into())
}

/// Answers the commands the listener serves itself; the rest (only once signed in) are
/// given back for the service.
fn session_command<S: RespService>(
    service: &S,
    session: &mut Session<S::Tenant>,
    command: Command,
) -> Result<(Reply, After), Command> {
    let reply = match command {
        Command::Quit => return Ok((Reply::ok(), After::Close)),
        Command::Auth { user, password } => {
            let reply = auth(service, session, user.as_ref(), &password);
            if session.tenant.is_none() && session.failed_auths >= MAX_FAILED_HELLOS {
                return Ok((reply, After::Close));
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
                    return Ok((
                        Reply::Error("NOPROTO unsupported protocol version".into()),
                        After::Continue,
                    ))
                }
            };
            if let Some((user, password)) = credentials {
                let reply = auth(service, session, Some(&user), &password);
                if session.tenant.is_none() {
                    return Ok((reply, After::Continue));
                }
            }
            if session.tenant.is_none() {
                return Ok((noauth(), After::Continue));
            }
            if let Some(version) = version {
                session.protocol = version;
            }
            hello_reply(service.mode(), session.protocol)
        }
        _ if session.tenant.is_none() => noauth(),
        Command::Ping(None) => Reply::Simple("PONG".into()),
        Command::Ping(Some(message)) | Command::Echo(message) => Reply::Bulk(message),
        Command::Select(index) => match std::str::from_utf8(&index).ok().and_then(|i| i.parse::<u32>().ok()) {
            Some(index) if index < MAX_DATABASES => {
                session.table = table_of(index);
                session.db = index;
                Reply::ok()
            }
            _ => Reply::err(format!("DB index is out of range (0 to {})", MAX_DATABASES - 1)),
        },
        Command::CommandInfo(args) => command_info(&args),
        Command::Info(sections) => {
            let tenant_info = session.tenant.as_ref().map(|tenant| service.tenant_info(tenant));
            let clients_info = session.client.signed_in_as().map(|user| session.clients.info(&user));
            let text = format!(
                "{}{}{}",
                ferry_resp::info::server_section(service.mode()),
                clients_info.unwrap_or_default(),
                tenant_info.unwrap_or_default()
            );
            Reply::Bulk(Bytes::from(ferry_resp::info::sections(&text, &sections)))
        }
        Command::Config(words) => {
            let mut settings = session.settings.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
            match session.tenant.as_ref() {
                Some(tenant) => settings.run(&words, &ServiceParams { service, tenant }),
                None => settings.run(&words, &NoTenantParams),
            }
        }
        Command::ReadOnly => {
            session.replica_reads = true;
            Reply::ok()
        }
        Command::ReadWrite => {
            session.replica_reads = false;
            Reply::ok()
        }
        Command::Client(words) => {
            // CLIENT LIST and INFO show themselves as the connection's command, as Redis's do.
            let this = format!("client|{}", String::from_utf8_lossy(&words[0]).to_ascii_lowercase());
            let resp = if session.protocol == Protocol::Resp3 { 3 } else { 2 };
            session.client.used(session.db, resp, this.as_bytes());
            let (reply, close) = session.clients.run(&session.client, &words);
            return Ok((reply, if close { After::Close } else { After::Continue }));
        }
        other => return Err(other),
    };
    Ok((reply, After::Continue))
}

/// A signed-in tenant's CONFIG parameters, kept by the service.
struct ServiceParams<'a, S: RespService> {
    service: &'a S,
    tenant: &'a S::Tenant,
}

impl<S: RespService> TenantParams for ServiceParams<'_, S> {
    fn value(&self, name: &str) -> Option<String> {
        self.service.tenant_param(self.tenant, name)
    }
    fn set(&self, pairs: &[(&'static str, String)]) -> Result<(), String> {
        self.service.set_tenant_params(self.tenant, pairs)
    }
}

fn auth<S: RespService>(
    service: &S,
    session: &mut Session<S::Tenant>,
    user: Option<&Bytes>,
    password: &Bytes,
) -> Reply {
    let tenant_id = crate::resp_sign_in::tenant_of_user(user.map(|u| &u[..]));
    let Some(tenant) = tenant_id.and_then(|id| service.sign_in(id, password)) else {
        session.failed_auths += 1;
        return Reply::Error("WRONGPASS invalid username-password pair or user is disabled.".into());
    };
    if session.seat.is_none() {
        match service.connections().take_seat() {
            Ok(seat) => session.seat = Some(seat),
            // Redis's words, which its clients recognise.
            Err(_) => return Reply::err("max number of clients reached"),
        }
    }
    session.client.signed_in(service.tenant_label(&tenant));
    session.tenant = Some(tenant);
    Reply::ok()
}

fn hello_reply(mode: &str, protocol: Protocol) -> Reply {
    let proto = match protocol {
        Protocol::Resp2 => 2,
        Protocol::Resp3 | Protocol::Ferry => 3,
    };
    Reply::Map(vec![
        (Reply::text("server"), Reply::text("redis")),
        (Reply::text("version"), Reply::text("7.2.0")),
        (Reply::text("proto"), Reply::Integer(proto)),
        (Reply::text("id"), Reply::Integer(0)),
        (Reply::text("mode"), Reply::text(mode)),
        (Reply::text("role"), Reply::text("master")),
        (Reply::text("modules"), Reply::Array(Vec::new())),
    ])
}

/// COMMAND, COMMAND COUNT, COMMAND DOCS and COMMAND INFO: enough for clients that probe
/// (each command's name with arity and flags unknown, as Redis allows).
fn command_info(args: &[Bytes]) -> Reply {
    let sub = args.first().map(|a| String::from_utf8_lossy(a).to_ascii_uppercase());
    match sub.as_deref() {
        Some("COUNT") => Reply::Integer(COMMANDS.len() as i64),
        Some("DOCS") => Reply::Map(Vec::new()),
        None => Reply::Array(COMMANDS.iter().map(|spec| spec.info()).collect()),
        // COMMAND INFO name...: one entry per name, nil for a command not served.
        Some("INFO") => Reply::Array(
            args[1..]
                .iter()
                .map(|name| ferry_resp::table::lookup(name).map_or(Reply::Null, |spec| spec.info()))
                .collect(),
        ),
        Some(_) => Reply::err("unknown COMMAND subcommand"),
    }
}
