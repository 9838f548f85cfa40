//! A client's command as a typed value: the name matched case-insensitively, the arity and
//! the options checked, so the executor only ever sees well-formed commands. Anything else
//! becomes the error reply Redis would give.

use bytes::Bytes;

use crate::reply::Reply;
use crate::table::Session;

/// A FUNCTION subcommand.
#[derive(Clone, Debug, PartialEq)]
pub enum FunctionCommand {
    /// FUNCTION LOAD [REPLACE] code.
    Load {
        /// REPLACE: a library of the same name may be replaced.
        replace: bool,
        /// The library's text.
        code: Bytes,
    },
    /// FUNCTION LIST [LIBRARYNAME pattern] [WITHCODE].
    List {
        /// Only libraries whose name matches this glob-style pattern.
        pattern: Option<Bytes>,
        /// Include each library's code.
        with_code: bool,
    },
    /// FUNCTION DELETE library.
    Delete(Bytes),
    /// FUNCTION STATS.
    Stats,
    /// FUNCTION FLUSH [ASYNC|SYNC]: every library of the tenant (both modes do it now).
    Flush,
    /// FUNCTION KILL.
    Kill,
    /// FUNCTION DUMP: every library as one payload.
    Dump,
    /// FUNCTION RESTORE payload [FLUSH|APPEND|REPLACE].
    Restore {
        /// What FUNCTION DUMP gave.
        payload: Bytes,
        /// What becomes of the libraries already loaded.
        policy: RestorePolicy,
    },
}

/// FUNCTION RESTORE's policy for the libraries already loaded.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum RestorePolicy {
    /// APPEND (the default): a library of a name already loaded is an error.
    Append,
    /// REPLACE: the payload's libraries replace those of the same name.
    Replace,
    /// FLUSH: every loaded library is removed first.
    Flush,
}

/// A command this front end knows.
#[derive(Clone, Debug, PartialEq)]
pub enum Command {
    /// PING [message].
    Ping(Option<Bytes>),
    /// ECHO message.
    Echo(Bytes),
    /// QUIT.
    Quit,
    /// READONLY: in a cluster, this connection's reads may be served by a replica.
    ReadOnly,
    /// READWRITE: back to reading from primaries only.
    ReadWrite,
    /// AUTH [user] password.
    Auth {
        /// The user (a tenant id), if given.
        user: Option<Bytes>,
        /// The password (the tenant's token).
        password: Bytes,
    },
    /// HELLO [protover [AUTH user password] [SETNAME name]].
    Hello {
        /// The protocol version asked for.
        protocol: Option<Bytes>,
        /// Credentials, if given.
        auth: Option<(Bytes, Bytes)>,
    },
    /// SELECT index.
    Select(Bytes),
    /// A data command (the command table's `KEYSPACE` flag): its words, the name first,
    /// arity checked; the keyspace executor reads its options where it runs.
    Data(Vec<Bytes>),
    /// A command over the whole database (the table's `DATABASE` flag): its words, arity
    /// checked.
    Database(Vec<Bytes>),
    /// COMMAND [subcommand ...].
    CommandInfo(Vec<Bytes>),
    /// INFO [section ...]: the sections asked for (none: the default ones).
    Info(Vec<Bytes>),
    /// CONFIG subcommand [argument ...]: the words after CONFIG.
    Config(Vec<Bytes>),
    /// MULTI: commands queue until EXEC.
    Multi,
    /// EXEC: the queued commands run as one transaction.
    Exec,
    /// DISCARD: the queued commands are dropped.
    Discard,
    /// WATCH key [key ...]: EXEC runs only if none of them changed since. The service
    /// answers it with one [`WatchedKey::token`] per key, which the listener keeps.
    Watch(Vec<Bytes>),
    /// UNWATCH.
    Unwatch,
    /// What EXEC sends the service: the queued commands and the watched keys.
    Transaction(Transaction),
    /// A blocking pop (BLPOP, BRPOP, BLMOVE, BRPOPLPUSH, BLMPOP, BZPOPMIN, BZPOPMAX,
    /// BZMPOP): the non-blocking step the listener repeats until it pops or times out.
    Blocking(crate::blocking::Blocking),
    /// SAVE (waits for the snapshot) or BGSAVE (starts it and returns).
    Save {
        /// BGSAVE.
        background: bool,
    },
    /// CLIENT subcommand [argument ...]: the words after CLIENT.
    Client(Vec<Bytes>),
    /// CLUSTER subcommand (upper case): SLOTS and SHARDS are served.
    Cluster(Bytes),
    /// FUNCTION subcommand.
    Function(FunctionCommand),
    /// EVAL / EVALSHA / EVAL_RO / EVALSHA_RO script-or-sha numkeys [key ...] [arg ...].
    Eval {
        /// The script's text, or (EVALSHA) its SHA-1.
        script: Bytes,
        /// EVALSHA.
        by_sha: bool,
        /// The keys it may touch.
        keys: Vec<Bytes>,
        /// Its other arguments.
        args: Vec<Bytes>,
        /// The `_RO` forms: the script may not write.
        read_only: bool,
    },
    /// SCRIPT subcommand.
    Script(ScriptCommand),
    /// FCALL / FCALL_RO function numkeys [key ...] [arg ...].
    FCall {
        /// The function's name.
        function: Bytes,
        /// The keys it may touch.
        keys: Vec<Bytes>,
        /// Its other arguments.
        args: Vec<Bytes>,
        /// FCALL_RO: only functions flagged `no-writes` may run.
        read_only: bool,
    },
}

/// A MULTI … EXEC transaction, for the service to run as one.
#[derive(Clone, Debug, PartialEq)]
pub struct Transaction {
    /// The queued commands (data commands, PING and ECHO), in order.
    pub commands: Vec<Command>,
    /// The keys WATCHed before MULTI, with what they were then.
    pub watched: Vec<WatchedKey>,
}

/// A key WATCH saw: EXEC runs only if it is the same now.
#[derive(Clone, Debug, PartialEq)]
pub struct WatchedKey {
    /// The table (database) it is in.
    pub table: String,
    pub key: Bytes,
    /// The service's word for the key's state then (its version; `None`: absent or
    /// expired).
    pub token: Option<u64>,
}

/// Appends a request (a command and its arguments) in RESP form, as a client sends it.
pub fn encode_request(args: &[&[u8]], out: &mut bytes::BytesMut) {
    use bytes::BufMut;
    out.put_slice(format!("*{}\r\n", args.len()).as_bytes());
    for arg in args {
        out.put_slice(format!("${}\r\n", arg.len()).as_bytes());
        out.put_slice(arg);
        out.put_slice(b"\r\n");
    }
}

fn upper(arg: &Bytes) -> String {
    String::from_utf8_lossy(arg).to_ascii_uppercase()
}

/// `-ERR wrong number of arguments for 'name' command`.
pub fn wrong_arity(name: &str) -> Reply {
    Reply::err(format!(
        "wrong number of arguments for '{}' command",
        name.to_ascii_lowercase()
    ))
}

/// `-ERR syntax error`.
pub fn syntax_error() -> Reply {
    Reply::err("syntax error")
}

/// The reply for a command nobody serves: Redis's wording, with the first arguments.
pub fn unknown(args: &[Bytes]) -> Reply {
    let name = String::from_utf8_lossy(&args[0]);
    let shown: Vec<String> = args[1..]
        .iter()
        .take(8)
        .map(|arg| format!("'{}'", String::from_utf8_lossy(&arg[..arg.len().min(64)])))
        .collect();
    Reply::err(format!(
        "unknown command '{}', with args beginning with: {}",
        &name[..name.len().min(128)],
        shown.join(" ")
    ))
}

impl Command {
    /// Parses `args` (never empty); the error is the reply to send.
    pub fn parse(args: Vec<Bytes>) -> Result<Command, Reply> {
        // The table says whether the command exists and how many words it takes; the
        // arms below check what only the command knows (its options, ranges of arity).
        let Some(spec) = crate::table::lookup(&args[0]) else {
            return Err(unknown(&args));
        };
        let name = spec.name;
        let n = args.len();
        if !spec.arity_fits(n) {
            return Err(wrong_arity(name));
        }
        if spec.is(crate::table::KEYSPACE) {
            return Ok(Command::Data(args));
        }
        if spec.is(crate::table::DATABASE) {
            return Ok(Command::Database(args));
        }
        if spec.is(crate::table::BLOCKING) {
            return Ok(Command::Blocking(crate::blocking::parse(name, args)?));
        }
        // Every other command of the table is the connection's own.
        let Some(session) = spec.session else {
            return Err(unknown(&args));
        };
        let arity = |ok: bool| if ok { Ok(()) } else { Err(wrong_arity(name)) };
        let mut rest = args.into_iter().skip(1);
        let mut next = || rest.next().expect("arity checked");
        Ok(match session {
            Session::Ping => {
                arity(n <= 2)?;
                Command::Ping((n == 2).then(&mut next))
            }
            Session::Echo => {
                arity(n == 2)?;
                Command::Echo(next())
            }
            Session::Quit => Command::Quit,
            Session::ReadOnly => Command::ReadOnly,
            Session::ReadWrite => Command::ReadWrite,
            Session::Auth => {
                arity(n == 2 || n == 3)?;
                let first = next();
                if n == 3 {
                    Command::Auth {
                        user: Some(first),
                        password: next(),
                    }
                } else {
                    Command::Auth {
                        user: None,
                        password: first,
                    }
                }
            }
            Session::Hello => {
                let mut protocol = None;
                let mut auth = None;
                if n >= 2 {
                    protocol = Some(next());
                }
                let mut i = 2;
                while i < n {
                    match upper(&next()).as_str() {
                        "AUTH" if i + 2 < n => {
                            auth = Some((next(), next()));
                            i += 3;
                        }
                        "SETNAME" if i + 1 < n => {
                            next();
                            i += 2;
                        }
                        _ => return Err(syntax_error()),
                    }
                }
                Command::Hello { protocol, auth }
            }
            Session::Select => {
                arity(n == 2)?;
                Command::Select(next())
            }
            Session::CommandInfo => Command::CommandInfo((1..n).map(|_| next()).collect()),
            Session::Info => Command::Info((1..n).map(|_| next()).collect()),
            Session::Config => Command::Config((1..n).map(|_| next()).collect()),
            Session::Multi => Command::Multi,
            Session::Exec => Command::Exec,
            Session::Discard => Command::Discard,
            Session::Unwatch => Command::Unwatch,
            Session::Watch => Command::Watch((1..n).map(|_| next()).collect()),
            Session::Save | Session::BgSave => {
                // BGSAVE SCHEDULE is not taken: a BGSAVE while one runs is refused.
                arity(n == 1)?;
                Command::Save {
                    background: session == Session::BgSave,
                }
            }
            Session::Client => {
                arity(n >= 2)?;
                Command::Client((1..n).map(|_| next()).collect())
            }
            Session::Cluster => {
                arity(n >= 2)?;
                Command::Cluster(Bytes::from(upper(&next())))
            }
            Session::Function => {
                arity(n >= 2)?;
                let sub = upper(&next());
                let rest: Vec<Bytes> = (2..n).map(|_| next()).collect();
                Command::Function(parse_function(&sub, rest)?)
            }
            Session::FCall | Session::FCallRo => {
                let function = next();
                let (keys, args) = keys_and_args(rest, n - 3)?;
                Command::FCall {
                    function,
                    keys,
                    args,
                    read_only: session == Session::FCallRo,
                }
            }
            Session::Eval | Session::EvalRo | Session::EvalSha | Session::EvalShaRo => {
                let script = next();
                let (keys, args) = keys_and_args(rest, n - 3)?;
                Command::Eval {
                    script,
                    by_sha: matches!(session, Session::EvalSha | Session::EvalShaRo),
                    keys,
                    args,
                    read_only: matches!(session, Session::EvalRo | Session::EvalShaRo),
                }
            }
            Session::Script => {
                let sub = upper(&next());
                let rest: Vec<Bytes> = rest.collect();
                Command::Script(parse_script(&sub, rest)?)
            }
        })
    }
}

impl Command {
    /// A data command as the words a client sends, so it can travel to where it runs and
    /// be parsed there; `None` for any other command.
    pub fn into_words(self) -> Option<Vec<Bytes>> {
        match self {
            Command::Data(words) => Some(words),
            _ => None,
        }
    }
}

/// FCALL's and EVAL's `numkeys key … arg …`: the keys and the other arguments; `count` is
/// how many words follow numkeys.
fn keys_and_args(mut words: impl Iterator<Item = Bytes>, count: usize) -> Result<(Vec<Bytes>, Vec<Bytes>), Reply> {
    let numkeys = words
        .next()
        .and_then(|word| std::str::from_utf8(&word).ok()?.parse::<i64>().ok())
        .ok_or_else(|| Reply::err("Bad number of keys provided"))?;
    if numkeys < 0 {
        return Err(Reply::err("Number of keys can't be negative"));
    }
    if numkeys as usize > count {
        return Err(Reply::err("Number of keys can't be greater than number of args"));
    }
    let keys = words.by_ref().take(numkeys as usize).collect();
    Ok((keys, words.collect()))
}

/// SCRIPT's subcommands.
#[derive(Clone, Debug, PartialEq)]
pub enum ScriptCommand {
    /// SCRIPT LOAD script.
    Load(Bytes),
    /// SCRIPT EXISTS sha1 [sha1 ...].
    Exists(Vec<Bytes>),
    /// SCRIPT FLUSH [ASYNC|SYNC].
    Flush,
    /// SCRIPT KILL.
    Kill,
}

fn parse_script(sub: &str, rest: Vec<Bytes>) -> Result<ScriptCommand, Reply> {
    let arity = |ok: bool| {
        if ok {
            Ok(())
        } else {
            Err(wrong_arity(&format!("script|{}", sub.to_ascii_lowercase())))
        }
    };
    match sub {
        "LOAD" => {
            arity(rest.len() == 1)?;
            Ok(ScriptCommand::Load(rest.into_iter().next().expect("arity checked")))
        }
        "EXISTS" => {
            arity(!rest.is_empty())?;
            Ok(ScriptCommand::Exists(rest))
        }
        "FLUSH" => match rest.first().map(upper).as_deref() {
            None | Some("ASYNC") | Some("SYNC") if rest.len() <= 1 => Ok(ScriptCommand::Flush),
            _ => Err(syntax_error()),
        },
        "KILL" => {
            arity(rest.is_empty())?;
            Ok(ScriptCommand::Kill)
        }
        _ => Err(Reply::err(format!(
            "unknown subcommand '{}'. Try SCRIPT LOAD, EXISTS, FLUSH or KILL.",
            sub.chars().take(64).collect::<String>()
        ))),
    }
}

fn parse_function(sub: &str, rest: Vec<Bytes>) -> Result<FunctionCommand, Reply> {
    let unknown_sub = || {
        Reply::err(format!(
            "unknown subcommand '{sub}'. Try FUNCTION LOAD, LIST, DELETE, FLUSH, KILL, STATS, DUMP or RESTORE."
        ))
    };
    let arity = |ok: bool| {
        if ok {
            Ok(())
        } else {
            Err(wrong_arity(&format!("function|{sub}")))
        }
    };
    // Past the table's arity, Redis's own check of the subcommand's words.
    let subcommand_syntax = || {
        Reply::err(format!(
            "unknown subcommand or wrong number of arguments for '{}'. Try FUNCTION HELP.",
            sub.to_ascii_lowercase()
        ))
    };
    match sub {
        "LOAD" => {
            arity(!rest.is_empty())?;
            let replace = rest.len() > 1 && upper(&rest[0]) == "REPLACE";
            if rest.len() != 1 + usize::from(replace) {
                return Err(Reply::err(format!(
                    "Unknown option given: {}",
                    String::from_utf8_lossy(&rest[0])
                )));
            }
            let code = rest.into_iter().last().expect("arity checked");
            Ok(FunctionCommand::Load { replace, code })
        }
        "LIST" => {
            let (mut pattern, mut with_code) = (None, false);
            let mut words = rest.into_iter();
            while let Some(word) = words.next() {
                match upper(&word).as_str() {
                    "WITHCODE" if !with_code => with_code = true,
                    "LIBRARYNAME" if pattern.is_none() => {
                        pattern = Some(
                            words
                                .next()
                                .ok_or_else(|| Reply::err("library name argument was not given"))?,
                        )
                    }
                    _ => {
                        return Err(Reply::err(format!(
                            "Unknown argument {}",
                            String::from_utf8_lossy(&word)
                        )))
                    }
                }
            }
            Ok(FunctionCommand::List { pattern, with_code })
        }
        "DELETE" => {
            arity(rest.len() == 1)?;
            Ok(FunctionCommand::Delete(rest.into_iter().next().expect("arity checked")))
        }
        "STATS" => {
            arity(rest.is_empty())?;
            Ok(FunctionCommand::Stats)
        }
        "DUMP" => {
            arity(rest.is_empty())?;
            Ok(FunctionCommand::Dump)
        }
        "KILL" => {
            arity(rest.is_empty())?;
            Ok(FunctionCommand::Kill)
        }
        "RESTORE" => {
            arity(!rest.is_empty())?;
            if rest.len() > 2 {
                return Err(subcommand_syntax());
            }
            let mut rest = rest.into_iter();
            let payload = rest.next().expect("arity checked");
            let policy = match rest.next().map(|p| upper(&p)).as_deref() {
                None | Some("APPEND") => RestorePolicy::Append,
                Some("REPLACE") => RestorePolicy::Replace,
                Some("FLUSH") => RestorePolicy::Flush,
                Some(_) => {
                    return Err(Reply::err(
                        "Wrong restore policy given, value should be either FLUSH, APPEND or REPLACE.",
                    ))
                }
            };
            Ok(FunctionCommand::Restore { payload, policy })
        }
        "FLUSH" => match &rest[..] {
            [] => Ok(FunctionCommand::Flush),
            [mode] if matches!(upper(mode).as_str(), "ASYNC" | "SYNC") => Ok(FunctionCommand::Flush),
            [_] => Err(Reply::err("FUNCTION FLUSH only supports SYNC|ASYNC option")),
            _ => Err(subcommand_syntax()),
        },
        _ => Err(unknown_sub()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(words: &[&str]) -> Result<Command, Reply> {
        Command::parse(words.iter().map(|w| Bytes::copy_from_slice(w.as_bytes())).collect())
    }

    #[test]
    fn commands_parse_case_insensitively_and_data_commands_keep_their_words() {
        let words = |w: &[&str]| {
            w.iter()
                .map(|w| Bytes::copy_from_slice(w.as_bytes()))
                .collect::<Vec<_>>()
        };
        assert_eq!(parse(&["get", "k"]), Ok(Command::Data(words(&["get", "k"]))));
        assert_eq!(
            parse(&["SET", "k", "v", "nx", "GET"]),
            Ok(Command::Data(words(&["SET", "k", "v", "nx", "GET"])))
        );
        assert_eq!(parse(&["GET"]), Err(wrong_arity("GET")));
        assert_eq!(parse(&["hset", "h", "f"]), Err(wrong_arity("hset")));
        assert!(matches!(
            parse(&["AUTH", "1", "secret"]),
            Ok(Command::Auth { user: Some(_), .. })
        ));
    }

    #[test]
    fn function_and_fcall_parse_with_redis_errors() {
        assert_eq!(
            parse(&["FUNCTION", "load", "REPLACE", "code"]),
            Ok(Command::Function(FunctionCommand::Load {
                replace: true,
                code: Bytes::from_static(b"code"),
            }))
        );
        assert!(matches!(
            parse(&["function", "LOAD", "code"]),
            Ok(Command::Function(FunctionCommand::Load { replace: false, .. }))
        ));
        assert!(parse(&["FUNCTION", "LOAD", "NOPE", "code"]).is_err());
        assert!(matches!(
            parse(&["FUNCTION", "LIST", "withcode", "LIBRARYNAME", "li*"]),
            Ok(Command::Function(FunctionCommand::List {
                pattern: Some(_),
                with_code: true
            }))
        ));
        assert!(parse(&["FUNCTION", "LIST", "LIBRARYNAME"]).is_err());
        assert_eq!(
            parse(&["FUNCTION", "FLUSH", "async"]),
            Ok(Command::Function(FunctionCommand::Flush))
        );
        assert!(parse(&["FUNCTION", "FLUSH", "LATER"]).is_err());
        assert_eq!(
            parse(&["FUNCTION", "DUMP"]),
            Ok(Command::Function(FunctionCommand::Dump))
        );
        assert!(parse(&["FUNCTION", "DUMP", "extra"]).is_err());
        assert_eq!(
            parse(&["FUNCTION", "KILL"]),
            Ok(Command::Function(FunctionCommand::Kill))
        );
        assert!(parse(&["FUNCTION", "KILL", "now"]).is_err());
        assert_eq!(
            parse(&["FCALL_RO", "f", "1", "k", "a", "b"]),
            Ok(Command::FCall {
                function: Bytes::from_static(b"f"),
                keys: vec![Bytes::from_static(b"k")],
                args: vec![Bytes::from_static(b"a"), Bytes::from_static(b"b")],
                read_only: true,
            })
        );
        assert!(matches!(
            parse(&["FCALL", "f", "0"]),
            Ok(Command::FCall { read_only: false, .. })
        ));
        assert_eq!(
            parse(&["FCALL", "f", "2", "k"]),
            Err(Reply::err("Number of keys can't be greater than number of args"))
        );
        assert_eq!(
            parse(&["FCALL", "f", "-1"]),
            Err(Reply::err("Number of keys can't be negative"))
        );
        assert_eq!(
            parse(&["FCALL", "f", "x"]),
            Err(Reply::err("Bad number of keys provided"))
        );
    }

    #[test]
    fn data_commands_travel_as_words_and_parse_back_the_same() {
        for words in [
            &["GET", "k"][..],
            &["SET", "k", "v", "EX", "10"],
            &["ZADD", "z", "1", "m"],
        ] {
            let command = parse(words).unwrap();
            let travelled = Command::parse(command.clone().into_words().unwrap()).unwrap();
            assert_eq!(travelled, command, "{words:?}");
        }
        assert_eq!(parse(&["PING"]).unwrap().into_words(), None);
    }

    #[test]
    fn save_and_bgsave_parse_without_arguments() {
        assert_eq!(parse(&["SAVE"]).unwrap(), Command::Save { background: false });
        assert_eq!(parse(&["bgsave"]).unwrap(), Command::Save { background: true });
        assert!(parse(&["BGSAVE", "SCHEDULE"]).is_err());
    }

    #[test]
    fn every_command_of_the_table_has_a_parser() {
        for spec in crate::table::COMMANDS {
            for extra in 0..4 {
                let mut words = vec![spec.name];
                words.extend(std::iter::repeat_n("1", extra));
                // Any outcome but "unknown": a command of the table that is neither data,
                // blocking nor tagged as the connection's own would be refused so.
                if let Err(Reply::Error(text)) = parse(&words) {
                    assert!(!text.contains("unknown command"), "{words:?}: {text}");
                }
            }
        }
    }

    #[test]
    fn unknown_commands_get_redis_wording() {
        let Err(Reply::Error(text)) = parse(&["BGREWRITEAOF", "ASYNC"]) else {
            panic!("unknown must be an error")
        };
        assert_eq!(
            text,
            "ERR unknown command 'BGREWRITEAOF', with args beginning with: 'ASYNC'"
        );
    }
}
