//! `jobprof fold`: perf script text in, collapsed stacks out.

use clap::Args;

/// Fold `perf script` text into collapsed stacks (`frame;frame;... count`).
#[derive(Debug, Args)]
pub struct FoldArgs {
    /// perf script text files (.gz and .zst are decoded); `-` or none reads stdin.
    #[arg(value_name = "INPUT")]
    pub inputs: Vec<std::path::PathBuf>,
}

pub fn run(_args: FoldArgs) -> anyhow::Result<jobprof::ExitCode> {
    anyhow::bail!("jobprof fold is being built in this commit series")
}
