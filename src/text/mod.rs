//! `perf script` text into stacks: the line grammar, nom parsers for header
//! and frame lines that every reader here calls ([`perf_script`]), the
//! byte-level scanning they stand on ([`bytes`]), where samples end
//! ([`boundary`]), folding into collapsed
//! stacks ([`fold`]) with what `--compat inferno` turns off ([`compat`]), the
//! sample-by-sample walk for outputs that need more than folded stacks
//! ([`samples`]), `perf script` text parsed once into the sample model
//! ([`script_samples`]), and the off-CPU accounting of switch records ([`offcpu`]).
//! This stage reads text and returns values; where they are written is
//! [`crate::output`]'s business.

pub mod boundary;
pub(crate) mod bytes;
pub mod compat;
pub mod fold;
pub mod offcpu;
pub mod perf_script;
pub mod samples;
pub mod script_samples;
