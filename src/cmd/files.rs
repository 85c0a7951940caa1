//! What the file commands (`fold`, `render`, `report`, `diff`) share at
//! their edges: a perf.data among the inputs symbolized as `process` does
//! and folded in memory, the bad lines of a folded input reported, an output written atomically
//! and never over one of the inputs.

use std::io::Write;
use std::path::{Path, PathBuf};

use anyhow::Context;

use jobprof::output::render;
use jobprof::output::render::folded::{read_folded_or, FoldedInput};
use jobprof::pipeline;
use jobprof::sys::atomic::AtomicFile;
use jobprof::sys::input::Source;
use jobprof::text::fold::{Folded, Folder};

/// How `fold`, `render` and `report` symbolize a perf.data: `process`'s
/// defaults, with its symbol cache.
pub fn perf_data_options() -> pipeline::Options {
    let mut o = pipeline::Options::default();
    o.cache_dir = super::pipeline_args::default_cache_dir();
    o
}

/// The file of `src` when it is a `perf.data`.
fn perf_data(src: &Source) -> Option<&Path> {
    match src {
        Source::Path(file) if jobprof::sys::input::is_perf_data(file).unwrap_or(false) => {
            Some(file)
        }
        _ => None,
    }
}

/// Folded stacks read from `sources` and merged ([`read_folded_or`]),
/// each `perf.data` among them symbolized and folded in memory as
/// `jobprof process` makes its `stacks.folded` ([`pipeline::folded_plain`]).
pub fn read_folded_inputs(sources: &[Source]) -> jobprof::Result<FoldedInput> {
    read_folded_or(sources, |src| {
        perf_data(src)
            .map(|file| pipeline::folded_plain(file, &perf_data_options()))
            .transpose()
    })
}

/// `sources` folded as `folder` folds `perf script` text
/// ([`Folder::fold_sources`]), each `perf.data` among them symbolized in
/// memory and its samples folded by the same fold
/// ([`pipeline::fold_plain`]: the fold of its text, without the text;
/// under `--compat inferno`, of the text made in memory).
pub fn fold_inputs(folder: &Folder, sources: &[Source]) -> jobprof::Result<Folded> {
    if !sources.iter().any(|s| perf_data(s).is_some()) {
        return folder.fold_sources(sources);
    }
    // inferno reads text: its fold is of the samples' text.
    let as_text = folder.options().compat == jobprof::text::fold::Compat::Inferno;
    let mut stream = folder.stream();
    // The runs' units are numbered after the inputs'.
    let mut unit = sources.len();
    for (i, src) in sources.iter().enumerate() {
        match perf_data(src) {
            Some(file) => {
                let opts = perf_data_options();
                (stream, unit) = pipeline::fold_plain(file, &opts, (stream, unit), as_text)?;
            }
            None => stream.push_source(i, src)?,
        }
    }
    Ok(stream.finish())
}

/// Writes `path` atomically with `f` (nothing is left behind on error), or
/// stdout when `path` is `-`.
pub fn write_output(
    path: &Path,
    f: impl FnOnce(&mut dyn Write) -> render::Result<()>,
) -> anyhow::Result<()> {
    if path == Path::new("-") {
        let stdout = std::io::stdout();
        let mut w = std::io::BufWriter::with_capacity(1 << 16, stdout.lock());
        f(&mut w).map_err(jobprof::Error::from)?;
        w.flush().context("writing to stdout")?;
        return Ok(());
    }
    let mut out = AtomicFile::create(path)?;
    f(&mut out).map_err(jobprof::Error::from)?;
    out.commit()?;
    Ok(())
}

/// Refuses an output path that is one of the inputs: jobprof never
/// modifies its inputs.
pub fn refuse_overwriting_inputs(output: &Path, inputs: &[PathBuf]) -> anyhow::Result<()> {
    use std::os::unix::fs::MetadataExt;
    let Ok(out) = std::fs::metadata(output) else {
        return Ok(());
    };
    for input in inputs {
        if let Ok(m) = std::fs::metadata(input) {
            if m.dev() == out.dev() && m.ino() == out.ino() {
                return Err(jobprof::Error::Usage(format!(
                    "{}: the output is also an input; choose another output path \
                     (jobprof never modifies its inputs)",
                    output.display()
                ))
                .into());
            }
        }
    }
    Ok(())
}

/// Prints the bad lines of an input (first few with file:line) on stderr.
pub fn warn_bad_lines(input: &FoldedInput) {
    if input.bad_lines > 0 {
        jobprof::errln!(
            "jobprof: warning: {} line(s) were not `stack count` and were skipped \
             (the exit code will be 1):",
            input.bad_lines
        );
        for b in &input.first_bad {
            jobprof::errln!("  {b}");
        }
    }
    if input.non_utf8_lines > 0 {
        jobprof::errln!(
            "jobprof: warning: {} line(s) were not valid UTF-8 and were read with U+FFFD replacements",
            input.non_utf8_lines
        );
    }
}
