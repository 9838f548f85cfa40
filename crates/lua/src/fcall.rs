//! FCALL as an invocation: the function `fcall.<name>` with [`FcallArgs`], served by
//! [`run`] on whichever side the policy places it.

use bytes::{BufMut, Bytes, BytesMut};

use ferry_func::args::{reader, Reader};
use ferry_func::{Ctx, CtxError, FnError, FnFuture};
use ferry_proto::wire::{put_bytes16, put_bytes32, put_count};
use ferry_resp::{Protocol, Reply};

use crate::catalog::{function_entry, library_key, TABLE};
use crate::library::hash;

/// The invocation name's prefix: FCALL `f` is the invocation `fcall.f`, so each Lua
/// function keeps its own cost profile in the placement policies.
pub const FAMILY: &str = "fcall.";

/// Most keys, and most other arguments, one FCALL may pass.
pub const MAX_FCALL_ARGS: usize = 4096;

/// One FCALL.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct FcallArgs {
    /// The function's name.
    pub function: String,
    /// The table its `redis.call`s use (the connection's database).
    pub table: String,
    /// KEYS.
    pub keys: Vec<Bytes>,
    /// ARGV.
    pub args: Vec<Bytes>,
    /// FCALL_RO.
    pub read_only: bool,
}

impl FcallArgs {
    /// The invocation's function name.
    pub fn invocation_name(&self) -> String {
        format!("{FAMILY}{}", self.function)
    }

    /// Wire form: u16-prefixed function and table, u8 read_only, then keys and args as
    /// u32 counts of u32-prefixed strings. `None` if a field cannot be encoded (too many
    /// arguments, a name too long).
    pub fn encode(&self) -> Option<Bytes> {
        let mut out = BytesMut::new();
        put_bytes16(&mut out, self.function.as_bytes(), "function").ok()?;
        put_bytes16(&mut out, self.table.as_bytes(), "table").ok()?;
        out.put_u8(u8::from(self.read_only));
        put_keys_and_args(&mut out, &self.keys, &self.args)?;
        Some(out.freeze())
    }

    /// Parses the wire form.
    pub fn decode(args: &Bytes) -> Result<FcallArgs, FnError> {
        let mut r = reader(args);
        let function = r.string16("function")?;
        let table = r.string16("table")?;
        let read_only = r.u8("read_only")? != 0;
        let (keys, args) = read_keys_and_args(&mut r)?;
        r.finish()?;
        Ok(FcallArgs {
            function,
            table,
            keys,
            args,
            read_only,
        })
    }
}

/// Appends KEYS and ARGV as FCALL's and EVAL's wire forms end: each a u32 count of
/// u32-prefixed strings. `None` past [`MAX_FCALL_ARGS`] or a length u32 cannot hold.
pub(crate) fn put_keys_and_args(out: &mut BytesMut, keys: &[Bytes], args: &[Bytes]) -> Option<()> {
    if keys.len() > MAX_FCALL_ARGS || args.len() > MAX_FCALL_ARGS {
        return None;
    }
    for list in [keys, args] {
        put_count(out, list.len(), "count").ok()?;
        for item in list {
            put_bytes32(out, item, "argument").ok()?;
        }
    }
    Some(())
}

/// Reads what [`put_keys_and_args`] wrote.
pub(crate) fn read_keys_and_args(r: &mut Reader) -> Result<(Vec<Bytes>, Vec<Bytes>), FnError> {
    let mut lists = [Vec::new(), Vec::new()];
    for list in &mut lists {
        let count = r.count(MAX_FCALL_ARGS, "count")?;
        for _ in 0..count {
            list.push(r.bytes32("argument")?);
        }
    }
    let [keys, args] = lists;
    Ok((keys, args))
}

/// The routing key of an FCALL: its first key (Redis Cluster routes FCALL the same way).
pub fn route(args: &Bytes) -> Option<Bytes> {
    FcallArgs::decode(args).ok()?.keys.into_iter().next()
}

/// Runs one FCALL: the catalog entry and (if this process has not loaded that text yet)
/// the library read through `ctx`, then the function in a VM of this process. The result
/// is the function's reply, in ferry's reply form (`Protocol::Ferry`) (decode it with `ferry_resp::Reply::decode`).
pub fn run(ctx: &mut dyn Ctx) -> FnFuture<'_> {
    Box::pin(async move {
        let call = FcallArgs::decode(ctx.args())?;
        let entry = function_entry(ctx, &call.function)
            .await?
            .ok_or_else(|| FnError::Failed("ERR Function not found".into()))?;
        let tenant = ctx.tenant();
        let loaded = match crate::cache::find(tenant, &entry.hash) {
            Some(loaded) => loaded,
            None => {
                let code = ctx.get(TABLE, &library_key(&entry.library)).await?.unwrap_or_default();
                if hash(&code) != entry.hash {
                    // Replaced between the two reads: the retry sees one version.
                    return Err(FnError::Ctx(CtxError::Conflict(format!(
                        "library {} changed while it was being read",
                        entry.library
                    ))));
                }
                let code = String::from_utf8(code.to_vec())
                    .map_err(|_| FnError::Failed("ERR library text is not UTF-8".into()))?;
                crate::cache::remember(tenant, &entry.hash, code, None)
            }
        };
        let mut vm = loaded.checkout().map_err(|err| FnError::Failed(err.0))?;
        let reply = vm
            .call(ctx, &call.function, &call.table, &call.keys, &call.args, call.read_only)
            .await;
        loaded.checkin(vm);
        let mut out = BytesMut::new();
        reply?.encode(Protocol::Ferry, &mut out);
        Ok(out.freeze())
    })
}

/// The reply of an FCALL invocation's result bytes (a malformed one becomes an error).
pub fn reply_of(result: &Bytes) -> Reply {
    Reply::decode(result).unwrap_or_else(|err| Reply::err(format!("malformed function result: {err}")))
}
