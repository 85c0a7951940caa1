//! The one runner of external commands that run to completion
//! (`nsight-slurm`, `squeue`, `scontrol`, `sbatch`, `scancel`): an argv
//! (never a shell string), a time limit, output captured.
//!
//! Each command is started with stdin closed, in a process group of its
//! own; both output pipes are read to their end on threads of their own
//! (so neither can fill and block the child). When the limit passes, the
//! whole group is killed (a grandchild holding the pipes open cannot
//! outlive it), the child is reaped, and the run is a typed
//! [`Error::Timeout`] carrying what it printed so far. This module does not
//! log, retry or interpret exit statuses: a command that ran and exited
//! non-zero is an [`Output`], for the caller to judge. Command lines are
//! shown in logs and scripts quoted as a POSIX shell needs them
//! ([`display_argv`], [`shell_quote`]).
//!
//! Commands that stream or own the terminal are not run here: `perf
//! script` (read as it prints, for as long as a capture takes) and the
//! `srun` that `jobprof repl` becomes.

use std::ffi::OsString;
use std::io::{self, Read};
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

/// How often a running command is checked for its exit.
const WAIT_POLL: Duration = Duration::from_millis(20);

/// Why a command did not run to completion.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// The argv was empty.
    #[error("empty command line")]
    Empty,

    /// The program could not be started.
    #[error("could not start {program}: {source}")]
    Spawn {
        /// The program, as given.
        program: String,
        /// What the operating system said.
        #[source]
        source: io::Error,
    },

    /// It was still running at its time limit: its process group was
    /// killed and the child reaped.
    #[error("killed after {}s without finishing", limit.as_secs())]
    Timeout {
        /// The program, as given.
        program: String,
        /// The limit it ran past.
        limit: Duration,
        /// What it printed on stdout before it was killed.
        stdout: String,
        /// What it printed on stderr before it was killed.
        stderr: String,
    },

    /// Waiting for the child failed.
    #[error("waiting for it failed: {source}")]
    Wait {
        /// The program, as given.
        program: String,
        /// What the operating system said.
        #[source]
        source: io::Error,
    },
}

impl Error {
    /// What the command printed before it failed (nothing unless it was
    /// killed at its limit): stdout, then stderr.
    pub fn partial_output(&self) -> (&str, &str) {
        match self {
            Error::Timeout { stdout, stderr, .. } => (stdout, stderr),
            _ => ("", ""),
        }
    }
}

/// What a command that ran to its end printed, and how it exited.
#[derive(Debug, Clone)]
pub struct Output {
    /// How it exited.
    pub status: ExitStatus,
    /// Its standard output, lossily decoded.
    pub stdout: String,
    /// Its standard error, lossily decoded.
    pub stderr: String,
}

impl Output {
    /// True when it exited 0.
    pub fn success(&self) -> bool {
        self.status.success()
    }
}

/// One external command as an argv (program first), no shell involved,
/// with the time it may take.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ExternalCommand {
    /// The program (a name looked up on `PATH`, or a path), then its arguments.
    pub argv: Vec<OsString>,
    /// How long it may run before its process group is killed.
    pub limit: Duration,
    /// Variables set on top of jobprof's own environment.
    pub env: Vec<(OsString, OsString)>,
    /// The working directory (jobprof's own when `None`).
    pub cwd: Option<PathBuf>,
    /// Whose rights it runs with (groups, group and user set in the child
    /// before it runs the program); `None`: jobprof's own.
    pub user: Option<crate::sys::creds::Creds>,
}

impl ExternalCommand {
    /// A command from an argv (program first).
    pub fn new(argv: Vec<OsString>, limit: Duration) -> Self {
        ExternalCommand {
            argv,
            limit,
            env: Vec::new(),
            cwd: None,
            user: None,
        }
    }

    /// The same command run with `user`'s rights (`None`: jobprof's own).
    /// Only root can take them: another user's attempt fails the spawn.
    pub fn as_user(mut self, user: Option<crate::sys::creds::Creds>) -> Self {
        self.user = user;
        self
    }

    /// The same command with variables `env` set and run in `cwd`.
    pub fn with_env(mut self, env: &[(OsString, OsString)], cwd: Option<&Path>) -> Self {
        self.env.extend(env.iter().cloned());
        self.cwd = cwd.map(Path::to_path_buf);
        self
    }

    /// The program as given (for messages).
    pub fn program(&self) -> String {
        self.argv
            .first()
            .map(|p| p.to_string_lossy().into_owned())
            .unwrap_or_default()
    }

    /// The command line as a shell would need it typed (for logs only).
    pub fn display(&self) -> String {
        display_argv(&self.argv)
    }

    /// Runs it with its output captured, killing its process group at the
    /// time limit.
    pub fn run(&self) -> Result<Output, Error> {
        let mut child = self.spawn()?;
        let out = drain(child.stdout.take());
        let err = drain(child.stderr.take());
        let waited = self.wait_limited(&mut child);
        let stdout = out.join().unwrap_or_default();
        let stderr = err.join().unwrap_or_default();
        match waited {
            Ok(status) => Ok(Output {
                status,
                stdout,
                stderr,
            }),
            Err(Waited::Timeout) => Err(Error::Timeout {
                program: self.program(),
                limit: self.limit,
                stdout,
                stderr,
            }),
            Err(Waited::Failed(source)) => Err(Error::Wait {
                program: self.program(),
                source,
            }),
        }
    }

    /// Starts it with piped output in a process group of its own.
    fn spawn(&self) -> Result<Child, Error> {
        let Some((program, args)) = self.argv.split_first() else {
            return Err(Error::Empty);
        };
        let mut command = Command::new(program);
        command
            .args(args)
            .envs(self.env.iter().map(|(k, v)| (k, v)))
            .process_group(0);
        if let Some(dir) = &self.cwd {
            command.current_dir(dir);
        }
        if let Some(user) = &self.user {
            let (uid, gid, groups) = (user.uid, user.gid, user.groups.clone());
            // SAFETY: the closure runs in the child between fork and exec
            // and calls only setgroups, setgid and setuid, which are
            // async-signal-safe, on data allocated before the fork.
            unsafe {
                command.pre_exec(move || {
                    let g = groups.as_ptr();
                    if libc::setgroups(groups.len(), g) != 0
                        || libc::setgid(gid) != 0
                        || libc::setuid(uid) != 0
                    {
                        return Err(std::io::Error::last_os_error());
                    }
                    Ok(())
                });
            }
        }
        command
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .map_err(|source| Error::Spawn {
                program: self.program(),
                source,
            })
    }

    /// Waits for `child` up to the limit, then kills its group and reaps it.
    fn wait_limited(&self, child: &mut Child) -> Result<ExitStatus, Waited> {
        let started = Instant::now();
        loop {
            match child.try_wait() {
                Ok(Some(s)) => return Ok(s),
                Ok(None) if started.elapsed() >= self.limit => {
                    // SAFETY: signalling the group we created for the child
                    // (its pgid is its pid); the child is not reaped yet, so
                    // the id cannot have been reused.
                    unsafe {
                        libc::kill(-(child.id() as libc::pid_t), libc::SIGKILL);
                    }
                    let _ = child.kill();
                    let _ = child.wait();
                    return Err(Waited::Timeout);
                }
                Ok(None) => std::thread::sleep(WAIT_POLL),
                Err(e) => return Err(Waited::Failed(e)),
            }
        }
    }
}

/// Joins an argv for messages (not for running: quoting is approximate).
pub fn display_argv(argv: &[OsString]) -> String {
    argv.iter()
        .map(|a| shell_quote(&a.to_string_lossy()))
        .collect::<Vec<_>>()
        .join(" ")
}

/// Quotes one word for a POSIX shell (batch scripts, logged command lines):
/// as is when it only holds characters every shell leaves alone, else in
/// single quotes (`'` written as `'\''`).
pub fn shell_quote(word: &str) -> String {
    let plain = !word.is_empty()
        && word
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b"-_./=:,+@%".contains(&b));
    if plain {
        word.to_string()
    } else {
        format!("'{}'", word.replace('\'', r"'\''"))
    }
}

/// Why [`ExternalCommand::wait_limited`] has no exit status.
enum Waited {
    Timeout,
    Failed(io::Error),
}

/// Reads a child's pipe to its end on a thread of its own; the text,
/// lossily decoded.
fn drain<R: Read + Send + 'static>(r: Option<R>) -> JoinHandle<String> {
    std::thread::spawn(move || {
        let mut buf = Vec::new();
        if let Some(mut r) = r {
            let _ = r.read_to_end(&mut buf);
        }
        String::from_utf8_lossy(&buf).into_owned()
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sh(script: &str, limit: Duration) -> ExternalCommand {
        ExternalCommand::new(vec!["sh".into(), "-c".into(), script.into()], limit)
    }

    #[test]
    fn commands_that_cannot_start_or_fail_are_reported() {
        let c = ExternalCommand::new(
            vec!["/nonexistent/jobprof-none".into()],
            Duration::from_secs(5),
        );
        let e = c.run().unwrap_err();
        assert!(matches!(e, Error::Spawn { .. }), "{e:?}");
        assert!(e
            .to_string()
            .starts_with("could not start /nonexistent/jobprof-none: "));
        let f = ExternalCommand::new(vec!["false".into()], Duration::from_secs(5));
        assert!(!f.run().unwrap().success());
        let empty = ExternalCommand::new(Vec::new(), Duration::from_secs(5));
        assert!(matches!(empty.run(), Err(Error::Empty)));
    }

    #[test]
    fn output_environment_and_directory_reach_the_command() {
        let d = tempfile::tempdir().unwrap();
        let c = sh(
            "echo \"$JOBPROF_X\"; pwd; echo err >&2",
            Duration::from_secs(30),
        )
        .with_env(&[("JOBPROF_X".into(), "set".into())], Some(d.path()));
        let o = c.run().unwrap();
        assert!(o.success());
        let dir = d.path().canonicalize().unwrap();
        assert_eq!(o.stdout, format!("set\n{}\n", dir.display()));
        assert_eq!(o.stderr, "err\n");
    }

    #[test]
    fn shell_quote_leaves_plain_words_alone() {
        assert_eq!(shell_quote("/a/b-c_d.e"), "/a/b-c_d.e");
        assert_eq!(shell_quote("abc-1.2/x"), "abc-1.2/x");
        assert_eq!(shell_quote("a b"), "'a b'");
        assert_eq!(shell_quote("it's"), r"'it'\''s'");
        assert_eq!(shell_quote("$HOME"), "'$HOME'");
        assert_eq!(shell_quote(""), "''");
    }

    #[test]
    fn display_argv_quotes_what_a_shell_would_split() {
        let v: Vec<OsString> = ["srun", "-w", "n1", "SELECT 'x';", ""]
            .iter()
            .map(OsString::from)
            .collect();
        assert_eq!(display_argv(&v), r#"srun -w n1 'SELECT '\''x'\'';' ''"#);
    }

    #[test]
    fn the_whole_process_group_is_killed_at_the_limit() {
        // A grandchild that keeps the output pipes open: without the group
        // kill, reading them would wait for its 30 seconds.
        let c = sh(
            "echo started; sleep 30 & sleep 30",
            Duration::from_millis(500),
        );
        let t = Instant::now();
        let e = c.run().unwrap_err();
        assert!(
            t.elapsed() < Duration::from_secs(20),
            "returned after {:?}",
            t.elapsed()
        );
        assert!(matches!(e, Error::Timeout { .. }), "{e:?}");
        assert_eq!(e.to_string(), "killed after 0s without finishing");
        assert_eq!(e.partial_output(), ("started\n", ""));
    }
}
