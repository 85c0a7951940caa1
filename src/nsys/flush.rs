//! The teardown flush of a profiled job: stop the Nsight sessions, take a
//! baseline, signal the connector steps so their ranks write reports, then
//! collect them.
//!
//! External programs (`nsight-slurm`, `squeue`, `scancel`) are run through
//! small argv builders (never a shell string) with a time limit; each
//! command line and its result is logged. A failing command is logged and the
//! sequence goes on: skipping the later steps would lose reports, and the
//! collection decides the outcome. This module does not kill jobs or steps
//! beyond the one `SIGTERM` per connector step.

use std::ffi::OsString;
use std::io::Read;
use std::path::{Path, PathBuf};
use std::process::{Command, ExitStatus, Stdio};
use std::time::{Duration, Instant};

use super::collect::{collect_logged, Baseline, CollectOptions, Collection};
use super::{Error, Log};
use crate::progress::Progress;

/// The step name `nsight-slurm` gives its connector steps.
pub const DEFAULT_CONNECTOR_STEP_NAME: &str = "nsight-slurm-connector";

/// Seconds `nsight-slurm stop` may take to stop the sessions (its own limit).
pub const STOP_TIMEOUT_S: u32 = 30;

/// What `flush` does.
#[derive(Debug, Clone)]
pub struct FlushOptions {
    /// The Slurm job ID.
    pub job: String,
    /// Steps with this name are sent `SIGTERM`.
    pub connector_step_name: String,
    /// The `nsight-slurm` executable (or its install home, whose
    /// `bin/nsight-slurm` is used); `None` skips `nsight-slurm stop`.
    pub nsight_slurm: Option<PathBuf>,
    /// `squeue` to run (a name looked up on `PATH`, or a path).
    pub squeue: PathBuf,
    /// `scancel` to run.
    pub scancel: PathBuf,
    /// How the reports are then collected.
    pub collect: CollectOptions,
}

impl FlushOptions {
    /// Flush options with the default connector step name and `squeue` /
    /// `scancel` from `PATH`.
    pub fn new(job: impl Into<String>, collect: CollectOptions) -> Self {
        FlushOptions {
            job: job.into(),
            connector_step_name: DEFAULT_CONNECTOR_STEP_NAME.to_string(),
            nsight_slurm: None,
            squeue: PathBuf::from("squeue"),
            scancel: PathBuf::from("scancel"),
            collect,
        }
    }
}

/// One external command: program and arguments, no shell involved.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ExternalCommand {
    /// The program (a name looked up on `PATH`, or a path).
    pub program: PathBuf,
    /// Its arguments.
    pub args: Vec<OsString>,
    /// How long it may run before it is killed.
    pub limit: Duration,
}

/// What an external command did.
#[derive(Debug)]
pub struct CommandOutcome {
    /// Exit status, `None` when it could not start or was killed at its limit.
    pub status: Option<ExitStatus>,
    /// Its standard output.
    pub stdout: String,
    /// Its standard error.
    pub stderr: String,
    /// Why it did not run to completion, if it did not.
    pub failure: Option<String>,
}

impl CommandOutcome {
    /// True when it ran and exited 0.
    pub fn success(&self) -> bool {
        self.status.is_some_and(|s| s.success())
    }
}

impl ExternalCommand {
    fn new(program: &Path, args: &[&str], limit: Duration) -> Self {
        ExternalCommand {
            program: program.to_path_buf(),
            args: args.iter().map(OsString::from).collect(),
            limit,
        }
    }

    /// `nsight-slurm stop --job JOB --timeout 30`.
    pub fn nsight_slurm_stop(nsight_slurm: &Path, job: &str) -> Self {
        let timeout = STOP_TIMEOUT_S.to_string();
        ExternalCommand::new(
            nsight_slurm,
            &["stop", "--job", job, "--timeout", &timeout],
            Duration::from_secs(u64::from(STOP_TIMEOUT_S) + 30),
        )
    }

    /// `squeue -s -j JOB -h -o %i|%j`: the job's steps as `id|name` lines.
    pub fn squeue_steps(squeue: &Path, job: &str) -> Self {
        ExternalCommand::new(
            squeue,
            &["-s", "-j", job, "-h", "-o", "%i|%j"],
            Duration::from_secs(60),
        )
    }

    /// `scancel --signal=TERM STEP`.
    pub fn scancel_term(scancel: &Path, step: &str) -> Self {
        ExternalCommand::new(scancel, &["--signal=TERM", step], Duration::from_secs(60))
    }

    /// The command line as a shell would need it typed (for logs only).
    pub fn display(&self) -> String {
        std::iter::once(self.program.as_os_str())
            .chain(self.args.iter().map(|a| a.as_os_str()))
            .map(|a| shell_quote(&a.to_string_lossy()))
            .collect::<Vec<_>>()
            .join(" ")
    }

    /// Runs it with its output captured, killing it at its time limit.
    pub fn run(&self) -> CommandOutcome {
        let mut child = match Command::new(&self.program)
            .args(&self.args)
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
        {
            Ok(c) => c,
            Err(e) => {
                return CommandOutcome {
                    status: None,
                    stdout: String::new(),
                    stderr: String::new(),
                    failure: Some(format!("could not start {}: {e}", self.program.display())),
                }
            }
        };
        let drain = |r: Option<Box<dyn Read + Send>>| {
            std::thread::spawn(move || {
                let mut buf = Vec::new();
                if let Some(mut r) = r {
                    let _ = r.read_to_end(&mut buf);
                }
                String::from_utf8_lossy(&buf).into_owned()
            })
        };
        let out = drain(
            child
                .stdout
                .take()
                .map(|s| Box::new(s) as Box<dyn Read + Send>),
        );
        let err = drain(
            child
                .stderr
                .take()
                .map(|s| Box::new(s) as Box<dyn Read + Send>),
        );
        let started = Instant::now();
        let mut failure = None;
        let status = loop {
            match child.try_wait() {
                Ok(Some(s)) => break Some(s),
                Ok(None) if started.elapsed() >= self.limit => {
                    let _ = child.kill();
                    let _ = child.wait();
                    failure = Some(format!(
                        "killed after {}s without finishing",
                        self.limit.as_secs()
                    ));
                    break None;
                }
                Ok(None) => std::thread::sleep(Duration::from_millis(20)),
                Err(e) => {
                    failure = Some(format!("waiting for it failed: {e}"));
                    break None;
                }
            }
        };
        CommandOutcome {
            status,
            stdout: out.join().unwrap_or_default(),
            stderr: err.join().unwrap_or_default(),
            failure,
        }
    }

    /// Runs it, logging the command line before and the result after.
    pub fn run_logged(&self, log: &Log) -> CommandOutcome {
        log.line(format!("running: {}", self.display()));
        let outcome = self.run();
        let name = self.program.display();
        let detail = |s: &str| {
            let s = s.trim();
            if s.is_empty() {
                String::new()
            } else {
                format!(": {}", s.lines().take(5).collect::<Vec<_>>().join(" | "))
            }
        };
        match (&outcome.failure, outcome.status) {
            (Some(why), _) => log.line(format!("{name} failed: {why}")),
            (None, Some(s)) if s.success() => {
                log.line(format!("{name} exited 0{}", detail(&outcome.stdout)))
            }
            (None, Some(s)) => log.line(format!(
                "{name} failed ({s}){}",
                detail(if outcome.stderr.trim().is_empty() {
                    &outcome.stdout
                } else {
                    &outcome.stderr
                })
            )),
            (None, None) => {}
        }
        outcome
    }
}

/// Quotes one word for a POSIX shell when it needs it.
pub fn shell_quote(word: &str) -> String {
    let plain = !word.is_empty()
        && word
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b"@%+=:,./-_".contains(&b));
    if plain {
        word.to_string()
    } else {
        format!("'{}'", word.replace('\'', r"'\''"))
    }
}

/// Parses `squeue -s -h -o "%i|%j"` output into `(step id, step name)`.
/// Lines without a `|` are not steps (squeue prints nothing else with `-h`,
/// but a wrapper might) and are left out.
pub fn parse_squeue_steps(text: &str) -> Vec<(String, String)> {
    text.lines()
        .filter_map(|line| {
            let (id, name) = line.trim().split_once('|')?;
            let id = id.trim();
            (!id.is_empty()).then(|| (id.to_string(), name.trim().to_string()))
        })
        .collect()
}

/// `nsight-slurm` given as the executable or as its install home.
fn nsight_slurm_executable(p: &Path) -> PathBuf {
    if p.is_dir() {
        p.join("bin").join("nsight-slurm")
    } else {
        p.to_path_buf()
    }
}

fn validate_job(job: &str) -> Result<(), Error> {
    let ok = !job.is_empty()
        && job.bytes().next().is_some_and(|b| b.is_ascii_digit())
        && job
            .bytes()
            .all(|b| b.is_ascii_digit() || b"_+.".contains(&b));
    if ok {
        Ok(())
    } else {
        Err(Error::Usage(format!(
            "--job `{job}` is not a Slurm job ID (digits, e.g. 123456 or an array task 123456_7)"
        )))
    }
}

/// Runs the teardown sequence and collects the reports.
///
/// Order: `nsight-slurm stop --job J --timeout 30` (when the wrapper is
/// given), baseline, `squeue -s -j J -h -o "%i|%j"`, `scancel --signal=TERM`
/// for every step named like the connector, then [`collect`] with the
/// baseline (reports that existed before, unchanged, are ignored, except
/// those of this job).
pub fn flush(opts: &FlushOptions, progress: &Progress) -> Result<Collection, Error> {
    validate_job(&opts.job)?;
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
        ExternalCommand::nsight_slurm_stop(&exe, &opts.job).run_logged(&log);
    }
    let baseline = Baseline::take(&opts.collect)?.keep_job(&opts.job);
    log.line(format!(
        "baseline: {} report(s) already present are ignored while unchanged \
         (except job {}'s own)",
        baseline.len(),
        opts.job
    ));
    let listing = ExternalCommand::squeue_steps(&opts.squeue, &opts.job).run_logged(&log);
    let steps: Vec<String> = if listing.success() {
        parse_squeue_steps(&listing.stdout)
            .into_iter()
            .filter(|(_, name)| *name == opts.connector_step_name)
            .map(|(id, _)| id)
            .collect()
    } else {
        Vec::new()
    };
    if steps.is_empty() {
        log.line(format!(
            "no running step named {} in job {}; collecting whatever the ranks write",
            opts.connector_step_name, opts.job
        ));
    }
    for step in &steps {
        ExternalCommand::scancel_term(&opts.scancel, step).run_logged(&log);
    }
    let result = collect_logged(&opts.collect, Some(baseline), &log);
    log.finish();
    result
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn argv_builders_match_the_documented_commands() {
        let stop = ExternalCommand::nsight_slurm_stop(Path::new("/opt/ns/bin/nsight-slurm"), "77");
        assert_eq!(
            stop.display(),
            "/opt/ns/bin/nsight-slurm stop --job 77 --timeout 30"
        );
        let sq = ExternalCommand::squeue_steps(Path::new("squeue"), "77");
        assert_eq!(
            sq.args,
            ["-s", "-j", "77", "-h", "-o", "%i|%j"].map(OsString::from)
        );
        assert_eq!(sq.display(), "squeue -s -j 77 -h -o '%i|%j'");
        let sc = ExternalCommand::scancel_term(Path::new("scancel"), "77.3");
        assert_eq!(sc.args, ["--signal=TERM", "77.3"].map(OsString::from));
    }

    #[test]
    fn parses_squeue_step_lines() {
        let out = "77.0|bash\n77.3|nsight-slurm-connector\n\n77.4|a|b\nnoise\n|x\n";
        assert_eq!(
            parse_squeue_steps(out),
            vec![
                ("77.0".to_string(), "bash".to_string()),
                ("77.3".to_string(), "nsight-slurm-connector".to_string()),
                ("77.4".to_string(), "a|b".to_string()),
            ]
        );
    }

    #[test]
    fn quotes_only_when_needed() {
        assert_eq!(shell_quote("abc-1.2/x"), "abc-1.2/x");
        assert_eq!(shell_quote("a b"), "'a b'");
        assert_eq!(shell_quote("it's"), r"'it'\''s'");
        assert_eq!(shell_quote(""), "''");
    }

    #[test]
    fn job_ids_are_checked() {
        for ok in ["1", "123456", "123_7", "5+1"] {
            validate_job(ok).unwrap();
        }
        for bad in ["", "-1", "abc", "1 2", "1;rm"] {
            assert!(validate_job(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn commands_that_cannot_start_or_fail_are_reported() {
        let c = ExternalCommand::new(
            Path::new("/nonexistent/jobprof-none"),
            &[],
            Duration::from_secs(5),
        );
        let o = c.run();
        assert!(!o.success());
        assert!(o.failure.unwrap().contains("could not start"));
        let f = ExternalCommand::new(Path::new("false"), &[], Duration::from_secs(5)).run();
        assert!(f.status.is_some() && !f.success());
    }
}
