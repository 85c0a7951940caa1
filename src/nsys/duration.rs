//! Durations on the command line. The parser and the formatter live in
//! [`crate::sys::units`] (one parser for every option); re-exported here for the
//! nsys code and `jobprof nsys`.

pub use crate::sys::units::{format_duration, parse_duration};
