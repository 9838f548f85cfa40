//! CLIENT: a listener's connections as Redis's clients see them. Each connection has an
//! id, its peer and local addresses, a name, the database it selected and what it last
//! ran; CLIENT LIST, INFO and KILL show and close connections **of the caller's tenant
//! only** (tenants share a process, not each other's connections). A connection that
//! has not signed in belongs to no tenant and is listed to nobody.
//!
//! What ferry does not keep per connection (buffer and memory sizes, file descriptors)
//! is listed as 0, so a client parsing the line finds every field Redis 7.2 gives.

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Instant;

use bytes::Bytes;
use tokio::sync::Notify;

use ferry_resp::Reply;

/// Longest client name or library name/version kept (Redis bounds none; a name is listed
/// on every CLIENT LIST line, so ferry does).
pub const MAX_CLIENT_NAME_BYTES: usize = 256;

/// One connection of a listener.
pub struct Client {
    /// CLIENT ID: unique in the process, never reused.
    pub id: u64,
    addr: String,
    laddr: String,
    created: Instant,
    state: Mutex<ClientState>,
    /// Wakes the connection's loop to close it (CLIENT KILL).
    pub(crate) kill: Notify,
    /// Whether it waits in a blocking pop (INFO's blocked_clients, flag `b`).
    blocked: AtomicBool,
    /// How CLIENT UNBLOCK asked its blocking pop to end, and the wake-up for it.
    unblock: Mutex<Option<Unblock>>,
    pub(crate) unblocked: Notify,
}

/// How CLIENT UNBLOCK ends a blocking pop: as if it timed out, or with an error.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Unblock {
    Timeout,
    Error,
}

/// Marks a connection blocked while it lives.
pub struct BlockedGuard<'a>(&'a Client);

impl Drop for BlockedGuard<'_> {
    fn drop(&mut self) {
        self.0.blocked.store(false, Ordering::Relaxed);
        self.0.take_unblock();
    }
}

/// What changes as a connection is used.
struct ClientState {
    /// The tenant it signed in as (its label), if it did.
    user: Option<String>,
    name: String,
    lib_name: String,
    lib_ver: String,
    db: u32,
    resp: u8,
    last_at: Instant,
    last_command: String,
}

/// A listener's connections.
#[derive(Default)]
pub struct Clients {
    next_id: AtomicU64,
    all: Mutex<HashMap<u64, Arc<Client>>>,
}

/// A connection's place in [`Clients`], removed when it drops.
pub struct Registered {
    pub(crate) clients: Arc<Clients>,
    /// The connection.
    pub client: Arc<Client>,
}

impl Drop for Registered {
    fn drop(&mut self) {
        self.clients.lock().remove(&self.client.id);
    }
}

impl Clients {
    fn lock(&self) -> MutexGuard<'_, HashMap<u64, Arc<Client>>> {
        self.all.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    /// Registers a connection from `addr` to `laddr`.
    pub fn register(self: &Arc<Self>, addr: String, laddr: String) -> Registered {
        let now = Instant::now();
        let client = Arc::new(Client {
            id: self.next_id.fetch_add(1, Ordering::Relaxed) + 1,
            addr,
            laddr,
            created: now,
            state: Mutex::new(ClientState {
                user: None,
                name: String::new(),
                lib_name: String::new(),
                lib_ver: String::new(),
                db: 0,
                resp: 2,
                last_at: now,
                last_command: "NULL".into(),
            }),
            kill: Notify::new(),
            blocked: AtomicBool::new(false),
            unblock: Mutex::new(None),
            unblocked: Notify::new(),
        });
        self.lock().insert(client.id, Arc::clone(&client));
        Registered {
            clients: Arc::clone(self),
            client,
        }
    }

    /// The connections of `user`, by id.
    fn of_user(&self, user: &str) -> Vec<Arc<Client>> {
        let mut clients: Vec<Arc<Client>> = self
            .lock()
            .values()
            .filter(|client| client.state().user.as_deref() == Some(user))
            .cloned()
            .collect();
        clients.sort_by_key(|client| client.id);
        clients
    }

    /// INFO's `# Clients` section for `user`'s connections, in Redis 7.2's fields (what
    /// ferry does not keep is 0).
    pub fn info(&self, user: &str) -> String {
        let clients = self.of_user(user);
        let blocked = clients.iter().filter(|client| client.is_blocked()).count();
        format!(
            "# Clients\r\nconnected_clients:{}\r\ncluster_connections:0\r\nmaxclients:10000\r\n\
             client_recent_max_input_buffer:0\r\nclient_recent_max_output_buffer:0\r\n\
             blocked_clients:{blocked}\r\ntracking_clients:0\r\nclients_in_timeout_table:{blocked}\r\n\
             total_blocking_keys:0\r\ntotal_blocking_keys_on_nokey:0\r\n\r\n",
            clients.len()
        )
    }

    /// CLIENT UNBLOCK: ends `id`'s blocking pop (if it is `user`'s and blocked) the way
    /// `how` says; whether it did.
    fn unblock(&self, user: &str, id: u64, how: Unblock) -> bool {
        let Some(client) = self.of_user(user).into_iter().find(|client| client.id == id) else {
            return false;
        };
        if !client.is_blocked() {
            return false;
        }
        *client.unblock.lock().unwrap_or_else(|poisoned| poisoned.into_inner()) = Some(how);
        client.unblocked.notify_one();
        true
    }

    /// Runs `CLIENT words…` (the words after CLIENT) for connection `me`: the reply, and
    /// whether `me` itself is to close after it (it killed itself).
    pub fn run(&self, me: &Client, words: &[Bytes]) -> (Reply, bool) {
        let sub = String::from_utf8_lossy(&words[0]).to_ascii_uppercase();
        let args = &words[1..];
        let user = me.state().user.clone().unwrap_or_default();
        let reply = match (sub.as_str(), args) {
            ("ID", []) => Reply::Integer(me.id as i64),
            ("INFO", []) => Reply::Bulk(Bytes::from(me.line())),
            ("LIST", _) => match list_filter(args) {
                Ok(filter) => Reply::Bulk(Bytes::from(
                    self.of_user(&user)
                        .iter()
                        .filter(|client| filter.as_ref().is_none_or(|ids| ids.contains(&client.id)))
                        .map(|client| client.line())
                        .collect::<String>(),
                )),
                Err(reply) => reply,
            },
            ("GETNAME", []) => {
                let name = me.state().name.clone();
                if name.is_empty() {
                    Reply::Null
                } else {
                    Reply::text(name)
                }
            }
            ("SETNAME", [name]) => match checked_name(name) {
                Ok(name) => {
                    me.state().name = name;
                    Reply::ok()
                }
                Err(reply) => reply,
            },
            ("SETINFO", [field, value]) => match (
                String::from_utf8_lossy(field).to_ascii_uppercase().as_str(),
                checked_name(value),
            ) {
                (_, Err(reply)) => reply,
                ("LIB-NAME", Ok(value)) => {
                    me.state().lib_name = value;
                    Reply::ok()
                }
                ("LIB-VER", Ok(value)) => {
                    me.state().lib_ver = value;
                    Reply::ok()
                }
                (other, Ok(_)) => Reply::err(format!("Unrecognized option '{other}'")),
            },
            ("UNBLOCK", [id, rest @ ..]) if rest.len() <= 1 => {
                let how = match rest.first().map(|how| how.to_ascii_uppercase()) {
                    None => Some(Unblock::Timeout),
                    Some(how) if how == b"TIMEOUT" => Some(Unblock::Timeout),
                    Some(how) if how == b"ERROR" => Some(Unblock::Error),
                    Some(_) => None,
                };
                match (std::str::from_utf8(id).ok().and_then(|id| id.parse::<u64>().ok()), how) {
                    (None, _) => Reply::err("value is not an integer or out of range"),
                    (_, None) => Reply::err("CLIENT UNBLOCK reason should be TIMEOUT or ERROR"),
                    (Some(id), Some(how)) => Reply::Integer(i64::from(self.unblock(&user, id, how))),
                }
            }
            ("NO-EVICT" | "NO-TOUCH", [flag]) if is_on_off(flag) => Reply::ok(),
            ("KILL", [addr]) => {
                // The old form: one client by address; an error if there is none.
                let killed = self.kill(
                    &user,
                    me,
                    &Kill {
                        addr: Some(addr.clone()),
                        ..Kill::new()
                    },
                );
                return match killed {
                    (0, _) => (Reply::err("No such client"), false),
                    (_, me_killed) => (Reply::ok(), me_killed),
                };
            }
            ("KILL", filters) if !filters.is_empty() && filters.len() % 2 == 0 => match Kill::parse(filters) {
                Ok(kill) => {
                    let (count, me_killed) = self.kill(&user, me, &kill);
                    return (Reply::Integer(count as i64), me_killed);
                }
                Err(reply) => reply,
            },
            ("HELP", []) => Reply::Array(
                [
                    "CLIENT <subcommand> [<arg> [value] [opt] ...]. Subcommands are:",
                    "ID",
                    "    Return the ID of the current connection.",
                    "INFO",
                    "    Return information about the current client connection.",
                    "LIST [TYPE normal] [ID <id> [<id> ...]]",
                    "    Return information about the tenant's client connections.",
                    "KILL <ip:port>",
                    "    Kill connection made from <ip:port>.",
                    "KILL <option> <value> [<option> <value> [...]]",
                    "    Kill connections. Options are: ID, ADDR, LADDR, USER, SKIPME, TYPE, MAXAGE.",
                    "GETNAME",
                    "    Return the name of the current connection.",
                    "SETNAME <name>",
                    "    Assign the name <name> to the current connection.",
                    "SETINFO <option> <value>",
                    "    Set client meta attr. Options are: LIB-NAME, LIB-VER.",
                    "UNBLOCK <clientid> [TIMEOUT|ERROR]",
                    "    Unblock the specified blocked client.",
                    "HELP",
                    "    Print this help.",
                ]
                .into_iter()
                .map(|line| Reply::Simple(line.into()))
                .collect(),
            ),
            _ => Reply::err(format!(
                "unknown subcommand or wrong number of arguments for '{}'. Try CLIENT HELP.",
                sub.chars().take(64).collect::<String>()
            )),
        };
        (reply, false)
    }

    /// Closes the connections of `user` that `kill` selects: how many, and whether `me`
    /// is one of them (closed by its caller after the reply).
    fn kill(&self, user: &str, me: &Client, kill: &Kill) -> (usize, bool) {
        let mut count = 0;
        let mut me_killed = false;
        for client in self.of_user(user) {
            if !kill.selects(&client, me) {
                continue;
            }
            count += 1;
            if client.id == me.id {
                me_killed = true;
            } else {
                client.kill.notify_one();
            }
        }
        (count, me_killed)
    }
}

/// CLIENT LIST's ID filter; TYPE normal (every client of ferry's is one) or none.
fn list_filter(args: &[Bytes]) -> Result<Option<Vec<u64>>, Reply> {
    match args {
        [] => Ok(None),
        [option, kind] if option.eq_ignore_ascii_case(b"TYPE") => match kind.to_ascii_lowercase().as_slice() {
            b"normal" => Ok(None),
            b"master" | b"replica" | b"slave" | b"pubsub" => Ok(Some(Vec::new())),
            _ => Err(Reply::err(format!(
                "Unknown client type '{}'",
                String::from_utf8_lossy(kind)
            ))),
        },
        [option, ids @ ..] if option.eq_ignore_ascii_case(b"ID") && !ids.is_empty() => ids
            .iter()
            .map(|id| {
                std::str::from_utf8(id)
                    .ok()
                    .and_then(|id| id.parse::<u64>().ok())
                    .filter(|id| *id > 0)
                    .ok_or_else(|| Reply::err("Invalid client ID"))
            })
            .collect::<Result<Vec<u64>, Reply>>()
            .map(Some),
        _ => Err(ferry_resp::command::syntax_error()),
    }
}

fn is_on_off(flag: &[u8]) -> bool {
    flag.eq_ignore_ascii_case(b"on") || flag.eq_ignore_ascii_case(b"off")
}

/// A client or library name: printable, no spaces (Redis's rule), bounded.
fn checked_name(name: &[u8]) -> Result<String, Reply> {
    if name.len() > MAX_CLIENT_NAME_BYTES {
        return Err(Reply::err(format!("names are at most {MAX_CLIENT_NAME_BYTES} bytes")));
    }
    if name.iter().any(|&b| !(b'!'..=b'~').contains(&b)) {
        return Err(Reply::err(
            "Client names cannot contain spaces, newlines or special characters.",
        ));
    }
    Ok(String::from_utf8_lossy(name).into_owned())
}

/// CLIENT KILL's filters.
struct Kill {
    id: Option<u64>,
    addr: Option<Bytes>,
    laddr: Option<Bytes>,
    user: Option<Bytes>,
    skip_me: bool,
    no_type_match: bool,
    max_age_s: Option<u64>,
}

impl Kill {
    fn new() -> Kill {
        Kill {
            id: None,
            addr: None,
            laddr: None,
            user: None,
            skip_me: true,
            no_type_match: false,
            max_age_s: None,
        }
    }

    fn parse(filters: &[Bytes]) -> Result<Kill, Reply> {
        let mut kill = Kill::new();
        let number = |value: &Bytes| {
            std::str::from_utf8(value)
                .ok()
                .and_then(|v| v.parse::<u64>().ok())
                .ok_or_else(|| Reply::err("client-id should be greater than 0"))
        };
        for pair in filters.chunks(2) {
            let (option, value) = (String::from_utf8_lossy(&pair[0]).to_ascii_uppercase(), &pair[1]);
            match option.as_str() {
                "ID" => {
                    kill.id = Some(number(value).and_then(|id| {
                        if id > 0 {
                            Ok(id)
                        } else {
                            Err(Reply::err("client-id should be greater than 0"))
                        }
                    })?)
                }
                "ADDR" => kill.addr = Some(value.clone()),
                "LADDR" => kill.laddr = Some(value.clone()),
                "USER" => kill.user = Some(value.clone()),
                "SKIPME" if value.eq_ignore_ascii_case(b"yes") => kill.skip_me = true,
                "SKIPME" if value.eq_ignore_ascii_case(b"no") => kill.skip_me = false,
                "TYPE" => match value.to_ascii_lowercase().as_slice() {
                    b"normal" => {}
                    b"master" | b"replica" | b"slave" | b"pubsub" => kill.no_type_match = true,
                    _ => {
                        return Err(Reply::err(format!(
                            "Unknown client type '{}'",
                            String::from_utf8_lossy(value)
                        )))
                    }
                },
                "MAXAGE" => kill.max_age_s = Some(number(value)?),
                _ => return Err(ferry_resp::command::syntax_error()),
            }
        }
        Ok(kill)
    }

    fn selects(&self, client: &Client, me: &Client) -> bool {
        let state = client.state();
        let skipped = self.no_type_match || (self.skip_me && client.id == me.id);
        !skipped
            && self.id.is_none_or(|id| id == client.id)
            && self
                .addr
                .as_ref()
                .is_none_or(|addr| addr[..] == *client.addr.as_bytes())
            && self
                .laddr
                .as_ref()
                .is_none_or(|laddr| laddr[..] == *client.laddr.as_bytes())
            && self
                .user
                .as_ref()
                .is_none_or(|user| state.user.as_deref().map(str::as_bytes) == Some(&user[..]))
            && self
                .max_age_s
                .is_none_or(|max| client.created.elapsed().as_secs() >= max)
    }
}

impl Client {
    fn state(&self) -> MutexGuard<'_, ClientState> {
        self.state.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    /// Marks it blocked until the guard drops.
    pub fn blocking(&self) -> BlockedGuard<'_> {
        self.blocked.store(true, Ordering::Relaxed);
        BlockedGuard(self)
    }

    fn is_blocked(&self) -> bool {
        self.blocked.load(Ordering::Relaxed)
    }

    /// What CLIENT UNBLOCK asked, if it did (taken: asked once, answered once).
    pub fn take_unblock(&self) -> Option<Unblock> {
        self.unblock
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
            .take()
    }

    /// The tenant label it signed in as, if it did.
    pub fn signed_in_as(&self) -> Option<String> {
        self.state().user.clone()
    }

    /// Records that it signed in as `user`.
    pub fn signed_in(&self, user: String) {
        self.state().user = Some(user);
    }

    /// Records its database, protocol and last command after a batch of commands.
    pub fn used(&self, db: u32, resp: u8, last_command: &[u8]) {
        let mut state = self.state();
        state.db = db;
        state.resp = resp;
        state.last_at = Instant::now();
        state.last_command.clear();
        state
            .last_command
            .push_str(&String::from_utf8_lossy(&last_command[..last_command.len().min(64)]).to_ascii_lowercase());
    }

    /// Its CLIENT LIST line, in Redis 7.2's fields and order.
    fn line(&self) -> String {
        let state = self.state();
        format!(
            "id={} addr={} laddr={} fd=0 name={} age={} idle={} flags={} db={} sub=0 psub=0 ssub=0 multi=-1 \
             qbuf=0 qbuf-free=0 argv-mem=0 multi-mem=0 rbs=0 rbp=0 obl=0 oll=0 omem=0 tot-mem=0 events=r \
             cmd={} user={} redir=-1 resp={} lib-name={} lib-ver={}\n",
            self.id,
            self.addr,
            self.laddr,
            state.name,
            self.created.elapsed().as_secs(),
            state.last_at.elapsed().as_secs(),
            if self.is_blocked() { "b" } else { "N" },
            state.db,
            state.last_command,
            state.user.as_deref().unwrap_or(""),
            state.resp,
            state.lib_name,
            state.lib_ver,
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn words(text: &str) -> Vec<Bytes> {
        text.split(' ').map(|w| Bytes::from(w.to_owned())).collect()
    }

    #[test]
    fn a_tenant_sees_and_kills_only_its_own_connections() {
        let clients = Arc::new(Clients::default());
        let a1 = clients.register("127.0.0.1:1001".into(), "127.0.0.1:6379".into());
        let a2 = clients.register("127.0.0.1:1002".into(), "127.0.0.1:6379".into());
        let b = clients.register("127.0.0.1:2001".into(), "127.0.0.1:6379".into());
        let _anonymous = clients.register("127.0.0.1:3001".into(), "127.0.0.1:6379".into());
        a1.client.signed_in("1".into());
        a2.client.signed_in("1".into());
        b.client.signed_in("2".into());
        let (Reply::Bulk(list), false) = clients.run(&a1.client, &words("LIST")) else {
            panic!("a list")
        };
        let list = String::from_utf8(list.to_vec()).unwrap();
        assert_eq!(list.lines().count(), 2, "{list}");
        assert!(list.contains("addr=127.0.0.1:1002") && !list.contains("2001"), "{list}");
        assert_eq!(
            clients.run(&a1.client, &words("KILL 127.0.0.1:2001")).0,
            Reply::err("No such client")
        );
        assert_eq!(
            clients.run(&a1.client, &words("KILL ADDR 127.0.0.1:1002")),
            (Reply::Integer(1), false)
        );
        // Killing oneself (SKIPME no) closes after the reply.
        assert_eq!(
            clients.run(&a1.client, &words("KILL USER 1 SKIPME no")),
            (Reply::Integer(2), true)
        );
        assert_eq!(
            clients.run(&a1.client, &words("ID")).0,
            Reply::Integer(a1.client.id as i64)
        );
        assert!(matches!(
            clients.run(&a1.client, &words("SETNAME has space")).0,
            Reply::Error(_)
        ));
        assert_eq!(clients.run(&a1.client, &words("SETNAME web-1")).0, Reply::ok());
        assert_eq!(clients.run(&a1.client, &words("GETNAME")).0, Reply::text("web-1"));
        drop(b);
        assert_eq!(clients.lock().len(), 3, "a dropped connection leaves the list");
    }
}
