//! A connection's MULTI / EXEC / DISCARD / WATCH / UNWATCH, as Redis has them: between
//! MULTI and EXEC commands are checked and queued (`+QUEUED`); EXEC sends them to the
//! service as one [`Transaction`] with the keys WATCHed before, and the service runs them
//! as one transaction (for ferry's storage node, one OCC transaction in which a watched
//! key that changed since WATCH makes EXEC answer null).
//!
//! An error while queueing (an unknown command, a wrong arity, a command a transaction
//! cannot hold) makes EXEC refuse the whole transaction with `EXECABORT`, as in Redis.

use bytes::Bytes;

use ferry_resp::command::{FunctionCommand, Transaction, WatchedKey};
use ferry_resp::reply::OUT_OF_MEMORY;
use ferry_resp::{table, Command, Reply};

/// Most commands one MULTI may queue: bounds what a connection makes the listener hold.
pub const MAX_QUEUED_COMMANDS: usize = 10_000;

/// Most keys a connection may WATCH at once.
pub const MAX_WATCHED_KEYS: usize = 10_000;

/// What the listener does with a command, given the connection's MULTI state.
pub(crate) enum Multi {
    /// Answered here (`+QUEUED`, `+OK`, an error).
    Answer(Reply),
    /// EXEC: the transaction for the service, with every key it names (for routing).
    Exec(Command, Vec<Bytes>),
    /// WATCH outside MULTI: the service answers with the keys' tokens; see
    /// [`MultiState::watched_now`].
    Watch(Command, Vec<Bytes>),
    /// Not about transactions: the listener goes on with it (and its keys).
    Pass(Command, Vec<Bytes>),
}

/// The commands queued since MULTI.
struct Queue {
    commands: Vec<Command>,
    keys: Vec<Bytes>,
    /// A command failed to queue: EXEC answers EXECABORT.
    aborted: bool,
    /// A queued command may grow memory: EXEC is refused while out of memory.
    grows: bool,
}

/// A connection's transaction state.
#[derive(Default)]
pub(crate) struct MultiState {
    queue: Option<Queue>,
    watched: Vec<WatchedKey>,
}

fn exec_abort() -> Reply {
    Reply::Error("EXECABORT Transaction discarded because of previous errors.".into())
}

/// Whether `command` may grow memory: a data command the table marks `DENY_OOM`, and
/// FUNCTION LOAD and RESTORE (Redis marks those subcommands so too).
pub(crate) fn grows_memory(command: &Command) -> bool {
    match command {
        Command::Data(words) => words
            .first()
            .and_then(|name| table::lookup(name))
            .is_some_and(|spec| spec.is(table::DENY_OOM)),
        Command::Function(FunctionCommand::Load { .. } | FunctionCommand::Restore { .. }) => true,
        _ => false,
    }
}

impl MultiState {
    /// Whether Redis refuses `command` while the tenant is out of memory: one that may grow
    /// memory; inside MULTI any command but EXEC, DISCARD and QUIT (a queue holds memory
    /// too), and EXEC if a queued command may grow memory.
    pub(crate) fn refused_when_out_of_memory(&self, command: &Command) -> bool {
        match (&self.queue, command) {
            (None, command) => grows_memory(command),
            (Some(queue), Command::Exec) => queue.grows,
            (Some(_), Command::Discard | Command::Quit) => false,
            (Some(_), _) => true,
        }
    }

    /// The refusal of `command` while out of memory: EXEC discards the transaction
    /// (EXECABORT with the reason, as Redis's), a command inside MULTI dooms it.
    pub(crate) fn out_of_memory(&mut self, command: &Command) -> Reply {
        if matches!(command, Command::Exec) && self.queue.is_some() {
            self.queue = None;
            self.watched.clear();
            return Reply::Error(format!("EXECABORT Transaction discarded because of: {OUT_OF_MEMORY}."));
        }
        self.refused(Reply::out_of_memory())
    }

    /// A command that did not parse: inside MULTI it also dooms the transaction.
    pub(crate) fn refused(&mut self, refusal: Reply) -> Reply {
        if let Some(queue) = &mut self.queue {
            queue.aborted = true;
        }
        refusal
    }

    /// The command `command` (naming `keys`) of a signed-in connection over `table`.
    pub(crate) fn handle(&mut self, command: Command, keys: Vec<Bytes>, table: &str) -> Multi {
        let Some(queue) = &mut self.queue else {
            return match command {
                Command::Multi => {
                    self.queue = Some(Queue {
                        commands: Vec::new(),
                        keys: Vec::new(),
                        aborted: false,
                        grows: false,
                    });
                    Multi::Answer(Reply::ok())
                }
                Command::Exec => Multi::Answer(Reply::err("EXEC without MULTI")),
                Command::Discard => Multi::Answer(Reply::err("DISCARD without MULTI")),
                Command::Unwatch => {
                    self.watched.clear();
                    Multi::Answer(Reply::ok())
                }
                Command::Watch(names) if self.watched.len() + names.len() > MAX_WATCHED_KEYS => Multi::Answer(
                    Reply::err(format!("a connection watches at most {MAX_WATCHED_KEYS} keys")),
                ),
                Command::Watch(_) => Multi::Watch(command, keys),
                // Only the listener builds a transaction.
                Command::Transaction(_) => Multi::Answer(Reply::err("EXEC without MULTI")),
                other => Multi::Pass(other, keys),
            };
        };
        match command {
            Command::Exec => {
                let queue = self.queue.take().expect("in MULTI");
                let watched = std::mem::take(&mut self.watched);
                if queue.aborted {
                    return Multi::Answer(exec_abort());
                }
                let mut keys = queue.keys;
                keys.extend(watched.iter().map(|watched| watched.key.clone()));
                if let Some(other) = watched.iter().find(|watched| watched.table != table) {
                    return Multi::Answer(Reply::err(format!(
                        "WATCH and EXEC in different databases are not supported (a key of {} is watched)",
                        other.table
                    )));
                }
                Multi::Exec(
                    Command::Transaction(Transaction {
                        commands: queue.commands,
                        watched,
                    }),
                    keys,
                )
            }
            Command::Discard => {
                self.queue = None;
                self.watched.clear();
                Multi::Answer(Reply::ok())
            }
            Command::Multi => Multi::Answer(Reply::err("MULTI calls can not be nested")),
            Command::Watch(_) => Multi::Answer(Reply::err("WATCH inside MULTI is not allowed")),
            Command::Quit => Multi::Pass(Command::Quit, keys),
            // A blocking pop inside a transaction does not block: it runs its step once,
            // as in Redis.
            Command::Data(_) | Command::Ping(_) | Command::Echo(_) | Command::Blocking(_) | Command::Database(_)
                if queue.commands.len() < MAX_QUEUED_COMMANDS =>
            {
                queue.grows |= grows_memory(&command);
                queue.commands.push(command);
                queue.keys.extend(keys);
                Multi::Answer(Reply::Simple("QUEUED".into()))
            }
            Command::Data(_) | Command::Ping(_) | Command::Echo(_) | Command::Blocking(_) | Command::Database(_) => {
                queue.aborted = true;
                Multi::Answer(Reply::err(format!(
                    "a transaction holds at most {MAX_QUEUED_COMMANDS} commands"
                )))
            }
            _ => {
                queue.aborted = true;
                Multi::Answer(Reply::err(
                    "Command not allowed inside a transaction (ferry's transactions hold data commands, the database commands, PING and ECHO)",
                ))
            }
        }
    }

    /// Keeps what the service answered to WATCH of `keys` over `table`: one token per key
    /// (an integer, or null for a key absent or expired). Gives the client's reply.
    pub(crate) fn watched_now(&mut self, table: &str, keys: Vec<Bytes>, answer: Reply) -> Reply {
        let tokens = match answer {
            Reply::Array(tokens) if tokens.len() == keys.len() => tokens,
            Reply::Error(refusal) => return Reply::Error(refusal),
            other => return Reply::err(format!("unexpected answer to WATCH: {other:?}")),
        };
        for (key, token) in keys.into_iter().zip(tokens) {
            let token = match token {
                Reply::Integer(version) => Some(version as u64),
                _ => None,
            };
            self.watched.push(WatchedKey {
                table: table.to_string(),
                key,
                token,
            });
        }
        Reply::ok()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn data(words: &[&str]) -> Command {
        Command::Data(words.iter().map(|w| Bytes::from(w.to_string())).collect())
    }

    fn answer(multi: Multi) -> Reply {
        match multi {
            Multi::Answer(reply) => reply,
            _ => panic!("answered here"),
        }
    }

    #[test]
    fn queued_commands_go_out_as_one_transaction_with_the_watched_keys() {
        let mut state = MultiState::default();
        let Multi::Watch(_, keys) = state.handle(Command::Watch(vec![Bytes::from("w")]), vec![Bytes::from("w")], "db0")
        else {
            panic!("watch goes to the service")
        };
        assert_eq!(
            state.watched_now("db0", keys, Reply::Array(vec![Reply::Integer(7)])),
            Reply::ok()
        );
        assert_eq!(answer(state.handle(Command::Multi, vec![], "db0")), Reply::ok());
        let queued = state.handle(data(&["set", "k", "v"]), vec![Bytes::from("k")], "db0");
        assert_eq!(answer(queued), Reply::Simple("QUEUED".into()));
        assert!(matches!(
            answer(state.handle(Command::Multi, vec![], "db0")),
            Reply::Error(_)
        ));
        let Multi::Exec(Command::Transaction(tx), keys) = state.handle(Command::Exec, vec![], "db0") else {
            panic!("exec goes to the service")
        };
        assert_eq!(tx.commands, vec![data(&["set", "k", "v"])]);
        assert_eq!(tx.watched[0].token, Some(7));
        assert_eq!(keys, vec![Bytes::from("k"), Bytes::from("w")]);
        // EXEC unwatches: the next transaction watches nothing.
        state.handle(Command::Multi, vec![], "db0");
        let Multi::Exec(Command::Transaction(tx), _) = state.handle(Command::Exec, vec![], "db0") else {
            panic!("exec")
        };
        assert!(tx.watched.is_empty());
    }

    #[test]
    fn out_of_memory_refuses_what_redis_refuses() {
        let mut state = MultiState::default();
        // Outside MULTI: only what may grow memory.
        assert!(state.refused_when_out_of_memory(&data(&["SET", "k", "v"])));
        assert!(!state.refused_when_out_of_memory(&data(&["get", "k"])));
        assert!(!state.refused_when_out_of_memory(&data(&["del", "k"])));
        // A transaction of reads queued before the limit runs; one that grows is discarded.
        state.handle(Command::Multi, vec![], "db0");
        state.handle(data(&["get", "k"]), vec![Bytes::from("k")], "db0");
        assert!(!state.refused_when_out_of_memory(&Command::Exec));
        assert!(!state.refused_when_out_of_memory(&Command::Discard));
        // Queueing anything holds memory.
        assert!(state.refused_when_out_of_memory(&data(&["get", "k"])));
        state.handle(data(&["set", "k", "v"]), vec![Bytes::from("k")], "db0");
        assert!(state.refused_when_out_of_memory(&Command::Exec));
        let Reply::Error(text) = state.out_of_memory(&Command::Exec) else {
            panic!("refused")
        };
        assert!(text.starts_with("EXECABORT") && text.contains("OOM"), "{text}");
        assert!(matches!(
            answer(state.handle(Command::Exec, vec![], "db0")),
            Reply::Error(text) if text == "ERR EXEC without MULTI"
        ));
        // A command refused inside MULTI dooms the transaction.
        state.handle(Command::Multi, vec![], "db0");
        assert!(
            matches!(state.out_of_memory(&data(&["lpush", "l", "x"])), Reply::Error(text) if text.starts_with("OOM "))
        );
        let Reply::Error(text) = answer(state.handle(Command::Exec, vec![], "db0")) else {
            panic!("refused")
        };
        assert!(text.starts_with("EXECABORT"), "{text}");
    }

    #[test]
    fn an_error_while_queueing_aborts_exec_and_clears_the_state() {
        let mut state = MultiState::default();
        state.handle(Command::Multi, vec![], "db0");
        state.refused(Reply::err("unknown command"));
        // A command a transaction cannot hold aborts it too.
        assert!(matches!(
            answer(state.handle(Command::Info(vec![]), vec![], "db0")),
            Reply::Error(_)
        ));
        let Reply::Error(text) = answer(state.handle(Command::Exec, vec![], "db0")) else {
            panic!("refused")
        };
        assert!(text.starts_with("EXECABORT"), "{text}");
        assert!(matches!(
            answer(state.handle(Command::Exec, vec![], "db0")),
            Reply::Error(text) if text == "ERR EXEC without MULTI"
        ));
        assert!(matches!(
            answer(state.handle(Command::Discard, vec![], "db0")),
            Reply::Error(_)
        ));
    }

    #[test]
    fn watch_in_another_database_than_exec_is_refused_not_ignored() {
        let mut state = MultiState::default();
        state.watched_now("db1", vec![Bytes::from("w")], Reply::Array(vec![Reply::Null]));
        state.handle(Command::Multi, vec![], "db0");
        let Reply::Error(text) = answer(state.handle(Command::Exec, vec![], "db0")) else {
            panic!("refused")
        };
        assert!(text.contains("different databases"), "{text}");
    }
}
