//! Off-CPU and wall-clock profiles of captures recorded with
//! `jobprof-record sidecar --off-cpu` (`sched:sched_switch` with call chains
//! and `--switch-events` next to the samples; docs/off-cpu.md).
//!
//! Each shard's samples, switch and task records go, in record order, to
//! a per-thread state machine ([`account`]): those the native symbolizer
//! read in the symbolizing pass from its log ([`log`]), kept until the
//! window is known; a shard it did not read as `perf script
//! --show-switch-events --show-task-events` text ([`parse`]). The machine
//! attributes every gap between
//! a switch-out and the thread's next switch-in to the switch-out's stack,
//! cut to the capture's window (the first and last sample of its shards).
//! [`Profiles`] turns the result into `offcpu.folded` (ns off the CPU, a
//! leaf frame naming the state), `wallclock.folded` (the sampling event's
//! periods, ns for the software clocks, plus the off-CPU ns: a thread's
//! total is its time in the window) and the per-thread totals for
//! `summary.json`; [`thread_table`] formats those for `report.txt`.

pub mod account;
pub mod log;
pub mod parse;

use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{ExitStatus, Stdio};

use serde::Serialize;

pub use account::SampleOf;
pub use account::{Accounts, Finished, State, ThreadTotals};
pub use log::ShardLog;

use crate::symbolize::perf::{PerfTool, ScriptOptions};

/// Why the off-CPU pass over a capture failed, or found no window.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// `perf script` could not be started on a shard.
    #[error("{}: cannot run perf script: {source}", data.display())]
    Start {
        /// The shard.
        data: PathBuf,
        /// What went wrong.
        #[source]
        source: std::io::Error,
    },
    /// Waiting for `perf script` failed.
    #[error("{0}")]
    Wait(#[source] std::io::Error),
    /// Its output could not be read.
    #[error("{}: reading perf script: {source}", data.display())]
    Read {
        /// The shard.
        data: PathBuf,
        /// What went wrong.
        #[source]
        source: std::io::Error,
    },
    /// `perf script` failed.
    #[error("{}: perf script (off-CPU pass) failed: {status}", data.display())]
    Failed {
        /// The shard.
        data: PathBuf,
        /// How it ended.
        status: ExitStatus,
    },
    /// No shard has a sample.
    #[error("no shard has samples")]
    NoSamples,
    /// A shard needs `perf script` (the native symbolizer cannot read it,
    /// or was not asked to) and no `perf` is usable.
    #[error("{}: needs perf script ({why}), and {perf}", data.display())]
    NoPerf {
        /// The shard.
        data: PathBuf,
        /// Why the native symbolizer does not read it.
        why: String,
        /// Why no `perf` is usable.
        perf: String,
    },
}

/// The tracepoint `--off-cpu` records at each switch-out.
pub const TRACEPOINT: &str = crate::symbolize::sample::SWITCH_EVENT;
/// The off-CPU profile's file name.
pub const OFFCPU_FOLDED: &str = "offcpu.folded";
/// The wall-clock profile's file name.
pub const WALLCLOCK_FOLDED: &str = "wallclock.folded";

/// Whether a shard was recorded with `--off-cpu` (its events include the
/// switch tracepoint). Unreadable files say no; the main pass reports them.
pub fn recorded(data: &Path) -> bool {
    // The header is checked before linux-perf-data allocates what it says.
    let Ok((_file, map)) = crate::symbolize::native::open_checked(data) else {
        return false;
    };
    let Ok(r) =
        linux_perf_data::PerfFileReader::parse_file(crate::sys::input::MappedReader::new(&map))
    else {
        return false;
    };
    r.perf_file
        .event_attributes()
        .iter()
        .any(|a| a.name() == Some(TRACEPOINT))
}

/// The `perf script` arguments of the off-CPU pass over one shard.
pub fn script_argv(data: &Path, opts: &ScriptOptions) -> Vec<std::ffi::OsString> {
    let mut a = crate::symbolize::perf::script_argv(data, opts, None);
    for extra in ["--ns", "--show-switch-events", "--show-task-events"] {
        a.push(extra.into());
    }
    a
}

/// Reads perf-script text into `acc`.
pub fn read_text(text: impl BufRead, acc: &mut Accounts) -> std::io::Result<()> {
    let mut p = parse::LineParser::default();
    let mut emit = |e| acc.event(e);
    let mut text = text;
    let mut buf = Vec::new();
    loop {
        buf.clear();
        if text.read_until(b'\n', &mut buf)? == 0 {
            break;
        }
        let line = String::from_utf8_lossy(&buf);
        p.line(line.trim_end_matches(['\n', '\r']), &mut emit);
    }
    p.finish(&mut emit);
    Ok(())
}

/// Reads one shard's records with `perf script`, streaming, into its
/// accounts (to be finished with the capture's window).
pub fn analyze_shard(
    perf: &PerfTool,
    opts: &ScriptOptions,
    data: &Path,
    event: Option<&str>,
) -> Result<Accounts, Error> {
    let mut child = perf
        .command(&script_argv(data, opts))
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .map_err(|source| Error::Start {
            data: data.to_path_buf(),
            source,
        })?;
    let mut acc = Accounts::new(event);
    let out = child.stdout.take().expect("stdout is piped");
    let read = read_text(BufReader::with_capacity(1 << 20, out), &mut acc);
    let status = child.wait().map_err(Error::Wait)?;
    read.map_err(|source| Error::Read {
        data: data.to_path_buf(),
        source,
    })?;
    if !status.success() {
        return Err(Error::Failed {
            data: data.to_path_buf(),
            status,
        });
    }
    Ok(acc)
}

/// How the off-CPU accounting reads one shard of a capture.
#[derive(Debug)]
pub enum ShardInput {
    /// Read in the symbolizing pass ([`ShardLog`]) into these accounts;
    /// with the first and last sample's time from the shard's header,
    /// when it has them.
    Read(Box<Accounts>, Option<(u64, u64)>),
    /// With `perf script` (the native symbolizer did not read it), with
    /// why the native symbolizer did not, when it was meant to.
    Perf(Option<String>),
}

/// One shard with `perf script`, when `perf` is usable; with a warning
/// when the native symbolizer was meant to read it.
fn analyze_with_perf(
    perf: Perf<'_>,
    opts: &ScriptOptions,
    data: &Path,
    why: Option<&str>,
    event: Option<&str>,
) -> (Result<Accounts, Error>, Option<String>) {
    let warn = why.map(|why| {
        format!(
            "off-CPU pass: perf script reads {} instead of the native symbolizer: {why}",
            data.display()
        )
    });
    let r = match perf.get() {
        Ok(perf) => analyze_shard(perf, opts, data, event),
        Err(e) => Err(Error::NoPerf {
            data: data.to_path_buf(),
            why: why.unwrap_or("--symbolizer perf").to_string(),
            perf: e.to_string(),
        }),
    };
    (r, warn)
}

/// The `perf` the off-CPU pass runs where the native symbolizer does not
/// read a shard, or why there is none (waited for only then).
pub type Perf<'a> = &'a crate::symbolize::perf::PerfProbe;

/// The capture's window: the first and last sample over its shards (a
/// shard's header's times where it has them, else those of the samples
/// read), from each shard's accounts and header times.
pub fn window<'a>(
    shards: impl IntoIterator<Item = (&'a Accounts, Option<(u64, u64)>)>,
) -> Option<(u64, u64)> {
    let mut w: Option<(u64, u64)> = None;
    for (acc, header) in shards {
        let read = acc.sample_times();
        // The header's times, and any sample outside them (a damaged
        // header must not leave a counted span outside the window).
        for (a, b) in header.into_iter().chain(read) {
            w = Some(w.map_or((a, b), |(x, y)| (x.min(a), y.max(b))));
        }
    }
    w
}

/// Totals over all threads, in ns. The job views read `summary.json`
/// back into this same type (fields missing from older files are 0).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, serde::Deserialize)]
#[serde(default)]
pub struct AllThreads {
    /// Running.
    pub on_cpu_ns: u64,
    /// Preempted (`R`).
    pub runnable_ns: u64,
    /// Sleeping (`S`).
    pub sleeping_ns: u64,
    /// Uninterruptible (`D`).
    pub uninterruptible_ns: u64,
    /// Other states.
    pub other_ns: u64,
    /// Unknown (blocked since before the window, or unrecorded).
    pub unknown_ns: u64,
}

/// The `off_cpu` section of `summary.json`.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct Summary {
    /// Window length in ns (first to last sample of the capture).
    pub window_ns: u64,
    /// Threads seen.
    pub thread_count: usize,
    /// `sched:sched_switch` samples (switch-outs with stacks).
    pub switch_samples: u64,
    /// `PERF_RECORD_SWITCH` records (ins and outs).
    pub switch_records: u64,
    /// All threads together.
    pub totals: AllThreads,
    /// Per thread, by tid.
    pub threads: Vec<ThreadTotals>,
    /// Why nothing was drawn, when nothing was.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub not_drawn: Option<String>,
}

/// The two profiles and the summary of one capture.
#[derive(Debug, Default)]
pub struct Profiles {
    /// Off-CPU ns per stack.
    pub off_cpu: Vec<(String, u64)>,
    /// On-CPU periods plus off-CPU ns per stack.
    pub wall_clock: Vec<(String, u64)>,
    /// For `summary.json`.
    pub summary: Summary,
    /// Shards the native symbolizer was meant to read and `perf script`
    /// read instead, and why.
    pub warnings: Vec<String>,
}

impl Profiles {
    /// From the merged result of every shard.
    pub fn from_finished(f: Finished) -> Profiles {
        let mut totals = AllThreads::default();
        for t in &f.threads {
            totals.on_cpu_ns += t.on_cpu_ns;
            totals.runnable_ns += t.runnable_ns;
            totals.sleeping_ns += t.sleeping_ns;
            totals.uninterruptible_ns += t.uninterruptible_ns;
            totals.other_ns += t.other_ns;
            totals.unknown_ns += t.unknown_ns;
        }
        let not_drawn = (f.switch_records == 0 && f.switch_samples == 0).then(|| {
            "the capture has no switch records or sched:sched_switch samples \
             (recorded without --off-cpu, or perf lost them): no off-CPU time to draw"
                .to_string()
        });
        let mut wall: std::collections::HashMap<String, u64> = f.on_cpu;
        for (k, v) in &f.off_cpu {
            *wall.entry(k.clone()).or_default() += v;
        }
        let sorted = |m: std::collections::HashMap<String, u64>| {
            let mut v: Vec<(String, u64)> = m.into_iter().filter(|(_, c)| *c > 0).collect();
            v.sort_unstable();
            v
        };
        let damaged = (f.unreadable_switches > 0).then(|| {
            format!(
                "{} of {} sched:sched_switch samples have no readable fields (no \
                 prev_state): the tracepoint's format in the capture puts them outside \
                 the record (damaged?); their off-CPU time is counted as unknown",
                f.unreadable_switches, f.switch_samples
            )
        });
        let summary = Summary {
            window_ns: f.end - f.start,
            thread_count: f.threads.len(),
            switch_samples: f.switch_samples,
            switch_records: f.switch_records,
            totals,
            threads: f.threads,
            not_drawn: not_drawn.clone(),
        };
        if not_drawn.is_some() {
            return Profiles {
                summary,
                ..Profiles::default()
            };
        }
        Profiles {
            off_cpu: sorted(f.off_cpu),
            wall_clock: sorted(wall),
            summary,
            warnings: damaged.into_iter().collect(),
        }
    }
}

/// The per-thread totals as a text table (for `report.txt`): one line per
/// thread, busiest wall time first, ms and % of the window.
pub fn thread_table(s: &Summary) -> String {
    let ms = |ns: u64| ns as f64 / 1e6;
    let pct = |ns: u64| {
        if s.window_ns == 0 {
            0.0
        } else {
            100.0 * ns as f64 / s.window_ns as f64
        }
    };
    let mut out = format!(
        "Off-CPU: window {:.1} ms, {} threads, {} switch-outs\n\
         {:>8}  {:<16} {:>12} {:>12} {:>12} {:>12} {:>12}\n",
        ms(s.window_ns),
        s.thread_count,
        s.switch_samples,
        "tid",
        "comm",
        "on-CPU",
        "runnable",
        "sleeping S",
        "blocked D",
        "other/unkn.",
    );
    let mut rows: Vec<&ThreadTotals> = s.threads.iter().collect();
    rows.sort_by(|a, b| b.on_cpu_ns.cmp(&a.on_cpu_ns).then(a.tid.cmp(&b.tid)));
    for t in rows {
        let cell = |ns: u64| format!("{:.1}ms {:>3.0}%", ms(ns), pct(ns));
        out.push_str(&format!(
            "{:>8}  {:<16} {:>12} {:>12} {:>12} {:>12} {:>12}\n",
            t.tid,
            t.comm.chars().take(16).collect::<String>(),
            cell(t.on_cpu_ns),
            cell(t.runnable_ns),
            cell(t.sleeping_ns),
            cell(t.uninterruptible_ns),
            cell(t.other_ns + t.unknown_ns),
        ));
    }
    out
}

/// The off-CPU accounting over the shards of a capture recorded with
/// `--off-cpu`: each read in the symbolizing pass, or now with `perf
/// script` (`jobs` at a time; each shard the native symbolizer was meant
/// to read a warning in [`Profiles::warnings`]; `perf` is needed only
/// then), then finished with the capture's window.
pub fn analyze_capture(
    perf: Perf<'_>,
    opts: &ScriptOptions,
    shards: Vec<(PathBuf, ShardInput)>,
    event: Option<&str>,
    jobs: usize,
) -> Result<Profiles, Error> {
    let (read, by_perf): (Vec<_>, Vec<_>) = shards
        .into_iter()
        .partition(|(_, input)| matches!(input, ShardInput::Read(..)));
    let ran = crate::sys::jobs::map_jobs(&by_perf, jobs, |(d, input)| {
        let why = match input {
            ShardInput::Perf(why) => why.as_deref(),
            ShardInput::Read(..) => None,
        };
        analyze_with_perf(perf, opts, d, why, event)
    });
    let mut accounts = Vec::with_capacity(read.len() + ran.len());
    for (_, input) in read {
        if let ShardInput::Read(acc, header) = input {
            accounts.push((*acc, header));
        }
    }
    let mut warnings = Vec::new();
    for (r, warn) in ran {
        warnings.extend(warn);
        accounts.push((r?, None));
    }
    let Some(window) = window(accounts.iter().map(|(a, h)| (a, *h))) else {
        let why = Error::NoSamples;
        let summary = Summary {
            not_drawn: Some(format!(
                "no sample and no switch-out in the capture ({why}): no off-CPU time to draw"
            )),
            ..Summary::default()
        };
        return Ok(Profiles {
            summary,
            warnings,
            ..Profiles::default()
        });
    };
    let mut all = Finished {
        start: window.0,
        end: window.1,
        ..Finished::default()
    };
    for (acc, _) in accounts {
        all.merge(acc.finish(window));
    }
    let mut p = Profiles::from_finished(all);
    warnings.append(&mut p.warnings);
    p.warnings = warnings;
    Ok(p)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_thread_table_lists_threads_busiest_first_with_shares_of_the_window() {
        let t = |tid, on, s| ThreadTotals {
            tid,
            comm: format!("w{tid}"),
            on_cpu_ns: on,
            sleeping_ns: s,
            ..ThreadTotals::default()
        };
        let s = Summary {
            window_ns: 1_000_000_000,
            thread_count: 2,
            switch_samples: 9,
            threads: vec![t(1, 100_000_000, 900_000_000), t(2, 600_000_000, 0)],
            ..Summary::default()
        };
        let table = thread_table(&s);
        let lines: Vec<&str> = table.lines().collect();
        assert!(lines[0].contains("window 1000.0 ms, 2 threads, 9 switch-outs"));
        assert!(lines[2].trim_start().starts_with("2  w2"), "{table}");
        assert!(lines[3].contains("100.0ms  10%") && lines[3].contains("900.0ms  90%"));
    }

    #[test]
    fn switch_outs_without_readable_fields_are_a_warning() {
        use super::parse::Event;
        let mut a = Accounts::new(Some("cpu-clock"));
        for (time, prev_state) in [(10, Some("S")), (20, None), (30, Some(""))] {
            a.event(Event::Sample {
                tid: 7,
                comm: "w".into(),
                time,
                event: TRACEPOINT.into(),
                period: 1,
                prev_state: prev_state.map(String::from),
                stack: vec!["f".into()],
            });
        }
        let p = Profiles::from_finished(a.finish((0, 100)));
        assert_eq!(p.warnings.len(), 1, "{:?}", p.warnings);
        assert!(
            p.warnings[0].starts_with("2 of 3 sched:sched_switch samples have no readable fields"),
            "{}",
            p.warnings[0]
        );
        let mut fine = Accounts::new(None);
        fine.event(Event::Sample {
            tid: 7,
            comm: "w".into(),
            time: 10,
            event: TRACEPOINT.into(),
            period: 1,
            prev_state: Some("R+".into()),
            stack: vec![],
        });
        assert!(Profiles::from_finished(fine.finish((0, 100)))
            .warnings
            .is_empty());
    }

    #[test]
    fn a_capture_without_switches_is_not_drawn() {
        let p = Profiles::from_finished(Finished {
            start: 0,
            end: 10,
            ..Finished::default()
        });
        assert!(p.summary.not_drawn.is_some());
        assert!(p.off_cpu.is_empty() && p.wall_clock.is_empty());
    }
}
