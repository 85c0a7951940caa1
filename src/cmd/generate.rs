//! `jobprof completions` and `jobprof man-pages`: shell completions and
//! man pages generated from the clap definitions, so they always match
//! `--help`.

use std::io::Write;
use std::path::PathBuf;

use anyhow::Context;
use clap::Args;
use clap_complete::Shell;

use jobprof::sys::atomic::AtomicFile;
use jobprof::ExitCode;

/// Print a shell completion script for jobprof on stdout.
#[derive(Debug, Args)]
#[command(after_help = "Examples:
  jobprof completions bash > ~/.local/share/bash-completion/completions/jobprof
  jobprof completions zsh > ~/.zfunc/_jobprof        # with fpath+=(~/.zfunc)
  jobprof completions fish > ~/.config/fish/completions/jobprof.fish

Exit status: 0 written; 2 bad usage.")]
pub struct CompletionsArgs {
    /// The shell: bash, zsh, fish, elvish or powershell.
    #[arg(value_name = "SHELL")]
    pub shell: Shell,
}

/// Write the man pages (jobprof.1 and one per subcommand) into a directory.
///
/// Write the man pages (jobprof.1 and one per subcommand, e.g.
/// jobprof-process.1, jobprof-nsys-collect.1) into a directory.
#[derive(Debug, Args)]
#[command(after_help = "Examples:
  jobprof man-pages ~/.local/share/man/man1 && man jobprof-process
  jobprof man-pages dist/man/man1

Exit status: 0 written; 1 a page could not be written; 2 bad usage.")]
pub struct ManPagesArgs {
    /// The directory (created when missing); existing pages are replaced
    /// atomically.
    #[arg(value_name = "DIR")]
    pub dir: PathBuf,
}

pub fn completions(args: CompletionsArgs, mut cmd: clap::Command) -> anyhow::Result<ExitCode> {
    let mut buf = Vec::new();
    clap_complete::generate(args.shell, &mut cmd, "jobprof", &mut buf);
    let mut out = std::io::stdout().lock();
    out.write_all(&buf)
        .and_then(|()| out.flush())
        .context("writing to stdout")?;
    Ok(ExitCode::Success)
}

pub fn man_pages(args: ManPagesArgs, cmd: clap::Command) -> anyhow::Result<ExitCode> {
    std::fs::create_dir_all(&args.dir)
        .map_err(|e| jobprof::Error::io(&args.dir, e))
        .with_context(|| format!("creating {}", args.dir.display()))?;
    let mut cmd = cmd.disable_help_subcommand(true);
    cmd.build();
    let mut written = Vec::new();
    write_pages(&cmd, &args.dir, &mut written)?;
    for p in &written {
        jobprof::outln!("{}", p.display())?;
    }
    Ok(ExitCode::Success)
}

/// Writes the page of `cmd` and of every visible subcommand below it.
fn write_pages(
    cmd: &clap::Command,
    dir: &std::path::Path,
    written: &mut Vec<PathBuf>,
) -> anyhow::Result<()> {
    let man = clap_mangen::Man::new(cmd.clone());
    let path = dir.join(man.get_filename());
    let mut page = Vec::new();
    man.render(&mut page).context("rendering a man page")?;
    let mut f = AtomicFile::create(&path)?;
    f.write_all(&page)
        .map_err(|e| jobprof::Error::io(&path, e))?;
    f.commit()?;
    written.push(path);
    for sub in cmd.get_subcommands().filter(|s| !s.is_hide_set()) {
        write_pages(sub, dir, written)?;
    }
    Ok(())
}
