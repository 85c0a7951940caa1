//! `jobprof fold`: perf script text in, collapsed stacks out.

use std::io::{self, Write};
use std::path::PathBuf;

use anyhow::Context;
use clap::{Args, ValueEnum};

use jobprof::output::render::folded::counts_line;
use jobprof::output::render::{Format, RenderOptions};
use jobprof::output::split::write_split;
use jobprof::sys::atomic::AtomicFile;
use jobprof::sys::input::Source;
use jobprof::text::fold::split::{split_by, SplitBy};
use jobprof::text::fold::{Compat, Folded, Folder, Options, SkippedKind};
use jobprof::ExitCode;

use super::files::fold_inputs;

/// Fold `perf script` text into collapsed stacks (`frame;frame;... count`).
///
/// Several INPUTs are shards of one capture: their stacks are merged. A
/// perf.data file is symbolized natively first (this host's files by build
/// id, as `jobprof process PERF_DATA` does): no `perf script` needed.
/// Compressed inputs (.gz, .zst) are recognised by their magic bytes.
/// The result is the input of `jobprof render`.
#[derive(Debug, Args)]
#[command(after_help = "Examples:
  jobprof fold perf.data > stacks.folded
  perf script | jobprof fold > stacks.folded
  perf script | jobprof fold | jobprof render > flamegraph.svg
  jobprof fold perf.script.zst -o stacks.folded --stats
  jobprof fold shard0.txt.gz shard1.txt.gz --tid -j 4 -o stacks.folded
  jobprof fold perf.txt --split-by tid -o threads/ --formats all
  jobprof fold perf.txt --compat inferno      # byte for byte inferno-collapse-perf

Exit status: 0 folded (lines that were neither headers nor frames are
counted and reported, not fatal); 2 bad usage, an unreadable or binary input,
a perf.data file that cannot be symbolized, or a corrupt compressed input
(nothing is written).")]
pub struct FoldArgs {
    /// perf script text files, or perf.data files; `-` or none reads stdin.
    #[arg(value_name = "INPUT")]
    pub inputs: Vec<PathBuf>,

    /// Write to this file (atomically: a temp file in the same directory,
    /// then renamed; nothing is left behind on error) instead of stdout.
    /// With --split-by, the directory for the per-group files.
    #[arg(short, long, value_name = "PATH")]
    pub output: Option<PathBuf>,

    /// Write one profile per process name (comm), process (pid: implies
    /// --pid) or thread (tid: implies --tid) into the -o directory, named
    /// after the group with unsafe characters replaced, plus index.tsv.
    #[arg(long, value_name = "GROUP", requires = "output")]
    pub split_by: Option<SplitByArg>,

    /// With --split-by: formats to write per group, comma-separated:
    /// folded, svg, html, speedscope, pprof, or all.
    #[arg(
        long,
        value_name = "LIST",
        default_value = "folded",
        requires = "split_by"
    )]
    pub formats: String,

    /// Include the PID in the root frame (`comm-PID`).
    #[arg(long)]
    pub pid: bool,

    /// Include PID and TID in the root frame (`comm-PID/TID`).
    #[arg(long)]
    pub tid: bool,

    /// Annotate kernel frames with `_[k]`.
    #[arg(long)]
    pub kernel: bool,

    /// Annotate JIT frames with `_[j]`.
    #[arg(long)]
    pub jit: bool,

    /// Both --kernel and --jit.
    #[arg(long)]
    pub all: bool,

    /// Show raw addresses where symbols are unknown.
    #[arg(long)]
    pub addrs: bool,

    /// Fold only samples of this event (default: the first event seen). A
    /// name without modifiers also matches its modified forms (`cycles`
    /// matches `cycles:u`), except under `--compat inferno`.
    #[arg(long, value_name = "EVENT")]
    pub event_filter: Option<String>,

    /// Drop the callers of any frame whose symbol is FUNC (repeatable).
    #[arg(long, value_name = "FUNC")]
    pub skip_after: Vec<String>,

    /// Worker threads [default: all cores]. `--nthreads` (inferno's
    /// spelling) also works.
    #[arg(short = 'j', long, value_name = "N", alias = "nthreads")]
    pub threads: Option<usize>,

    /// Reproduce another tool byte for byte, including its known losses.
    #[arg(long, value_name = "TOOL")]
    pub compat: Option<CompatArg>,

    /// Print one line of statistics on stderr: bytes, samples, unique
    /// stacks, skipped lines, seconds and MB/s.
    #[arg(long)]
    pub stats: bool,

    /// Do not warn about lines that could not be parsed.
    #[arg(short, long)]
    pub quiet: bool,
}

/// Groups `--split-by` can make.
#[derive(Debug, Clone, Copy, ValueEnum)]
pub enum SplitByArg {
    /// Process name.
    Comm,
    /// Process (`comm-PID`).
    Pid,
    /// Thread (`comm-PID/TID`).
    Tid,
}

impl From<SplitByArg> for SplitBy {
    fn from(a: SplitByArg) -> Self {
        match a {
            SplitByArg::Comm => SplitBy::Comm,
            SplitByArg::Pid => SplitBy::Pid,
            SplitByArg::Tid => SplitBy::Tid,
        }
    }
}

/// Tools whose output `--compat` reproduces.
#[derive(Debug, Clone, Copy, ValueEnum)]
pub enum CompatArg {
    /// inferno-collapse-perf 0.12.8.
    Inferno,
}

impl FoldArgs {
    fn options(&self) -> Options {
        let mut o = Options::default();
        o.include_pid = self.pid;
        o.include_tid = self.tid;
        o.annotate_kernel = self.kernel || self.all;
        o.annotate_jit = self.jit || self.all;
        o.include_addrs = self.addrs;
        o.event_filter = self.event_filter.clone();
        o.skip_after = self.skip_after.clone();
        o.compat = match self.compat {
            Some(CompatArg::Inferno) => Compat::Inferno,
            None => Compat::None,
        };
        o.threads = self.threads.unwrap_or(0);
        if let Some(by) = self.split_by {
            SplitBy::from(by).adjust(&mut o);
        }
        o
    }

    fn sources(&self) -> Vec<Source> {
        if self.inputs.is_empty() {
            vec![Source::Stdin]
        } else {
            self.inputs.iter().map(Source::from_arg).collect()
        }
    }
}

pub fn run(args: FoldArgs) -> anyhow::Result<ExitCode> {
    super::check_count("--threads", args.threads, super::MAX_JOBS)?;
    let sources = args.sources();
    if sources.iter().filter(|s| **s == Source::Stdin).count() > 1 {
        return Err(jobprof::Error::Usage("stdin (`-`) can be given only once".into()).into());
    }
    let options = args.options();
    if let (Some(output), None) = (&args.output, args.split_by) {
        super::files::refuse_overwriting_inputs(output, &args.inputs)?;
    }
    if let Some(by) = args.split_by {
        // Parse the list before the (possibly long) fold.
        let formats = Format::parse_list(&args.formats).map_err(jobprof::Error::from)?;
        let dir = args
            .output
            .as_deref()
            .expect("clap requires -o with --split-by");
        let folded = fold_inputs(&Folder::new(options.clone()), &sources)?;
        require_samples(&folded, &sources, &options)?;
        let groups = split_by(&folded.stacks, by.into(), &options)?;
        let look = {
            let mut o = RenderOptions::default();
            o.title = String::new();
            folded.count_name().clone_into(&mut o.count_name);
            o
        };
        let written = write_split(dir, &groups, &formats, &look)?;
        if !args.quiet {
            warn_skipped(&folded, &sources);
            jobprof::errln!(
                "jobprof: {} group(s) by {} written to {} (see index.tsv)",
                written.len(),
                SplitBy::from(by),
                dir.display()
            );
        }
        if args.stats {
            print_stats(&folded);
        }
        return Ok(ExitCode::Success);
    }
    let folded = fold_inputs(&Folder::new(options.clone()), &sources)?;
    require_samples(&folded, &sources, &options)?;
    // What the counts are travels with them (`# counts: ns`), for
    // `render`, `diff` and `report`; never in inferno's byte-for-byte mode.
    let counts = counts_line(folded.count_name()).filter(|_| options.compat == Compat::None);
    let head = counts.as_deref().unwrap_or("").as_bytes();
    match &args.output {
        Some(path) => {
            let mut f = AtomicFile::create(path)?;
            f.write_all(head)
                .and_then(|()| folded.write_to(&mut f))
                .map_err(|e| jobprof::Error::io(path, e))?;
            f.commit()?;
        }
        None => {
            let stdout = io::stdout();
            let mut w = io::BufWriter::with_capacity(1 << 16, stdout.lock());
            w.write_all(head)
                .and_then(|()| folded.write_to(w))
                .context("writing to stdout")?;
        }
    }
    if !args.quiet {
        warn_skipped(&folded, &sources);
    }
    if args.stats {
        print_stats(&folded);
    }
    Ok(ExitCode::Success)
}

/// Input where not one line is a sample is an error (exit 2), except under
/// `--compat inferno`, which prints an empty fold as inferno does.
fn require_samples(folded: &Folded, sources: &[Source], options: &Options) -> jobprof::Result<()> {
    if options.compat != Compat::None {
        return Ok(());
    }
    let names: Vec<String> = sources
        .iter()
        .map(|s| s.display_path().display().to_string())
        .collect();
    folded.require_samples(&names.join(", "))
}

fn warn_skipped(folded: &Folded, sources: &[Source]) {
    let s = &folded.stats;
    if s.flat_samples > 0 {
        jobprof::errln!(
            "jobprof: warning: {}",
            jobprof::text::perf_script::no_call_graph_warning(s.flat_samples, s.samples)
        );
    }
    if s.skipped_lines > 0 {
        jobprof::errln!(
            "jobprof: warning: {} line(s) were neither sample headers nor frames and were skipped",
            s.skipped_lines
        );
    }
    for l in s.first_skipped.iter() {
        let name = sources
            .get(l.input)
            .map(|s| s.display_path())
            .unwrap_or_default();
        let what = match l.kind {
            SkippedKind::Header => "not a sample header",
            SkippedKind::Frame => "not a frame line",
            SkippedKind::Truncated => "input ends mid-line; this line was not folded",
            SkippedKind::OrphanFrame => "frame line outside a sample (its header is missing)",
        };
        jobprof::errln!("  {}:{}: {what}: {}", name.display(), l.line, l.text);
    }
    if s.non_utf8_lines > 0 {
        jobprof::errln!(
            "jobprof: warning: {} line(s) were not valid UTF-8 and were folded with U+FFFD replacements",
            s.non_utf8_lines
        );
    }
}

fn print_stats(folded: &Folded) {
    let s = &folded.stats;
    jobprof::errln!(
        "jobprof fold: {} bytes, {} samples, {} unique stacks, {} skipped lines, {:.3} s, {:.1} MB/s",
        s.bytes,
        s.samples,
        s.unique_stacks,
        s.skipped_lines,
        s.elapsed.as_secs_f64(),
        s.mb_per_s()
    );
}
