//! A Rust worker for the native symbolizer's dwarf tests (tests/native.rs):
//! THREADS threads (default 3) plus the main thread loop over stages that
//! spend their time in the program itself (compute_stage), in the standard
//! library (sorting with a comparison closure, formatting floats) and in
//! the kernel (writes to /dev/null, getppid), built without frame pointers
//! so that only dwarf unwinding recovers its stacks.
//!
//!   rust_worker [THREADS]
//!
//! Runs until killed. Build: rustc --edition 2021 -C opt-level=2 -g
//! rust_worker.rs -o rust_worker

use std::fs::File;
use std::hint::black_box;
use std::io::Write;

#[inline(never)]
fn compute_stage(seed: u64) -> u64 {
    let mut x = seed;
    for _ in 0..200_000 {
        x = x.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
        x ^= x >> 17;
    }
    x
}

#[inline(never)]
fn sort_stage(seed: u64) -> u64 {
    let mut v: Vec<u64> = (0..4096u64)
        .map(|i| (i ^ seed).wrapping_mul(0x9e3779b97f4a7c15))
        .collect();
    v.sort_by(|a, b| black_box(a.rotate_left(7)).cmp(&b.rotate_left(7)));
    v[7]
}

#[inline(never)]
fn format_stage(seed: u64) -> u64 {
    let mut n = 0;
    for i in 0..2000u64 {
        let s = format!("{} row {:.3}", i ^ seed, i as f64 * 1.5);
        n += s.len() as u64;
    }
    n
}

#[inline(never)]
fn io_stage(out: &mut File) -> u64 {
    let buf = [b'x'; 4096];
    let mut n = 0;
    for _ in 0..50 {
        if out.write_all(&buf).is_ok() {
            n += 1;
        }
        n += u64::from(std::os::unix::process::parent_id());
    }
    n
}

#[inline(never)]
fn worker(id: u64) {
    let mut out = File::create("/dev/null").expect("/dev/null");
    let mut sink = id;
    loop {
        sink = sink.wrapping_add(compute_stage(sink));
        sink = sink.wrapping_add(sort_stage(sink));
        sink = sink.wrapping_add(format_stage(sink));
        sink = sink.wrapping_add(io_stage(&mut out));
        black_box(sink);
    }
}

fn main() {
    let threads: u64 = std::env::args()
        .nth(1)
        .and_then(|a| a.parse().ok())
        .unwrap_or(3);
    for t in 0..threads {
        std::thread::spawn(move || worker(t + 1));
    }
    println!("ready");
    worker(0);
}
