//! `jobprof render`: folded stacks from any tool in, a flamegraph (SVG or
//! offline HTML), speedscope JSON or merged folded text out.

use std::io::Write;
use std::path::{Path, PathBuf};

use anyhow::Context;
use clap::Args;

use jobprof::output::render::folded::{count_name_of, read_folded, FoldedInput};
use jobprof::output::render::{self, Format, RenderOptions};
use jobprof::sys::atomic::AtomicFile;
use jobprof::sys::input::Source;
use jobprof::ExitCode;

/// Options shared by `render` and `diff`: how the flamegraph looks.
#[derive(Debug, Args)]
pub struct LookArgs {
    /// Title at the top (default: "Flame Graph", or "Differential Flame Graph").
    #[arg(long, value_name = "TEXT")]
    pub title: Option<String>,

    /// A second line under the title.
    #[arg(long, value_name = "TEXT")]
    pub subtitle: Option<String>,

    /// Image width in pixels [default: fit the window].
    #[arg(long, value_name = "PIXELS", value_parser = clap::value_parser!(u32).range(100..))]
    pub width: Option<u32>,

    /// Leave out frames narrower than this percentage of the total.
    #[arg(long, value_name = "PERCENT", default_value_t = 0.1)]
    pub minwidth: f64,

    /// Icicle graph: roots at the top, stacks growing downwards.
    #[arg(long)]
    pub inverted: bool,

    /// What the counts are, for the totals and tooltips (e.g. samples, ns,
    /// bytes; ns are shown as time) [default: what the inputs' first line
    /// says (`# counts: ns`, written by `jobprof fold`), else what their
    /// capture directory says (its summary.json's event: `ns` for
    /// cpu-clock, whose periods the counts are), else samples].
    /// `--countname` (inferno's spelling) also works.
    #[arg(long, value_name = "NAME", alias = "countname")]
    pub count_name: Option<String>,

    /// Output format: svg, html, speedscope, folded, pprof [default: from
    /// the output's extension (.svg, .html, .json, .folded, .pb.gz); svg on
    /// stdout].
    #[arg(long, value_name = "FORMAT")]
    pub format: Option<String>,
}

impl LookArgs {
    /// Library options from the flags, drawn with `palette`.
    pub fn options(&self, default_title: &str, palette: &str) -> anyhow::Result<RenderOptions> {
        let mut o = RenderOptions::default();
        o.title = self
            .title
            .clone()
            .unwrap_or_else(|| default_title.to_string());
        o.subtitle = self.subtitle.clone();
        o.width = self.width.map(|w| w as usize);
        o.min_width_pct = self.minwidth;
        o.colors = RenderOptions::parse_palette(palette).map_err(jobprof::Error::from)?;
        o.inverted = self.inverted;
        if let Some(n) = &self.count_name {
            o.count_name = n.clone();
        }
        Ok(o)
    }

    /// [`LookArgs::options`] for stacks read from `inputs`: without
    /// `--count-name`, the counts are named as their capture directories
    /// say ([`count_name_of`]).
    pub fn options_for(
        &self,
        default_title: &str,
        palette: &str,
        inputs: &[PathBuf],
    ) -> anyhow::Result<RenderOptions> {
        let mut o = self.options(default_title, palette)?;
        if self.count_name.is_none() {
            let paths: Vec<&Path> = inputs.iter().map(PathBuf::as_path).collect();
            o.count_name = count_name_of(&paths);
        }
        Ok(o)
    }

    /// Without `--count-name`, the count name the folded inputs declare
    /// (`# counts: ns`, as `fold` writes it), when one does and none says
    /// otherwise.
    pub fn take_declared<'a>(
        &self,
        opts: &mut RenderOptions,
        inputs: impl IntoIterator<Item = &'a FoldedInput>,
    ) {
        if self.count_name.is_some() {
            return;
        }
        let mut said = inputs.into_iter().filter_map(|i| i.count_name.as_deref());
        if let Some(first) = said.next() {
            if said.all(|n| n == first) {
                first.clone_into(&mut opts.count_name);
            }
        }
    }

    /// The format to write `output` in (`None` or `-`: stdout, SVG unless
    /// --format says otherwise).
    pub fn format_for(&self, output: Option<&Path>) -> anyhow::Result<Format> {
        let f = match (&self.format, output) {
            (Some(f), _) => f.parse(),
            (None, None) => Ok(Format::Svg),
            (None, Some(p)) if p == Path::new("-") => Ok(Format::Svg),
            (None, Some(p)) => Format::from_path(p),
        };
        Ok(f.map_err(jobprof::Error::from)?)
    }
}

/// Render collapsed stacks as a flamegraph (SVG or HTML), speedscope, pprof or folded.
///
/// Render collapsed stacks (`frame;frame;... COUNT` lines, from jobprof,
/// inferno, FlameGraph, py-spy, ...) as an interactive flamegraph (SVG or a
/// self-contained offline HTML page), speedscope JSON, a pprof profile, or
/// merged folded stacks (`--format folded`).
///
/// Several inputs are merged (counts of equal stacks summed). Compressed
/// inputs (.gz, .zst) are recognised by their magic bytes. Without -o the
/// SVG goes to stdout, as with inferno-flamegraph. `perf script` text is
/// refused with the `jobprof fold` command that folds it; a perf.data file
/// is symbolized natively and folded first, as `jobprof process` does.
#[derive(Debug, Args)]
#[command(after_help = "Examples:
  jobprof render perf.data -o flamegraph.html
  perf script | jobprof fold | jobprof render > flamegraph.svg
  jobprof render stacks.folded -o flamegraph.html --title 'job 4242 · q17'
  jobprof render a.folded b.folded.zst -o merged.folded
  jobprof render stacks.folded -o profile.json      # speedscope
  jobprof render stacks.folded --inverted --colors java --countname ns > icicle.svg

Exit status: 0 rendered; 1 rendered, but some lines were not `stack COUNT`
and were skipped (they are listed); 2 bad usage, an unreadable input, no
usable line (nothing is written), or `perf script` text (fold it first).")]
pub struct RenderArgs {
    /// Folded stack files, or perf.data files; `-` or none reads stdin.
    #[arg(value_name = "FOLDED")]
    pub inputs: Vec<PathBuf>,

    /// Output file, written atomically (.svg, .html, .json or .folded)
    /// [default: SVG on stdout].
    #[arg(short, long, value_name = "OUT")]
    pub output: Option<PathBuf>,

    /// Colour palette: hot, mem, io, wakeup, java, js, perl, python, rust,
    /// red, green, blue, aqua, yellow, purple, orange.
    #[arg(long, value_name = "PALETTE", default_value = "hot")]
    pub colors: String,

    #[command(flatten)]
    pub look: LookArgs,

    /// Do not warn about lines that could not be used.
    #[arg(short, long)]
    pub quiet: bool,
}

pub fn run(args: RenderArgs) -> anyhow::Result<ExitCode> {
    let output = args.output.as_deref();
    let format = args.look.format_for(output)?;
    let mut opts = args
        .look
        .options_for("Flame Graph", &args.colors, &args.inputs)?;
    // Merged folded text says what its counts are, as `fold` does.
    opts.counts_line = true;
    let sources: Vec<Source> = if args.inputs.is_empty() {
        vec![Source::Stdin]
    } else {
        args.inputs.iter().map(Source::from_arg).collect()
    };
    if sources.iter().filter(|s| **s == Source::Stdin).count() > 1 {
        return Err(jobprof::Error::Usage("stdin (`-`) can be given only once".into()).into());
    }
    if let Some(out) = output {
        refuse_overwriting_inputs(out, &args.inputs)?;
    }
    let (sources, _symbolized) =
        super::fold::symbolize_perf_data(sources, jobprof::capture::FOLDED)?;
    let input = read_folded(&sources)?;
    if input.stacks.is_empty() {
        let what = if args.inputs.is_empty() {
            "stdin".to_string()
        } else {
            names(&args.inputs)
        };
        return Err(jobprof::Error::from(input.nothing_usable(&what)).into());
    }
    if !args.quiet {
        warn_bad_lines(&input);
    }
    args.look.take_declared(&mut opts, [&input]);
    write_output(output.unwrap_or(Path::new("-")), |w| {
        render::render(format, &input.stacks, &opts, w)
    })?;
    Ok(if input.bad_lines > 0 {
        ExitCode::Failed
    } else {
        ExitCode::Success
    })
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

fn names(paths: &[PathBuf]) -> String {
    paths
        .iter()
        .map(|p| p.display().to_string())
        .collect::<Vec<_>>()
        .join(", ")
}
