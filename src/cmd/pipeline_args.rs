//! The options `jobprof process` and `jobprof reprocess` share: how the
//! per-capture pipeline symbolizes, compresses, draws and reports, turned
//! into [`pipeline::Options`] in one place.

use std::path::PathBuf;

use clap::Args;

use jobprof::output::archive::DEFAULT_LEVEL;
use jobprof::pipeline::{self, Formats};
use jobprof::symbolize::native::Choice;
use jobprof::sys::progress::{LogLines, Progress};
use jobprof::sys::units;
use jobprof::views;

/// `--formats` when not given.
pub const DEFAULT_FORMATS: &str = "svg,html,folded,summary,report";

/// The pipeline's options, flattened into `process` and `reprocess`.
#[derive(Debug, Clone, Args)]
pub struct PipelineArgs {
    /// Expand inlined functions also in the shards `perf script`
    /// symbolizes (it can make `perf script` 100 times slower). The native
    /// symbolizer expands them by default, at about the cost of plain
    /// symbols, where `perf script --inline` does (perf 6.1: call chains
    /// unwound from `--call-graph dwarf` stack copies; frame-pointer chains
    /// get none). The log and summary.json (`shards[].inline`) say which
    /// shards have them.
    #[arg(long, conflicts_with = "no_inline")]
    pub inline: bool,

    /// No inline frames, not even from the native symbolizer.
    #[arg(long)]
    pub no_inline: bool,

    /// zstd level of the perf.script.zst archives (also of reprocess
    /// --recompress): 1 (fastest; the default) to 19 (smallest). Level 3
    /// makes the archive ~8% smaller and the compression ~1.6x slower on
    /// `perf script` text.
    #[arg(long, value_name = "LEVEL", default_value_t = DEFAULT_LEVEL,
          value_parser = clap::value_parser!(i32).range(1..=19))]
    pub zstd_level: i32,

    /// Outputs to write, comma separated: svg (flamegraph.svg), html
    /// (flamegraph.html, one offline page), folded (stacks.folded), summary
    /// (summary.json), report (report.txt, the functions by self time as
    /// `perf report --stdio --no-children` over all shards), speedscope
    /// (profile.speedscope.json, for speedscope.app when a big profile
    /// makes the SVG slow), pprof (profile.pb.gz, for go tool pprof,
    /// Pyroscope, Parca), or all. perf.script.zst is always written when
    /// perf.data is symbolized.
    #[arg(long, value_name = "LIST", default_value = DEFAULT_FORMATS)]
    pub formats: String,

    /// Refuse to draw a flamegraph when less than PCT percent of the sample
    /// weight has a named leaf frame (`symbolized_ratio` in summary.json);
    /// stacks.folded and summary.json are still written. Without it every
    /// capture is drawn; below 5% the page header, the job page and
    /// summary.json (`symbol_warning`) say that symbols are few.
    #[arg(long, value_name = "PCT")]
    pub min_symbolized: Option<f64>,

    /// The perf executable [default: `perf` on PATH].
    #[arg(long, value_name = "PATH")]
    pub perf: Option<PathBuf>,

    /// Root frame of the per-query flamegraphs merged over all workers
    /// (profiles/perf/queries/QUERY/): `worker` puts each worker's stacks
    /// under a `worker_N` frame, so imbalance between workers shows; `none`
    /// sums the workers' stacks.
    #[arg(long, value_name = "ROOT", default_value = "worker", value_parser = ["worker", "none"])]
    pub query_root: String,

    /// No progress bars or log lines on stderr; what goes to stdout (the
    /// result lines, reprocess's table) and errors remain.
    #[arg(short, long)]
    pub quiet: bool,

    /// Log each step of each capture on stderr (symbol sources, kernel
    /// symbols, every shard's text, the archive, the symbol store); by
    /// default stderr gets warnings only, as stdout has one result line
    /// per capture.
    #[arg(short, long, conflicts_with = "quiet")]
    pub verbose: bool,

    /// Who turns perf.data into text: `native` (read perf.data in-process,
    /// no perf needed, several times faster), `perf` (`perf script`), or
    /// `auto`: native for every shard it can read (frame-pointer call
    /// chains, x86-64 and aarch64 dwarf call chains), `perf script` for the
    /// others (compressed files, unknown records), with or without
    /// --inline. A shard native cannot read falls back to `perf script`
    /// with a warning; summary.json's symbolized_from says which ran.
    #[arg(long, value_name = "WHO", default_value = "auto")]
    pub symbolizer: Choice,

    /// A directory of debug files by build id (`DIR/.build-id/NN/REST.debug`
    /// or `DIR/NN/REST.debug`), searched after the capture's snapshot and
    /// this host's /usr/lib/debug, ~/.debug and $DEBUGINFOD_CACHE_PATH; may
    /// be given more than once. A file is taken only when its build id is
    /// the one the capture recorded (docs/symbols.md).
    #[arg(long = "debug-dir", value_name = "DIR")]
    pub debug_dirs: Vec<PathBuf>,

    /// Where to keep the symbol tables and inflated DWARF of files with a
    /// build id between runs, so that the next run over the same builds
    /// reads them back instead of building them again (docs/symbols.md) [default:
    /// $JOBPROF_CACHE_DIR, else $XDG_CACHE_HOME/jobprof, else
    /// ~/.cache/jobprof]. Used only when it is yours, no one else may
    /// write it, no symbolic link is on its path, and it is new, empty or
    /// jobprof's own (CACHEDIR.TAG); kept under 2 GiB.
    #[arg(long, value_name = "DIR")]
    pub cache_dir: Option<PathBuf>,

    /// Do not read or write the symbol cache (--cache-dir).
    #[arg(long, conflicts_with = "cache_dir")]
    pub no_cache: bool,

    /// The longest one Nsight Systems report's export may take to read
    /// (e.g. 90s, 20m); a report past it fails naming the limit and the
    /// others are still processed [default: 10m]. An export a worker left
    /// beside its report is read as hostile input (docs/nsys.md).
    #[arg(long, value_name = "DURATION", value_parser = units::parse_duration)]
    pub nsys_read_limit: Option<std::time::Duration>,

    /// Also cut each Nsight Systems report into one profile per NVTX
    /// range whose text matches PATTERN (a glob: `*`, `?`), in
    /// REPORT_OUT/slices/NAME/ (a repeated name: NAME_iter2, ...);
    /// nvtx:DOMAIN:PATTERN takes that domain's ranges only, nvtx::PATTERN
    /// the default domain's (docs/nsys.md). A report already processed
    /// needs --force.
    #[arg(long, value_name = "nvtx[:DOMAIN:]PATTERN")]
    pub slice_by: Option<jobprof::nsys::export::SliceBy>,
}

impl PipelineArgs {
    /// The pipeline's options from these arguments (checked; `jobs`,
    /// `force` and `time_slices` are left to the command).
    pub fn options(&self) -> anyhow::Result<pipeline::Options> {
        if let Some(min) = self.min_symbolized.filter(|m| !(0.0..=100.0).contains(m)) {
            return Err(jobprof::Error::Usage(format!(
                "--min-symbolized {min}: give a percentage between 0 and 100"
            ))
            .into());
        }
        let mut opts = pipeline::Options::default();
        opts.symbolizer = self.symbolizer;
        opts.inline = self.inline;
        opts.no_inline = self.no_inline;
        opts.zstd_level = self.zstd_level;
        opts.formats = Formats::parse(&self.formats)?;
        opts.min_symbolized_pct = self.min_symbolized;
        opts.perf = self.perf.clone();
        // Absolute: a reprocess array task may start elsewhere.
        opts.debug_dirs = self
            .debug_dirs
            .iter()
            .map(|d| std::path::absolute(d).unwrap_or_else(|_| d.clone()))
            .collect();
        opts.cache_dir = match (&self.cache_dir, self.no_cache) {
            (_, true) => None,
            (Some(d), false) => Some(std::path::absolute(d).unwrap_or_else(|_| d.clone())),
            (None, false) => default_cache_dir(),
        };
        opts.nsys_read_limit = self.nsys_read_limit;
        // `process` and `reprocess` refresh the job views after the run.
        opts.keep_stacks = Some(std::sync::Arc::new(std::sync::atomic::AtomicU64::new(
            views::KEEP_STACKS_BYTES,
        )));
        Ok(opts)
    }

    /// The job views' options (`--query-root`).
    pub fn view_options(&self) -> anyhow::Result<views::Options> {
        let mut v = views::Options::default();
        v.query_root = self.query_root.parse()?;
        Ok(v)
    }

    /// Progress on stderr, or none with `--quiet`.
    pub fn progress(&self) -> Box<dyn Progress> {
        if self.quiet {
            Box::new(LogLines::quiet())
        } else {
            super::bars::from_env(self.verbose)
        }
    }

    /// These options as command-line words, those that differ from their
    /// defaults only (for the tasks of a `reprocess --sbatch` array).
    pub fn to_argv(&self) -> Vec<String> {
        let mut v = Vec::new();
        if self.inline {
            v.push("--inline".into());
        }
        if self.no_inline {
            v.push("--no-inline".into());
        }
        if self.zstd_level != DEFAULT_LEVEL {
            v.push(format!("--zstd-level={}", self.zstd_level));
        }
        if self.formats != DEFAULT_FORMATS {
            v.push(format!("--formats={}", self.formats));
        }
        if let Some(pct) = self.min_symbolized {
            v.push(format!("--min-symbolized={pct}"));
        }
        if let Some(p) = &self.perf {
            v.push(format!("--perf={}", p.display()));
        }
        if self.query_root != "worker" {
            v.push(format!("--query-root={}", self.query_root));
        }
        if self.quiet {
            v.push("--quiet".into());
        }
        if self.verbose {
            v.push("--verbose".into());
        }
        if self.symbolizer != Choice::Auto {
            v.push(format!("--symbolizer={}", self.symbolizer.as_str()));
        }
        for d in &self.debug_dirs {
            v.push(format!("--debug-dir={}", d.display()));
        }
        if let Some(d) = &self.cache_dir {
            v.push(format!("--cache-dir={}", d.display()));
        }
        if self.no_cache {
            v.push("--no-cache".into());
        }
        if let Some(d) = self.nsys_read_limit {
            v.push(format!("--nsys-read-limit={}ms", d.as_millis()));
        }
        if let Some(by) = &self.slice_by {
            v.push(format!("--slice-by={by}"));
        }
        v
    }
}

/// The symbol cache without `--cache-dir` or `--no-cache`:
/// `$JOBPROF_CACHE_DIR`, else `~/.cache/jobprof`.
pub fn default_cache_dir() -> Option<PathBuf> {
    std::env::var_os("JOBPROF_CACHE_DIR")
        .filter(|d| !d.is_empty())
        .map(PathBuf::from)
        .and_then(|d| std::path::absolute(&d).ok())
        .or_else(jobprof::symbolize::native::cache::Cache::default_dir)
}
