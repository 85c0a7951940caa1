//! jobprof's integration tests: one binary (ripgrep style), one module per
//! area. Modules that need real components (perf, Slurm) say so loudly when
//! those are missing, and fail under CI (`CI=true`).

mod arm64;
mod attacks;
mod attacks_sidecar;
mod cache;
mod cli;
mod demangle;
mod diff_noise;
mod docs;
mod engines;
mod exit_codes;
mod faults;
mod fold;
mod fold_props;
mod jit;
mod job;
mod layout;
mod legacy;
mod names;
mod native;
mod nsys;
mod offcpu;
mod pages;
mod perf_data;
mod pprof;
mod process;
mod record;
mod render;
mod report;
mod reprocess;
mod slurm;
mod slurm_e2e;
mod symbols;
mod timeline;
mod trend;
mod trend_synthetic;
mod util;
