//! Profiling configs (TOML): validation and the worker launch plan.
//!
//! A config names the profiler (`type = "nsys" | "nsight-slurm" | "perf"`),
//! its options, the run's log directory and the worker launch (`[launch]`:
//! native srun options, the command, exported variables). [`Plan::from_toml`]
//! first reads the file as a plain TOML table, so that unknown fields and
//! values of the wrong kind are reported together with every rule broken
//! (the `check_*` steps of [`ProfilingConfig`]), each with the field or flag,
//! why, and what to write instead. From a valid config it builds:
//!
//! - for `nsight-slurm`: `<home>/bin/nsight-slurm srun <srun options> -- <cmd>`
//!   with no `--export=...` (the wrapper adds `--export=ALL`, so exported
//!   variables go into the wrapper's environment), every container mount in
//!   one `--container-mounts` (pyxis keeps only the last one), and the
//!   wrapper's set-up calls (`configure ...`, `coordinator start`) and
//!   teardown call (`coordinator stop --force`) that `jobprof nsys setup` and
//!   `teardown` run;
//! - for `nsys`: `srun <srun options> -- <tool_path> profile <tool options> <cmd>`;
//! - for `perf`: `srun <srun options> -- <cmd>` (perf attaches from its
//!   sidecar, not through the launcher).
//!
//! The report directories all derive from `log_dir` ([`Dirs`]). Nothing is
//!
//! The steps are modules of their own: [`mod@parse`] reads the TOML
//! table into a [`ProfilingConfig`], [`mod@check`] applies every rule,
//! [`mod@build`] turns the checked parts into the [`Plan`], and
//! [`mod@show`] prints it (the one shell-quoted line and the `--dry-run`
//! panel).

mod build;
mod check;
mod parse;
mod show;

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use super::Error;

/// The profiler a config selects.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum ProfilerType {
    /// `nsys profile` run directly in every rank.
    Nsys,
    /// The `nsight-slurm` wrapper around `srun`.
    NsightSlurm,
    /// Linux perf through jobprof's capture sidecar.
    Perf,
}

impl ProfilerType {
    /// The name as written in configs.
    pub fn name(self) -> &'static str {
        match self {
            ProfilerType::Nsys => "nsys",
            ProfilerType::NsightSlurm => "nsight-slurm",
            ProfilerType::Perf => "perf",
        }
    }

    fn is_nsight(self) -> bool {
        matches!(self, ProfilerType::Nsys | ProfilerType::NsightSlurm)
    }
}

/// When the Nsight sessions record.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum ProfilingMode {
    /// From process launch to exit.
    AtLaunch,
    /// Between `nsight-slurm start` and `nsight-slurm stop`.
    Manual,
    /// Between the application's `cudaProfilerStart`/`Stop` calls.
    CudaApi,
}

impl ProfilingMode {
    /// The name as written in configs (and passed to the wrapper).
    pub fn name(self) -> &'static str {
        match self {
            ProfilingMode::AtLaunch => "at-launch",
            ProfilingMode::Manual => "manual",
            ProfilingMode::CudaApi => "cuda-api",
        }
    }
}

/// `tool_options` as a list, or one string split at whitespace.
#[derive(Debug, Clone, Deserialize)]
#[serde(untagged)]
enum ToolOptions {
    List(Vec<String>),
    Line(String),
}

/// The `[launch]` table: how workers are started.
#[derive(Debug, Clone, Default)]
pub struct Launch {
    /// Native srun options, passed through unchanged (apart from merged
    /// container mounts).
    pub srun_options: Vec<String>,
    /// The worker command and its arguments.
    pub command: Vec<String>,
    /// Variables exported to the workers.
    pub env: BTreeMap<String, String>,
}

/// A profiling config as written in the TOML file.
#[derive(Debug, Clone)]
pub struct ProfilingConfig {
    /// `nsys`, `nsight-slurm` or `perf`.
    pub kind: ProfilerType,
    /// nsight-slurm install home (absolute).
    pub home: Option<PathBuf>,
    /// The nsys executable on the compute nodes (default `/usr/local/bin/nsys`).
    pub tool_path: Option<PathBuf>,
    /// `at-launch`, `manual` or `cuda-api` (default).
    pub profiling_mode: Option<ProfilingMode>,
    /// The inference backend; `cuda-api` requires `trtllm`.
    pub backend: Option<String>,
    /// cuda-api iteration windows `A-B` (TensorRT-LLM's `TLLM_PROFILE_START_STOP`).
    pub windows: Option<Vec<String>>,
    tool_options: Option<ToolOptions>,
    /// Container mounts `SRC[:DST[:FLAGS]]`.
    pub container_mounts: Vec<String>,
    /// The run's log directory (absolute, shared); see [`Dirs`].
    pub log_dir: Option<PathBuf>,
    /// The NVTX injection library the workers load (`NVTX_INJECTION64_PATH`).
    pub nvtx_injection_path: Option<PathBuf>,
    /// How workers are launched.
    pub launch: Launch,
    /// Fields present in the file but of the wrong kind (already reported;
    /// their other checks are skipped).
    invalid: BTreeSet<&'static str>,
}

/// The default nsys path on compute nodes.
pub const DEFAULT_TOOL_PATH: &str = "/usr/local/bin/nsys";

/// The variable TensorRT-LLM reads its profiling iteration windows from.
pub const TRTLLM_WINDOWS_VAR: &str = "TLLM_PROFILE_START_STOP";

/// The tool options used when a config gives none: the profiling playbook's
/// set without the connector-owned flags. CUDA and NVTX tracing, CUDA graphs
/// traced per node, no CPU sampling, no context-switch tracing.
pub const DEFAULT_TOOL_OPTIONS: &[&str] = &[
    "--trace=cuda,nvtx",
    "--cuda-graph-trace=node",
    "--sample=none",
    "--cpuctxsw=none",
];

/// Added to every Nsight launch: without it nsys waits for re-parented
/// children after SIGTERM and never writes its report.
pub const WAIT_PRIMARY: &str = "--wait=primary";

/// Under `log_dir`: the wrapper's report workspace (`configure report-output`).
pub const WORKSPACE_DIR: &str = "nsight-slurm-reports";
/// Under `log_dir`: the per-rank direct output of `nsight-slurm` ranks (next
/// to the workspace, not inside: the wrapper refuses a non-empty workspace).
pub const DIRECT_DIR: &str = "nsight-slurm-direct";
/// Under `log_dir`: the per-rank output of plain `nsys` ranks.
pub const NSYS_DIRECT_DIR: &str = "nsys-direct";
/// Under `log_dir`: the runtime workspace of the connectors.
pub const RUNTIME_DIR: &str = "nsight-slurm-runtime";
/// Under `log_dir`: every wrapper call and its output.
pub const WRAPPER_LOG: &str = "nsight-slurm.out";
/// Where the runtime workspace is mounted in containers (short: the AF_UNIX
/// socket path limit is 108 bytes).
pub const RUNTIME_MOUNT: &str = "/nsrt";
/// Where the connector binary is mounted in containers.
pub const CONNECTOR_MOUNT: &str = "/usr/local/bin/nsight-slurm-connector";

/// Where a run's files go, all derived from `log_dir`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Dirs {
    /// The run's log directory (the collect/flush report root).
    pub log_dir: PathBuf,
    /// The wrapper's report workspace (`nsight-slurm` only).
    pub workspace: Option<PathBuf>,
    /// Where every rank writes its report directly.
    pub direct: PathBuf,
    /// The connectors' runtime workspace, mounted at `/nsrt` (`nsight-slurm` only).
    pub runtime: Option<PathBuf>,
    /// The log of every wrapper call (`nsight-slurm` only).
    pub wrapper_log: Option<PathBuf>,
}

impl Dirs {
    /// The directories of a run of `kind` under `log_dir`.
    pub fn new(kind: ProfilerType, log_dir: &Path) -> Dirs {
        let wrapper = kind == ProfilerType::NsightSlurm;
        Dirs {
            log_dir: log_dir.to_path_buf(),
            workspace: wrapper.then(|| log_dir.join(WORKSPACE_DIR)),
            direct: log_dir.join(if wrapper { DIRECT_DIR } else { NSYS_DIRECT_DIR }),
            runtime: wrapper.then(|| log_dir.join(RUNTIME_DIR)),
            wrapper_log: wrapper.then(|| log_dir.join(WRAPPER_LOG)),
        }
    }

    /// The directories to create before the first rank starts, parents first.
    pub fn to_create(&self) -> Vec<&Path> {
        let mut v = vec![self.log_dir.as_path()];
        v.extend(self.workspace.as_deref());
        v.push(self.direct.as_path());
        v.extend(self.runtime.as_deref());
        v
    }
}

/// The validated plan: what would be launched and how it is profiled.
#[derive(Debug, Clone, Serialize)]
pub struct Plan {
    /// The profiler.
    #[serde(rename = "type")]
    pub kind: ProfilerType,
    /// The profiling mode (Nsight types only).
    pub mode: Option<ProfilingMode>,
    /// The backend, when given.
    pub backend: Option<String>,
    /// What is recorded when, in words.
    pub windows: String,
    /// The launcher argv.
    pub launcher: Vec<String>,
    /// The profiler executable (nsys path; `null` for perf).
    pub tool: Option<PathBuf>,
    /// The tool options, including `--wait=primary` and the `-o` pattern.
    pub tool_options: Vec<String>,
    /// The report output pattern (`null` for perf).
    pub report_output: Option<String>,
    /// The merged container mounts.
    pub container_mounts: Vec<String>,
    /// Variables the launcher must run with.
    pub environment: BTreeMap<String, String>,
    /// The nsight-slurm install home.
    pub home: Option<PathBuf>,
    /// The run's directories (Nsight types).
    pub dirs: Option<Dirs>,
    /// The wrapper calls `jobprof nsys setup` runs, in order.
    pub setup: Vec<Vec<String>>,
    /// The wrapper call `jobprof nsys teardown` runs.
    pub teardown: Vec<Vec<String>>,
}

impl Plan {
    /// Reads, validates and plans the config at `path`.
    pub fn from_path(path: &Path) -> Result<Plan, Error> {
        let text = std::fs::read_to_string(path).map_err(|e| Error::io(path, e))?;
        Plan::from_toml(&text, path)
    }

    /// Validates and plans a config given as TOML text (`path` names it in
    /// messages). Every problem is listed in one [`Error::Config`].
    pub fn from_toml(text: &str, path: &Path) -> Result<Plan, Error> {
        let config_error = |problems: Vec<String>| Error::Config {
            path: path.to_path_buf(),
            message: if problems.len() == 1 {
                problems[0].clone()
            } else {
                format!(
                    "{} problems:\n  - {}",
                    problems.len(),
                    problems.join("\n  - ")
                )
            },
        };
        let (config, mut problems) = ProfilingConfig::parse(text);
        let Some(config) = config else {
            return Err(config_error(problems));
        };
        match config.plan() {
            Ok(plan) if problems.is_empty() => Ok(plan),
            Ok(_) => Err(config_error(problems)),
            Err(more) => {
                problems.extend(more);
                Err(config_error(problems))
            }
        }
    }

    /// The `nsight-slurm` executable (`<home>/bin/nsight-slurm`).
    pub fn wrapper(&self) -> Option<PathBuf> {
        self.home
            .as_ref()
            .map(|h| h.join("bin").join("nsight-slurm"))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const BASE: &str = r#"
type = "nsight-slurm"
home = "/opt/nsight-slurm"
backend = "trtllm"
log_dir = "/shared/run1"
[launch]
command = ["python", "serve.py"]
"#;

    fn plan(extra_top: &str, extra_launch: &str) -> Result<Plan, Error> {
        let text = BASE.replace("[launch]", &format!("{extra_top}\n[launch]")) + extra_launch;
        Plan::from_toml(&text, Path::new("cfg.toml"))
    }

    #[test]
    fn the_base_config_plans() {
        let p = plan("", "").unwrap();
        assert_eq!(
            p.launcher,
            [
                "/opt/nsight-slurm/bin/nsight-slurm",
                "srun",
                "--",
                "python",
                "serve.py"
            ]
        );
        let mut expected: Vec<&str> = DEFAULT_TOOL_OPTIONS.to_vec();
        expected.extend([
            "--wait=primary",
            "-o",
            "/shared/run1/nsight-slurm-direct/%q{SLURM_JOB_ID}_%q{SLURMD_NODENAME}_rank%q{SLURM_PROCID}",
        ]);
        assert_eq!(p.tool_options, expected);
        assert_eq!(p.mode, Some(ProfilingMode::CudaApi));
        assert_eq!(p.tool.as_deref(), Some(Path::new(DEFAULT_TOOL_PATH)));
        let d = p.dirs.unwrap();
        assert_eq!(
            d.workspace.unwrap(),
            Path::new("/shared/run1/nsight-slurm-reports")
        );
        assert_eq!(
            d.runtime.unwrap(),
            Path::new("/shared/run1/nsight-slurm-runtime")
        );
        assert_eq!(
            d.wrapper_log.unwrap(),
            Path::new("/shared/run1/nsight-slurm.out")
        );
        assert_eq!(p.setup.len(), 6);
        assert_eq!(p.setup[5][1..], ["coordinator", "start"]);
    }

    #[test]
    fn every_problem_is_listed_with_unknown_fields_and_wrong_kinds() {
        let e = plan(
            "tool_option = 1\nreport_root = \"/r\"\nprofiling_mode = \"often\"\nwindows = \"1-2\"",
            "shell = true\nenv = { \"1X\" = \"y\" }",
        )
        .unwrap_err()
        .to_string();
        for needle in [
            "6 problems",
            "tool_option: unknown field",
            "report_root: replaced by log_dir",
            "launch.shell: unknown field",
            "profiling_mode: unknown variant `often`",
            "windows: invalid type",
            "launch.env: `1X`",
        ] {
            assert!(e.contains(needle), "{needle:?} missing in:\n{e}");
        }
    }

    #[test]
    fn a_missing_or_unreadable_type_stops_after_the_parse_problems() {
        let e = Plan::from_toml("home = 3\n", Path::new("c.toml"))
            .unwrap_err()
            .to_string();
        assert!(
            e.contains("type: required") && e.contains("home: invalid type"),
            "{e}"
        );
        let e = Plan::from_toml("type = [\n", Path::new("c.toml"))
            .unwrap_err()
            .to_string();
        assert!(e.contains("not valid TOML"), "{e}");
    }
}
