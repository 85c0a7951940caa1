//! `jobprof-record`: the minimal static capture sidecar of jobprof.
//!
//! Runs next to a benchmark worker during a Slurm job: attaches perf before
//! each query with sampling off, switches it on for exactly one query
//! (driver: `jobprof-record start` / `stop`), and leaves all heavy work for
//! after the job. std plus libc (and lexopt for the arguments), so the binary
//! is small and static. This file only dispatches, prints errors and exits.

mod capture;
mod cli;
mod confine;
mod driver;
mod dwarf;
mod elf;
mod fail;
mod generate;
mod identity;
mod jit;
mod nsys;
mod offcpu;
mod pool;
mod preflight;
mod publish;
mod regs;
mod shard;
mod sidecar;
mod symfs;
mod sys;
mod tokens;

use std::fs;
use std::process::ExitCode;

use cli::Command;
use fail::Fail;

fn preflight(opts: cli::PreflightOpts) -> Result<(), Fail> {
    let pid = preflight::resolve_pid(&opts.target.pid, opts.target.start_timeout)?;
    let staging = preflight::staging_root(opts.target.staging.as_deref());
    let created = fs::symlink_metadata(&staging).is_err();
    let report = preflight::run(&opts.target, pid, &staging, None);
    if created {
        let _ = std::fs::remove_dir(&staging);
    }
    print!("{}", report.text(pid));
    if report.failed().is_empty() {
        Ok(())
    } else {
        Err(Fail::failed(report.failure_message()))
    }
}

fn main() -> ExitCode {
    let result = cli::parse(std::env::args_os().skip(1)).and_then(|cmd| match cmd {
        Command::Help(text) => {
            print!("{text}");
            Ok(())
        }
        Command::Sidecar(o) => sidecar::run(o),
        Command::NsysSidecar(o) => nsys::run(o),
        Command::Driver(o) => driver::run(o),
        Command::Shutdown(o) => driver::shutdown(o),
        Command::WaitReady(o) => driver::wait_ready_cmd(o),
        Command::Preflight(o) => preflight(o),
        Command::Completions(shell) => generate::completions(&shell).map(|s| print!("{s}")),
        Command::ManPages(dir) => generate::man_pages(&dir),
    });
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("jobprof-record: error: {}", e.message);
            ExitCode::from(e.code)
        }
    }
}
