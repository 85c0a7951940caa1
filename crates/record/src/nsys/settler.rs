//! The settling thread: takes each stopped collection from the serving
//! loop (so the next query's `nsys start` never waits for a report), polls
//! its `.nsys-rep` and `.qdstrm` until the report settles by the rule
//! `jobprof nsys collect` uses ([`jobprof_capture_format::settle`]), or
//! `--report-timeout` passes, then hashes and publishes it and answers the
//! driver (`finished`, or the error token with the reason). Ends once the
//! loop has hung up and every report is published or given up; a report
//! that could not be published (a full disk) is tried once more then.

use std::fs;
use std::path::{Path, PathBuf};
use std::sync::mpsc::{Receiver, RecvTimeoutError};
use std::thread::{self, JoinHandle};
use std::time::{Duration, Instant};

use jobprof_capture_format::nsys::{NsysCall, NsysCapture, ReportKind, NSYS_FORMAT_VERSION};
use jobprof_capture_format::settle::{self, Stamp, Watch};
use jobprof_capture_format::sha256;

use super::{call, log, publish};
use crate::sys;
use crate::tokens::Tokens;

/// One stopped collection.
pub struct Job {
    /// The query id.
    pub query: String,
    /// Its staging directory (`STAGING/Q`).
    pub dir: PathBuf,
    /// The report's path without extension (`nsys start -o`).
    pub base: PathBuf,
    /// `nsys start`.
    pub start: NsysCall,
    /// `nsys stop`.
    pub stop: NsysCall,
    /// The last lines of its output.
    pub stop_output: String,
    /// When `nsys stop` returned.
    pub stopped: Instant,
    /// Why the collection ended other than by its stop token.
    pub note: Option<String>,
}

/// What the thread shares with the sidecar.
pub struct Config {
    /// The worker's tokens.
    pub tokens: Tokens,
    /// `NSYS_ROOT/worker_N`.
    pub out_worker: PathBuf,
    /// The settle window.
    pub settle: Duration,
    /// The longest wait after `stop`.
    pub report_timeout: Duration,
    /// This node.
    pub host: String,
    /// `QdstrmImporter`, when one was found.
    pub importer: Option<PathBuf>,
    /// The longest importer run.
    pub call_timeout: Duration,
    /// `HOME` of the importer: a private directory, not the session's.
    pub importer_home: PathBuf,
}

/// What the thread did, for `done` or the error token.
#[derive(Default)]
pub struct Summary {
    /// Reports published.
    pub published: usize,
    /// What was given up or could not be published.
    pub errors: Vec<String>,
}

/// What to do with a report after a poll.
enum Decision {
    Wait,
    Publish(ReportKind, Option<String>),
    GiveUp(String),
}

struct Pending {
    job: Job,
    watch: Watch<PathBuf>,
    /// `QdstrmImporter -i`, once run.
    import: Option<NsysCall>,
}

/// A report ready to publish (kept for the retry when publishing failed).
struct Ready {
    job: Job,
    meta: NsysCapture,
    file: PathBuf,
}

/// Starts the thread; it ends after `rx` is hung up and all is settled.
pub fn spawn(cfg: Config, rx: Receiver<Job>) -> JoinHandle<Summary> {
    thread::spawn(move || cfg.serve(rx))
}

fn stamp(path: &Path) -> Option<Stamp> {
    use std::os::unix::fs::MetadataExt;
    let m = fs::symlink_metadata(path).ok().filter(|m| m.is_file())?;
    Some(Stamp {
        bytes: m.len(),
        mtime_ns: m.mtime().saturating_mul(1_000_000_000) + m.mtime_nsec(),
    })
}

fn with_ext(base: &Path, kind: ReportKind) -> PathBuf {
    let mut s = base.as_os_str().to_owned();
    s.push(kind.extension());
    PathBuf::from(s)
}

impl Config {
    fn poll(&self) -> Duration {
        (self.settle / 4).clamp(Duration::from_millis(50), Duration::from_secs(1))
    }

    fn serve(self, rx: Receiver<Job>) -> Summary {
        let mut pending: Vec<Pending> = Vec::new();
        let mut failed: Vec<Ready> = Vec::new();
        let mut summary = Summary::default();
        let mut open = true;
        loop {
            if open {
                match rx.recv_timeout(self.poll()) {
                    Ok(job) => pending.push(self.pending(job)),
                    Err(RecvTimeoutError::Timeout) => {}
                    Err(RecvTimeoutError::Disconnected) => open = false,
                }
            } else if pending.is_empty() {
                break;
            } else {
                thread::sleep(self.poll());
            }
            let now = Instant::now();
            let mut i = 0;
            while i < pending.len() {
                match self.decide(&mut pending[i], now) {
                    Decision::Wait => i += 1,
                    d => {
                        let p = pending.swap_remove(i);
                        self.conclude(p.job, d, &mut summary, &mut failed);
                    }
                }
            }
        }
        for r in failed {
            match self.publish(&r) {
                Ok(()) => {
                    summary.published += 1;
                    let _ = Tokens::remove(&self.tokens.query("error", &r.job.query));
                }
                Err(e) => summary.errors.push(e),
            }
        }
        summary
    }

    fn pending(&self, job: Job) -> Pending {
        log(&format!(
            "{}: stopped; waiting for its report to settle ({} s unchanged, at most {} s)",
            job.query,
            self.settle.as_secs_f64(),
            self.report_timeout.as_secs()
        ));
        Pending {
            watch: Watch::new(job.stopped),
            job,
            import: None,
        }
    }

    /// One poll of one report: settled, timed out, or wait.
    fn decide(&self, p: &mut Pending, now: Instant) -> Decision {
        let (rep, qd) = (
            with_ext(&p.job.base, ReportKind::NsysRep),
            with_ext(&p.job.base, ReportKind::Qdstrm),
        );
        let (rep_s, qd_s) = (stamp(&rep), stamp(&qd));
        let current: Vec<(PathBuf, Stamp)> = [(rep, rep_s), (qd, qd_s)]
            .into_iter()
            .filter_map(|(p, s)| Some((p, s?)))
            .collect();
        p.watch.update(&current, now);
        if let Some(s) = rep_s {
            if settle::settled(&[s.bytes], p.watch.quiet_for(now), self.settle) {
                return Decision::Publish(ReportKind::NsysRep, None);
            }
        }
        let timed_out = now.saturating_duration_since(p.job.stopped) >= self.report_timeout;
        // nsys stop said it did not convert the stream (its importer was
        // not where it looks, as with Debian's packages): once the
        // .qdstrm is whole, it is converted here, or published as it is.
        let skipped =
            p.job.stop.exit_code == Some(0) && p.job.stop_output.contains("skipping importation");
        let qd_whole =
            qd_s.is_some_and(|s| settle::settled(&[s.bytes], p.watch.quiet_for(now), self.settle));
        if rep_s.is_none() && qd_whole && (skipped || (timed_out && self.importer.is_some())) {
            if let Some(d) = self.import(p) {
                return d;
            }
        }
        if !timed_out {
            return Decision::Wait;
        }
        let t = self.report_timeout.as_secs();
        match (rep_s, qd_s) {
            (Some(s), _) if s.bytes > 0 => Decision::Publish(
                ReportKind::NsysRep,
                Some(format!(
                    "the .nsys-rep was still changing (or empty) {t} s after nsys stop \
                     (--report-timeout); published as it was"
                )),
            ),
            (_, Some(s)) if s.bytes > 0 => Decision::Publish(
                ReportKind::Qdstrm,
                Some(format!(
                    "no complete .nsys-rep {t} s after nsys stop (--report-timeout); the raw \
                     .qdstrm is published (convert it with QdstrmImporter)"
                )),
            ),
            _ => Decision::GiveUp(format!(
                "no report of query {}: neither {}.nsys-rep nor .qdstrm was written (non-empty) \
                 within {t} s after nsys stop (--report-timeout); nsys stop said: {}",
                p.job.query,
                p.job.base.display(),
                p.job
                    .stop
                    .exit_code
                    .map_or("no exit status".into(), |c| format!("exit {c}"))
            )),
        }
    }

    /// Converts the whole `.qdstrm` of `p` with `QdstrmImporter` (once):
    /// `None` when it wrote the `.nsys-rep` (settled by the next polls);
    /// else the `.qdstrm` is published, saying why.
    fn import(&self, p: &mut Pending) -> Option<Decision> {
        if let Some(tried) = &p.import {
            return (tried.exit_code != Some(0)).then(|| {
                Decision::Publish(
                    ReportKind::Qdstrm,
                    Some(format!(
                        "QdstrmImporter did not convert the .qdstrm ({}); the raw .qdstrm is \
                         published",
                        sys::describe_status(tried.exit_code.unwrap_or(-1))
                    )),
                )
            });
        }
        let qd = with_ext(&p.job.base, ReportKind::Qdstrm);
        let Some(importer) = &self.importer else {
            return Some(Decision::Publish(
                ReportKind::Qdstrm,
                Some(
                    "nsys stop did not convert the .qdstrm (its importer was not found) and no \
                     QdstrmImporter was found (--importer PATH); the raw .qdstrm is published"
                        .into(),
                ),
            ));
        };
        let qd_text = qd.to_string_lossy().into_owned();
        log(&format!(
            "{}: converting {qd_text} with {}",
            p.job.query,
            importer.display()
        ));
        // Its own HOME: QdstrmImporter fills `~/.nsightsystems/.../cache`
        // with copies of the worker's binaries, the cache the session's
        // agent uses, and the session's next `stop` then hangs (nsys
        // 2022.4; docs/nsys.md).
        let ran = call::run_env(
            importer,
            &["-i", &qd_text],
            &p.job.dir.join(".import.log"),
            self.call_timeout,
            &[("HOME", &self.importer_home)],
        );
        if !ran.ok() {
            log(&format!(
                "{}: QdstrmImporter: {}",
                p.job.query,
                ran.describe()
            ));
        }
        let ok = ran.ok() && stamp(&with_ext(&p.job.base, ReportKind::NsysRep)).is_some();
        p.import = Some(NsysCall {
            exit_code: if ok {
                Some(0)
            } else {
                ran.call.exit_code.filter(|c| *c != 0).or(Some(1))
            },
            ..ran.call
        });
        if ok {
            // The .qdstrm stays beside it until the report is published.
            let how = format!(
                "converted from the .qdstrm by {} (nsys stop did not)",
                importer.display()
            );
            p.job.note = Some(match p.job.note.take() {
                Some(n) => format!("{n}; {how}"),
                None => how,
            });
            None
        } else {
            self.import(p)
        }
    }

    fn conclude(&self, job: Job, d: Decision, summary: &mut Summary, failed: &mut Vec<Ready>) {
        let q = job.query.clone();
        let (kind, reason) = match d {
            Decision::Wait => return,
            Decision::GiveUp(msg) => {
                log(&msg);
                let _ = self.tokens.write(&self.tokens.query("error", &q), &msg);
                summary.errors.push(msg);
                return;
            }
            Decision::Publish(kind, reason) => (kind, reason),
        };
        let ready = match self.prepare(job, kind, reason) {
            Ok(r) => r,
            Err(msg) => {
                log(&msg);
                let _ = self.tokens.write(&self.tokens.query("error", &q), &msg);
                summary.errors.push(msg);
                return;
            }
        };
        match self.publish(&ready) {
            Ok(()) => summary.published += 1,
            Err(e) => {
                let msg =
                    format!("cannot publish the report of {q} yet (retried at shutdown): {e}");
                log(&msg);
                let _ = self.tokens.write(&self.tokens.query("error", &q), &msg);
                failed.push(ready);
            }
        }
    }

    /// Hashes the chosen file and writes its metadata.
    fn prepare(&self, job: Job, kind: ReportKind, reason: Option<String>) -> Result<Ready, String> {
        let file = with_ext(&job.base, kind);
        let (sha256, bytes) = fs::File::open(&file)
            .and_then(sha256::hash_reader)
            .map_err(|e| format!("cannot read {}: {e}", file.display()))?;
        let now = sys::now_ns();
        // Settled by the rule; the note (a collection ended by shutdown)
        // only explains.
        let settled = kind == ReportKind::NsysRep && reason.is_none();
        let reason = match (reason, &job.note) {
            (Some(r), Some(n)) => Some(format!("{n}; {r}")),
            (r, n) => r.or(n.clone()),
        };
        let meta = NsysCapture {
            format_version: NSYS_FORMAT_VERSION,
            query: job.query.clone(),
            worker: self.tokens.worker,
            host: self.host.clone(),
            slurm_job_id: std::env::var("SLURM_JOB_ID").ok().filter(|s| !s.is_empty()),
            start: job.start.clone(),
            stop: job.stop.clone(),
            settle_ms: self.settle.as_millis() as u64,
            report_timeout_ms: self.report_timeout.as_millis() as u64,
            settled_at_ns: settled.then_some(now),
            published_at_ns: now,
            file: file
                .file_name()
                .map(|n| n.to_string_lossy().into_owned())
                .unwrap_or_default(),
            kind,
            settled,
            bytes,
            sha256,
            reason,
        };
        Ok(Ready { job, meta, file })
    }

    fn publish(&self, r: &Ready) -> Result<(), String> {
        let mut meta = r.meta.clone();
        meta.published_at_ns = sys::now_ns();
        let dir = publish::report(&r.file, &self.out_worker, &meta)?;
        let _ = fs::remove_dir_all(&r.job.dir);
        let m = &meta;
        let answer = format!(
            "query={} published: {} file={} kind={} bytes={} settled={} wait_s={:.1}{}",
            m.query,
            dir.display(),
            m.file,
            m.kind.as_str(),
            m.bytes,
            m.settled,
            m.wait_s(),
            m.reason
                .as_ref()
                .map_or(String::new(), |r| format!("\nreason: {r}"))
        );
        log(&format!(
            "published {} ({} bytes, {})",
            dir.display(),
            m.bytes,
            m.kind.as_str()
        ));
        let _ = self
            .tokens
            .write(&self.tokens.query("finished", &m.query), &answer);
        Ok(())
    }
}
