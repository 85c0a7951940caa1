//! What every stage stands on, knowing nothing of profiles: atomic writes
//! ([`atomic`]), directories opened without following links
//! ([`confined`]), opening and mapping inputs ([`input`]), SHA-256
//! ([`digest`]), overflow-safe sums of periods ([`counts`]), durations and
//! sizes as people type and read them ([`units`]), progress bars and log
//! lines ([`progress`]), and Slurm's commands ([`slurm`]).

pub mod atomic;
pub mod confined;
pub mod counts;
pub(crate) mod digest;
pub mod input;
pub mod progress;
pub mod slurm;
pub mod units;
