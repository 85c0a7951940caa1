//! How the `nsight-slurm` wrapper is called: where it is, the environment
//! and working directory of every call, and the call log.
//!
//! Every wrapper call runs through [`crate::sys::exec`] (an argv, no shell,
//! a time limit) in `log_dir`, with `SLURM_SUBMIT_DIR=<log_dir>` and
//! `SLURMD_NODENAME=<head node IPv4>` (see [`mod@super::setup`] for why).
//! Each call, its output and its result are appended to
//! `<log_dir>/nsight-slurm.out`. This module decides nothing about which
//! calls to make: set-up, teardown and flush do.

use std::ffi::OsString;
use std::fs::{self, OpenOptions};
use std::io::Write as _;
use std::net::Ipv4Addr;
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};
use std::time::Duration;

use super::plan::Plan;
use super::{Error, Log};
use crate::sys::exec::{self, ExternalCommand, Output};
use crate::sys::units::utc_timestamp;

/// The default time limit of one wrapper call.
pub const DEFAULT_CALL_LIMIT: Duration = Duration::from_secs(120);

/// How the wrapper is called: where it is, the run it serves and the head
/// node's address.
#[derive(Debug, Clone)]
pub struct Wrapper {
    /// `<home>/bin/nsight-slurm`.
    pub exe: PathBuf,
    /// The run's log directory (working directory and `SLURM_SUBMIT_DIR`).
    pub log_dir: PathBuf,
    /// `SLURMD_NODENAME` of every call.
    pub head_ip: Ipv4Addr,
    /// The time limit of one call.
    pub limit: Duration,
}

impl Wrapper {
    /// The wrapper of a planned `nsight-slurm` run; an error naming the
    /// path when `<home>/bin/nsight-slurm` is not an executable file.
    pub fn of(plan: &Plan, head_ip: Ipv4Addr, limit: Duration) -> Result<Wrapper, Error> {
        let (Some(exe), Some(dirs)) = (plan.wrapper(), plan.dirs.as_ref()) else {
            return Err(Error::Usage(format!(
                "type = \"{}\" has no nsight-slurm wrapper to set up or tear down; \
                 only type = \"nsight-slurm\" needs it",
                plan.kind.name()
            )));
        };
        check_executable(&exe)?;
        Ok(Wrapper {
            exe,
            log_dir: dirs.log_dir.clone(),
            head_ip,
            limit,
        })
    }

    /// `<log_dir>/nsight-slurm.out`.
    pub fn log_path(&self) -> PathBuf {
        self.log_dir.join(super::plan::WRAPPER_LOG)
    }

    /// The variables every call runs with.
    pub fn env(&self) -> Vec<(OsString, OsString)> {
        vec![
            ("SLURM_SUBMIT_DIR".into(), self.log_dir.clone().into()),
            ("SLURMD_NODENAME".into(), self.head_ip.to_string().into()),
        ]
    }

    /// `argv` as a wrapper call: its environment, working directory and limit.
    pub fn command(&self, argv: &[String]) -> ExternalCommand {
        ExternalCommand::new(argv.iter().map(OsString::from).collect(), self.limit)
            .with_env(&self.env(), Some(&self.log_dir))
    }

    /// Runs a wrapper call, logging it to the status lines and appending
    /// it with its output to `nsight-slurm.out`. The outcome, and an error
    /// when the log could not be written.
    pub fn run(
        &self,
        cmd: &ExternalCommand,
        log: &Log,
    ) -> (Result<Output, exec::Error>, Option<Error>) {
        let outcome = log.run(cmd);
        let written = append_call(&self.log_path(), cmd, &outcome).err();
        (outcome, written)
    }

    /// Runs a wrapper call that must succeed.
    pub(super) fn run_checked(&self, argv: &[String], log: &Log) -> Result<(), Error> {
        let cmd = self.command(argv);
        let (outcome, log_error) = self.run(&cmd, log);
        if let Some(e) = log_error {
            return Err(e);
        }
        let why = match outcome {
            Ok(out) if out.success() => return Ok(()),
            Ok(out) => {
                let said = if out.stderr.trim().is_empty() {
                    out.stdout.trim()
                } else {
                    out.stderr.trim()
                };
                format!(
                    "{}: {}",
                    out.status,
                    said.lines().last().unwrap_or("no output")
                )
            }
            Err(e) => e.to_string(),
        };
        Err(Error::Wrapper {
            command: cmd.display(),
            why,
            log: self.log_path(),
        })
    }
}

/// An error naming `exe` when it is not an executable file.
pub(super) fn check_executable(exe: &Path) -> Result<(), Error> {
    use std::os::unix::fs::PermissionsExt;
    match fs::metadata(exe) {
        Ok(m) if m.is_file() && m.permissions().mode() & 0o111 != 0 => Ok(()),
        Ok(_) => Err(Error::Usage(format!(
            "{}: not an executable file; `home` must be the nsight-slurm install directory \
             (its launcher is <home>/bin/nsight-slurm)",
            exe.display()
        ))),
        Err(e) => Err(Error::Usage(format!(
            "{}: {e}; nsight-slurm is not installed there: `home` must be its install \
             directory (its launcher is <home>/bin/nsight-slurm)",
            exe.display()
        ))),
    }
}

/// Appends one call, its output and its result to the wrapper log (never
/// through a symlink).
fn append_call(
    path: &Path,
    cmd: &ExternalCommand,
    outcome: &Result<Output, exec::Error>,
) -> Result<(), Error> {
    let env: Vec<String> = cmd
        .env
        .iter()
        .map(|(k, v)| {
            format!(
                "{}={}",
                k.to_string_lossy(),
                exec::shell_quote(&v.to_string_lossy())
            )
        })
        .collect();
    let mut text = format!(
        "[{}] $ {} {}\n",
        utc_timestamp(),
        env.join(" "),
        cmd.display()
    );
    let (stdout, stderr) = match outcome {
        Ok(out) => (out.stdout.as_str(), out.stderr.as_str()),
        Err(e) => e.partial_output(),
    };
    for part in [stdout, stderr] {
        if !part.is_empty() {
            text.push_str(part);
            if !part.ends_with('\n') {
                text.push('\n');
            }
        }
    }
    let result = match outcome {
        Ok(out) => out.status.to_string(),
        Err(why) => format!("failed: {why}"),
    };
    text.push_str(&format!("[{}] {result}\n", utc_timestamp()));
    let mut f = OpenOptions::new()
        .append(true)
        .create(true)
        .mode(0o644)
        .custom_flags(libc::O_NOFOLLOW)
        .open(path)
        .map_err(|e| Error::io(path, e))?;
    f.write_all(text.as_bytes()).map_err(|e| Error::io(path, e))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_wrapper_log_gets_the_call_its_output_and_result() {
        let d = tempfile::tempdir().unwrap();
        let log = d.path().join("nsight-slurm.out");
        let cmd = ExternalCommand::new(
            vec![
                "sh".into(),
                "-c".into(),
                "echo out; echo err >&2; exit 3".into(),
            ],
            Duration::from_secs(30),
        )
        .with_env(&[("SLURM_SUBMIT_DIR".into(), "/x".into())], None);
        let outcome = cmd.run();
        append_call(&log, &cmd, &outcome).unwrap();
        append_call(&log, &cmd, &outcome).unwrap();
        let text = fs::read_to_string(&log).unwrap();
        assert_eq!(
            text.matches("$ SLURM_SUBMIT_DIR=/x sh -c").count(),
            2,
            "{text}"
        );
        assert!(text.contains("out\nerr\n"), "{text}");
        assert!(text.contains("exit status: 3"), "{text}");
        // Never through a symlink.
        let link = d.path().join("link.out");
        std::os::unix::fs::symlink(&log, &link).unwrap();
        assert!(append_call(&link, &cmd, &outcome).is_err());
    }

    #[test]
    fn a_call_killed_at_its_limit_is_logged_with_what_it_printed() {
        let d = tempfile::tempdir().unwrap();
        let log = d.path().join("nsight-slurm.out");
        let cmd = ExternalCommand::new(
            vec!["sh".into(), "-c".into(), "echo begun; sleep 30".into()],
            Duration::from_millis(300),
        );
        let outcome = cmd.run();
        append_call(&log, &cmd, &outcome).unwrap();
        let text = fs::read_to_string(&log).unwrap();
        assert!(text.contains("begun\n"), "{text}");
        assert!(
            text.contains("] failed: killed after 0s without finishing\n"),
            "{text}"
        );
    }
}
