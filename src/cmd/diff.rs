//! `jobprof diff`: a differential flamegraph of two folded profiles, or of
//! the same queries of two runs (result or capture directories); with
//! replicates on both sides (`BEFORE... --vs AFTER...`, or queries run
//! several times), only the frames that changed beyond their noise are
//! coloured.

use std::path::{Path, PathBuf};

use clap::Args;

use jobprof::output::render::diff::{
    render_diff, render_diff_replicates, totals_note, DiffSummary, Noise, NoiseSummary,
};
use jobprof::output::render::Format;
use jobprof::sys::input::Source;
use jobprof::views::diff::{self as jobdiff, QueryStacks};
use jobprof::ExitCode;

use super::files::{read_folded_inputs, refuse_overwriting_inputs, warn_bad_lines, write_output};
use super::look::LookArgs;

/// Draw how AFTER differs from BEFORE: a differential flamegraph (red grew, blue shrank).
///
/// Draw how AFTER differs from BEFORE: AFTER's flamegraph with every frame
/// coloured by the change of its total (the frame and all it calls): red =
/// grew, blue = shrank, grey = unchanged; stronger = larger change. Correct
/// for inner frames, not only leaves. Code only BEFORE ran is not drawn
/// (swap the inputs to see it).
///
/// With replicates on both sides (several profiles each: `BEFORE...
/// --vs AFTER...`; or two runs whose query ran several times), their
/// counts are pooled (BEFORE's scaled to AFTER's number of replicates) and
/// a frame is coloured only where its change is beyond the replicates'
/// noise: its share of each replicate's samples, and its samples per
/// replicate, differ by a permutation test, with the false discovery rate
/// kept to --alpha over the frames (as `jobprof trend` judges functions);
/// grey otherwise. The tooltips give the shares, p and q. Without
/// replicates every change is coloured.
///
/// The look options of `render` apply, except --colors (the colours are the
/// changes).
#[derive(Debug, Args)]
#[command(after_help = "Examples:
  jobprof diff before.folded after.folded -o diff.svg
  jobprof diff old/perf.data new/perf.data -o diff.html   # plain perf record outputs
  jobprof diff run1/stacks.folded run2/stacks.folded --no-normalize -o diff.html   # raw counts
  jobprof diff before.folded after.folded -o diff.folded   # for flamegraph.pl/inferno
  jobprof diff before.folded after.folded > diff.svg
  jobprof diff a1.folded a2.folded a3.folded a4.folded --vs b1.folded b2.folded b3.folded b4.folded -o diff.html
  jobprof diff old_run/ new_run/ --query q01 -o q01.html   # q01_iter1.. are replicates

Exit status: 0 drawn; 1 drawn, but some lines were not `stack COUNT` and
were skipped (they are listed); 2 bad usage, an unreadable input, or an input
without a usable line (nothing is written).")]
pub struct DiffArgs {
    /// BEFORE AFTER: the baseline and what to compare with it (of the same
    /// kind): folded stacks, a plain perf.data (symbolized natively, as
    /// `jobprof process` does), or a run (result or capture directory).
    /// With --vs: BEFORE's replicates, one profile each (a folded file, a
    /// perf.data, or a run's query: the only one, or --query).
    #[arg(value_name = "INPUT", required = true, num_args = 1..)]
    pub inputs: Vec<PathBuf>,

    /// AFTER's replicates, of the same kinds as BEFORE's (at least two a
    /// side, so that the noise can be measured: 4 or more for a
    /// permutation test to reach p < 0.05).
    #[arg(long, value_name = "AFTER", num_args = 1..)]
    pub vs: Vec<PathBuf>,

    /// The baseline (from INPUT).
    #[arg(skip)]
    pub before: PathBuf,

    /// What is compared with it (from INPUT).
    #[arg(skip)]
    pub after: PathBuf,

    /// Output file, written atomically: .svg, .html, or .folded
    /// (`stack before after` lines, the input of FlameGraph/inferno's
    /// differential mode) [default: SVG on stdout]. For two result
    /// directories without --query: the output directory (created).
    #[arg(short, long, value_name = "OUT")]
    pub output: Option<PathBuf>,

    /// With two result directories: compare only query Q (a base query:
    /// its replicates and workers merged; or one replicate's name), into
    /// the file OUT.
    #[arg(long, value_name = "Q")]
    pub query: Option<String>,

    /// With two result or capture directories: which profile to compare:
    /// on-cpu (stacks.folded), off-cpu (offcpu.folded) or wall-clock
    /// (wallclock.folded; the last two need captures recorded with
    /// `jobprof-record sidecar --off-cpu`).
    #[arg(long, value_name = "KIND", default_value = "on-cpu",
          value_parser = ["on-cpu", "off-cpu", "wall-clock"])]
    pub kind: String,

    /// Scale BEFORE's counts so its total equals AFTER's, so the colours
    /// compare shares (runs of different lengths or sampling rates): the
    /// default for a drawing (svg, html) of two profiles; for a .folded
    /// output, for two result directories (instead of scaling by the
    /// replicate counts) and for replicates, only when given. With
    /// replicates, frames are then judged by their shares alone.
    #[arg(long)]
    pub normalize: bool,

    /// Two profiles: compare the raw counts (a longer AFTER is red all
    /// over) instead of scaling BEFORE to AFTER's total.
    #[arg(long, conflicts_with = "normalize")]
    pub no_normalize: bool,

    /// With replicates: the false discovery rate over the frames tested
    /// (a frame is coloured when its adjusted p is at most RATE).
    #[arg(long, value_name = "RATE", default_value_t = 0.05)]
    pub alpha: f64,

    /// With replicates: colour every frame whose total changed, as without
    /// them, not only the changes beyond the noise.
    #[arg(long)]
    pub every_change: bool,

    #[command(flatten)]
    pub look: LookArgs,

    /// Do not warn about lines that could not be used.
    #[arg(short, long)]
    pub quiet: bool,
}

pub fn run(mut args: DiffArgs) -> anyhow::Result<ExitCode> {
    if !(args.alpha > 0.0 && args.alpha < 1.0) {
        return Err(jobprof::Error::Usage(format!(
            "--alpha {}: give a rate between 0 and 1 (0.05)",
            args.alpha
        ))
        .into());
    }
    match (args.inputs.len(), args.vs.len()) {
        (2, 0) => {}
        (n, 0) => {
            return Err(jobprof::Error::Usage(format!(
                "give BEFORE AFTER (two profiles or runs), or replicates as \
                 BEFORE... --vs AFTER...; got {n} input(s) without --vs"
            ))
            .into())
        }
        (1, 1) => args.inputs.push(args.vs.pop().expect("one")),
        _ => return run_replicates(args),
    }
    args.before = args.inputs[0].clone();
    args.after = args.inputs[1].clone();
    // Two Nsight Systems profiles: their folded files of the kind asked.
    if let (Some(b), Some(a)) = (
        nsys_folded(&args.before, &args.kind),
        nsys_folded(&args.after, &args.kind),
    ) {
        (args.before, args.after) = (b, a);
    }
    match (args.before.is_dir(), args.after.is_dir()) {
        (true, true) => return run_dirs(args),
        (false, false) if args.query.is_none() => {}
        (false, false) => {
            return Err(jobprof::Error::Usage(
                "--query needs BEFORE and AFTER to be result directories".into(),
            )
            .into())
        }
        _ => {
            return Err(jobprof::Error::Usage(format!(
                "{} and {}: give two folded files or two directories (result or capture \
                 directories), not one of each",
                args.before.display(),
                args.after.display()
            ))
            .into())
        }
    }
    let output = args.output.as_deref();
    let format = args.look.format_for(output)?;
    // The palette is unused: every frame is coloured by its change.
    let inputs = [args.before.clone(), args.after.clone()];
    let mut opts = args
        .look
        .options_for("Differential Flame Graph", "hot", &inputs)?;
    if let Some(out) = output {
        refuse_overwriting_inputs(out, &inputs)?;
    }
    if args.before.as_os_str() == "-" && args.after.as_os_str() == "-" {
        return Err(jobprof::Error::Usage("stdin (`-`) can be given only once".into()).into());
    }
    // A plain perf.data is symbolized natively first, as `render` does.
    let sources = [
        Source::from_arg(&args.before),
        Source::from_arg(&args.after),
    ];
    let before = read_folded_inputs(&sources[..1])?;
    let after = read_folded_inputs(&sources[1..])?;
    if !args.quiet {
        warn_bad_lines(&before);
        warn_bad_lines(&after);
    }
    args.look.take_declared(&mut opts, [&before, &after]);
    if after.stacks.is_empty() {
        let e = after.nothing_usable(&args.after.display().to_string());
        return Err(jobprof::Error::from(e).into());
    }
    if before.stacks.is_empty() {
        let e = before.nothing_usable(&args.before.display().to_string());
        return Err(jobprof::Error::from(e).into());
    }
    // A drawing compares shares unless asked otherwise: a run half as long
    // would be blue all over. The folded form is data for other tools
    // (difffolded.pl normalizes with its own -n): raw unless --normalize.
    let normalize = args.normalize || (!args.no_normalize && format != Format::Folded);
    let mut summary = None;
    write_output(output.unwrap_or(Path::new("-")), |w| {
        summary = Some(render_diff(
            &before.stacks,
            &after.stacks,
            normalize,
            format,
            &opts,
            w,
        )?);
        Ok(())
    })?;
    if let (Some(s), false) = (&summary, args.quiet) {
        note_totals(s, normalize, &opts.count_name);
    }
    if let (Some(s), false) = (summary, args.quiet) {
        note_vanished(&s, &opts.count_name);
    }
    Ok(if before.bad_lines + after.bad_lines > 0 {
        ExitCode::Failed
    } else {
        ExitCode::Success
    })
}

/// Says on stderr how much of BEFORE (its own counts, before any scaling)
/// lies on call paths AFTER never reached, which are not drawn.
fn note_vanished(s: &DiffSummary, name: &str) {
    let vanished = s.vanished / if s.scale > 0.0 { s.scale } else { 1.0 };
    if vanished < 0.5 {
        return;
    }
    // `5 of BEFORE's 10 samples`, `7.01 ms of BEFORE's 1.07 s`.
    let part = match name {
        "ns" => jobprof::sys::units::format_amount(vanished, name),
        _ => format!("{vanished:.0}"),
    };
    jobprof::errln!(
        "jobprof: note: {part} of BEFORE's {} are on call paths AFTER never reached; they \
         are not drawn (swap the inputs to see them)",
        jobprof::sys::units::format_amount(s.before_total as f64, name),
    );
}

/// Says on stderr how the totals were compared when they differ: BEFORE
/// scaled to AFTER's, or a warning that the colours include the change of
/// the total ([`totals_note`]).
fn note_totals(s: &DiffSummary, normalize: bool, count_name: &str) {
    let note = totals_note(s, normalize);
    if note != "." {
        jobprof::errln!(
            "jobprof: note: BEFORE {}, AFTER {}{note}",
            jobprof::sys::units::format_amount(s.before_total as f64, count_name),
            jobprof::sys::units::format_amount(s.after_total as f64, count_name),
        );
    }
}

/// The folded file of `kind` (`on-cpu`: stacks.folded, `off-cpu`: the
/// waits, offcpu.folded) of an Nsight Systems profile that `jobprof
/// process` wrote: its `jobprof/` directory (or `REPORT.jobprof/`), or the
/// published query directory holding it. `None` for anything else.
fn nsys_folded(dir: &Path, kind: &str) -> Option<PathBuf> {
    let profile = [
        dir.to_path_buf(),
        dir.join(jobprof::nsys::export::OUTPUT_DIR),
    ]
    .into_iter()
    .find(|d| {
        let s = std::fs::read_to_string(d.join(jobprof::capture::SUMMARY)).unwrap_or_default();
        serde_json::from_str::<serde_json::Value>(&s).is_ok_and(|v| v["source"] == "nsys")
    })?;
    Some(profile.join(match kind {
        "off-cpu" => jobprof::text::offcpu::OFFCPU_FOLDED,
        "wall-clock" => jobprof::text::offcpu::WALLCLOCK_FOLDED,
        _ => jobprof::capture::FOLDED,
    }))
}

/// Two runs: one query into a file, or every common query into a directory.
fn run_dirs(args: DiffArgs) -> anyhow::Result<ExitCode> {
    let captures = jobdiff::is_capture_dir(&args.before) && jobdiff::is_capture_dir(&args.after);
    let query = args.query.as_deref();
    let folded = match args.kind.as_str() {
        "off-cpu" => jobprof::text::offcpu::OFFCPU_FOLDED,
        "wall-clock" => jobprof::text::offcpu::WALLCLOCK_FOLDED,
        _ => jobprof::capture::FOLDED,
    };
    let before = jobdiff::load_run_of(&args.before, query.filter(|_| !captures), folded)?;
    let after = jobdiff::load_run_of(&args.after, query.filter(|_| !captures), folded)?;
    // Off-CPU and wall-clock profiles count ns whatever the event.
    let ns = (args.kind != "on-cpu").then(|| "ns".to_string());
    if let Some((b, a, q)) = one_pair(captures, query, &before, &after)? {
        let count = ns.clone().or_else(|| jobdiff::count_name(&before, &after));
        return diff_one(&args, b, a, &q, count);
    }
    let out_dir = every_query_dir(&args)?;
    let format = match &args.look.format {
        Some(f) => f.parse::<Format>().map_err(jobprof::Error::from)?,
        None => Format::Html,
    };
    let mut opts = args.look.options("Differential Flame Graph", "hot")?;
    if args.look.count_name.is_none() {
        if let Some(n) = ns.or_else(|| jobdiff::count_name(&before, &after)) {
            opts.count_name = n;
        }
    }
    let noise = args.noise();
    let diff = jobdiff::diff_runs(
        &before,
        &after,
        args.normalize,
        noise.as_ref(),
        format,
        &opts,
        &out_dir,
    )?;
    let bad = warn_unprocessed(&args, [&before, &after]);
    print_changes(&diff, &opts.count_name, &out_dir)?;
    if !args.quiet {
        note_unpaired(&diff);
    }
    Ok(if bad > 0 {
        ExitCode::Failed
    } else {
        ExitCode::Success
    })
}

/// The one query to compare, with its name: the only query of two capture
/// directories (named `QB vs QA` when they differ), or `--query`. None:
/// compare every common query.
fn one_pair<'r>(
    captures: bool,
    query: Option<&str>,
    before: &'r jobdiff::Run,
    after: &'r jobdiff::Run,
) -> anyhow::Result<Option<(&'r QueryStacks, &'r QueryStacks, String)>> {
    let single = (jobdiff::only_query(before), jobdiff::only_query(after));
    Ok(
        if let (true, Some((qb, _)), Some((qa, _))) = (captures, single.0, single.1) {
            Some((
                jobdiff::stacks_of(before, qb, "BEFORE")?,
                jobdiff::stacks_of(after, qa, "AFTER")?,
                if qb == qa {
                    qb.clone()
                } else {
                    format!("{qb} vs {qa}")
                },
            ))
        } else if let Some(q) = query {
            Some((
                jobdiff::stacks_of(before, q, "BEFORE")?,
                jobdiff::stacks_of(after, q, "AFTER")?,
                q.to_string(),
            ))
        } else {
            None
        },
    )
}

/// The `-o` directory every query's page goes into; a usage error when it
/// is missing, a file or stdout.
fn every_query_dir(args: &DiffArgs) -> anyhow::Result<PathBuf> {
    let Some(out_dir) = args.output.clone() else {
        return Err(jobprof::Error::Usage(
            "comparing every query of two runs writes a directory (index.html and one page \
             per query): give it with -o DIR, or pick one query with --query"
                .into(),
        )
        .into());
    };
    if out_dir.is_file() || out_dir.as_os_str() == "-" {
        return Err(jobprof::Error::Usage(format!(
            "{}: comparing every query writes a directory (index.html and one page per \
             query); name a directory, or pick one query with --query",
            out_dir.display()
        ))
        .into());
    }
    Ok(out_dir)
}

/// Warns (unless quiet) about each query whose inputs were not processed
/// and were left out; returns the skipped input lines of both runs.
fn warn_unprocessed(args: &DiffArgs, runs: [&jobdiff::Run; 2]) -> u64 {
    let mut bad = 0;
    for run in runs {
        for (q, s) in &run.queries {
            bad += s.bad_lines;
            if !args.quiet && !s.missing.is_empty() {
                jobprof::errln!(
                    "jobprof: warning: {}: query {q}: not processed, left out: {}",
                    run.root.display(),
                    s.missing.join(", ")
                );
            }
        }
    }
    bad
}

/// One stdout line per compared query (its change and page), then the index.
fn print_changes(diff: &jobdiff::RunDiff, count_name: &str, out_dir: &Path) -> anyhow::Result<()> {
    for d in &diff.queries {
        let base = d.before_total as f64 * d.scale;
        jobprof::outln!(
            "{}: {:+.0} {} ({}){}",
            d.query,
            d.change,
            count_name,
            if base > 0.0 {
                format!("{:+.1}%", 100.0 * d.change / base)
            } else {
                "new".to_string()
            },
            d.file
                .as_ref()
                .map(|f| format!(" -> {}", out_dir.join(f).display()))
                .unwrap_or_default()
        )?;
    }
    jobprof::outln!("{}", out_dir.join(jobprof::views::INDEX_HTML).display())?;
    Ok(())
}

/// Notes the queries only one run has (they are not compared).
fn note_unpaired(diff: &jobdiff::RunDiff) {
    for (side, list) in [("BEFORE", &diff.only_before), ("AFTER", &diff.only_after)] {
        if !list.is_empty() {
            jobprof::errln!(
                "jobprof: note: only {side} has {}: not compared",
                list.join(", ")
            );
        }
    }
}

/// One query of two runs into the file OUT.
fn diff_one(
    args: &DiffArgs,
    b: &QueryStacks,
    a: &QueryStacks,
    q: &str,
    count: Option<String>,
) -> anyhow::Result<ExitCode> {
    let output = args.output.as_deref();
    let format = args.look.format_for(output)?;
    let mut opts = args.look.options("Differential Flame Graph", "hot")?;
    if let (Some(n), None) = (count, &args.look.count_name) {
        opts.count_name = n;
    }
    if args.look.title.is_none() {
        opts.title = format!("Differential Flame Graph · query {q}");
    }
    let mut summary = None;
    let noise = args.noise();
    super::files::write_output(output.unwrap_or(Path::new("-")), |w| {
        summary = Some(jobdiff::render_query(
            b,
            a,
            args.normalize,
            noise.as_ref(),
            format,
            &opts,
            w,
        )?);
        Ok(())
    })?;
    if let (Some(s), false) = (&summary, args.quiet) {
        note_totals(s, args.normalize, &opts.count_name);
    }
    if !args.quiet {
        let k = jobdiff::replicate_scale(b, a);
        if let Some(n) = summary.as_ref().and_then(|s| s.noise.as_ref()) {
            note_noise(n, &format!("query {q}: "));
        } else if k != 1.0 && !args.normalize {
            jobprof::errln!(
                "jobprof: note: query {q}: BEFORE has {} replicate(s), AFTER {}: BEFORE's \
                 counts are scaled by {k:.3}",
                b.replicates.len(),
                a.replicates.len()
            );
        }
        for (side, s) in [("BEFORE", b), ("AFTER", a)] {
            jobprof::errln!(
                "jobprof: {side}: query {q}: {} merged{}",
                s.merged.join(", "),
                if s.missing.is_empty() {
                    String::new()
                } else {
                    format!("; not processed, left out: {}", s.missing.join(", "))
                }
            );
        }
        if let Some(s) = summary {
            note_vanished(&s, &opts.count_name);
        }
    }
    Ok(if b.bad_lines + a.bad_lines > 0 {
        ExitCode::Failed
    } else {
        ExitCode::Success
    })
}

impl DiffArgs {
    /// How frames are judged over replicates (none with --every-change).
    fn noise(&self) -> Option<Noise> {
        (!self.every_change).then(|| Noise {
            alpha: self.alpha,
            ..Noise::default()
        })
    }
}

/// Says how many frames changed beyond the noise, and when these
/// replicates can never show one.
fn note_noise(n: &NoiseSummary, what: &str) {
    jobprof::errln!(
        "jobprof: {what}{} of {} frames changed beyond the noise ({} tested; {} and {} \
         replicates, permutation test, false discovery rate {})",
        n.significant,
        n.frames,
        n.tested,
        n.before_replicates,
        n.after_replicates,
        n.alpha
    );
    if n.smallest_p > n.alpha {
        jobprof::errln!(
            "jobprof: warning: {what}with {} and {} replicates the smallest p-value a \
             permutation test can give is {:.3}, above --alpha {}: no frame can be coloured; \
             give more replicates (4 a side or more)",
            n.before_replicates,
            n.after_replicates,
            n.smallest_p,
            n.alpha
        );
    }
}

/// One replicate: its stacks, its lines that were not `stack COUNT`, and
/// what its counts are when it says (`# counts: ns`, or the run's event).
type Replicate = (Vec<(String, u64)>, u64, Option<String>);

/// One replicate's stacks: a folded file (or perf.data, symbolized), or
/// the query of a run (`--query`, or its only one) with its own
/// replicates and workers merged.
fn replicate_of(path: &Path, args: &DiffArgs) -> anyhow::Result<Replicate> {
    let folded = match args.kind.as_str() {
        "off-cpu" => jobprof::text::offcpu::OFFCPU_FOLDED,
        "wall-clock" => jobprof::text::offcpu::WALLCLOCK_FOLDED,
        _ => jobprof::capture::FOLDED,
    };
    let file = nsys_folded(path, &args.kind).unwrap_or_else(|| path.to_path_buf());
    if file.is_dir() {
        let run = jobdiff::load_run_of(&file, args.query.as_deref(), folded)?;
        let q = match (&args.query, jobdiff::only_query(&run)) {
            (Some(q), _) => q.clone(),
            (None, Some((q, _))) => q.clone(),
            (None, None) => {
                return Err(jobprof::Error::Usage(format!(
                    "{}: a run of several queries; pick one with --query",
                    file.display()
                ))
                .into())
            }
        };
        let s = jobdiff::stacks_of(&run, &q, "input")?;
        let count = jobdiff::count_name(&run, &run);
        return Ok((s.stacks.clone(), s.bad_lines, count));
    }
    if args.query.is_some() {
        return Err(jobprof::Error::Usage(format!(
            "{}: --query needs runs (result or capture directories)",
            file.display()
        ))
        .into());
    }
    let input = read_folded_inputs(&[Source::from_arg(&file)])?;
    if !args.quiet {
        warn_bad_lines(&input);
    }
    if input.stacks.is_empty() {
        let e = input.nothing_usable(&file.display().to_string());
        return Err(jobprof::Error::from(e).into());
    }
    Ok((input.stacks, input.bad_lines, input.count_name))
}

/// `BEFORE... --vs AFTER...`: each input one replicate.
fn run_replicates(args: DiffArgs) -> anyhow::Result<ExitCode> {
    let all: Vec<PathBuf> = args.inputs.iter().chain(&args.vs).cloned().collect();
    if all.iter().any(|p| p.as_os_str() == "-") {
        return Err(
            jobprof::Error::Usage("replicates are files or runs, not stdin (`-`)".into()).into(),
        );
    }
    let output = args.output.as_deref();
    let format = args.look.format_for(output)?;
    let mut opts = args
        .look
        .options_for("Differential Flame Graph", "hot", &all)?;
    if args.kind != "on-cpu" && args.look.count_name.is_none() {
        opts.count_name = "ns".into();
    }
    if let Some(out) = output {
        refuse_overwriting_inputs(out, &all)?;
    }
    let mut bad = 0;
    let mut declared = Vec::new();
    let mut side = |paths: &[PathBuf]| -> anyhow::Result<Vec<Vec<(String, u64)>>> {
        paths
            .iter()
            .map(|p| {
                let (stacks, b, count) = replicate_of(p, &args)?;
                bad += b;
                declared.extend(count);
                Ok(stacks)
            })
            .collect()
    };
    let before = side(&args.inputs)?;
    let after = side(&args.vs)?;
    // Without --count-name, what the inputs say they count (`ns`: read as
    // time), when none says otherwise.
    if let (None, Some(first)) = (&args.look.count_name, declared.first()) {
        if args.kind == "on-cpu" && declared.iter().all(|n| n == first) {
            opts.count_name.clone_from(first);
        }
    }
    let noise = args.noise();
    let mut summary = None;
    write_output(output.unwrap_or(Path::new("-")), |w| {
        summary = Some(match &noise {
            Some(n) if before.len() >= 2 && after.len() >= 2 => {
                render_diff_replicates(&before, &after, args.normalize, n, format, &opts, w)?
            }
            _ => {
                // Every change coloured: the pooled sides, BEFORE at
                // AFTER's number of replicates (or, normalised, its total).
                let k = if args.normalize {
                    1.0
                } else {
                    after.len() as f64 / before.len() as f64
                };
                let b: Vec<(String, u64)> = before
                    .iter()
                    .flatten()
                    .map(|(s, c)| (s.clone(), (*c as f64 * k).round() as u64))
                    .collect();
                let a: Vec<(String, u64)> = after.iter().flatten().cloned().collect();
                render_diff(&b, &a, args.normalize, format, &opts, w)?
            }
        });
        Ok(())
    })?;
    if let (Some(s), false) = (&summary, args.quiet) {
        note_totals(s, args.normalize, &opts.count_name);
        match &s.noise {
            Some(n) => note_noise(n, ""),
            None if args.every_change => {}
            None => jobprof::errln!(
                "jobprof: note: {} and {} replicates: the noise is measured only with two or \
                 more a side; every change is coloured",
                before.len(),
                after.len()
            ),
        }
        note_vanished(s, &opts.count_name);
    }
    Ok(if bad > 0 {
        ExitCode::Failed
    } else {
        ExitCode::Success
    })
}
