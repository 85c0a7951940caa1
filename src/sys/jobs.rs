//! A few long, independent tasks (one per file, say) on a bounded number of
//! threads, the results in the items' order: a scoped rayon pool.

use rayon::prelude::*;

/// `f` of each item, on up to `jobs` threads at once (at least one, at
/// most one per item), in the items' order. Where no pool can be started
/// (threads exhausted), the items are mapped on this thread instead.
pub(crate) fn map_jobs<T: Sync, R: Send>(
    items: &[T],
    jobs: usize,
    f: impl Fn(&T) -> R + Sync,
) -> Vec<R> {
    let threads = jobs.clamp(1, items.len().max(1));
    match rayon::ThreadPoolBuilder::new().num_threads(threads).build() {
        // An indexed parallel iterator collects in order.
        Ok(pool) => pool.install(|| items.par_iter().map(&f).collect()),
        Err(_) => items.iter().map(f).collect(),
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn map_jobs_keeps_the_order_whatever_the_threads() {
        let items: Vec<u64> = (0..100).collect();
        for jobs in [0, 1, 3, 200] {
            let out = super::map_jobs(&items, jobs, |&i| {
                // Later items finish first.
                std::thread::sleep(std::time::Duration::from_micros(100 - i));
                i * i
            });
            assert_eq!(out, items.iter().map(|i| i * i).collect::<Vec<_>>());
        }
        assert!(super::map_jobs(&[] as &[u8], 4, |_| 0).is_empty());
    }

    #[test]
    fn map_jobs_runs_on_as_many_threads_as_asked() {
        use std::collections::HashSet;
        use std::sync::Mutex;
        let seen = Mutex::new(HashSet::new());
        let items: Vec<u32> = (0..64).collect();
        super::map_jobs(&items, 3, |_| {
            std::thread::sleep(std::time::Duration::from_millis(1));
            seen.lock().unwrap().insert(std::thread::current().id());
        });
        let n = seen.lock().unwrap().len();
        assert!((1..=3).contains(&n), "{n} threads");
    }
}
