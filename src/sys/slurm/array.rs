//! The sbatch script of a `jobprof reprocess` job array, and its
//! submission (`sbatch --parsable`).
//!
//! The caller (`bulk`) says what the tasks run and how many captures there
//! are; this module writes the `#SBATCH` lines and the one `exec` line, with
//! the command built as an argv and every word quoted, so any path works.

use std::io::Write;
use std::path::{Path, PathBuf};

use super::{JobId, Slurm};
use crate::error::{Error, Result};
use crate::sys::exec::shell_quote;

/// The sbatch array job that runs a reprocessing ([`script`]).
#[derive(Debug, Clone)]
pub struct ArrayJob {
    /// The jobprof executable the tasks run (absolute: tasks do not share
    /// the submitter's `PATH`).
    pub jobprof: PathBuf,
    /// The trees to reprocess (as given; made absolute by the caller).
    pub roots: Vec<PathBuf>,
    /// Array size; `None` = the number of captures to do, at most
    /// [`DEFAULT_MAX_ARRAY`].
    pub array_count: Option<usize>,
    /// `#SBATCH --partition`.
    pub partition: Option<String>,
    /// `#SBATCH --time`.
    pub time: Option<String>,
    /// `#SBATCH --cpus-per-task` (also each task's `--jobs`, through
    /// `SLURM_CPUS_PER_TASK`); `None` = [`DEFAULT_CPUS_PER_TASK`].
    pub cpus_per_task: Option<usize>,
    /// Further `jobprof reprocess` options for the tasks (`--recompress`).
    pub extra_args: Vec<String>,
}

/// Largest array [`script`] makes when not told a size.
pub const DEFAULT_MAX_ARRAY: usize = 64;
/// CPUs of each array task when not told.
pub const DEFAULT_CPUS_PER_TASK: usize = 4;

fn utf8_path(p: &Path, what: &str) -> Result<String> {
    p.to_str().map(str::to_string).ok_or_else(|| {
        Error::Usage(format!(
            "{what} {} is not valid UTF-8; it cannot be written into a batch script",
            p.display()
        ))
    })
}

fn sbatch_value(name: &str, v: &str) -> Result<String> {
    if v.is_empty() || v.chars().any(|c| c.is_whitespace() || c.is_control()) {
        return Err(Error::Usage(format!(
            "--{name} `{v}`: give a value without spaces (it goes on an #SBATCH line)"
        )));
    }
    Ok(v.to_string())
}

/// Writes the sbatch script of a job array that runs `jobprof reprocess`
/// over `roots` (absolute): one task per share of the captures (each task
/// finds its share from `SLURM_ARRAY_TASK_ID`). `captures` is how many
/// captures the roots hold, `pending` how many of them have work to do
/// (the array's size when `job.array_count` does not give one). The
/// command line is built as an argv and every word quoted, so any path
/// works.
pub fn script(
    job: &ArrayJob,
    roots: &[PathBuf],
    captures: usize,
    pending: usize,
) -> Result<String> {
    let count = match job.array_count {
        Some(0) => return Err(Error::Usage("--array-count must be at least 1".into())),
        Some(n) => n,
        None => pending.clamp(1, DEFAULT_MAX_ARRAY),
    };
    let cpus = job.cpus_per_task.unwrap_or(DEFAULT_CPUS_PER_TASK).max(1);
    let mut argv = vec![
        utf8_path(&job.jobprof, "the jobprof executable")?,
        "reprocess".to_string(),
    ];
    argv.extend(job.extra_args.iter().cloned());
    argv.push("--".into());
    for r in roots {
        argv.push(utf8_path(r, "ROOT")?);
    }
    let command: Vec<String> = argv.iter().map(|w| shell_quote(w)).collect();
    let mut s = String::new();
    s.push_str("#!/bin/bash\n");
    s.push_str(&format!(
        "# Written by `jobprof reprocess --sbatch` (jobprof {}) on {}.\n",
        env!("CARGO_PKG_VERSION"),
        crate::sys::units::utc_timestamp()
    ));
    s.push_str(&format!(
        "# {count} array task(s) share the {} capture(s) under the roots below ({pending} to do\n\
         # when written). Each capture goes to the task its path below its ROOT hashes to\n\
         # (FNV-1a; task I from SLURM_ARRAY_TASK_ID), so every capture is processed exactly\n\
         # once, the tasks never talk to each other, and a result directory that appears\n\
         # between two tasks' starts moves no other capture. A killed task leaves only complete\n\
         # outputs: submit again to finish the rest (complete captures are skipped).\n",
        captures
    ));
    s.push_str("#SBATCH --job-name=jobprof-reprocess\n");
    s.push_str(&format!("#SBATCH --array=0-{}\n", count - 1));
    s.push_str("#SBATCH --nodes=1\n#SBATCH --ntasks=1\n");
    s.push_str(&format!("#SBATCH --cpus-per-task={cpus}\n"));
    s.push_str("#SBATCH --output=jobprof-reprocess-%A_%a.out\n");
    if let Some(p) = &job.partition {
        s.push_str(&format!(
            "#SBATCH --partition={}\n",
            sbatch_value("partition", p)?
        ));
    }
    if let Some(t) = &job.time {
        s.push_str(&format!("#SBATCH --time={}\n", sbatch_value("time", t)?));
    }
    s.push_str("set -euo pipefail\n");
    s.push_str(
        "# --jobs comes from SLURM_CPUS_PER_TASK; the share from SLURM_ARRAY_TASK_ID,\n\
         # SLURM_ARRAY_TASK_MIN and SLURM_ARRAY_TASK_COUNT.\n",
    );
    s.push_str(&format!("exec {}\n", command.join(" ")));
    Ok(s)
}

/// Submits a batch script (`sbatch --parsable FILE`, the script written to
/// a temporary file that sbatch copies) and returns the job id.
pub fn submit(slurm: &Slurm, script: &str) -> Result<JobId> {
    let mut f = tempfile::Builder::new()
        .prefix("jobprof-reprocess-")
        .suffix(".sbatch")
        .tempfile()
        .map_err(|e| Error::io(std::env::temp_dir(), e))?;
    f.write_all(script.as_bytes())
        .and_then(|()| f.flush())
        .map_err(|e| Error::io(f.path(), e))?;
    Ok(slurm.submit([f.path().as_os_str().to_owned()])?)
}
