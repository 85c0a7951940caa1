//! What a run over a shard recorded with `--off-cpu` hands the off-CPU
//! accounting besides its samples ([`Tasks`]): the `SWITCH`,
//! `SWITCH_CPU_WIDE`, `COMM`, `FORK` and `EXIT` records that carry a time,
//! in record order among the samples, and the `prev_state` of each
//! `sched:sched_switch` sample, decoded from its raw data with the format
//! in the file's tracing data ([`SchedSwitch`]). Nothing is printed: the
//! accounting reads these as they are (`crate::text::offcpu::log`).

use linux_perf_data::linux_perf_event_reader::{
    ContextSwitchRecord, EventRecord, PerfEventType, RawEventRecord, SampleRecord, TaskWasPreempted,
};
use linux_perf_data::{Feature, PerfFile};

use super::Run;
use crate::symbolize::native::error::Error;
use crate::symbolize::native::tracepoint::SchedSwitch;
use crate::symbolize::sample::{Task, Tasks, SWITCH_EVENT as TRACEPOINT};

/// How a run reads the records of an off-CPU capture.
#[derive(Debug)]
pub(super) struct OffCpu {
    /// The `sched_switch` format, by attribute (`None`: another event).
    formats: Vec<Option<SchedSwitch>>,
}

impl OffCpu {
    /// From the file's attributes and tracing data: `None` for a file
    /// without the tracepoint (recorded without `--off-cpu`); refuses a
    /// `sched_switch` format it cannot read.
    pub(super) fn of(perf_file: &PerfFile) -> Result<Option<OffCpu>, Error> {
        let attrs = perf_file.event_attributes();
        if !attrs.iter().any(|a| a.name() == Some(TRACEPOINT)) {
            return Ok(None);
        }
        let tracing = perf_file.feature_section_data(Feature::TRACING_DATA);
        let mut formats = Vec::with_capacity(attrs.len());
        for a in attrs {
            let format = match (a.name(), &a.attributes().type_) {
                (Some(TRACEPOINT), PerfEventType::Tracepoint(id)) => Some(
                    tracing
                        .and_then(|t| SchedSwitch::from_tracing_data(t, *id))
                        .ok_or(Error::SchedSwitchFormat)?,
                ),
                _ => None,
            };
            formats.push(format);
        }
        Ok(Some(OffCpu { formats }))
    }
}

impl Run<'_> {
    /// Starts a batch's records (every batch of an off-CPU run has them).
    pub(super) fn start_tasks(&mut self) {
        if self.off_cpu.is_some() {
            self.batch.tasks = Some(Tasks::default());
        }
    }

    /// Hands on a switch or task record whose time lies in `[lo, hi]`
    /// (the run's time slice), after [`Run::side_band`] took it in.
    pub(super) fn task(
        &mut self,
        rec: &EventRecord<'_>,
        raw: &RawEventRecord<'_>,
        lo: u64,
        hi: u64,
    ) {
        let Some(tasks) = self.batch.tasks.as_mut() else {
            return;
        };
        let cd = raw.common_data().unwrap_or_default();
        let Some(time) = cd.timestamp.filter(|t| (lo..=hi).contains(t)) else {
            return;
        };
        let task = match rec {
            EventRecord::ContextSwitch(sw) => Task::Switch {
                tid: cd.tid.unwrap_or(-1),
                time,
                out: matches!(sw, ContextSwitchRecord::Out { .. }),
                preempt: matches!(
                    sw,
                    ContextSwitchRecord::Out {
                        preempted: TaskWasPreempted::Yes,
                        ..
                    }
                ),
            },
            EventRecord::Comm(c) => Task::Comm {
                tid: c.tid,
                comm: crate::sys::printable::printable_text(&String::from_utf8_lossy(
                    &c.name.as_slice(),
                ))
                .into(),
                time,
            },
            EventRecord::Fork(f) => Task::Fork { tid: f.tid, time },
            EventRecord::Exit(f) => Task::Exit { tid: f.tid, time },
            _ => return,
        };
        let before = self.batch.samples.len() as u32;
        tasks.records.push((before, task));
    }

    /// Hands on the state a `sched:sched_switch` sample (the batch's last,
    /// of attribute `attr_index`) left its thread in.
    pub(super) fn switch_state(&mut self, s: &SampleRecord<'_>, attr_index: usize) {
        let Some(format) = self
            .off_cpu
            .as_ref()
            .and_then(|o| o.formats.get(attr_index)?.as_ref())
        else {
            return;
        };
        let raw = s.raw.as_ref().map(|r| r.as_slice()).unwrap_or_default();
        let state = format.prev_state(&raw).map(Into::into);
        let at = self.batch.samples.len().saturating_sub(1) as u32;
        if let Some(tasks) = self.batch.tasks.as_mut() {
            tasks.states.push((at, state));
        }
    }
}
