//! `--off-cpu`: what it adds to each shard's `perf record` command line and
//! the preflight check that tells whether the kernel lets perf do it.
//!
//! Off-CPU time is reconstructed after the job (as hotspot does) from two
//! things perf records next to the samples: the `sched:sched_switch`
//! tracepoint, sampled at every switch-out of a recorded thread with the same
//! call chains as the samples (the stack that blocked and `prev_state`, R for
//! preempted, S/D for sleeping/blocked), and `--switch-events`
//! (`PERF_RECORD_SWITCH`), whose switch-in records say when the thread ran
//! again. perf's own `--off-cpu` needs a BPF build Debian's perf lacks.
//!
//! A global `-F` would put the tracepoint in frequency mode too (perf 6.1
//! applies `-F` to every event, so only some switches would be sampled), so
//! with `--off-cpu` the frequency is given to the sampling event alone
//! (`EVENT/freq=F,name=EVENT/`, named as before so the processor sees the
//! same event name) and the tracepoint keeps its period of 1.

use std::path::Path;
use std::process::Command;

/// The tracepoint recorded at every switch-out.
pub const TRACEPOINT: &str = "sched:sched_switch";

/// Where tracefs is mounted (the first that has the tracepoint wins).
const TRACEFS: [&str; 2] = ["/sys/kernel/tracing", "/sys/kernel/debug/tracing"];

/// Adds the event options: plain `-e EVENT -F HZ` without off-CPU, the
/// sampling event with its own frequency plus the tracepoint and switch
/// events with it.
pub fn event_args(cmd: &mut Command, event: &str, frequency: u32, off_cpu: bool) {
    if !off_cpu {
        cmd.arg("-e")
            .arg(event)
            .arg("-F")
            .arg(frequency.to_string());
        return;
    }
    cmd.arg("-e")
        .arg(sampling_event(event, frequency))
        .arg("-e")
        .arg(TRACEPOINT)
        .arg("--switch-events");
}

/// `EVENT/freq=HZ,name=EVENT/` (an event that already has terms gets the
/// two added to them).
fn sampling_event(event: &str, frequency: u32) -> String {
    match event.strip_suffix('/') {
        Some(with_terms) if with_terms.contains('/') => {
            format!("{with_terms},freq={frequency}/")
        }
        _ => format!("{event}/freq={frequency},name={event}/"),
    }
}

/// The tracepoint's directory under a mounted tracefs, if any.
pub fn tracepoint_dir() -> Option<std::path::PathBuf> {
    TRACEFS
        .iter()
        .map(|root| Path::new(root).join("events/sched/sched_switch"))
        .find(|d| d.join("id").exists())
}

/// The outcome of the tracefs check: `Ok(detail)` or `Err((detail, fix))`.
pub fn check_tracefs() -> Result<String, (String, String)> {
    let Some(dir) = tracepoint_dir() else {
        return Err((
            format!(
                "{TRACEPOINT} not found: tracefs is not mounted at {} or {}",
                TRACEFS[0], TRACEFS[1]
            ),
            "mount it (as root): mount -t tracefs nodev /sys/kernel/tracing \
             (or add it to /etc/fstab); a kernel without CONFIG_FTRACE cannot record off-CPU time"
                .into(),
        ));
    };
    match std::fs::read_to_string(dir.join("id")) {
        Ok(id) => Ok(format!(
            "{TRACEPOINT} is tracepoint {} ({})",
            id.trim(),
            dir.display()
        )),
        Err(e) => Err((
            format!("cannot read {}: {e}", dir.join("id").display()),
            "run as root, or let the user read tracefs (chmod/chgrp /sys/kernel/tracing, \
             e.g. the `tracing` group) and set kernel.perf_event_paranoid to -1"
                .into(),
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn args(event: &str, off: bool) -> Vec<String> {
        let mut c = Command::new("perf");
        event_args(&mut c, event, 99, off);
        c.get_args()
            .map(|a| a.to_string_lossy().into_owned())
            .collect()
    }

    #[test]
    fn the_tracepoint_keeps_period_one_and_the_event_keeps_its_name() {
        assert_eq!(args("cpu-clock", false), ["-e", "cpu-clock", "-F", "99"]);
        assert_eq!(
            args("cpu-clock", true),
            [
                "-e",
                "cpu-clock/freq=99,name=cpu-clock/",
                "-e",
                "sched:sched_switch",
                "--switch-events"
            ]
        );
        assert_eq!(
            args("cpu/cycles,name=c/", true)[1],
            "cpu/cycles,name=c,freq=99/"
        );
    }
}
