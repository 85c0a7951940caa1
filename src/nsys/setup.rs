//! The nsight-slurm set-up and teardown of a profiled run.
//!
//! Before the first worker step, [`setup`] creates the run's directories
//! (all under `log_dir`, see [`Dirs`]), configures the wrapper through its
//! own CLI (`nsight-slurm configure tool-path|tool-command|profiling-mode|
//! tool-options|report-output`) and starts its coordinator
//! (`nsight-slurm coordinator start`). [`teardown`] optionally flushes the
//! reports first, then runs `nsight-slurm coordinator stop --force`.
//!
//! Every wrapper call ([`super::wrapper`]) runs from an argv (no shell)
//! with a time limit, in `log_dir`, with `SLURM_SUBMIT_DIR=<log_dir>` (the wrapper keeps its job
//! state under the run) and `SLURMD_NODENAME=<head node IPv4>` (the
//! coordinator publishes `tcp://<SLURMD_NODENAME>:<port>`, and a node's own
//! name may resolve only to a link-local IPv6 address that ranks time out
//! on). Each call, its output and its result are appended to
//! `<log_dir>/nsight-slurm.out`.
//!
//! Set-up is idempotent: what was configured (the calls, the head address
//! and the Slurm job) is recorded in `<log_dir>/.jobprof-nsight-slurm.json`
//! after the last call succeeded; a second set-up with the same record runs
//! nothing, a changed one stops the running coordinator and configures anew.

use std::fs;
use std::net::{IpAddr, Ipv4Addr, ToSocketAddrs};
use std::path::PathBuf;
use std::time::Duration;

use serde::{Deserialize, Serialize};

use super::collect::Collection;
use super::flush::{flush, FlushOptions};
use super::plan::{Dirs, Plan, ProfilerType};
use super::wrapper::{check_executable, Wrapper};
use super::{Error, Log};
use crate::sys::progress::Progress;

/// The set-up record under `log_dir`.
pub const STATE_FILE: &str = ".jobprof-nsight-slurm.json";

/// The head node's IPv4 address: `given`, else this node's name
/// (`SLURMD_NODENAME`, else the host name) resolved to IPv4, a
/// non-loopback address first. Also a warning when only loopback resolved.
pub fn head_ip(given: Option<Ipv4Addr>) -> Result<(Ipv4Addr, Option<String>), Error> {
    if let Some(ip) = given {
        return Ok((ip, None));
    }
    let name = std::env::var("SLURMD_NODENAME")
        .ok()
        .filter(|n| !n.is_empty())
        .map_or_else(host_name, Ok)?;
    let resolved: Vec<IpAddr> = (name.as_str(), 0)
        .to_socket_addrs()
        .map(|a| a.map(|s| s.ip()).collect())
        .unwrap_or_default();
    let v4: Vec<Ipv4Addr> = resolved
        .iter()
        .filter_map(|ip| match ip {
            IpAddr::V4(v4) => Some(*v4),
            IpAddr::V6(_) => None,
        })
        .collect();
    if let Some(ip) = v4.iter().find(|ip| !ip.is_loopback()) {
        return Ok((*ip, None));
    }
    match v4.first() {
        Some(ip) => Ok((
            *ip,
            Some(format!(
                "warning: this node's name `{name}` resolves only to the loopback address {ip}: \
                 ranks on other nodes cannot reach the coordinator; pass --head-ip for multi-node jobs"
            )),
        )),
        None => Err(Error::Usage(format!(
            "this node's name `{name}` does not resolve to an IPv4 address ({}); \
             the coordinator must publish one that every rank can reach: pass --head-ip ADDRESS",
            if resolved.is_empty() {
                "it does not resolve at all".to_string()
            } else {
                format!(
                    "only to {}",
                    resolved
                        .iter()
                        .map(IpAddr::to_string)
                        .collect::<Vec<_>>()
                        .join(", ")
                )
            }
        ))),
    }
}

fn host_name() -> Result<String, Error> {
    let mut buf = [0u8; 256];
    // SAFETY: the buffer is valid for its length; gethostname NUL-terminates
    // within it on success (truncation is handled by the search below).
    let rc = unsafe { libc::gethostname(buf.as_mut_ptr().cast(), buf.len()) };
    if rc != 0 {
        return Err(Error::Usage(format!(
            "cannot read this node's host name ({}); pass --head-ip ADDRESS",
            std::io::Error::last_os_error()
        )));
    }
    let end = buf.iter().position(|&b| b == 0).unwrap_or(buf.len());
    Ok(String::from_utf8_lossy(&buf[..end]).into_owned())
}

/// What a completed set-up configured.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
struct State {
    /// `SLURM_JOB_ID` of the set-up, if any.
    job: Option<String>,
    /// The head node's address the calls ran with.
    head_ip: String,
    /// The set-up calls, in order.
    calls: Vec<Vec<String>>,
}

impl State {
    fn path(dirs: &Dirs) -> PathBuf {
        dirs.log_dir.join(STATE_FILE)
    }

    fn read(dirs: &Dirs) -> Option<State> {
        let bytes = fs::read(State::path(dirs)).ok()?;
        serde_json::from_slice(&bytes).ok()
    }
}

/// The head node address the last completed set-up of `plan`'s run used.
pub fn recorded_head_ip(plan: &Plan) -> Option<Ipv4Addr> {
    plan.dirs
        .as_ref()
        .and_then(State::read)
        .and_then(|s| s.head_ip.parse().ok())
}

/// What [`setup`] did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SetupOutcome {
    /// Directories created (type `nsys`: nothing else to set up).
    DirsOnly,
    /// The wrapper was configured and its coordinator started.
    Configured,
    /// A changed config: the coordinator was stopped, then configured and
    /// started again.
    Reconfigured,
    /// The same set-up had already completed: nothing was run.
    Unchanged,
}

/// Creates the run's directories and, for `nsight-slurm`, configures the
/// wrapper and starts its coordinator (see the module documentation).
pub fn setup(
    plan: &Plan,
    head_ip: Option<Ipv4Addr>,
    limit: Duration,
    progress: &dyn Progress,
) -> Result<SetupOutcome, Error> {
    let Some(dirs) = plan.dirs.as_ref() else {
        return Err(Error::Usage(
            "type = \"perf\" has nothing to set up (the perf sidecar needs no wrapper)".into(),
        ));
    };
    let wrapper_exe = plan.wrapper();
    if let Some(exe) = &wrapper_exe {
        check_executable(exe)?;
    }
    for d in dirs.to_create() {
        fs::create_dir_all(d).map_err(|e| Error::io(d, e))?;
    }
    if plan.kind != ProfilerType::NsightSlurm {
        return Ok(SetupOutcome::DirsOnly);
    }
    let (ip, warning) = self::head_ip(head_ip)?;
    let wrapper = Wrapper::of(plan, ip, limit)?;
    let log = Log::new(
        progress,
        limit * plan.setup.len() as u32,
        "nsight-slurm setup",
    );
    if let Some(w) = warning {
        log.line(w);
    }
    let wanted = State {
        job: std::env::var("SLURM_JOB_ID").ok().filter(|j| !j.is_empty()),
        head_ip: ip.to_string(),
        calls: plan.setup.clone(),
    };
    let previous = State::read(dirs);
    if previous.as_ref() == Some(&wanted) {
        log.line(format!(
            "already set up with this config (see {}); nothing to do",
            State::path(dirs).display()
        ));
        log.finish();
        return Ok(SetupOutcome::Unchanged);
    }
    let reconfigure = previous.is_some_and(|p| p.job == wanted.job);
    let result = configure(plan, dirs, &wrapper, &wanted, reconfigure, &log);
    log.finish();
    result?;
    Ok(if reconfigure {
        SetupOutcome::Reconfigured
    } else {
        SetupOutcome::Configured
    })
}

/// Stops a running coordinator (when reconfiguring), checks the workspace
/// is empty, runs the set-up calls and records them.
fn configure(
    plan: &Plan,
    dirs: &Dirs,
    wrapper: &Wrapper,
    wanted: &State,
    reconfigure: bool,
    log: &Log,
) -> Result<(), Error> {
    let state = State::path(dirs);
    match fs::remove_file(&state) {
        Ok(()) => {}
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
        Err(e) => return Err(Error::io(&state, e)),
    }
    if reconfigure {
        log.line("the config changed since the last set-up: stopping its coordinator first");
        for call in &plan.teardown {
            wrapper.run_checked(call, log)?;
        }
    }
    if let Some(ws) = &dirs.workspace {
        let mut entries = fs::read_dir(ws).map_err(|e| Error::io(ws, e))?;
        if entries.next().is_some() {
            return Err(Error::Usage(format!(
                "{}: the report workspace is not empty, and nsight-slurm refuses a non-empty \
                 one; use a new log_dir for this run (or move the old reports away)",
                ws.display()
            )));
        }
    }
    for call in &plan.setup {
        wrapper.run_checked(call, log)?;
    }
    let json = serde_json::to_vec_pretty(wanted).expect("the set-up record serializes");
    crate::sys::atomic::write_atomic(&state, &json).map_err(Error::from)
}

/// Optionally flushes the reports (`flush` options with the report root
/// and runtime dir already set), then stops the coordinator. The flush's
/// result decides the outcome when it failed; otherwise a failed stop does.
/// The set-up record is removed after a successful stop. With `type =
/// "nsys"` there is no coordinator: only the flush runs.
pub fn teardown(
    plan: &Plan,
    head_ip: Option<Ipv4Addr>,
    limit: Duration,
    flush_options: Option<FlushOptions>,
    progress: &dyn Progress,
) -> Result<Option<Collection>, Error> {
    let Some(dirs) = plan.dirs.clone() else {
        return Err(Error::Usage(
            "type = \"perf\" has nothing to tear down (no Nsight reports, no wrapper)".into(),
        ));
    };
    if plan.kind == ProfilerType::Nsys {
        return match flush_options {
            Some(f) => flush(&f, progress).map(Some),
            None => Err(Error::Usage(
                "type = \"nsys\" has no coordinator to stop; use --flush --job JOBID to \
                 collect its reports"
                    .into(),
            )),
        };
    }
    if !dirs.log_dir.is_dir() {
        return Err(Error::Usage(format!(
            "log_dir {} does not exist: nothing was set up there (jobprof nsys setup creates it)",
            dirs.log_dir.display()
        )));
    }
    let (ip, warning) = self::head_ip(head_ip.or_else(|| recorded_head_ip(plan)))?;
    let wrapper = Wrapper::of(plan, ip, limit)?;
    let flushed = flush_options.map(|mut f| {
        f.nsight_slurm = Some(wrapper.exe.clone());
        f.wrapper = Some(wrapper.clone());
        flush(&f, progress)
    });
    let log = Log::new(progress, limit, "nsight-slurm teardown");
    if let Some(w) = warning {
        log.line(w);
    }
    let mut stopped = Ok(());
    for call in &plan.teardown {
        stopped = stopped.and_then(|()| wrapper.run_checked(call, &log));
    }
    log.finish();
    if stopped.is_ok() {
        let _ = fs::remove_file(State::path(&dirs));
    }
    match flushed {
        Some(Err(e)) => Err(e),
        Some(Ok(c)) => stopped.map(|()| Some(c)),
        None => stopped.map(|()| None),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_given_head_ip_is_used_as_is() {
        let ip: Ipv4Addr = "10.1.2.3".parse().unwrap();
        assert_eq!(head_ip(Some(ip)).unwrap(), (ip, None));
    }
}
