//! Symbolizing a capture's `perf.data` shards into `perf script` text: by
//! running `perf script` ([`perf`]), whole or in time slices, or with the
//! native reader and unwinder ([`native`]), which reads the records and the
//! capture's symbol snapshot itself. JIT-compiled frames are named from the
//! capture's own perf maps and jitdump files ([`jit`]); the build ids of the
//! DSOs the samples hit come from the shards' headers ([`build_ids`]), and
//! kernel frames are named from the table [`kernel`] picks. Which files
//! name each DSO (the snapshot's, this host's debug files, all by build
//! id) is [`sources`]' one answer for both symbolizers. The
//! text this stage prints is what [`crate::text`] folds.

pub mod build_ids;
pub mod jit;
pub mod kernel;
pub mod native;
pub mod perf;
pub mod sample;
pub mod sources;
