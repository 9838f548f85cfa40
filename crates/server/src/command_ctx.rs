//! `Ctx` for one RESP data command run as a transaction of its own: what `StoreCtx` is for
//! an invocation, cut to what a command needs, because a command's whole cost is a few
//! hundred nanoseconds and an invocation's bookkeeping (a shared attempt state, a profile,
//! slices, owned copies of every table name) would double it.
//!
//! The semantics are an invocation's: every read is made at one read version (TL2), the
//! command sees its own writes, a second read of an object returns the first value, and
//! writes are buffered and committed with OCC, validating the reads once. A command names
//! one table; it never yields (it is bounded by its size).

use bytes::Bytes;

use ferry_func::{Ctx, CtxError, CtxFuture};
use ferry_store::{ObjectRef, StoreError, TenantStore, WriteRef};

use crate::routing::ClusterRole;
use crate::store_ctx::{ctx_error, MAX_SNAPSHOT_EXTENSIONS};

/// One object the command read: its key, the version seen and the value.
struct Read {
    key: Bytes,
    version: u64,
    value: Option<Bytes>,
}

/// The transaction of one data command.
pub(crate) struct CommandCtx<'c> {
    store: &'c TenantStore,
    tenant: u32,
    table: &'c str,
    cluster: Option<&'c ClusterRole>,
    read_version: u64,
    reads: Vec<Read>,
    writes: Vec<(Bytes, Option<Bytes>)>,
    now_us: u64,
}

/// No arguments: a command is not an invocation.
static NO_ARGS: Bytes = Bytes::new();

impl<'c> CommandCtx<'c> {
    pub(crate) fn new(
        store: &'c TenantStore,
        tenant: u32,
        table: &'c str,
        cluster: Option<&'c ClusterRole>,
    ) -> CommandCtx<'c> {
        CommandCtx {
            store,
            tenant,
            table,
            cluster,
            read_version: store.read_version(),
            reads: Vec::new(),
            writes: Vec::new(),
            now_us: crate::store_ctx::unix_time_us(),
        }
    }

    /// Commits what the command wrote (nothing to do for a read-only one: its reads were
    /// all made at one read version).
    pub(crate) fn commit(&self) -> Result<(), StoreError> {
        if self.writes.is_empty() {
            return Ok(());
        }
        let reads: Vec<ObjectRef<'_>> = self
            .reads
            .iter()
            .map(|read| ObjectRef {
                table: self.table,
                key: &read.key,
                version: read.version,
            })
            .collect();
        let writes: Vec<WriteRef<'_>> = self
            .writes
            .iter()
            .map(|(key, value)| WriteRef {
                table: self.table,
                key,
                value: value.as_deref(),
            })
            .collect();
        self.store.commit(&reads, &writes).map(|_| ())
    }

    /// What WATCH keeps of `key`: its version if it exists and has not expired, else
    /// `None` (a key that expires while watched has changed; one that was already gone
    /// has not).
    pub(crate) fn watch_token(&mut self, key: &[u8]) -> Result<Option<u64>, CtxError> {
        let table = self.table;
        let Some(value) = self.read(table, key)? else {
            return Ok(None);
        };
        let now_ms = self.now_us / 1000;
        let expires_at_ms = ferry_keyspace::value::Entry::peek(&value).and_then(|(_, at)| at);
        if expires_at_ms.is_some_and(|at| at <= now_ms) {
            return Ok(None);
        }
        Ok(self
            .reads
            .iter()
            .find(|read| read.key[..] == *key)
            .map(|read| read.version))
    }

    fn check(&self, table: &str, key: &[u8]) -> Result<(), CtxError> {
        if table != self.table {
            return Err(CtxError::Refused(format!(
                "a command reads and writes one table ({}), not {table}",
                self.table
            )));
        }
        let Some(role) = self.cluster else { return Ok(()) };
        if let Some(why) = crate::routing::not_owned(role, key) {
            return Err(CtxError::Refused(why));
        }
        match crate::routing::frozen(role, key) {
            Some(why) => Err(CtxError::Unavailable(why)),
            None => Ok(()),
        }
    }

    /// What the command already knows of `key`: its own write, else its earlier read.
    fn known(&self, key: &[u8]) -> Option<Option<Bytes>> {
        if let Some((_, value)) = self.writes.iter().rev().find(|(k, _)| k[..] == *key) {
            return Some(value.clone());
        }
        self.reads
            .iter()
            .find(|read| read.key[..] == *key)
            .map(|read| read.value.clone())
    }

    /// Reads `key` at the read version. When it is newer and nothing was read yet, the
    /// read version moves up to now (a bounded number of times); past that, a conflict
    /// starts the command over.
    fn read(&mut self, table: &str, key: &[u8]) -> Result<Option<Bytes>, CtxError> {
        self.check(table, key)?;
        if let Some(value) = self.known(key) {
            return Ok(value);
        }
        let mut extensions = 0;
        let read = loop {
            match self.store.read_at(table, &[key], self.read_version) {
                Err(StoreError::Newer { .. }) if self.reads.is_empty() && extensions < MAX_SNAPSHOT_EXTENSIONS => {
                    extensions += 1;
                    self.read_version = self.store.read_version();
                }
                result => break result.map_err(ctx_error)?.pop().flatten(),
            }
        };
        let (version, value) = match read {
            Some((version, value)) => (version, Some(value)),
            None => (ferry_store::VERSION_ABSENT, None),
        };
        self.reads.push(Read {
            key: Bytes::copy_from_slice(key),
            version,
            value: value.clone(),
        });
        Ok(value)
    }

    fn write(&mut self, table: &str, key: &[u8], value: Option<Bytes>) -> Result<(), CtxError> {
        self.check(table, key)?;
        ferry_store::tenant::check_write(table, key, value.as_deref()).map_err(ctx_error)?;
        match self.writes.iter_mut().find(|(k, _)| k[..] == *key) {
            Some(write) => write.1 = value,
            None => self.writes.push((Bytes::copy_from_slice(key), value)),
        }
        Ok(())
    }
}

impl Ctx for CommandCtx<'_> {
    fn args(&self) -> &Bytes {
        &NO_ARGS
    }

    fn tenant(&self) -> u32 {
        self.tenant
    }

    fn now_us(&self) -> u64 {
        self.now_us
    }

    fn immediate(&self) -> bool {
        true
    }

    fn get<'a>(&'a mut self, table: &'a str, key: &'a [u8]) -> CtxFuture<'a, Option<Bytes>> {
        let read = self.read(table, key);
        Box::pin(std::future::ready(read))
    }

    fn multiget<'a>(&'a mut self, table: &'a str, keys: &'a [Bytes]) -> CtxFuture<'a, Vec<Option<Bytes>>> {
        let read = keys.iter().map(|key| self.read(table, key)).collect();
        Box::pin(std::future::ready(read))
    }

    fn put<'a>(&'a mut self, table: &'a str, key: &'a [u8], value: Bytes) -> CtxFuture<'a, ()> {
        let written = self.write(table, key, Some(value));
        Box::pin(std::future::ready(written))
    }

    fn delete<'a>(&'a mut self, table: &'a str, key: &'a [u8]) -> CtxFuture<'a, ()> {
        let written = self.write(table, key, None);
        Box::pin(std::future::ready(written))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ready<T>(access: CtxFuture<'_, T>) -> Result<T, CtxError> {
        let mut access = access;
        let mut cx = std::task::Context::from_waker(std::task::Waker::noop());
        match access.as_mut().poll(&mut cx) {
            std::task::Poll::Ready(result) => result,
            std::task::Poll::Pending => panic!("a command's access never waits"),
        }
    }

    #[test]
    fn a_command_sees_its_own_writes_and_commits_them_once() {
        let store = TenantStore::new(1 << 20);
        let mut ctx = CommandCtx::new(&store, 1, "db0", None);
        assert_eq!(ready(ctx.get("db0", b"k")).unwrap(), None);
        ready(ctx.put("db0", b"k", Bytes::from_static(b"1"))).unwrap();
        assert_eq!(ready(ctx.get("db0", b"k")).unwrap(), Some(Bytes::from_static(b"1")));
        assert_eq!(store.get("db0", b"k").unwrap(), None, "buffered until the commit");
        ctx.commit().unwrap();
        assert_eq!(store.get("db0", b"k").unwrap().unwrap().1, Bytes::from_static(b"1"));
    }

    #[test]
    fn a_write_after_the_read_version_makes_the_commit_conflict() {
        let store = TenantStore::new(1 << 20);
        store.put("db0", b"k", b"0").unwrap();
        let mut ctx = CommandCtx::new(&store, 1, "db0", None);
        assert_eq!(ready(ctx.get("db0", b"k")).unwrap(), Some(Bytes::from_static(b"0")));
        store.put("db0", b"k", b"other").unwrap();
        ready(ctx.put("db0", b"k", Bytes::from_static(b"1"))).unwrap();
        assert!(ctx.commit().unwrap_err().is_conflict());
    }

    #[test]
    fn a_read_past_the_read_version_moves_it_only_before_anything_was_read() {
        let store = TenantStore::new(1 << 20);
        store.put("db0", b"a", b"0").unwrap();
        let mut ctx = CommandCtx::new(&store, 1, "db0", None);
        store.put("db0", b"a", b"1").unwrap();
        // Nothing read yet: the snapshot moves up and the read sees the newer value.
        assert_eq!(ready(ctx.get("db0", b"a")).unwrap(), Some(Bytes::from_static(b"1")));
        store.put("db0", b"b", b"2").unwrap();
        // Something read: a newer object is a conflict, never a mixed snapshot.
        assert!(matches!(ready(ctx.get("db0", b"b")), Err(CtxError::Conflict(_))));
    }

    #[test]
    fn a_command_names_one_table() {
        let store = TenantStore::new(1 << 20);
        let mut ctx = CommandCtx::new(&store, 1, "db0", None);
        assert!(matches!(ready(ctx.get("db1", b"k")), Err(CtxError::Refused(_))));
    }
}
