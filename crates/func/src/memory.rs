//! A `Ctx` over a plain map, for running functions without a storage node: unit tests of
//! functions (built-in or Lua) and tools that check a function's logic. Writes apply at
//! once (there is no concurrency to guard against), and every access is ready at once.

use ferry_proto::TenantId;
use std::collections::HashMap;
use std::future::Future;
use std::pin::pin;
use std::task::{Context, Poll, Waker};

use bytes::Bytes;

use crate::ctx::{Ctx, CtxFuture, Listed};

/// Objects by (table, key).
#[derive(Clone, Debug, Default)]
pub struct MemoryCtx {
    /// The arguments the next invocation sees.
    pub args: Bytes,
    /// The tenant it runs for.
    pub tenant: TenantId,
    /// The objects.
    pub data: HashMap<(String, Bytes), Bytes>,
    /// What [`Ctx::now_us`] answers: this context has no clock, so the caller sets it.
    pub now_us: u64,
    /// What [`Ctx::interrupt`] answers: the flag that stops the calls run over it.
    pub interrupt: Option<crate::Interrupt>,
    /// What [`Ctx::slice`] answers: the slice the calls run over it are paused at.
    pub slice: Option<crate::Slice>,
}

impl MemoryCtx {
    /// A context holding `data`.
    pub fn new(data: impl IntoIterator<Item = (&'static str, Bytes, Bytes)>) -> MemoryCtx {
        MemoryCtx {
            args: Bytes::new(),
            tenant: TenantId(0),
            now_us: 0,
            interrupt: None,
            slice: None,
            data: data.into_iter().map(|(t, k, v)| ((t.to_string(), k), v)).collect(),
        }
    }

    /// The object at (`table`, `key`).
    pub fn object(&self, table: &str, key: &[u8]) -> Option<&Bytes> {
        self.data.get(&(table.to_string(), Bytes::copy_from_slice(key)))
    }
}

impl Ctx for MemoryCtx {
    fn immediate(&self) -> bool {
        true
    }

    fn args(&self) -> &Bytes {
        &self.args
    }
    fn tenant(&self) -> TenantId {
        self.tenant
    }
    fn now_us(&self) -> u64 {
        self.now_us
    }
    fn interrupt(&self) -> Option<crate::Interrupt> {
        self.interrupt.clone()
    }
    fn slice(&self) -> Option<crate::Slice> {
        self.slice.clone()
    }
    fn get<'a>(&'a mut self, table: &'a str, key: &'a [u8]) -> CtxFuture<'a, Option<Bytes>> {
        Box::pin(async move { Ok(self.object(table, key).cloned()) })
    }
    fn multiget<'a>(&'a mut self, table: &'a str, keys: &'a [Bytes]) -> CtxFuture<'a, Vec<Option<Bytes>>> {
        Box::pin(async move { Ok(keys.iter().map(|k| self.object(table, k).cloned()).collect()) })
    }
    fn put<'a>(&'a mut self, table: &'a str, key: &'a [u8], value: Bytes) -> CtxFuture<'a, ()> {
        Box::pin(async move {
            self.data
                .insert((table.to_string(), Bytes::copy_from_slice(key)), value);
            Ok(())
        })
    }
    fn delete<'a>(&'a mut self, table: &'a str, key: &'a [u8]) -> CtxFuture<'a, ()> {
        Box::pin(async move {
            self.data.remove(&(table.to_string(), Bytes::copy_from_slice(key)));
            Ok(())
        })
    }
    fn list<'a>(&'a mut self, tables: &'a [String]) -> CtxFuture<'a, Vec<Vec<Listed>>> {
        Box::pin(async move {
            Ok(tables
                .iter()
                .map(|table| {
                    self.data
                        .iter()
                        .filter(|((t, _), _)| t == table)
                        .map(|((_, key), value)| Listed::Value {
                            key: key.clone(),
                            value: value.clone(),
                        })
                        .collect()
                })
                .collect())
        })
    }
}

/// Polls a future that never waits (as a [`MemoryCtx`] invocation) to completion.
pub fn block_on<F: Future>(future: F) -> F::Output {
    let mut future = pin!(future);
    let mut cx = Context::from_waker(Waker::noop());
    loop {
        if let Poll::Ready(out) = future.as_mut().poll(&mut cx) {
            return out;
        }
    }
}
