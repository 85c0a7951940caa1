//! The `jobprof` command line: clap definitions mapped onto library options.
//!
//! Each subcommand's arguments and its small driver live in `src/cmd/`
//! (binary-only code); all real work happens in the `jobprof` library. This
//! file is the one place that prints errors and chooses the process exit code
//! (see [`jobprof::ExitCode`]): 0 success, 1 partial or failed work, 2 usage
//! or unreadable input, 3-5 the `nsys collect` outcomes (3 and 6 also `trend
//! --fail-on-regression`'s gate: a regression, nothing to judge); a broken pipe on
//! stdout counts as success.

use std::process::ExitCode;

use clap::{CommandFactory, Parser, Subcommand};

mod cmd;

/// Turn perf and Nsight Systems captures of Slurm jobs into flamegraphs,
/// summaries and compact archives.
#[derive(Debug, Parser)]
#[command(
    name = "jobprof",
    version,
    about,
    long_about = None,
    max_term_width = 100,
    after_help = "Examples:
  perf script | jobprof fold | jobprof render > flamegraph.svg
  jobprof process result_dir_4242
  jobprof reprocess /shared/results --sbatch --submit --array-count 32

Exit status (every subcommand): 0 done; 1 some work failed or was refused
while the rest was done; 2 bad usage or unreadable input; 3-5 `nsys collect`
outcomes; 3 `trend --fail-on-regression`: a regression, 6: nothing to judge or no test possible. `jobprof COMMAND --help` gives each command's examples."
)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

/// The commands in the order the data flows (`--help` lists them so): text
/// to stacks to pages, then whole result directories, then comparisons,
/// then Nsight Systems and the helpers. The first paragraph of each
/// command's doc is the one line the top-level help shows; `COMMAND --help`
/// gives the whole description.
#[derive(Debug, Subcommand)]
enum Command {
    Fold(cmd::fold::FoldArgs),
    Render(cmd::render::RenderArgs),
    Process(cmd::process::ProcessArgs),
    Report(cmd::report::ReportArgs),
    Diff(cmd::diff::DiffArgs),
    Reprocess(cmd::reprocess::ReprocessArgs),
    Trend(cmd::trend::TrendArgs),
    Nsys(cmd::nsys::NsysArgs),
    Repl(cmd::repl::ReplArgs),
    Completions(cmd::generate::CompletionsArgs),
    ManPages(cmd::generate::ManPagesArgs),
}

fn main() -> ExitCode {
    guard_std_streams();
    raise_open_file_limit();
    let cli = Cli::parse();
    let result = match cli.command {
        Command::Fold(args) => cmd::fold::run(args),
        Command::Nsys(args) => cmd::nsys::run(args),
        Command::Diff(args) => cmd::diff::run(args),
        Command::Process(args) => cmd::process::run(args),
        Command::Repl(args) => cmd::repl::run(args),
        Command::Report(args) => cmd::report::run(args),
        Command::Reprocess(args) => cmd::reprocess::run(args),
        Command::Render(args) => cmd::render::run(args),
        Command::Trend(args) => cmd::trend::run(args),
        Command::Completions(args) => cmd::generate::completions(args, Cli::command()),
        Command::ManPages(args) => cmd::generate::man_pages(args, Cli::command()),
    };
    if jobprof::sys::counts::saturated() {
        jobprof::errln!("jobprof: {}", jobprof::sys::counts::WARNING);
    }
    match result {
        Ok(code) => ExitCode::from(code.code()),
        Err(err) => exit_for_error(&err),
    }
}

/// A standard stream closed by the caller (`2>&-`) is reopened on
/// `/dev/null`: otherwise the next file jobprof opens would get its number,
/// and log lines would be written into an output or an archive.
fn guard_std_streams() {
    for fd in 0..=2 {
        // SAFETY: F_GETFD only queries the descriptor.
        if unsafe { libc::fcntl(fd, libc::F_GETFD) } != -1 {
            continue;
        }
        let flags = if fd == 0 {
            libc::O_RDONLY
        } else {
            libc::O_WRONLY
        };
        // SAFETY: a static NUL-terminated path; the lowest free descriptor
        // is `fd` itself, since every lower one is open.
        let opened = unsafe { libc::open(c"/dev/null".as_ptr(), flags) };
        if opened >= 0 && opened != fd {
            // SAFETY: both descriptors are ours.
            unsafe {
                libc::dup2(opened, fd);
                libc::close(opened);
            }
        }
    }
}

/// Raises the soft limit on open files to the hard one: reprocessing many
/// captures at once keeps a few files per running `perf script` open, and
/// the usual soft limit of 1,024 is an accident of history, not a policy.
/// (jobprof never needs more than a bounded number whatever the shard and
/// slice counts; this is headroom for many parallel captures.)
fn raise_open_file_limit() {
    let mut lim = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: getrlimit/setrlimit with a valid pointer.
    unsafe {
        if libc::getrlimit(libc::RLIMIT_NOFILE, &mut lim) == 0 && lim.rlim_cur < lim.rlim_max {
            lim.rlim_cur = lim.rlim_max;
            libc::setrlimit(libc::RLIMIT_NOFILE, &lim);
        }
    }
}

/// Prints `err` (with its causes) and maps it onto the exit-code contract.
fn exit_for_error(err: &anyhow::Error) -> ExitCode {
    if is_broken_pipe(err) {
        return ExitCode::SUCCESS;
    }
    jobprof::errln!("jobprof: error: {err}");
    for cause in err.chain().skip(1) {
        // thiserror messages already embed their direct source; print only
        // causes that add something new.
        let text = cause.to_string();
        if !err.to_string().contains(&text) {
            jobprof::errln!("  caused by: {text}");
        }
    }
    let code = err
        .chain()
        .find_map(layer_exit_code)
        .unwrap_or(jobprof::ExitCode::Failed);
    ExitCode::from(code.code())
}

/// The exit code of one error in a chain, when it is one of the library's
/// layers' errors: the library's own [`jobprof::Error`] (unless it only
/// carries a layer's, found next in the chain), or a layer's: `render` and
/// `slurm` (2 for the user's input or options, 1 for failed work) and
/// `nsys` (whose codes 3-5 are its own). The outermost one found decides.
fn layer_exit_code(err: &(dyn std::error::Error + 'static)) -> Option<jobprof::ExitCode> {
    use jobprof::{output::render, sys::slurm, ExitCode};
    let usage_or_failed = |usage| match usage {
        true => ExitCode::Usage,
        false => ExitCode::Failed,
    };
    if let Some(e) = err.downcast_ref::<jobprof::Error>() {
        return e.exit_code();
    }
    if let Some(e) = err.downcast_ref::<render::Error>() {
        return Some(usage_or_failed(e.is_usage()));
    }
    if let Some(e) = err.downcast_ref::<slurm::Error>() {
        return Some(usage_or_failed(e.is_usage()));
    }
    err.downcast_ref::<jobprof::nsys::Error>()
        .map(jobprof::nsys::Error::exit_code)
}

/// A broken pipe anywhere in `err`'s chain of causes.
fn is_broken_pipe(err: &anyhow::Error) -> bool {
    jobprof::error::is_broken_pipe(err.as_ref())
}

#[cfg(test)]
mod tests {
    use super::*;
    use jobprof::{output::render, sys::slurm, ExitCode as Code};

    /// The code the binary gives `err`, as `exit_for_error` finds it.
    fn code_of(err: anyhow::Error) -> Code {
        err.chain()
            .find_map(layer_exit_code)
            .unwrap_or(Code::Failed)
    }

    #[test]
    fn a_layers_error_is_mapped_at_the_edge_however_it_is_carried() {
        let empty = || render::Error::Empty { what: "x".into() };
        let internal = || render::Error::Internal("bug".into());
        let bad_job = || slurm::Error::BadJobId("x".into());
        // Directly, inside the library's error, and under anyhow context.
        assert_eq!(code_of(empty().into()), Code::Usage);
        assert_eq!(code_of(jobprof::Error::from(empty()).into()), Code::Usage);
        let wrapped = anyhow::Error::from(jobprof::Error::from(bad_job())).context("repl");
        assert_eq!(code_of(wrapped), Code::Usage);
        assert_eq!(
            code_of(jobprof::Error::from(internal()).into()),
            Code::Failed
        );
        // The library's own errors keep theirs.
        let usage = jobprof::Error::Usage("bad".into());
        assert_eq!(code_of(usage.into()), Code::Usage);
        // The layer's message is the library error's, printed once.
        let e = jobprof::Error::from(empty());
        assert_eq!(e.to_string(), empty().to_string());
    }
}
