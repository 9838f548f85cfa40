//! Loaded libraries in this process, by tenant and the hash of their text, each with idle
//! VMs to run its functions in. Keyed by tenant as well because a VM keeps whatever its
//! library's code keeps between calls (Redis says functions must not, but nothing stops
//! them): two tenants loading the same text must not share that. By hash, because a text
//! is only ever found by its own hash, whichever side of the process asks.

use ferry_proto::TenantId;
use std::collections::HashMap;
use std::sync::{Arc, Mutex, MutexGuard, OnceLock};

use crate::vm::Vm;
use crate::LuaError;

/// Libraries kept loaded; past this, one is forgotten (and loaded again when called).
pub const MAX_CACHED_LIBRARIES: usize = 64;

/// Idle VMs kept per library. A storage node interleaves many invocations per worker, so
/// this must cover the calls of one library in flight at once: a VM dropped at check-in is
/// compiled again at the next check-out (a VM holding a small library is ~100–200 KiB).
pub const MAX_IDLE_VMS_PER_LIBRARY: usize = 128;

/// One library's text and its idle VMs.
pub struct Loaded {
    code: String,
    idle: Mutex<Vec<Vm>>,
}

fn lock<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    // A panic elsewhere cannot leave these maps half-updated: every update is one call.
    mutex.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
}

/// A library's place in the cache: its tenant and the hash of its text.
type Key = (TenantId, String);

fn libraries() -> &'static Mutex<HashMap<Key, Arc<Loaded>>> {
    static LIBRARIES: OnceLock<Mutex<HashMap<Key, Arc<Loaded>>>> = OnceLock::new();
    LIBRARIES.get_or_init(Default::default)
}

/// The library of `tenant` whose text hashes to `hash`, if loaded here.
pub fn find(tenant: TenantId, hash: &str) -> Option<Arc<Loaded>> {
    lock(libraries()).get(&(tenant, hash.to_string())).cloned()
}

/// Remembers `tenant`'s `code` (whose hash is `hash`), with `vm` as its first idle VM if
/// given.
pub fn remember(tenant: TenantId, hash: &str, code: String, vm: Option<Vm>) -> Arc<Loaded> {
    let key = (tenant, hash.to_string());
    let loaded = Arc::new(Loaded {
        code,
        idle: Mutex::new(vm.into_iter().collect()),
    });
    let mut libraries = lock(libraries());
    if libraries.len() >= MAX_CACHED_LIBRARIES && !libraries.contains_key(&key) {
        if let Some(victim) = libraries.keys().next().cloned() {
            libraries.remove(&victim);
        }
    }
    Arc::clone(libraries.entry(key).or_insert(loaded))
}

impl Loaded {
    /// An idle VM, or a new one.
    pub fn checkout(&self) -> Result<Vm, LuaError> {
        if let Some(vm) = lock(&self.idle).pop() {
            return Ok(vm);
        }
        Vm::load(&self.code).map(|(vm, _, _)| vm)
    }

    /// Gives a VM back after a call (dropped if it hit a limit or enough are idle).
    pub fn checkin(&self, vm: Vm) {
        if vm.poisoned() {
            return;
        }
        let mut idle = lock(&self.idle);
        if idle.len() < MAX_IDLE_VMS_PER_LIBRARY {
            idle.push(vm);
        }
    }
}
