//! A pool of long-lived threads that attach perf shards in parallel: one
//! per core, and at least [`MIN_THREADS`]. The threads live as long as the
//! sidecar: perf is started with `PR_SET_PDEATHSIG`, which fires when the
//! *thread* that started it exits, so perf must never be started from a
//! thread that ends before the capture does.
//!
//! Why more threads than cores: a perf process attaching is not only busy
//! on a CPU, it competes for one with the worker's threads (the scheduler
//! shares a CPU out by thread), and it waits on the worker's memory map
//! lock while it reads `/proc/PID/maps`. Against a switch-heavy worker
//! (hundreds of runnable threads) one perf process per core got a sliver
//! of the machine each and 16 shards took 36-39 s to arm on 2 cores; 16 at
//! once took 13 s (`benches/arm.sh`, docs/pre-arm.md). Against an idle
//! worker it costs nothing: the perf processes share the cores as before.

use std::sync::mpsc::{channel, Receiver, Sender};
use std::sync::{Arc, Mutex, OnceLock};

type Job = Box<dyn FnOnce() + Send>;

struct Pool {
    jobs: Mutex<Sender<Job>>,
}

/// Fewest threads in the pool, whatever the cores.
pub const MIN_THREADS: usize = 16;

fn pool() -> &'static Pool {
    static POOL: OnceLock<Pool> = OnceLock::new();
    POOL.get_or_init(|| {
        let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
        let threads = cores.max(MIN_THREADS);
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
