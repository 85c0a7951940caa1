//! What a capture's stacks become on disk: flamegraphs and their pages
//! ([`render`]), `summary.json` ([`summary`]), the text report
//! ([`report`]), the pprof profile ([`pprof`]), one profile per process
//! or thread ([`split`]) and the compressed text archive ([`archive`]). Each writer takes folded stacks or `perf script`
//! text from [`crate::text`] and writes through [`crate::sys::atomic`].

pub mod archive;
pub mod pprof;
pub mod render;
pub mod report;
pub mod split;
pub mod summary;
