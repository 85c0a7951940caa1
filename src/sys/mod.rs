//! What every stage stands on, knowing nothing of profiles: atomic writes
//! ([`atomic`]), directories opened without following links
//! ([`confined`]), opening files with another user's rights ([`creds`]),
//! the one refusal of links and special files
//! ([`file_kind`]), the one lock of a directory ([`lock`]), opening and
//! mapping inputs ([`input`]), SHA-256 ([`digest`]), overflow-safe sums of
//! periods ([`counts`]), durations, sizes and times as people type and read
//! them ([`units`]), progress bars and log lines ([`progress`]), the one
//! escape of control characters in names and paths ([`printable`]), the
//! one runner of external commands, with time limits ([`exec`]), a few
//! long tasks on a bounded number of threads ([`jobs`]), and Slurm's
//! commands ([`slurm`]).

pub mod atomic;
pub mod confined;
pub mod counts;
pub mod creds;
pub(crate) mod digest;
pub mod exec;
pub mod file_kind;
pub mod input;
pub(crate) mod jobs;
pub mod lock;
pub mod printable;
pub mod progress;
pub mod slurm;
pub mod units;
