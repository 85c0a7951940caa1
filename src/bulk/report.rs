//! The outcome of a `jobprof reprocess` run: one [`Outcome`] per directory
//! of this task's share, and the summary table printed at the end.

use super::Split;
use crate::capture::{Outcome, Status};
use crate::error::ExitCode;

/// The outcome of a run.
#[derive(Debug, Clone, Default)]
pub struct Report {
    /// Result directories found in the trees.
    pub result_dirs: usize,
    /// Captures found in the trees (all tasks).
    pub total: usize,
    /// This task's share (`None` = all).
    pub split: Option<Split>,
    /// One entry per directory of this task's share, sorted by path.
    pub outcomes: Vec<Outcome>,
    /// True for `--dry-run`: outcomes say what would be done.
    pub dry_run: bool,
}

impl Report {
    /// How many outcomes have `status`.
    pub fn count(&self, status: Status) -> usize {
        self.outcomes.iter().filter(|o| o.status == status).count()
    }

    /// 0 when everything was processed or already complete; 2 when
    /// nothing could be done (each directory refused); 1 when
    /// any was refused, not rendered or failed beside others done
    /// ([`crate::capture::run_exit_code`]).
    pub fn exit_code(&self) -> ExitCode {
        crate::capture::run_exit_code(&self.outcomes)
    }

    /// The summary table printed at the end of a run.
    pub fn table(&self) -> String {
        let mut s = String::new();
        let share = match self.split {
            Some(sp) => format!(
                ", array task {} of {}: {} of them",
                sp.index,
                sp.count,
                self.outcomes.len()
            ),
            None => String::new(),
        };
        s.push_str(&format!(
            "jobprof reprocess{}: {} capture(s) in {} result dir(s){share}\n",
            if self.dry_run { " --dry-run" } else { "" },
            self.total,
            self.result_dirs,
        ));
        let rows: [(&str, usize); 5] = if self.dry_run {
            [
                ("to do", self.count(Status::Processed)),
                ("skipped", self.count(Status::Skipped)),
                ("refused", self.count(Status::Refused)),
                ("not rendered", 0),
                ("failed", self.count(Status::Failed)),
            ]
        } else {
            [
                ("processed", self.count(Status::Processed)),
                ("skipped", self.count(Status::Skipped)),
                ("refused", self.count(Status::Refused)),
                ("not rendered", self.count(Status::RenderRefused)),
                ("failed", self.count(Status::Failed)),
            ]
        };
        for (name, n) in rows {
            if name == "not rendered" && n == 0 {
                continue;
            }
            s.push_str(&format!("  {name:<12} {n:>6}\n"));
        }
        for (status, title) in [
            (Status::Refused, "refused"),
            (Status::RenderRefused, "not rendered"),
            (Status::Failed, "failed"),
        ] {
            let list: Vec<&Outcome> = self
                .outcomes
                .iter()
                .filter(|o| o.status == status)
                .collect();
            if list.is_empty() {
                continue;
            }
            s.push_str(&format!("{title}:\n"));
            for o in list {
                s.push_str(&format!(
                    "  {}: {}\n",
                    crate::sys::progress::printable(&o.dir),
                    o.message
                ));
            }
        }
        s
    }
}
