//! `jobprof fold|render|report|diff PATH/perf.data`: a plain `perf.data`
//! symbolized as `jobprof process FILE` symbolizes it (one capture, this
//! host's files by build id, the symbol cache), its samples handed
//! straight to the fold and the report's reader as the run makes them.
//! Nothing is written: no output directory, no archive, no temporary
//! directory, and no text read back.
//!
//! [`folded_plain`] gives what `render` and `diff` read from the
//! `stacks.folded` such a run writes; [`fold_plain`] folds the samples
//! into `jobprof fold`'s own fold (its options, as it folds the run's
//! `perf script` text); [`report_plain`] gives the profile `report.txt`
//! is written from.

use std::path::Path;
use std::sync::Mutex;
use std::time::Instant;

use super::{Formats, Options, Pass, Pipeline};
use crate::capture;
use crate::error::{Error, Result};
use crate::output::render::folded::{self, FoldedInput};
use crate::output::report::Profile;
use crate::symbolize::perf::PerfProbe;
use crate::sys::progress::LogLines;
use crate::text::fold::StreamFolder;

/// What a run in memory hands on besides its [`Pass`]: a caller's fold
/// its samples go into instead of the run's own.
#[derive(Default)]
pub(super) struct Memory {
    /// That fold, and the number its first unit takes in it (units of
    /// inputs folded before are numbered below).
    into: Mutex<Option<(StreamFolder, usize)>>,
    /// The runs hand that fold their samples' `perf script` text, not the
    /// samples: `--compat inferno` folds as inferno folds the text, down
    /// to the headers inferno skips (a thread id of -1) and the lines it
    /// misreads (a DSO path with ` (` in it).
    pub(super) as_text: bool,
}

impl Memory {
    /// The caller's fold and its next unit number, taken for the run
    /// (`None`: the run folds with its own options).
    pub(super) fn take_fold(&self) -> Option<(StreamFolder, usize)> {
        self.into.lock().unwrap_or_else(|e| e.into_inner()).take()
    }

    /// The caller's fold back, its next free unit number `next`.
    pub(super) fn give_back(&self, stream: StreamFolder, next: usize) {
        *self.into.lock().unwrap_or_else(|e| e.into_inner()) = Some((stream, next));
    }
}

/// What `jobprof render` and `diff` read from the `stacks.folded` that
/// `jobprof process FILE` writes for the plain `perf.data` `file` (its
/// count unit as a `# counts:` line would say it), made in memory. A file
/// that cannot be symbolized is an error naming it (exit code 2).
pub fn folded_plain(file: &Path, opts: &Options) -> Result<FoldedInput> {
    in_memory(file, opts, false, &Memory::default(), |p, pass| {
        let count_name = p.render_options(&pass.folded, &pass.stats).count_name;
        Ok(folded::as_input(&pass.folded.stacks, &count_name, file))
    })
}

/// `jobprof fold FILE`: folds the samples of the plain `perf.data` `file`
/// into `stream` (with its options: the fold of the file's `perf script`
/// text, made without the text), the run's units numbered from `unit`.
/// Returns the fold and the next free unit number. `as_text`: the fold
/// reads the samples' text instead (`--compat inferno`, [`Memory::as_text`]).
pub fn fold_plain(
    file: &Path,
    opts: &Options,
    (stream, unit): (StreamFolder, usize),
    as_text: bool,
) -> Result<(StreamFolder, usize)> {
    let memory = Memory {
        as_text,
        ..Memory::default()
    };
    memory.give_back(stream, unit);
    in_memory(file, opts, false, &memory, |_, _| Ok(()))?;
    memory.take_fold().ok_or_else(|| {
        Error::Usage(format!(
            "{}: cannot be symbolized: no samples were folded",
            file.display()
        ))
    })
}

/// `jobprof report FILE`: the profile `report.txt` is written from for
/// the plain `perf.data` `file`, read from its samples as the run makes
/// them (not from text: the samples keep what the text lacks, such as the
/// ELF symbol of a frame printed with inlined lines only). A file that
/// cannot be symbolized is an error naming it (exit code 2).
pub fn report_plain(file: &Path, opts: &Options) -> Result<Profile> {
    let profile = |p: &Pipeline<'_>, mut pass: Pass| {
        // Each time slice's reader reads on from the one before; where
        // they cannot be merged (slices whose first events differ, no
        // event asked for) the whole file is read as one unit.
        if pass.report.is_none() && !pass.folded.stacks.is_empty() {
            return Ok(None);
        }
        let text = (!pass.folded.stacks.is_empty()).then(|| file.to_path_buf());
        p.profile_of(&mut pass, text).map(Some)
    };
    if let Some(p) = in_memory(file, opts, true, &Memory::default(), profile)? {
        return Ok(p);
    }
    let whole = Options {
        time_slices: Some(1),
        ..opts.clone()
    };
    in_memory(file, &whole, true, &Memory::default(), profile)?.ok_or_else(|| {
        Error::Usage(format!(
            "{}: cannot be symbolized: no report was made",
            file.display()
        ))
    })
}

/// Symbolizes and folds the plain `perf.data` `file` in memory (its
/// report read too when `report`) and hands the pass to `then`.
fn in_memory<T>(
    file: &Path,
    opts: &Options,
    report: bool,
    memory: &Memory,
    then: impl FnOnce(&Pipeline<'_>, Pass) -> Result<T>,
) -> Result<T> {
    let cannot = |why: &dyn std::fmt::Display| {
        Error::Usage(format!("{}: cannot be symbolized: {why}", file.display()))
    };
    let opts = Options {
        formats: Formats {
            render: Vec::new(),
            summary: false,
            report,
        },
        ..opts.clone()
    };
    let perf = PerfProbe::start(opts.perf.as_deref());
    // `--perf PATH` that does not work is a usage error up front.
    let explicit = opts.perf.as_ref();
    if let (Some(p), Some(Err(e))) = (explicit, explicit.map(|_| perf.get())) {
        return Err(Error::Usage(format!("--perf {}: {e}", p.display())));
    }
    let found = capture::discover(&[file.to_path_buf()], &capture::Filter::default())?;
    let [found] = found.as_slice() else {
        return Err(Error::Usage(format!(
            "{}: not one perf.data file",
            file.display()
        )));
    };
    let cap = capture::validate(found).map_err(|refusal| cannot(&refusal.0))?;
    let (opts, _store) = opts.with_store();
    let progress = LogLines::silent();
    let mut p = Pipeline::new(&cap, &opts, &perf, &progress, Instant::now());
    p.memory = Some(memory);
    let pass = match p.symbolize_or_fold().map_err(|e| cannot(&e))? {
        Ok(pass) if pass.failures.is_empty() => pass,
        Ok(pass) => return Err(cannot(&pass.failures.join("; "))),
        Err(done) => return Err(cannot(&done.message)),
    };
    then(&p, pass)
}
