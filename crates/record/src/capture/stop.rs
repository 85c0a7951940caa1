//! Ending a capture: `disable` everywhere (the window's end), FIFO `stop`,
//! SIGINT and the watchdog, and what the shards' exits say of it.

use std::fs;
use std::time::{Duration, Instant};

use jobprof_capture_format::{EndCause, Phase};

use super::{ActiveCapture, State};
use crate::shard::Shard;
use crate::sys::{self, now_ns};

impl ActiveCapture {
    /// Ends the capture: `disable` everywhere, FIFO `stop`, then SIGINT and
    /// the watchdog (`on_forced` is called with a message when SIGTERM or
    /// SIGKILL had to be sent); then writes the manifests and `capture.json`
    /// (phase `queued`). Calling it again does nothing.
    pub fn end(
        &mut self,
        cause: EndCause,
        stop_timeout: Duration,
        on_forced: &mut dyn FnMut(&str),
    ) {
        if self.state == State::Queued {
            return;
        }
        self.state = State::Queued;
        if self.meta.reached(Phase::Enabled) {
            self.meta.ended_by = Some(cause);
        }
        self.invalidate_for(cause);
        let late = self.disable_all(stop_timeout);
        self.stop_all(stop_timeout, on_forced);
        self.judge_window(&late, now_ns());
        self.judge_exits();
    }

    /// What ending by `cause` says of the capture's validity.
    pub(super) fn invalidate_for(&mut self, cause: EndCause) {
        match cause {
            EndCause::Stop | EndCause::AttachFailure => {}
            EndCause::MaxCapture => self.meta.invalidate(format!(
                "stop never came: ended by --max-capture after {} s",
                self.enabled_at.map(|t| t.elapsed().as_secs()).unwrap_or(0)
            )),
            EndCause::WorkerExit => self.meta.invalidate(format!(
                "the worker (pid {}) exited during the capture",
                self.meta.pid
            )),
            EndCause::PerfFailure => self.meta.invalidate("a perf shard exited while recording"),
            EndCause::Shutdown => self.meta.invalidate("shutdown came before stop"),
            EndCause::Signal => self
                .meta
                .invalidate("the sidecar was signalled before stop"),
        }
    }

    /// Switches sampling off everywhere first, so that the window ends at
    /// one moment (perf may take a while to write its file after `stop`):
    /// `disable` is sent to every shard, then the answers are collected,
    /// within one wait of 5 s (or the stop timeout, when shorter) for all.
    /// Returns the shards that did not answer in time: they sample until
    /// they stop.
    pub(super) fn disable_all(&mut self, stop_timeout: Duration) -> Vec<u32> {
        let was_enabled = self.meta.reached(Phase::Enabled);
        if was_enabled {
            self.meta.disable_requested_unix_ns = Some(now_ns());
        }
        let deadline = Instant::now() + Duration::from_secs(5).min(stop_timeout);
        let mut asked = Vec::new();
        for (i, s) in self.shards.iter_mut().enumerate() {
            if !s.poll_exit() && s.send("disable").is_ok() {
                asked.push(i);
            }
        }
        let mut late = Vec::new();
        for i in asked {
            let s = &mut self.shards[i];
            // At least one look at each: an answer already there counts.
            let left = deadline
                .saturating_duration_since(Instant::now())
                .max(Duration::from_millis(100));
            if s.wait_ack("disable", left).is_err() && !s.poll_exit() {
                late.push(s.index);
            }
        }
        if was_enabled {
            let now = now_ns();
            self.meta.disabled_unix_ns = Some(now);
            self.meta.reach(Phase::Disabled, now);
        }
        late
    }

    /// What perf recorded, not what was asked: shards that did not answer
    /// `disable` (`late`) sampled until they stopped, so the window ends
    /// there (`disabled_unix_ns` moved to `stopped`); and when disabling
    /// took far longer than the query ([`slow_disable`]), `capture.json`
    /// and the log say so.
    pub(super) fn judge_window(&mut self, late: &[u32], stopped: u64) {
        let m = &mut self.meta;
        let (Some(on), Some(asked)) = (m.enabled_unix_ns, m.disable_requested_unix_ns) else {
            return;
        };
        if !late.is_empty() {
            let shards: Vec<String> = late.iter().map(u32::to_string).collect();
            m.warnings.push(format!(
                "shard(s) {} did not acknowledge `disable` within 5 s and sampled until they \
                 stopped: the window ends there",
                shards.join(", ")
            ));
            m.disabled_unix_ns = Some(stopped.max(m.disabled_unix_ns.unwrap_or(0)));
        }
        let off = m.disabled_unix_ns.unwrap_or(asked);
        if let Some(w) = slow_disable(on, asked, off) {
            m.warnings.push(w);
        }
        for w in &m.warnings {
            eprintln!("jobprof-record sidecar: capture {}: {w}", self.query);
        }
    }
    /// Asks every shard to stop and drives each to its end (FIFO `stop`,
    /// SIGINT, then the watchdog's SIGTERM/SIGKILL, reported to
    /// `on_forced`).
    pub(super) fn stop_all(&mut self, stop_timeout: Duration, on_forced: &mut dyn FnMut(&str)) {
        for s in &mut self.shards {
            s.request_stop();
        }
        loop {
            let mut all = true;
            for s in &mut self.shards {
                let (exited, fired) = s.drive_stop(stop_timeout);
                if fired {
                    on_forced(&format!(
                        "query {} shard {} (perf pid {}): perf did not stop within {} s; watchdog sent SIGTERM/SIGKILL",
                        self.query,
                        s.index,
                        s.pid,
                        stop_timeout.as_secs()
                    ));
                }
                all &= exited;
            }
            if all {
                break;
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        for s in &mut self.shards {
            s.close_fifos();
        }
        let _ = fs::remove_dir(&self.fifo_dir);
        if !self.shards.is_empty() {
            self.meta.reach(Phase::Stopped, now_ns());
        }
    }

    /// What the shards' exits say of the capture: a perf that died on its
    /// own, or with a status other than 0 or SIGINT's, invalidates it.
    pub(super) fn judge_exits(&mut self) {
        if self.meta.ended_by == Some(EndCause::Stop)
            && self.shards.iter().any(Shard::failed_on_its_own)
        {
            // perf died just before `stop` was seen (a kill the sidecar's
            // last check had not noticed yet): what ended it was perf.
            self.meta.ended_by = Some(EndCause::PerfFailure);
        }
        for s in &self.shards {
            if !matches!(s.status, Some(0) | Some(130)) {
                self.meta.invalidate(format!(
                    "shard {} (perf pid {}) ended with {}",
                    s.index,
                    s.pid,
                    sys::describe_status(s.status.unwrap_or(-1))
                ));
            }
        }
        if !self.meta.reached(Phase::Enabled) {
            self.meta.invalidate("sampling was never enabled");
        }
    }
}

/// Says so when disabling (from `asked` to `off`) took far longer than the
/// query itself (from `on` to `asked`): more than 2 s and more than the
/// query (ns since the Unix epoch). The window is then mostly not the
/// query's: under heavy scheduling (a switch-heavy worker with
/// `--off-cpu`), perf answers its control FIFO late.
pub fn slow_disable(on: u64, asked: u64, off: u64) -> Option<String> {
    let query = asked.saturating_sub(on);
    let took = off.saturating_sub(asked);
    (took > 2_000_000_000 && took > query).then(|| {
        format!(
            "disabling took {:.1} s after a {:.1} s query: the window ({:.1} s) is what perf \
             recorded, mostly after the query",
            took as f64 / 1e9,
            query as f64 / 1e9,
            off.saturating_sub(on) as f64 / 1e9
        )
    })
}

#[cfg(test)]
mod tests {
    use super::slow_disable;

    const S: u64 = 1_000_000_000;

    #[test]
    pub(super) fn disabling_far_longer_than_the_query_is_said() {
        // A 3 s query whose shards took 100 s to disable (issue 35).
        let w = slow_disable(10 * S, 13 * S, 113 * S).unwrap();
        assert!(
            w.starts_with("disabling took 100.0 s after a 3.0 s query"),
            "{w}"
        );
        assert!(w.contains("window (103.0 s)"), "{w}");
        // Quick, or short against a long query: nothing to say.
        assert_eq!(slow_disable(10 * S, 13 * S, 13 * S + S / 10), None);
        assert_eq!(slow_disable(0, 60 * S, 65 * S), None);
        assert_eq!(slow_disable(10 * S, 11 * S, 12 * S + S / 2), None);
    }
}
