//! `jobprof diff`: a differential flamegraph of two folded profiles.

use std::path::PathBuf;

use clap::Args;

use jobprof::input::Source;
use jobprof::render::diff::render_diff;
use jobprof::render::folded::read_folded;
use jobprof::ExitCode;

use super::render::{refuse_overwriting_inputs, warn_bad_lines, write_output, LookArgs};

/// Draw how AFTER differs from BEFORE: AFTER's flamegraph with every frame
/// coloured by the change of its total (the frame and all it calls): red =
/// grew, blue = shrank, grey = unchanged; stronger = larger change. Correct
/// for inner frames, not only leaves. Code only BEFORE ran is not drawn
/// (swap the inputs to see it).
#[derive(Debug, Args)]
pub struct DiffArgs {
    /// The baseline folded stacks.
    #[arg(value_name = "BEFORE")]
    pub before: PathBuf,

    /// The folded stacks to compare with the baseline.
    #[arg(value_name = "AFTER")]
    pub after: PathBuf,

    /// Output file, written atomically: .svg, .html, or .folded
    /// (`stack before after` lines, the input of FlameGraph/inferno's
    /// differential mode); `-` writes to stdout (then give --format).
    #[arg(short, long, value_name = "OUT")]
    pub output: PathBuf,

    /// Scale BEFORE's counts so its total equals AFTER's (compare the shape
    /// of runs of different lengths or sampling rates).
    #[arg(long)]
    pub normalize: bool,

    #[command(flatten)]
    pub look: LookArgs,

    /// Do not warn about lines that could not be used.
    #[arg(short, long)]
    pub quiet: bool,
}

pub fn run(args: DiffArgs) -> anyhow::Result<ExitCode> {
    let format = args.look.format_for(&args.output)?;
    let opts = args.look.options("Differential Flame Graph")?;
    refuse_overwriting_inputs(&args.output, &[args.before.clone(), args.after.clone()])?;
    if args.before.as_os_str() == "-" && args.after.as_os_str() == "-" {
        return Err(jobprof::Error::Usage("stdin (`-`) can be given only once".into()).into());
    }
    let before = read_folded(&[Source::from_arg(&args.before)])?;
    let after = read_folded(&[Source::from_arg(&args.after)])?;
    if !args.quiet {
        warn_bad_lines(&before);
        warn_bad_lines(&after);
    }
    if after.stacks.is_empty() {
        let e = after.nothing_usable(&args.after.display().to_string());
        return Err(jobprof::Error::from(e).into());
    }
    if before.stacks.is_empty() {
        let e = before.nothing_usable(&args.before.display().to_string());
        return Err(jobprof::Error::from(e).into());
    }
    let mut summary = None;
    write_output(&args.output, |w| {
        summary = Some(render_diff(
            &before.stacks,
            &after.stacks,
            args.normalize,
            format,
            &opts,
            w,
        )?);
        Ok(())
    })?;
    if let (Some(s), false) = (summary, args.quiet) {
        if s.vanished >= 0.5 {
            jobprof::errln!(
                "jobprof: note: {:.0} of BEFORE's {} {} are on call paths AFTER never reached; \
                 they are not drawn (swap the inputs to see them)",
                s.vanished,
                s.before_total,
                args.look.count_name
            );
        }
    }
    Ok(if before.bad_lines + after.bad_lines > 0 {
        ExitCode::Failed
    } else {
        ExitCode::Success
    })
}
