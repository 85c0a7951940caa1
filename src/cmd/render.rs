//! `jobprof render`: folded stacks from any tool in, a flamegraph (SVG or
//! offline HTML), speedscope JSON or merged folded text out.

use std::path::{Path, PathBuf};

use clap::Args;

use jobprof::output::render;
use jobprof::sys::input::Source;
use jobprof::ExitCode;

use super::files::{refuse_overwriting_inputs, warn_bad_lines, write_output};
use super::look::LookArgs;

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
    let input = super::files::read_folded_inputs(&sources)?;
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

fn names(paths: &[PathBuf]) -> String {
    paths
        .iter()
        .map(|p| p.display().to_string())
        .collect::<Vec<_>>()
        .join(", ")
}
