//! `redis.call` inside a function: the data commands, run against the invocation's `Ctx`,
//! so reads join its read set and writes its buffered write set wherever it runs. The
//! command's own failures (wrong arity, not an integer) are replies the script sees;
//! conflicts, refusals of the runtime and lost storage nodes end the invocation.

use bytes::Bytes;

use ferry_func::{Ctx, CtxError};
use ferry_keyspace::{Keys, Slot};
use ferry_resp::table::{lookup, NO_SCRIPT, READ_ONLY, WRITE};
use ferry_resp::{Command, Reply};
use ferry_value::{Entry, DEFAULT_ENCODINGS};

/// Runs one command for a script over `table`. `writes_allowed` is false in functions
/// flagged `no-writes`.
pub async fn execute(
    ctx: &mut dyn Ctx,
    table: &str,
    args: Vec<Bytes>,
    writes_allowed: bool,
) -> Result<Reply, CtxError> {
    // What a script may call is the command table's to say.
    if let Some(spec) = args.first().and_then(|name| lookup(name)) {
        if spec.is(NO_SCRIPT) {
            return Ok(Reply::err("This Redis command is not allowed from script"));
        }
        if !spec.arity_fits(args.len()) {
            return Ok(Reply::err("Wrong number of args calling Redis command from script"));
        }
        if spec.is(WRITE) && !writes_allowed {
            return Ok(Reply::err("Write commands are not allowed from read-only scripts."));
        }
    }
    let command = match Command::parse(args) {
        Ok(command) => command,
        Err(reply) => return Ok(reply),
    };
    match run_with(ctx, table, &command, writes_allowed).await? {
        Some(reply) => Ok(reply),
        None => Ok(Reply::err("This Redis command is not allowed from script")),
    }
}

/// Most keys one multi-get of a command asks for (the protocol's bound on one request).
const MAX_KEYS_PER_LOAD: usize = ferry_proto::MAX_MULTIGET_KEYS;

/// Runs one data command over `ctx`: the one executor of Redis's data commands, for a
/// script's `redis.call` and for a RESP client's command alike (the storage node runs the
/// latter as a one-command transaction in the tenant's seat). It loads the keys the
/// command table says the command names (one multi-get, so one round trip on an app node),
/// runs it in `ferry_keyspace`, and buffers its writes; with `writes_allowed` false (a
/// replica's read, a read-only script) an expired key it meets is read as absent but not
/// deleted. `None` for a command that is not a data command.
pub async fn run(ctx: &mut dyn Ctx, table: &str, command: &Command) -> Result<Option<Reply>, CtxError> {
    run_with(ctx, table, command, true).await
}

/// [`run`], saying whether the command may delete the expired keys it meets.
pub async fn run_with(
    ctx: &mut dyn Ctx,
    table: &str,
    command: &Command,
    writes_allowed: bool,
) -> Result<Option<Reply>, CtxError> {
    let (words, blocking_shape) = match command {
        Command::Ping(None) => return Ok(Some(Reply::Simple("PONG".into()))),
        Command::Ping(Some(message)) | Command::Echo(message) => return Ok(Some(Reply::Bulk(message.clone()))),
        Command::Data(words) => (words, None),
        // In a script a blocking pop runs its step once and does not wait (as in Redis).
        Command::Blocking(blocking) => (&blocking.step, Some(blocking.shape)),
        Command::Database(words) => return crate::listing::run(ctx, table, words).await,
        // The node's description, not the data: no part of the transaction.
        Command::Info(sections) => {
            let text = ctx.info().await?;
            let shown = ferry_resp::info::sections(&String::from_utf8_lossy(&text), sections);
            return Ok(Some(Reply::Bulk(Bytes::from(shown))));
        }
        _ => return Ok(None),
    };
    let Some(spec) = lookup(&words[0]) else {
        return Ok(Some(ferry_resp::command::unknown(words)));
    };
    let names = spec.keys(words);
    // A read of one key the invocation has not fetched may run where the key is: on the
    // app side, one round trip that moves the part the command reads, not the value.
    if blocking_shape.is_none() && spec.is(READ_ONLY) && !spec.is(WRITE) && names.len() == 1 {
        if let Some(reply) = ctx.read_part(table, names[0], words).await? {
            return Ok(Some(crate::fcall::reply_of(&reply)));
        }
    }
    let mut slots: Vec<Slot> = Vec::with_capacity(names.len());
    // What each key held when loaded: a key absent then and absent now needs no write.
    let mut loaded_present: Vec<bool> = Vec::with_capacity(names.len());
    for chunk in names.chunks(MAX_KEYS_PER_LOAD) {
        let chunk: Vec<Bytes> = chunk.iter().map(|key| (*key).clone()).collect();
        let values = ctx.multiget(table, &chunk).await?;
        for (key, value) in chunk.into_iter().zip(values) {
            if slots.iter().any(|slot| slot.key == key) {
                continue;
            }
            loaded_present.push(value.is_some());
            // The encoding only shapes memory here: the value goes back as its byte form.
            slots.push(Slot::new(
                key,
                value.map(|bytes| Entry::decode(&bytes, &DEFAULT_ENCODINGS)),
            ));
        }
    }
    let now_us = ctx.now_us();
    let mut keys = Keys::new(
        &mut slots,
        now_us,
        ferry_keyspace::keys::fresh_seed(now_us),
        DEFAULT_ENCODINGS,
        writes_allowed,
    );
    let reply = ferry_keyspace::run(words, &mut keys);
    if matches!(reply, Reply::Error(_)) {
        return Ok(Some(reply));
    }
    for (slot, was_present) in slots.iter().zip(loaded_present) {
        if !slot.tracked.changed() {
            continue;
        }
        match slot.tracked.entry() {
            Some(entry) => ctx.put(table, &slot.key, entry.encode()).await?,
            None if was_present => ctx.delete(table, &slot.key).await?,
            None => {}
        }
    }
    Ok(Some(match (blocking_shape, reply) {
        (Some(shape), popped) if !matches!(popped, Reply::Null | Reply::NullArray) => shape.reply(popped),
        (_, reply) => reply,
    }))
}
