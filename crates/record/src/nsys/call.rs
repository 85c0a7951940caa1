//! Running `nsys` (`--version`, `start`, `stop`) with a time limit, its
//! output kept in a log file in staging (a pipe could be held open by a
//! daemon nsys leaves behind) and its argv, exit code and end time
//! recorded for `nsys-capture.json`.

use std::fs;
use std::path::Path;
use std::process::{Command, Stdio};
use std::thread::sleep;
use std::time::{Duration, Instant};

use jobprof_capture_format::nsys::NsysCall;

use crate::sys;

/// One finished call: what `nsys-capture.json` records, and its output.
pub struct Ran {
    /// argv, exit code, end time.
    pub call: NsysCall,
    /// The last lines of its output (` | `-joined), or why it did not run.
    pub output: String,
}

impl Ran {
    /// It ran and exited 0.
    pub fn ok(&self) -> bool {
        self.call.exit_code == Some(0)
    }

    /// `exit N: output`, for messages.
    pub fn describe(&self) -> String {
        let status = match self.call.exit_code {
            Some(c) => sys::describe_status(c),
            None => "no exit status".into(),
        };
        if self.output.is_empty() {
            status
        } else {
            format!("{status}: {}", self.output)
        }
    }
}

/// Runs `bin args...`, its output into `log` (replaced), killing it after
/// `timeout`.
pub fn run(bin: &Path, args: &[&str], log: &Path, timeout: Duration) -> Ran {
    let mut argv = vec![bin.to_string_lossy().into_owned()];
    argv.extend(args.iter().map(|a| a.to_string()));
    let done = |exit_code: Option<i32>, output: String| Ran {
        call: NsysCall {
            argv: argv.clone(),
            exit_code,
            unix_ns: sys::now_ns(),
        },
        output,
    };
    let _ = fs::remove_file(log);
    let out = match sys::create_new(log, 0o600) {
        Ok(f) => f,
        Err(e) => return done(None, format!("cannot create {}: {e}", log.display())),
    };
    let err = match out.try_clone() {
        Ok(f) => f,
        Err(e) => return done(None, format!("cannot open {}: {e}", log.display())),
    };
    let child = Command::new(bin)
        .args(args)
        .stdin(Stdio::null())
        .stdout(out)
        .stderr(err)
        .spawn();
    let mut child = match child {
        Ok(c) => c,
        Err(e) => {
            return done(
                None,
                format!("cannot run {}: {e} (pass --nsys-bin)", bin.display()),
            )
        }
    };
    let deadline = Instant::now() + timeout;
    loop {
        match child.try_wait() {
            Ok(Some(status)) => return done(Some(sys::shell_status(status)), sys::tail(log, 6)),
            Ok(None) if Instant::now() < deadline => sleep(Duration::from_millis(20)),
            _ => {
                let _ = child.kill();
                let _ = child.wait();
                let tail = sys::tail(log, 6);
                return done(
                    None,
                    format!(
                        "killed after {} s without an answer; {tail}",
                        timeout.as_secs()
                    ),
                );
            }
        }
    }
}
