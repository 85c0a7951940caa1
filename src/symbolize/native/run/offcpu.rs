//! What the off-CPU run ([`crate::symbolize::native::Symbolizer::run_off_cpu`]) prints beyond
//! the on-CPU text, as `perf script --ns --show-switch-events
//! --show-task-events` prints it: header lines with ns times and event
//! names padded to the longest, `sched:sched_switch` samples with their
//! fields and no period, and the `SWITCH`, `SWITCH_CPU_WIDE`, `COMM`,
//! `FORK` and `EXIT` records.

use std::io::Write;

use linux_perf_data::linux_perf_event_reader::{
    ContextSwitchRecord, EventRecord, PerfEventType, RawEventRecord, SampleFormat, SampleRecord,
    TaskWasPreempted,
};
use linux_perf_data::{Feature, PerfFile};

use super::Run;
use crate::symbolize::native::error::Error;
use crate::symbolize::native::threads::Machine;
use crate::symbolize::native::tracepoint::SchedSwitch;

/// The tracepoint whose samples are switch-outs.
const TRACEPOINT: &str = "sched:sched_switch";

/// Per attribute, how its lines print.
#[derive(Debug)]
pub(super) struct OffCpu {
    /// The `sched_switch` formats, by event name.
    tracepoints: Vec<(String, SchedSwitch)>,
    /// Whether the attribute's lines show the CPU.
    cpu: Vec<bool>,
    /// perf pads event names to the longest.
    name_width: usize,
}

impl OffCpu {
    /// From the file's attributes and tracing data; refuses a
    /// `sched_switch` tracepoint whose format it cannot read.
    pub(super) fn of(perf_file: &PerfFile) -> Result<OffCpu, Error> {
        let attrs = perf_file.event_attributes();
        let tracing = perf_file.feature_section_data(Feature::TRACING_DATA);
        let mut tracepoints = Vec::new();
        for a in attrs {
            if let (Some(name @ TRACEPOINT), PerfEventType::Tracepoint(id)) =
                (a.name(), &a.attributes().type_)
            {
                let f = tracing
                    .and_then(|t| SchedSwitch::from_tracing_data(t, *id))
                    .ok_or(Error::SchedSwitchFormat)?;
                tracepoints.push((name.to_string(), f));
            }
        }
        Ok(OffCpu {
            tracepoints,
            cpu: attrs
                .iter()
                .map(|a| a.attributes().sample_format.contains(SampleFormat::CPU))
                .collect(),
            name_width: attrs
                .iter()
                .map(|a| a.name().map_or(0, str::len))
                .max()
                .unwrap_or(0),
        })
    }

    /// A sample's header line: comm, TID, CPU and time (each when
    /// recorded), the period (not for the tracepoint), the padded event
    /// name and the tracepoint's fields.
    pub(super) fn write_header(
        &self,
        out: &mut Vec<u8>,
        machine: &Machine,
        s: &SampleRecord<'_>,
        has: SampleFormat,
        event: &str,
    ) {
        let tid = s.tid.unwrap_or(-1);
        start(out, &machine.comm_of(tid), tid, s.cpu, s.timestamp);
        let format = self
            .tracepoints
            .iter()
            .find_map(|(name, t)| (name == event).then_some(t));
        let w = self.name_width;
        match format {
            Some(f) => {
                let _ = write!(out, "{event:>w$}: ");
                let raw = s.raw.as_ref().map(|r| r.as_slice()).unwrap_or_default();
                f.write(out, &raw);
                out.push(b'\n');
            }
            None => {
                if has.contains(SampleFormat::PERIOD) {
                    let _ = write!(out, "{:10} ", s.period.unwrap_or(0));
                }
                let _ = writeln!(out, "{event:>w$}: ");
            }
        }
    }
}

/// `COMM TID [CPU] SECS.NS: ` (CPU and time when recorded).
fn start(out: &mut Vec<u8>, comm: &str, tid: i32, cpu: Option<u32>, time: Option<u64>) {
    let _ = write!(out, "{comm} {tid:5} ");
    if let Some(c) = cpu {
        let _ = write!(out, "[{c:03}] ");
    }
    if let Some(t) = time {
        let _ = write!(out, "{:5}.{:09}: ", t / 1_000_000_000, t % 1_000_000_000);
    }
}

impl Run<'_> {
    /// Prints a switch or task record (after [`Run::side_band`] took it
    /// in, as perf prints a new name or a forked thread's inherited one);
    /// others print nothing.
    pub(super) fn side_band_line(
        &mut self,
        rec: &EventRecord<'_>,
        raw: &RawEventRecord<'_>,
        attr_index: usize,
    ) {
        let Some(o) = &self.off_cpu else { return };
        let cd = raw.common_data().unwrap_or_default();
        let tid = cd.tid.unwrap_or(-1);
        let cpu = cd.cpu.filter(|_| o.cpu.get(attr_index) == Some(&true));
        let mut body = Vec::with_capacity(64);
        let comm = match rec {
            EventRecord::ContextSwitch(sw) => {
                switch_text(&mut body, raw.record_type.0 == 15, sw);
                self.machine.comm_of(tid).into_owned()
            }
            EventRecord::Comm(c) => {
                let name = String::from_utf8_lossy(&c.name.as_slice()).into_owned();
                let exec = if c.is_execve { " exec" } else { "" };
                let _ = writeln!(body, "PERF_RECORD_COMM{exec}: {name}:{}/{}", c.pid, c.tid);
                name
            }
            EventRecord::Fork(f) | EventRecord::Exit(f) => {
                let what = if matches!(rec, EventRecord::Fork(_)) {
                    "FORK"
                } else {
                    "EXIT"
                };
                let _ = writeln!(
                    body,
                    "PERF_RECORD_{what}({}:{}):({}:{})",
                    f.pid, f.tid, f.ppid, f.ptid
                );
                self.machine.comm_of(f.tid).into_owned()
            }
            _ => return,
        };
        start(&mut self.out, &comm, tid, cpu, cd.timestamp);
        self.out.extend_from_slice(&body);
    }
}

/// `PERF_RECORD_SWITCH IN         ` and the like (perf's
/// `perf_event__fprintf_switch`).
fn switch_text(out: &mut Vec<u8>, cpu_wide: bool, sw: &ContextSwitchRecord) {
    let (in_out, other) = match sw {
        ContextSwitchRecord::In { prev_pid, prev_tid } => {
            ("IN         ", ("prev", *prev_pid, *prev_tid))
        }
        ContextSwitchRecord::Out {
            next_pid,
            next_tid,
            preempted,
        } => (
            match preempted {
                TaskWasPreempted::Yes => "OUT preempt",
                TaskWasPreempted::No => "OUT        ",
            },
            ("next", *next_pid, *next_tid),
        ),
    };
    if cpu_wide {
        let (word, pid, tid) = other;
        let _ = writeln!(
            out,
            "PERF_RECORD_SWITCH_CPU_WIDE {in_out}  {word} pid/tid: {:5}/{:<5}",
            pid.unwrap_or(-1),
            tid.unwrap_or(-1)
        );
    } else {
        let _ = writeln!(out, "PERF_RECORD_SWITCH {in_out}");
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn text(f: impl FnOnce(&mut Vec<u8>)) -> String {
        let mut v = Vec::new();
        f(&mut v);
        String::from_utf8(v).unwrap()
    }

    #[test]
    fn switch_records_print_as_perf_script_prints_them() {
        let out = |preempted| ContextSwitchRecord::Out {
            next_pid: Some(7),
            next_tid: Some(8),
            preempted,
        };
        let inn = ContextSwitchRecord::In {
            prev_pid: Some(1),
            prev_tid: Some(12345),
        };
        assert_eq!(
            text(|v| switch_text(v, false, &inn)),
            "PERF_RECORD_SWITCH IN         \n"
        );
        assert_eq!(
            text(|v| switch_text(v, false, &out(TaskWasPreempted::Yes))),
            "PERF_RECORD_SWITCH OUT preempt\n"
        );
        assert_eq!(
            text(|v| switch_text(v, true, &out(TaskWasPreempted::No))),
            "PERF_RECORD_SWITCH_CPU_WIDE OUT          next pid/tid:     7/8    \n"
        );
        assert_eq!(
            text(|v| switch_text(v, true, &inn)),
            "PERF_RECORD_SWITCH_CPU_WIDE IN           prev pid/tid:     1/12345\n"
        );
    }

    #[test]
    fn line_starts_have_ns_times_and_the_cpu_when_recorded() {
        assert_eq!(
            text(|v| start(v, "sh", 16885, Some(1), Some(3_387_396_411_465))),
            "sh 16885 [001]  3387.396411465: "
        );
        assert_eq!(
            text(|v| start(v, "perf-exec", 0, Some(0), Some(0))),
            "perf-exec     0 [000]     0.000000000: "
        );
        assert_eq!(
            text(|v| start(v, "w", 42, None, Some(5))),
            "w    42     0.000000005: "
        );
    }
}
