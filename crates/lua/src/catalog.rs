//! The libraries of a tenant, stored in its table [`TABLE`] like any data, so loading one
//! is a transaction and every side reads them through its `Ctx`:
//!
//! - `lib:<library>`: the library's text;
//! - `fn:<function>`: `<library>\n<hash of the text>\n<no-writes or empty>`;
//! - `libraries`: one line per library, `<library> <function> <function> …`.
//!
//! `lua.load`, `lua.delete` and `lua.list` are storage functions, so FUNCTION LOAD over
//! RESP and `ferry fn load` over the ferry protocol are the same invocation.

use std::collections::BTreeMap;

use bytes::{BufMut, Bytes, BytesMut};

use ferry_func::args::reader;
use ferry_func::{Ctx, FnError, FnFuture};
use ferry_proto::wire::{put_bytes16, put_bytes32, put_count};
use ferry_resp::{Protocol, Reply};

use crate::library::{hash, FunctionInfo};
use crate::vm::Vm;

/// The table holding a tenant's libraries: node-local in a cluster (every primary keeps
/// its own catalog, and FUNCTION LOAD through the gateway reaches every primary).
pub const TABLE: &str = ferry_cluster::NODE_LOCAL_TABLE;

/// Most libraries one tenant may load.
pub const MAX_LIBRARIES: usize = 1024;

/// `lua.load`: arguments [`LoadArgs`], result the library's name.
pub const LOAD: &str = "lua.load";
/// `lua.delete`: arguments the library's name (u16-prefixed), result empty.
pub const DELETE: &str = "lua.delete";
/// `lua.flush`: no arguments, result empty: every library removed.
pub const FLUSH: &str = "lua.flush";
/// `lua.dump`: no arguments, result FUNCTION DUMP's payload.
pub const DUMP: &str = "lua.dump";
/// `lua.restore`: arguments [`restore_args`], result empty.
pub const RESTORE: &str = "lua.restore";
/// `lua.list`: arguments [`ListArgs`], result FUNCTION LIST's reply (in ferry's reply form,
/// `Protocol::Ferry`).
pub const LIST: &str = "lua.list";

const INDEX_KEY: &[u8] = b"libraries";

/// What the catalog says about one function.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct FunctionEntry {
    /// Its library.
    pub library: String,
    /// The hash of the library's text.
    pub hash: String,
    /// Flagged `no-writes`.
    pub no_writes: bool,
    /// Its flags, as FUNCTION LIST shows them.
    pub flags: Vec<String>,
    /// Its description, if it gave one.
    pub description: Option<String>,
}

fn function_key(name: &str) -> Vec<u8> {
    format!("fn:{name}").into_bytes()
}

/// The key of a library's text.
pub fn library_key(name: &str) -> Vec<u8> {
    format!("lib:{name}").into_bytes()
}

fn corrupt(what: &str) -> FnError {
    FnError::Failed(format!("ERR the function catalog's {what} is malformed"))
}

/// The catalog entry of function `name`, read through `ctx`.
pub async fn function_entry(ctx: &mut dyn Ctx, name: &str) -> Result<Option<FunctionEntry>, FnError> {
    let Some(value) = ctx.get(TABLE, &function_key(name)).await? else {
        return Ok(None);
    };
    // Lines: library, hash, flags (space-separated), then the description, if any, to
    // the end (it may hold line ends).
    let text = std::str::from_utf8(&value).map_err(|_| corrupt("function entry"))?;
    let mut lines = text.splitn(4, '\n');
    match (lines.next(), lines.next(), lines.next()) {
        (Some(library), Some(hash), Some(flags)) => {
            let flags: Vec<String> = flags.split_ascii_whitespace().map(str::to_string).collect();
            Ok(Some(FunctionEntry {
                library: library.to_string(),
                hash: hash.to_string(),
                no_writes: flags.iter().any(|flag| flag == "no-writes"),
                flags,
                description: lines.next().map(str::to_string),
            }))
        }
        _ => Err(corrupt("function entry")),
    }
}

/// Libraries and their functions, from the index.
async fn index(ctx: &mut dyn Ctx) -> Result<BTreeMap<String, Vec<String>>, FnError> {
    let Some(value) = ctx.get(TABLE, INDEX_KEY).await? else {
        return Ok(BTreeMap::new());
    };
    let text = std::str::from_utf8(&value).map_err(|_| corrupt("index"))?;
    Ok(text
        .lines()
        .filter_map(|line| {
            let mut words = line.split(' ');
            let library = words.next()?.to_string();
            Some((library, words.map(str::to_string).collect()))
        })
        .collect())
}

async fn write_index(ctx: &mut dyn Ctx, index: &BTreeMap<String, Vec<String>>) -> Result<(), FnError> {
    let text: String = index
        .iter()
        .map(|(library, functions)| format!("{library} {}\n", functions.join(" ")))
        .collect();
    ctx.put(TABLE, INDEX_KEY, Bytes::from(text)).await?;
    Ok(())
}

/// `lua.load`'s arguments.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct LoadArgs {
    /// FUNCTION LOAD REPLACE.
    pub replace: bool,
    /// The library's text.
    pub code: Bytes,
}

impl LoadArgs {
    /// Wire form: u8 replace, u32-prefixed text.
    pub fn encode(&self) -> Bytes {
        let mut out = BytesMut::with_capacity(5 + self.code.len());
        out.put_u8(u8::from(self.replace));
        put_bytes32(&mut out, &self.code, "library").expect("a library's length fits in u32");
        out.freeze()
    }

    fn decode(args: &Bytes) -> Result<LoadArgs, FnError> {
        let mut r = reader(args);
        let parsed = LoadArgs {
            replace: r.u8("replace")? != 0,
            code: r.bytes32("library")?,
        };
        r.finish()?;
        Ok(parsed)
    }
}

/// FUNCTION LOAD [REPLACE]: checks the library by loading it, refuses a name or function
/// taken by another library, and stores it (replacing the old one's functions).
pub fn load(ctx: &mut dyn Ctx) -> FnFuture<'_> {
    Box::pin(async move {
        let args = LoadArgs::decode(ctx.args())?;
        let code = String::from_utf8(args.code.to_vec())
            .map_err(|_| FnError::Failed("ERR library text is not UTF-8".into()))?;
        let name = load_text(ctx, code, args.replace, false).await?;
        Ok(Bytes::from(name))
    })
}

/// Loads one library's text into the catalog (FUNCTION LOAD's work, and RESTORE's for
/// each library): its name.
/// `restoring`: RESTORE's call (Redis words the name collision differently there).
async fn load_text(ctx: &mut dyn Ctx, code: String, replace: bool, restoring: bool) -> Result<String, FnError> {
    let (vm, header, functions) = Vm::load(&code).map_err(|err| FnError::Failed(err.0))?;
    let mut index = index(ctx).await?;
    if index.contains_key(&header.name) && !replace {
        return Err(FnError::Failed(if restoring {
            format!("ERR Library {} already exists", header.name)
        } else {
            format!("ERR Library '{}' already exists", header.name)
        }));
    }
    if !index.contains_key(&header.name) && index.len() >= MAX_LIBRARIES {
        return Err(FnError::Failed(format!(
            "ERR at most {MAX_LIBRARIES} libraries may be loaded"
        )));
    }
    for FunctionInfo { name, .. } in &functions {
        if let Some(entry) = function_entry(ctx, name).await? {
            if entry.library != header.name {
                return Err(FnError::Failed(format!("ERR Function {name} already exists")));
            }
        }
    }
    let text_hash = hash(code.as_bytes());
    for old in index.remove(&header.name).unwrap_or_default() {
        if !functions.iter().any(|f| f.name == old) {
            ctx.delete(TABLE, &function_key(&old)).await?;
        }
    }
    for function in &functions {
        let mut entry = format!("{}\n{text_hash}\n{}", header.name, function.flags.join(" "));
        if let Some(description) = &function.description {
            entry.push('\n');
            entry.push_str(description);
        }
        ctx.put(TABLE, &function_key(&function.name), Bytes::from(entry))
            .await?;
    }
    ctx.put(TABLE, &library_key(&header.name), Bytes::from(code.clone()))
        .await?;
    index.insert(header.name.clone(), functions.iter().map(|f| f.name.clone()).collect());
    write_index(ctx, &index).await?;
    crate::cache::remember(ctx.tenant(), &text_hash, code, Some(vm));
    Ok(header.name)
}

/// `lua.delete`'s arguments.
pub fn delete_args(library: &str) -> Bytes {
    let mut out = BytesMut::new();
    put_bytes16(&mut out, library.as_bytes(), "library name").expect("library names are short");
    out.freeze()
}

/// FUNCTION DELETE: removes a library and its functions.
pub fn delete(ctx: &mut dyn Ctx) -> FnFuture<'_> {
    Box::pin(async move {
        let mut r = reader(ctx.args());
        let name = r.string16("library name")?;
        r.finish()?;
        let mut index = index(ctx).await?;
        let Some(functions) = index.remove(&name) else {
            return Err(FnError::Failed("ERR Library not found".into()));
        };
        for function in functions {
            ctx.delete(TABLE, &function_key(&function)).await?;
        }
        ctx.delete(TABLE, &library_key(&name)).await?;
        write_index(ctx, &index).await?;
        Ok(Bytes::new())
    })
}

/// FUNCTION FLUSH: removes every library and its functions.
pub fn flush(ctx: &mut dyn Ctx) -> FnFuture<'_> {
    Box::pin(async move {
        reader(ctx.args()).finish()?;
        flush_all(ctx).await?;
        Ok(Bytes::new())
    })
}

async fn flush_all(ctx: &mut dyn Ctx) -> Result<(), FnError> {
    let index = index(ctx).await?;
    for (library, functions) in &index {
        for function in functions {
            ctx.delete(TABLE, &function_key(function)).await?;
        }
        ctx.delete(TABLE, &library_key(library)).await?;
    }
    write_index(ctx, &BTreeMap::new()).await
}

/// What FUNCTION DUMP's payload starts with (ferry's own format, version 1).
const DUMP_MAGIC: &[u8] = b"FERRYFN1";

/// Bytes of the payload's checksum (a prefix of the SHA-256 of what precedes it).
const DUMP_CHECKSUM_BYTES: usize = 8;

fn dump_checksum(body: &[u8]) -> [u8; DUMP_CHECKSUM_BYTES] {
    use sha2::{Digest, Sha256};
    let digest = Sha256::digest(body);
    let mut out = [0; DUMP_CHECKSUM_BYTES];
    out.copy_from_slice(&digest[..DUMP_CHECKSUM_BYTES]);
    out
}

/// FUNCTION DUMP: every library's text in one payload (magic, u32 count, u32-prefixed
/// texts, checksum). Its format is ferry's own: RESTORE takes it on any ferry node, not
/// on Redis, and Redis's payloads are not taken here.
pub fn dump(ctx: &mut dyn Ctx) -> FnFuture<'_> {
    Box::pin(async move {
        reader(ctx.args()).finish()?;
        let mut out = BytesMut::new();
        out.put_slice(DUMP_MAGIC);
        let libraries = index(ctx).await?;
        put_count(&mut out, libraries.len(), "libraries").map_err(|_| corrupt("index"))?;
        for library in libraries.keys() {
            let code = ctx.get(TABLE, &library_key(library)).await?.unwrap_or_default();
            put_bytes32(&mut out, &code, "library").map_err(|_| corrupt("library"))?;
        }
        let checksum = dump_checksum(&out);
        out.put_slice(&checksum);
        Ok(out.freeze())
    })
}

/// The library texts of a FUNCTION DUMP payload, or why it is not one.
fn dump_texts(payload: &[u8]) -> Result<Vec<String>, FnError> {
    let bad = || FnError::Failed("ERR payload version or checksum are wrong".into());
    if payload.len() < DUMP_MAGIC.len() + 4 + DUMP_CHECKSUM_BYTES || !payload.starts_with(DUMP_MAGIC) {
        return Err(bad());
    }
    let (body, checksum) = payload.split_at(payload.len() - DUMP_CHECKSUM_BYTES);
    if dump_checksum(body) != checksum {
        return Err(bad());
    }
    let mut r = reader(&Bytes::copy_from_slice(&body[DUMP_MAGIC.len()..]));
    let count = r.count(MAX_LIBRARIES, "libraries").map_err(|_| bad())?;
    let mut texts = Vec::with_capacity(count);
    for _ in 0..count {
        let text = r.bytes32("library").map_err(|_| bad())?;
        texts.push(String::from_utf8(text.to_vec()).map_err(|_| bad())?);
    }
    r.finish().map_err(|_| bad())?;
    Ok(texts)
}

/// `lua.restore`'s arguments: u8 policy (0 append, 1 replace, 2 flush), u32-prefixed
/// payload.
pub fn restore_args(policy: ferry_resp::command::RestorePolicy, payload: &[u8]) -> Option<Bytes> {
    use ferry_resp::command::RestorePolicy;
    let mut out = BytesMut::new();
    out.put_u8(match policy {
        RestorePolicy::Append => 0,
        RestorePolicy::Replace => 1,
        RestorePolicy::Flush => 2,
    });
    put_bytes32(&mut out, payload, "payload").ok()?;
    Some(out.freeze())
}

/// FUNCTION RESTORE: the payload's libraries loaded in one transaction, by its policy (an
/// error, a bad payload included, leaves the catalog as it was).
pub fn restore(ctx: &mut dyn Ctx) -> FnFuture<'_> {
    Box::pin(async move {
        let mut r = reader(ctx.args());
        let policy = r.u8("policy")?;
        let payload = r.bytes32("payload")?;
        r.finish()?;
        let texts = dump_texts(&payload)?;
        if policy == 2 {
            flush_all(ctx).await?;
        }
        for text in texts {
            load_text(ctx, text, policy == 1, true).await?;
        }
        Ok(Bytes::new())
    })
}

/// `lua.list`'s arguments.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ListArgs {
    /// Only libraries matching this pattern (`*` and `?` wildcards); all if empty.
    pub pattern: String,
    /// Include each library's text.
    pub with_code: bool,
}

impl ListArgs {
    /// Wire form: u8 with_code, u16-prefixed pattern.
    pub fn encode(&self) -> Bytes {
        let mut out = BytesMut::new();
        out.put_u8(u8::from(self.with_code));
        put_bytes16(&mut out, self.pattern.as_bytes(), "pattern").expect("patterns are short");
        out.freeze()
    }
}

/// FUNCTION LIST: every library with its functions and their flags, as Redis answers.
pub fn list(ctx: &mut dyn Ctx) -> FnFuture<'_> {
    Box::pin(async move {
        let mut r = reader(ctx.args());
        let with_code = r.u8("with_code")? != 0;
        let pattern = r.string16("pattern")?;
        r.finish()?;
        let mut libraries = Vec::new();
        for (library, functions) in index(ctx).await? {
            if !pattern.is_empty() && !glob_match(pattern.as_bytes(), library.as_bytes()) {
                continue;
            }
            let mut described = Vec::new();
            for function in functions {
                let entry = function_entry(ctx, &function).await?;
                let flags = entry
                    .iter()
                    .flat_map(|entry| &entry.flags)
                    .map(|flag| Reply::text(flag.clone()));
                let description = entry
                    .as_ref()
                    .and_then(|entry| entry.description.clone())
                    .map_or(Reply::Null, Reply::text);
                described.push(Reply::Map(vec![
                    (Reply::text("name"), Reply::text(function)),
                    (Reply::text("description"), description),
                    (Reply::text("flags"), Reply::Array(flags.collect())),
                ]));
            }
            let mut fields = vec![
                (Reply::text("library_name"), Reply::text(library.clone())),
                (Reply::text("engine"), Reply::text("LUA")),
                (Reply::text("functions"), Reply::Array(described)),
            ];
            if with_code {
                let code = ctx.get(TABLE, &library_key(&library)).await?.unwrap_or_default();
                fields.push((Reply::text("library_code"), Reply::Bulk(code)));
            }
            libraries.push(Reply::Map(fields));
        }
        let mut out = BytesMut::new();
        Reply::Array(libraries).encode(Protocol::Ferry, &mut out);
        Ok(out.freeze())
    })
}

/// FUNCTION LIST's LIBRARYNAME pattern is a Redis glob, matched as KEYS and SCAN match.
pub use ferry_resp::glob::matches as glob_match;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn globs_match_like_redis_for_star_and_question_mark() {
        for (pattern, text, expected) in [
            ("*", "anything", true),
            ("lib*", "library", true),
            ("lib*", "mylib", false),
            ("*lib", "mylib", true),
            ("m?lib", "mylib", true),
            ("m?lib", "mylibs", false),
            ("a*b*c", "axxbyyc", true),
            ("a*b*c", "axxbyy", false),
            ("", "", true),
        ] {
            assert_eq!(
                glob_match(pattern.as_bytes(), text.as_bytes()),
                expected,
                "{pattern} {text}"
            );
        }
    }
}
