//! A pool of long-lived threads, one per core, that attach perf shards in
//! parallel. The threads live as long as the sidecar: perf is started with
//! `PR_SET_PDEATHSIG`, which fires when the *thread* that started it exits,
//! so perf must never be started from a thread that ends before the
//! capture does.

use std::sync::mpsc::{channel, Receiver, Sender};
use std::sync::{Arc, Mutex, OnceLock};

type Job = Box<dyn FnOnce() + Send>;

struct Pool {
    jobs: Mutex<Sender<Job>>,
}

fn pool() -> &'static Pool {
    static POOL: OnceLock<Pool> = OnceLock::new();
    POOL.get_or_init(|| {
        let threads = std::thread::available_parallelism().map_or(1, |n| n.get());
        let (tx, rx) = channel::<Job>();
        let rx = Arc::new(Mutex::new(rx));
        for i in 0..threads {
            let rx = Arc::clone(&rx);
            // A thread that cannot be created only makes the pool smaller.
            let _ = std::thread::Builder::new()
                .name(format!("attach-{i}"))
                .spawn(move || worker(&rx));
        }
        Pool {
            jobs: Mutex::new(tx),
        }
    })
}

fn worker(rx: &Mutex<Receiver<Job>>) {
    loop {
        let job = match rx.lock() {
            Ok(rx) => rx.recv(),
            Err(_) => return,
        };
        match job {
            Ok(job) => job(),
            Err(_) => return,
        }
    }
}

/// Runs `f` on every item on the pool's threads, as many at once as there
/// are threads, and returns the results in the order they finished. `f`
/// runs on the calling thread when the pool cannot take jobs.
pub fn run_all<T, R>(items: Vec<T>, f: impl Fn(T) -> R + Send + Sync + 'static) -> Vec<R>
where
    T: Send + 'static,
    R: Send + 'static,
{
    let f = Arc::new(f);
    let (tx, rx) = channel::<R>();
    let n = items.len();
    for item in items {
        let (f, tx) = (Arc::clone(&f), tx.clone());
        let job: Job = Box::new(move || {
            let _ = tx.send(f(item));
        });
        let refused = match pool().jobs.lock() {
            Ok(jobs) => jobs.send(job).err().map(|e| e.0),
            Err(_) => Some(job),
        };
        if let Some(job) = refused {
            job();
        }
    }
    drop(tx);
    // Ends early only if a job panicked (its sender is dropped unsent).
    rx.iter().take(n).collect()
}
