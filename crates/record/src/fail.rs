//! The one error type of the recorder: a message for the user and the exit
//! status it maps to. Only `main.rs` prints it and exits.

use std::fmt;

/// A failure with its exit status (1 failure, 2 usage, 3 timeout).
#[derive(Debug)]
pub struct Fail {
    /// Process exit status.
    pub code: u8,
    /// What went wrong and what to do about it.
    pub message: String,
}

impl Fail {
    /// The work failed (exit 1).
    pub fn failed(message: String) -> Fail {
        Fail { code: 1, message }
    }

    /// Bad usage or bad input (exit 2).
    pub fn usage(message: String) -> Fail {
        Fail { code: 2, message }
    }

    /// Waited too long (exit 3).
    pub fn timeout(message: String) -> Fail {
        Fail { code: 3, message }
    }
}

impl fmt::Display for Fail {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.message)
    }
}
