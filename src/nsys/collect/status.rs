//! The words a collection's outcome is told in, shared by settling (which
//! decides them) and the manifest (which records them): where each report
//! came from, each report's state, and the collection's overall status.

use serde::{Deserialize, Serialize};

/// Where a collected report came from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Source {
    /// Written by the rank straight into the report root.
    Direct,
    /// Copied out of a runtime workspace into `DIR/rescued/`.
    Rescued,
}

/// The state of one report (or expected rank) in the manifest.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum ReportStatus {
    /// Non-empty and unchanged for the whole settle window.
    Ok,
    /// 0 bytes.
    Empty,
    /// Its size or mtime changed within the last settle window.
    Incomplete,
    /// An expected rank without any report.
    Missing,
}

/// The overall outcome of a collection.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum OverallStatus {
    /// Settled and complete: exit 0.
    Complete,
    /// Reports were still changing at the timeout: exit 3.
    Timeout,
    /// Some reports stayed empty: exit 4.
    Empty,
    /// Expected ranks (or any report at all) never appeared: exit 5.
    MissingRanks,
}
