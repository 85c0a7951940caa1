//! Durations on the command line. The parser and the formatter live in
//! [`crate::units`] (one parser for every option); re-exported here for the
//! nsys code and `jobprof nsys`.

pub use crate::units::{format_duration, parse_duration};
