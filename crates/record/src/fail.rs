//! The one error type of the recorder: a message for the user and the exit
//! status it maps to. Only `main.rs` prints it and exits.

use std::fmt;

/// A failure with its exit status (1 failure, 2 usage, 3 timeout, 4 no live
/// sidecar, 5 the capture ended but is invalid).
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

    /// No sidecar is alive to answer (exit 4).
    pub fn no_sidecar(message: String) -> Fail {
        Fail { code: 4, message }
    }

    /// The capture ended but is invalid; its data is kept (exit 5).
    pub fn invalid(message: String) -> Fail {
        Fail { code: 5, message }
    }
}

impl fmt::Display for Fail {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.message)
    }
}
