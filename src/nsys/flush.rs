//! The teardown flush of a profiled job: stop the Nsight sessions, take a
//! baseline, signal the connector steps so their ranks write reports, then
//! collect them.
//!
//! External programs (`nsight-slurm`, and `squeue`/`scancel` through the
//! argv builders of [`crate::sys::slurm`], with its time limit) are run
//! through [`crate::sys::exec`] from argv vectors (never a shell string)
//! with a time limit; each command line and its result is logged. A failing command is logged and the sequence goes on: skipping the
//! later steps would lose reports, and the collection decides the outcome. This module does not kill jobs or steps
//! beyond the one `SIGTERM` per connector step.

use std::ffi::OsString;
use std::path::{Path, PathBuf};
use std::time::Duration;

use super::collect::{collect_logged, Baseline, CollectOptions, Collection};
use super::wrapper::Wrapper;
use super::{Error, Log};
use crate::sys::exec::ExternalCommand;
use crate::sys::progress::Progress;
use crate::sys::slurm::{self, JobId, Slurm, Step};

/// The step name `nsight-slurm` gives its connector steps.
pub const DEFAULT_CONNECTOR_STEP_NAME: &str = "nsight-slurm-connector";

/// Seconds `nsight-slurm stop` may take to stop the sessions (its own limit).
pub const STOP_TIMEOUT_S: u32 = 30;

/// What `flush` does.
#[derive(Debug, Clone)]
#[non_exhaustive]
pub struct FlushOptions {
    /// The Slurm job (or array task).
    pub job: JobId,
    /// Steps with this name are sent `SIGTERM`.
    pub connector_step_name: String,
    /// The `nsight-slurm` executable (or its install home, whose
    /// `bin/nsight-slurm` is used); `None` skips `nsight-slurm stop`.
    pub nsight_slurm: Option<PathBuf>,
    /// How wrapper calls run (environment, working directory, and the
    /// `nsight-slurm.out` log) when the flush is part of a set-up run's
    /// teardown; `None` runs `nsight-slurm stop` plainly.
    pub wrapper: Option<Wrapper>,
    /// Slurm's commands (`squeue`, `scancel` from `PATH` by default).
    pub slurm: Slurm,
    /// How the reports are then collected.
    pub collect: CollectOptions,
}

impl FlushOptions {
    /// Flush options with the default connector step name and Slurm's
    /// commands from `PATH`.
    pub fn new(job: JobId, collect: CollectOptions) -> Self {
        FlushOptions {
            job,
            connector_step_name: DEFAULT_CONNECTOR_STEP_NAME.to_string(),
            nsight_slurm: None,
            wrapper: None,
            slurm: Slurm::new(),
            collect,
        }
    }
}

/// `nsight-slurm stop --job JOB --timeout 30`, allowed 30 s more than
/// its own limit.
pub fn nsight_slurm_stop(nsight_slurm: &Path, job: &JobId) -> ExternalCommand {
    let mut argv = vec![nsight_slurm.as_os_str().to_owned()];
    argv.extend(
        [
            "stop",
            "--job",
            job.as_str(),
            "--timeout",
            &STOP_TIMEOUT_S.to_string(),
        ]
        .map(OsString::from),
    );
    ExternalCommand::new(argv, Duration::from_secs(u64::from(STOP_TIMEOUT_S) + 30))
}

/// `nsight-slurm` given as the executable or as its install home.
fn nsight_slurm_executable(p: &Path) -> PathBuf {
    if p.is_dir() {
        p.join("bin").join("nsight-slurm")
    } else {
        p.to_path_buf()
    }
}

/// Runs the teardown sequence and collects the reports.
///
/// Order: `nsight-slurm stop --job J --timeout 30` (when the wrapper is
/// given), baseline, `squeue -s -j J -h -o "%i|%j"`, `scancel --signal=TERM`
/// for every step named like the connector, then [`fn@super::collect::collect`] with the
/// baseline (reports that existed before, unchanged, are ignored, except
/// those of this job).
pub fn flush(opts: &FlushOptions, progress: &dyn Progress) -> Result<Collection, Error> {
    if !opts.collect.report_root.is_dir() {
        return Err(Error::Usage(format!(
            "--report-root {}: not an existing directory; it must be the shared directory \
             the ranks write reports to",
            opts.collect.report_root.display()
        )));
    }
    let log = Log::new(
        progress,
        opts.collect.timeout,
        &format!("flushing job {}", opts.job),
    );
    if let Some(ns) = &opts.nsight_slurm {
        let exe = nsight_slurm_executable(ns);
        let stop = nsight_slurm_stop(&exe, &opts.job);
        match &opts.wrapper {
            Some(w) => {
                let stop = stop.with_env(&w.env(), Some(&w.log_dir));
                if let (_, Some(e)) = w.run(&stop, &log) {
                    log.line(format!("warning: {e}"));
                }
            }
            None => {
                let _ = log.run(&stop);
            }
        }
    }
    let job = numeric_job(&opts.slurm, &opts.job, &log);
    let baseline = Baseline::take(&opts.collect)?.keep_job(job.as_str());
    log.line(format!(
        "baseline: {} report(s) already present are ignored while unchanged \
         (except job {job}'s own)",
        baseline.len(),
    ));
    let steps = connector_steps(&opts.slurm, &job, &opts.connector_step_name, &log);
    if steps.is_empty() {
        log.line(format!(
            "no running step named {} in job {job}; collecting whatever the ranks write",
            opts.connector_step_name
        ));
    }
    for step in &steps {
        let scancel = opts
            .slurm
            .command(opts.slurm.scancel_step_signal_argv(step, "TERM"));
        let _ = log.run(&scancel);
    }
    let result = collect_logged(&opts.collect, Some(baseline), &log);
    log.finish();
    result
}

/// An array task (`1234_5`) runs under its own numeric job ID, which is
/// what its report names and step IDs carry; ask `squeue` for it. Plain
/// IDs are returned as they are; when the lookup fails, the ID as given.
fn numeric_job(slurm: &Slurm, job: &JobId, log: &Log) -> JobId {
    if !job.as_str().contains('_') {
        return job.clone();
    }
    let out = log.run(&slurm.command(slurm.squeue_job_argv(job)));
    let found = out
        .ok()
        .filter(|o| o.success())
        .and_then(|o| slurm::parse_jobs(&o.stdout).ok())
        .and_then(|jobs| jobs.into_iter().next())
        .map(|j| j.id);
    match found {
        Some(id) => {
            log.line(format!("array task {job} runs as job {id}"));
            id
        }
        None => {
            log.line(format!(
                "could not resolve array task {job} to its job ID; using it as given"
            ));
            job.clone()
        }
    }
}

/// The job's steps named `name`, from `squeue -s -j JOB -h -o "%i|%j"`;
/// none when squeue fails or prints something unexpected (logged).
fn connector_steps(slurm: &Slurm, job: &JobId, name: &str, log: &Log) -> Vec<Step> {
    let out = match log.run(&slurm.command(slurm.squeue_steps_argv(job))) {
        Ok(out) if out.success() => out,
        _ => return Vec::new(),
    };
    match slurm::parse_steps(&out.stdout) {
        Ok(steps) => steps.into_iter().filter(|s| s.name == name).collect(),
        Err((what, line)) => {
            log.line(format!(
                "squeue printed {line:?}, expected {what}; no step is signalled"
            ));
            Vec::new()
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn argv_builders_match_the_documented_commands() {
        let job = JobId::parse("77").unwrap();
        let stop = nsight_slurm_stop(Path::new("/opt/ns/bin/nsight-slurm"), &job);
        assert_eq!(
            stop.display(),
            "/opt/ns/bin/nsight-slurm stop --job 77 --timeout 30"
        );
        let slurm = Slurm::new();
        let sq = slurm.command(slurm.squeue_steps_argv(&job));
        assert_eq!(sq.display(), "squeue -s -j 77 -h -o '%i|%j'");
        assert_eq!(sq.limit, slurm::COMMAND_LIMIT);
        let step = Step {
            id: "77.3".into(),
            name: DEFAULT_CONNECTOR_STEP_NAME.into(),
        };
        assert_eq!(
            slurm.scancel_step_signal_argv(&step, "TERM"),
            ["scancel", "--signal=TERM", "77.3"].map(OsString::from)
        );
    }
}
