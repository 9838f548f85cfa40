//! One way to spread independent simulations over threads: `f(0..n)` on a few workers,
//! results in index order, so the output never depends on the thread count.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Mutex;

/// `f(i)` for every `i` in `0..n`, on up to `threads` scoped workers, in index order.
pub fn map_indexed<T: Send>(n: usize, threads: usize, f: impl Fn(usize) -> T + Sync) -> Vec<T> {
    let next = AtomicUsize::new(0);
    let results: Mutex<Vec<Option<T>>> = Mutex::new((0..n).map(|_| None).collect());
    std::thread::scope(|s| {
        for _ in 0..threads.clamp(1, n.max(1)) {
            s.spawn(|| loop {
                let i = next.fetch_add(1, Ordering::Relaxed);
                if i >= n {
                    break;
                }
                let r = f(i);
                // Invariant: a worker never panics while holding the lock, so it is never
                // poisoned.
                results.lock().expect("parallel results lock")[i] = Some(r);
            });
        }
    });
    results
        .into_inner()
        .expect("parallel results lock")
        .into_iter()
        .map(|r| r.expect("every index was processed"))
        .collect()
}

#[cfg(test)]
mod tests {
    #[test]
    fn results_come_back_in_index_order_whatever_the_threads() {
        for threads in [1, 2, 7] {
            assert_eq!(
                super::map_indexed(10, threads, |i| i * i),
                (0..10).map(|i| i * i).collect::<Vec<_>>()
            );
        }
        assert!(super::map_indexed(0, 2, |i| i).is_empty());
    }
}
