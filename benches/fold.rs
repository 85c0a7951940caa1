//! Criterion benchmark of the folder: jobprof (1 thread and all cores) and
//! the inferno library (1 and N threads) on the same input, in the same run,
//! with `Throughput::Bytes` so criterion reports MB/s.
//!
//! Input: every perf script text under `fixtures/` (and FlameGraph's example
//! from `../shared/compat` when present), concatenated and repeated to about
//! 32 MiB; `JOBPROF_BENCH_INPUT=PATH` benchmarks a file of your own instead.
//! Run with `cargo bench --bench fold`. The end-to-end, peak-RSS comparison
//! against the `inferno-collapse-perf` binary on >= 1 GB is
//! `benches/compare.sh`.

// criterion_group! defines an undocumented public function.
#![allow(missing_docs)]

use std::path::{Path, PathBuf};

use criterion::{criterion_group, criterion_main, BenchmarkId, Criterion, Throughput};
use jobprof::text::fold::{Compat, Folder, Options};

const TARGET_BYTES: usize = 32 << 20;

fn load(path: &Path) -> Vec<u8> {
    let raw = std::fs::read(path).unwrap();
    let name = path.to_string_lossy();
    if name.ends_with(".zst") {
        zstd::decode_all(&raw[..]).unwrap()
    } else if name.ends_with(".gz") {
        let mut out = Vec::new();
        std::io::Read::read_to_end(&mut flate2::read::MultiGzDecoder::new(&raw[..]), &mut out)
            .unwrap();
        out
    } else {
        raw
    }
}

fn input() -> Vec<u8> {
    if let Some(p) = std::env::var_os("JOBPROF_BENCH_INPUT") {
        return load(Path::new(&p));
    }
    let root = PathBuf::from(env!("CARGO_MANIFEST_DIR"));
    let mut parts = Vec::new();
    let mut dirs = vec![root.join("fixtures")];
    let example = root.join("../shared/compat/flamegraph-57207af/example-perf-stacks.txt.gz");
    if example.exists() {
        parts.push(load(&example));
    }
    while let Some(d) = dirs.pop() {
        let Ok(rd) = std::fs::read_dir(&d) else {
            continue;
        };
        for e in rd.flatten() {
            let p = e.path();
            let n = p.file_name().unwrap().to_string_lossy().into_owned();
            if n.ends_with(".txt") || n.ends_with(".txt.zst") || n.ends_with(".txt.gz") {
                parts.push(load(&p));
            }
        }
    }
    assert!(!parts.is_empty(), "no perf script text found in fixtures/");
    let mut data = Vec::with_capacity(TARGET_BYTES + (1 << 20));
    while data.len() < TARGET_BYTES {
        for p in &parts {
            data.extend_from_slice(p);
            if !data.ends_with(b"\n\n") {
                data.extend_from_slice(b"\n\n");
            }
        }
    }
    data
}

fn inferno_fold(data: &[u8], threads: usize) -> usize {
    use inferno::collapse::Collapse;
    let mut o = inferno::collapse::perf::Options::default();
    o.nthreads = threads;
    let mut out = Vec::new();
    inferno::collapse::perf::Folder::from(o)
        .collapse(data, &mut out)
        .unwrap();
    out.len()
}

fn bench_fold(c: &mut Criterion) {
    let data = input();
    let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
    let mut g = c.benchmark_group("fold");
    g.throughput(Throughput::Bytes(data.len() as u64));
    g.sample_size(10);
    for threads in [1, cores] {
        for (name, compat) in [
            ("jobprof", Compat::None),
            ("jobprof-compat", Compat::Inferno),
        ] {
            let folder = Folder::new({
                let mut o = Options::default();
                o.threads = threads;
                o.compat = compat;
                o
            });
            g.bench_with_input(BenchmarkId::new(name, threads), &data, |b, d| {
                b.iter(|| folder.fold_bytes(d).stacks.len())
            });
        }
        g.bench_with_input(BenchmarkId::new("inferno", threads), &data, |b, d| {
            b.iter(|| inferno_fold(d, threads))
        });
    }
    g.finish();
}

criterion_group!(benches, bench_fold);
criterion_main!(benches);
