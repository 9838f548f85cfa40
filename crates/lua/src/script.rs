//! EVAL, EVALSHA, their `_RO` forms and SCRIPT LOAD / EXISTS / FLUSH: Redis's scripts as
//! invocations, placed and run like FCALL.
//!
//! A script is named by the SHA-1 of its text, as in Redis. Its text is kept in the
//! catalog table under `script:<sha>` (and listed under [`INDEX_KEY`]) by SCRIPT LOAD and by
//! the first EVAL of it that may write, so EVALSHA finds it on any side and after a
//! restart or a failover; SCRIPT FLUSH removes them all. To run, the text becomes a
//! one-function library ([`library_text`]): the script's body is the function's body, with
//! `KEYS` and `ARGV` its parameters, so the VM, its sandbox, its budget and `redis.call`
//! are the functions' own. A `#!lua flags=…` first line gives the flags, as in Redis 7.
//! EVAL_RO runs the script with writes refused (a second function of the same library,
//! flagged `no-writes`).

use bytes::{BufMut, Bytes, BytesMut};
use sha1::{Digest, Sha1};

use ferry_func::args::reader;
use ferry_func::{Ctx, FnError, FnFuture};
use ferry_proto::wire::{put_bytes16, put_bytes32, put_count};
use ferry_resp::{Protocol, Reply};

use crate::catalog::TABLE;
use crate::fcall::{put_keys_and_args, read_keys_and_args, MAX_FCALL_ARGS};
use crate::library::{KNOWN_FLAGS, MAX_LIBRARY_BYTES};

/// The invocation name's prefix: EVAL of script `s` is `script.<sha of s>`, so each script
/// keeps its own cost profile in the placement policies.
pub const FAMILY: &str = "script.";

/// `lua.script_load`: arguments the script's text (u32-prefixed), result its SHA-1.
pub const LOAD: &str = "lua.script_load";
/// `lua.script_exists`: arguments u32 count of u16-prefixed SHA-1s, result an array of 0/1.
pub const EXISTS: &str = "lua.script_exists";
/// `lua.script_flush`: no arguments: every stored script removed.
pub const FLUSH: &str = "lua.script_flush";

/// Most scripts one tenant's catalog keeps (EVAL of a new script past it runs, unstored).
pub const MAX_STORED_SCRIPTS: usize = 10_000;

/// The list of stored scripts: one SHA-1 per line.
const INDEX_KEY: &[u8] = b"scripts";

/// The function a script becomes, and its read-only twin.
const FUNCTION: &str = "script";
const FUNCTION_RO: &str = "script_ro";

/// Redis's reply to EVALSHA of a script it does not have.
pub const NO_SCRIPT: &str = "NOSCRIPT No matching script. Please use EVAL.";

/// The SHA-1 of `text` in lower-case hex, as Redis names scripts (and `redis.sha1hex`).
pub fn sha1_hex(text: &[u8]) -> String {
    Sha1::digest(text).iter().map(|b| format!("{b:02x}")).collect()
}

fn script_key(sha: &str) -> Vec<u8> {
    format!("script:{sha}").into_bytes()
}

/// Whether `sha` is a SHA-1 as EVALSHA takes it (40 hex digits, any case).
pub fn valid_sha(sha: &str) -> bool {
    sha.len() == 40 && sha.bytes().all(|b| b.is_ascii_hexdigit())
}

/// One EVAL or EVALSHA.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ScriptArgs {
    /// The script's SHA-1, lower case.
    pub sha: String,
    /// The text (EVAL); `None` for EVALSHA, which finds it stored.
    pub text: Option<Bytes>,
    /// The table its `redis.call`s use.
    pub table: String,
    /// KEYS.
    pub keys: Vec<Bytes>,
    /// ARGV.
    pub args: Vec<Bytes>,
    /// EVAL_RO / EVALSHA_RO.
    pub read_only: bool,
}

impl ScriptArgs {
    /// The invocation's function name.
    pub fn invocation_name(&self) -> String {
        format!("{FAMILY}{}", self.sha)
    }

    /// Wire form: u16-prefixed SHA and table, u8 read_only, u8 has-text and the u32-prefixed
    /// text, then keys and args as u32 counts of u32-prefixed strings.
    pub fn encode(&self) -> Option<Bytes> {
        let mut out = BytesMut::new();
        put_bytes16(&mut out, self.sha.as_bytes(), "sha").ok()?;
        put_bytes16(&mut out, self.table.as_bytes(), "table").ok()?;
        out.put_u8(u8::from(self.read_only));
        out.put_u8(u8::from(self.text.is_some()));
        if let Some(text) = &self.text {
            put_bytes32(&mut out, text, "script").ok()?;
        }
        put_keys_and_args(&mut out, &self.keys, &self.args)?;
        Some(out.freeze())
    }

    /// Parses the wire form.
    pub fn decode(args: &Bytes) -> Result<ScriptArgs, FnError> {
        let mut r = reader(args);
        let sha = r.string16("sha")?;
        let table = r.string16("table")?;
        let read_only = r.u8("read_only")? != 0;
        let text = match r.u8("has_text")? {
            0 => None,
            _ => Some(r.bytes32("script")?),
        };
        let (keys, args) = read_keys_and_args(&mut r)?;
        r.finish()?;
        Ok(ScriptArgs {
            sha,
            text,
            table,
            keys,
            args,
            read_only,
        })
    }
}

/// The routing key of a script call: its first key, as for FCALL.
pub fn route(args: &Bytes) -> Option<Bytes> {
    ScriptArgs::decode(args).ok()?.keys.into_iter().next()
}

fn failed(message: impl Into<String>) -> FnError {
    FnError::Failed(message.into())
}

/// The one-function library a script's `text` runs as: its flags from a `#!lua flags=…`
/// first line (Redis 7's script shebang), its body the function's, `KEYS` and `ARGV` the
/// parameters.
pub fn library_text(sha: &str, text: &[u8]) -> Result<String, FnError> {
    if text.len() > MAX_LIBRARY_BYTES {
        return Err(failed(format!(
            "ERR script of {} bytes exceeds the limit of {MAX_LIBRARY_BYTES}",
            text.len()
        )));
    }
    let text = std::str::from_utf8(text).map_err(|_| failed("ERR the script is not UTF-8"))?;
    let (flags, body) = match text.strip_prefix("#!") {
        None => (Vec::new(), text.to_string()),
        Some(rest) => {
            let (first, body) = rest.split_once('\n').unwrap_or((rest, ""));
            let mut words = first.trim_end_matches('\r').split(' ').filter(|w| !w.is_empty());
            if words.next() != Some("lua") {
                return Err(failed("ERR Unexpected engine in script shebang"));
            }
            let mut flags = Vec::new();
            for word in words {
                let Some(list) = word.strip_prefix("flags=") else {
                    return Err(failed(format!("ERR Unknown lua shebang option: {word}")));
                };
                for flag in list.split(',').filter(|f| !f.is_empty()) {
                    if !KNOWN_FLAGS.contains(&flag) {
                        return Err(failed(format!("ERR Unexpected flag in script shebang: {flag}")));
                    }
                    flags.push(flag.to_string());
                }
            }
            // The blank line keeps the body's line numbers.
            (flags, format!("\n{body}"))
        }
    };
    let quoted = |flags: &[String]| flags.iter().map(|f| format!("'{f}'")).collect::<Vec<_>>().join(",");
    let mut read_only = flags.clone();
    if !read_only.iter().any(|f| f == "no-writes") {
        read_only.push("no-writes".into());
    }
    // The body first, on the header's line, so its line numbers are the script's own.
    Ok(format!(
        "#!lua name=__script_{sha}\nlocal function body(KEYS, ARGV) {body}\nend\n\
         redis.register_function{{function_name='{FUNCTION}', callback=body, flags={{{}}}}}\n\
         redis.register_function{{function_name='{FUNCTION_RO}', callback=body, flags={{{}}}}}\n",
        quoted(&flags),
        quoted(&read_only)
    ))
}

/// The VM cache's key of a script (apart from the libraries' text hashes).
fn cache_key(sha: &str) -> String {
    format!("script:{sha}")
}

/// Stored scripts, from the index.
async fn index(ctx: &mut dyn Ctx) -> Result<Vec<String>, FnError> {
    let Some(value) = ctx.get(TABLE, INDEX_KEY).await? else {
        return Ok(Vec::new());
    };
    let text = std::str::from_utf8(&value).map_err(|_| failed("ERR the script index is malformed"))?;
    Ok(text.lines().map(str::to_string).collect())
}

/// Stores `text` as script `sha` unless it is stored; false when the catalog is full.
async fn store(ctx: &mut dyn Ctx, sha: &str, text: &Bytes) -> Result<bool, FnError> {
    if ctx.get(TABLE, &script_key(sha)).await?.is_some() {
        return Ok(true);
    }
    let mut shas = index(ctx).await?;
    if shas.len() >= MAX_STORED_SCRIPTS {
        return Ok(false);
    }
    shas.push(sha.to_string());
    ctx.put(TABLE, &script_key(sha), text.clone()).await?;
    ctx.put(TABLE, INDEX_KEY, Bytes::from(shas.join("\n"))).await?;
    Ok(true)
}

/// Runs one EVAL or EVALSHA: the script's text (given, or the stored one), a VM of this
/// process for it, and the call. The result is the script's reply, in ferry's reply form (`Protocol::Ferry`).
pub fn run(ctx: &mut dyn Ctx) -> FnFuture<'_> {
    Box::pin(async move {
        let call = ScriptArgs::decode(ctx.args())?;
        let text = match &call.text {
            Some(text) => {
                if !call.read_only {
                    // Stored for EVALSHA anywhere; a full catalog only costs EVALSHA.
                    store(ctx, &call.sha, text).await?;
                }
                text.clone()
            }
            None => ctx
                .get(TABLE, &script_key(&call.sha))
                .await?
                .ok_or_else(|| failed(NO_SCRIPT))?,
        };
        let tenant = ctx.tenant();
        let loaded = match crate::cache::find(tenant, &cache_key(&call.sha)) {
            Some(loaded) => loaded,
            None => crate::cache::remember(tenant, &cache_key(&call.sha), library_text(&call.sha, &text)?, None),
        };
        let mut vm = loaded.checkout().map_err(|err| failed(err.0))?;
        let function = if call.read_only { FUNCTION_RO } else { FUNCTION };
        let reply = vm
            .call(ctx, function, &call.table, &call.keys, &call.args, call.read_only)
            .await;
        loaded.checkin(vm);
        let mut out = BytesMut::new();
        reply?.encode(Protocol::Ferry, &mut out);
        Ok(out.freeze())
    })
}

/// SCRIPT LOAD's arguments: the text, u32-prefixed.
pub fn load_args(text: &[u8]) -> Option<Bytes> {
    let mut out = BytesMut::new();
    put_bytes32(&mut out, text, "script").ok()?;
    Some(out.freeze())
}

/// SCRIPT LOAD: compiles the script (a syntax error is refused, as in Redis), stores it,
/// and answers its SHA-1.
pub fn load(ctx: &mut dyn Ctx) -> FnFuture<'_> {
    Box::pin(async move {
        let mut r = reader(ctx.args());
        let text = r.bytes32("script")?;
        r.finish()?;
        let sha = sha1_hex(&text);
        let library = library_text(&sha, &text)?;
        let (vm, _, _) = crate::vm::Vm::load(&library).map_err(|err| failed(err.0))?;
        if !store(ctx, &sha, &text).await? {
            return Err(failed(format!(
                "ERR at most {MAX_STORED_SCRIPTS} scripts may be stored; SCRIPT FLUSH first"
            )));
        }
        crate::cache::remember(ctx.tenant(), &cache_key(&sha), library, Some(vm));
        Ok(Bytes::from(sha))
    })
}

/// SCRIPT EXISTS' arguments.
pub fn exists_args(shas: &[String]) -> Option<Bytes> {
    let mut out = BytesMut::new();
    put_count(&mut out, shas.len(), "count").ok()?;
    for sha in shas {
        put_bytes16(&mut out, sha.as_bytes(), "sha").ok()?;
    }
    Some(out.freeze())
}

/// SCRIPT EXISTS: 1 or 0 per SHA-1, in ferry's reply form (`Protocol::Ferry`).
pub fn exists(ctx: &mut dyn Ctx) -> FnFuture<'_> {
    Box::pin(async move {
        let mut r = reader(ctx.args());
        let count = r.count(MAX_FCALL_ARGS, "count")?;
        let mut shas = Vec::with_capacity(count);
        for _ in 0..count {
            shas.push(r.string16("sha")?.to_ascii_lowercase());
        }
        r.finish()?;
        let mut answers = Vec::with_capacity(shas.len());
        for sha in &shas {
            let stored = valid_sha(sha) && ctx.get(TABLE, &script_key(sha)).await?.is_some();
            answers.push(Reply::Integer(i64::from(stored)));
        }
        let mut out = BytesMut::new();
        Reply::Array(answers).encode(Protocol::Ferry, &mut out);
        Ok(out.freeze())
    })
}

/// SCRIPT FLUSH: every stored script removed.
pub fn flush(ctx: &mut dyn Ctx) -> FnFuture<'_> {
    Box::pin(async move {
        reader(ctx.args()).finish()?;
        for sha in index(ctx).await? {
            ctx.delete(TABLE, &script_key(&sha)).await?;
        }
        ctx.delete(TABLE, INDEX_KEY).await?;
        Ok(Bytes::new())
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sha1_names_scripts_as_redis_does() {
        // Redis: SCRIPT LOAD "return 1" answers this.
        assert_eq!(sha1_hex(b"return 1"), "e0e1f9fabfc9d4800c877a703b823ac0578ff8db");
        assert!(valid_sha("E0E1F9FABFC9D4800C877A703B823AC0578FF8DB"));
        assert!(!valid_sha("e0e1"));
    }

    #[test]
    fn a_script_becomes_a_library_whose_flags_come_from_its_shebang() {
        let sha = sha1_hex(b"x");
        let plain = library_text(&sha, b"return KEYS[1]").unwrap();
        assert!(plain.contains("flags={}"), "{plain}");
        assert!(plain.contains("flags={'no-writes'}"), "{plain}");
        let flagged = library_text(&sha, b"#!lua flags=no-writes,allow-stale\nreturn 1").unwrap();
        assert!(flagged.contains("flags={'no-writes','allow-stale'}"), "{flagged}");
        for bad in [
            &b"#!python\nreturn 1"[..],
            b"#!lua name=x\nreturn 1",
            b"#!lua flags=bogus\nreturn 1",
        ] {
            assert!(library_text(&sha, bad).is_err(), "{}", String::from_utf8_lossy(bad));
        }
        let (_, _, functions) = crate::vm::Vm::load(&plain).unwrap();
        assert_eq!(functions.len(), 2);
    }

    #[test]
    fn arguments_round_trip() {
        let call = ScriptArgs {
            sha: sha1_hex(b"return 1"),
            text: Some(Bytes::from("return 1")),
            table: "db0".into(),
            keys: vec![Bytes::from("k")],
            args: vec![Bytes::from("a"), Bytes::new()],
            read_only: true,
        };
        assert_eq!(ScriptArgs::decode(&call.encode().unwrap()).unwrap(), call);
        let by_sha = ScriptArgs { text: None, ..call };
        assert_eq!(ScriptArgs::decode(&by_sha.encode().unwrap()).unwrap(), by_sha);
    }
}
