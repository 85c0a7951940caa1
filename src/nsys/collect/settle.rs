//! Waiting for reports to settle: one poll every `--poll` (rescue, scan,
//! leave out the baseline's), and the decision, on bytes and modification
//! times over the settle window, never on file counts, that they are
//! complete, or why they are not when the deadline passes. Each poll logs
//! one status line.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use jobprof_capture_format::settle;

use super::rescue::{rescue, RESCUED_DIR};
use super::scan::{scan, unix_now, Baseline, Found, Stamp};
use super::status::{OverallStatus, Source};
use super::{CollectOptions, Result};
use crate::nsys::{compact_ranks, Log, ReportName};
use crate::sys::units::format_duration;

/// The collector's memory across polls: the stamps (the settling rule
/// shared with `jobprof-record sidecar --tool nsys`, in
/// [`jobprof_capture_format::settle`]) and the rescue warnings.
pub(super) struct Watch {
    stamps: settle::Watch<PathBuf>,
    /// Rescue destinations already reported as conflicting (logged once).
    pub(super) warned: BTreeSet<PathBuf>,
}

impl Watch {
    pub(super) fn new(now: Instant) -> Watch {
        Watch {
            stamps: settle::Watch::new(now),
            warned: BTreeSet::new(),
        }
    }

    /// Records the current stamps; returns the files that changed since
    /// the previous poll (none at the first).
    pub(super) fn update(
        &mut self,
        current: &[(PathBuf, Stamp)],
        now: Instant,
    ) -> BTreeSet<PathBuf> {
        self.stamps.update(current, now)
    }

    /// When anything last appeared, changed or vanished.
    pub(super) fn last_change(&self) -> Instant {
        self.stamps.last_change
    }

    pub(super) fn changed_at(&self, path: &Path) -> Option<Instant> {
        self.stamps.changed_at(&path.to_path_buf())
    }
}

/// One report as evaluated at a poll.
#[derive(Debug, Clone)]
pub(super) struct Current {
    pub(super) found: Found,
    pub(super) name: ReportName,
    pub(super) source: Source,
    pub(super) origin: Option<PathBuf>,
    /// When we last saw it (or its origin) change; `None`: not since the first poll.
    pub(super) changed_at: Option<Instant>,
}

impl Current {
    /// Changed within the last settle window: seen changing by us, or, if
    /// unchanged since the first poll, modified (by its mtime) that recently.
    pub(super) fn recently_changed(&self, now: Instant, settle: Duration) -> bool {
        let now_ns = (unix_now() * 1e9) as i64;
        settle::recently_changed(
            self.changed_at,
            self.found.stamp.mtime_ns,
            now,
            now_ns,
            settle,
        )
    }
}

/// Where the polls ended.
pub(super) struct Polled {
    /// The reports of the last poll.
    pub(super) reports: Vec<Current>,
    pub(super) status: OverallStatus,
    /// Expected ranks without a report at the last poll.
    pub(super) missing: Vec<u32>,
    /// Reports left out as the baseline's (at the last poll).
    pub(super) ignored: usize,
    /// Every report seen at any poll: one that vanished is recorded missing.
    pub(super) ever: BTreeMap<PathBuf, (PathBuf, ReportName, u64)>,
    /// The last scan was cut by the deadline.
    pub(super) cut: bool,
}

/// Polls every `opts.poll` until the reports have settled (every expected
/// rank present, none empty, none changed for `opts.settle`) or `deadline`
/// passes; logs one line a poll.
pub(super) fn poll_until_settled(
    opts: &CollectOptions,
    baseline: Option<&Baseline>,
    start: Instant,
    deadline: Instant,
    log: &Log,
) -> Result<Polled> {
    let mut watch = Watch::new(Instant::now());
    let mut poll_no = 0u64;
    let mut ever = BTreeMap::new();
    let mut last_whole: Option<(Vec<Current>, usize)> = None;
    loop {
        poll_no += 1;
        let looked = poll_reports(opts, baseline, &mut watch, deadline, log)?;
        let (changed, now, cut) = (looked.changed, looked.now, looked.cut);
        // A scan cut by the deadline saw only part of the tree: the last
        // whole poll (if any) is what is known, and nothing counts as
        // settled.
        let (reports, ignored) = match (cut, last_whole.take()) {
            (true, Some(whole)) => whole,
            (_, _) => (looked.reports, looked.ignored),
        };
        if cut {
            log.line(format!(
                "the scan of the report tree did not finish before the timeout ({}); \
                 recording what the last whole poll found",
                format_duration(opts.timeout)
            ));
        }
        remember(&mut ever, &reports);
        let quiet_for = now.duration_since(watch.last_change());
        let seen = PollSeen::of(&reports, &changed, quiet_for, opts, cut);
        log.tick(start.elapsed());
        log.line(seen.line(
            poll_no,
            opts.settle,
            deadline.saturating_duration_since(now),
        ));
        if !seen.settled && now < deadline && !cut {
            last_whole = Some((reports, ignored));
            std::thread::sleep(opts.poll.min(deadline - now));
            continue;
        }
        let status = seen.status();
        let PollSeen { missing, .. } = seen;
        return Ok(Polled {
            reports,
            status,
            missing,
            ignored,
            ever,
            cut,
        });
    }
}

/// Adds the reports of one poll to every report seen (a report that
/// vanishes later is recorded missing).
fn remember(ever: &mut BTreeMap<PathBuf, (PathBuf, ReportName, u64)>, reports: &[Current]) {
    for r in reports {
        ever.insert(
            r.found.path.clone(),
            (r.found.rel.clone(), r.name.clone(), r.found.stamp.bytes),
        );
    }
}

/// What one poll saw, for its status line.
struct PollSeen<'a> {
    reports: &'a [Current],
    missing: Vec<u32>,
    empty: usize,
    growing: usize,
    quiet_for: Duration,
    settled: bool,
}

impl<'a> PollSeen<'a> {
    /// What `reports` say after a poll: which expected ranks are missing,
    /// how many are empty or grew (`changed`), and whether they settled
    /// (quiet for the settle window, none missing or empty, the scan whole).
    fn of(
        reports: &'a [Current],
        changed: &BTreeSet<PathBuf>,
        quiet_for: Duration,
        opts: &CollectOptions,
        cut: bool,
    ) -> PollSeen<'a> {
        let present: BTreeSet<u32> = reports.iter().filter_map(|r| r.name.rank).collect();
        let missing: Vec<u32> = (0..opts.expect_ranks.unwrap_or(0))
            .filter(|r| !present.contains(r))
            .collect();
        let empty = reports.iter().filter(|r| r.found.stamp.bytes == 0).count();
        let growing = reports
            .iter()
            .filter(|r| {
                changed.contains(&r.found.path)
                    || r.origin.as_ref().is_some_and(|o| changed.contains(o))
            })
            .count();
        let sizes: Vec<u64> = reports.iter().map(|r| r.found.stamp.bytes).collect();
        let settled = !cut && missing.is_empty() && settle::settled(&sizes, quiet_for, opts.settle);
        PollSeen {
            reports,
            missing,
            empty,
            growing,
            quiet_for,
            settled,
        }
    }

    /// The collection's status when polling stops here.
    fn status(&self) -> OverallStatus {
        if self.settled {
            OverallStatus::Complete
        } else if !self.missing.is_empty() || self.reports.is_empty() {
            OverallStatus::MissingRanks
        } else if self.empty > 0 {
            OverallStatus::Empty
        } else {
            OverallStatus::Timeout
        }
    }

    /// `poll N: R report(s), SIZE, G growing, E empty[, missing ranks ...];
    /// settled | settles in ..., times out in ...` (`left`: until the
    /// deadline).
    fn line(&self, poll_no: u64, settle: Duration, left: Duration) -> String {
        let (reports, missing, empty) = (self.reports, &self.missing, self.empty);
        let total: u64 = reports.iter().map(|r| r.found.stamp.bytes).sum();
        let mut line = format!(
            "poll {poll_no}: {} report(s), {}, {} growing, {empty} empty",
            reports.len(),
            crate::sys::units::format_bytes(total),
            self.growing
        );
        if !missing.is_empty() {
            line.push_str(&format!(", missing ranks {}", compact_ranks(missing)));
        } else if reports.is_empty() {
            line.push_str(", no report yet");
        }
        if self.settled {
            line.push_str("; settled");
        } else if empty == 0 && missing.is_empty() && !reports.is_empty() {
            line.push_str(&format!(
                "; settles in {}, times out in {}",
                format_duration(settle - self.quiet_for),
                format_duration(left)
            ));
        } else {
            line.push_str(&format!("; times out in {}", format_duration(left)));
        }
        line
    }
}

/// What one poll found.
struct Looked {
    reports: Vec<Current>,
    /// How many were left out as the baseline's.
    ignored: usize,
    /// The paths that changed since the last poll.
    changed: BTreeSet<PathBuf>,
    /// When it looked.
    now: Instant,
    /// A scan was cut by the deadline: `reports` is what it found so far.
    cut: bool,
}

/// One poll: rescues what the ranks left in their runtime dirs, scans for
/// reports, leaves out the baseline's.
fn poll_reports(
    opts: &CollectOptions,
    baseline: Option<&Baseline>,
    watch: &mut Watch,
    deadline: Instant,
    log: &Log,
) -> Result<Looked> {
    let mut sources = Vec::new();
    let (origins, rescue_cut) = rescue(
        opts,
        baseline,
        &mut watch.warned,
        &mut sources,
        deadline,
        log,
    )?;
    let (found, cut) = if rescue_cut {
        (Vec::new(), true)
    } else {
        scan(&opts.report_root, &opts.runtime_dirs, Some(deadline))?
    };
    let all = found.len();
    let found: Vec<Found> = found
        .into_iter()
        .filter(|f| !baseline.is_some_and(|b| b.ignores(&f.path, f.stamp)))
        .collect();
    let ignored = all - found.len();
    let now = Instant::now();
    let mut stamps: Vec<(PathBuf, Stamp)> =
        found.iter().map(|f| (f.path.clone(), f.stamp)).collect();
    stamps.extend(sources);
    let changed = watch.update(&stamps, now);

    let reports: Vec<Current> = found
        .into_iter()
        .map(|f| {
            let rescued = f.rel.starts_with(RESCUED_DIR);
            let origin = origins.get(&f.path).cloned();
            let own = watch.changed_at(&f.path);
            let of_origin = origin.as_ref().and_then(|o| watch.changed_at(o));
            let changed_at = own.max(of_origin);
            Current {
                name: ReportName::parse(&f.path.file_name().unwrap_or_default().to_string_lossy()),
                source: if rescued {
                    Source::Rescued
                } else {
                    Source::Direct
                },
                origin,
                changed_at,
                found: f,
            }
        })
        .collect();
    Ok(Looked {
        reports,
        ignored,
        changed,
        now,
        cut,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn watch_counts_new_changed_and_vanished_files_as_changes() {
        // The rule itself is tested in jobprof_capture_format::settle; this
        // checks the collector's use of it.
        let t0 = Instant::now();
        let mut w = Watch::new(t0);
        let a = PathBuf::from("a");
        let s = Stamp {
            bytes: 1,
            mtime_ns: 1,
        };
        let t1 = t0 + Duration::from_secs(1);
        assert!(w.update(&[(a.clone(), s)], t1).is_empty());
        let t2 = t1 + Duration::from_secs(1);
        let touched = Stamp { mtime_ns: 2, ..s };
        assert_eq!(w.update(&[(a.clone(), touched)], t2).len(), 1);
        assert_eq!((w.last_change(), w.changed_at(&a)), (t2, Some(t2)));
        let t3 = t2 + Duration::from_secs(1);
        w.update(&[], t3);
        assert_eq!(w.last_change(), t3, "vanishing counts");
    }
}
