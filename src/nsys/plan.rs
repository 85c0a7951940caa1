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
//! launched here.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

use serde::de::DeserializeOwned;
use serde::{Deserialize, Serialize};

use super::{Error, REPORT_PATTERN};

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

/// nsys flags the connector owns, with why a user may not set them.
const CONNECTOR_OWNED: &[(&str, &str)] = &[
    ("-o", "jobprof sets the report output (-o <log_dir>/nsight-slurm-direct/<job>_<node>_rank<k>) so that collect finds every rank's report"),
    ("--output", "jobprof sets the report output (-o <log_dir>/nsight-slurm-direct/<job>_<node>_rank<k>) so that collect finds every rank's report"),
    ("--force-overwrite", "the connector decides whether reports are overwritten; an overwrite would destroy a report another flush is collecting"),
    ("-c", "the capture range follows profiling_mode; set profiling_mode instead"),
    ("--capture-range", "the capture range follows profiling_mode; set profiling_mode instead"),
    ("--capture-range-end", "the capture range follows profiling_mode; set profiling_mode instead"),
    ("--start-later", "when sessions start follows profiling_mode (manual = nsight-slurm start/stop); set profiling_mode instead"),
    ("--wait", "jobprof adds --wait=primary: with any other value nsys waits for re-parented children after SIGTERM and never writes its report"),
];

/// The top-level fields a config may have.
const FIELDS: &[&str] = &[
    "type",
    "home",
    "tool_path",
    "profiling_mode",
    "backend",
    "windows",
    "tool_options",
    "container_mounts",
    "log_dir",
    "nvtx_injection_path",
    "launch",
];

/// The fields of `[launch]`.
const LAUNCH_FIELDS: &[&str] = &["srun_options", "command", "env"];

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

    /// The launcher as one shell-quoted line, prefixed with `env VAR=...`
    /// when variables must be set (ready for an sbatch script).
    pub fn command_line(&self) -> String {
        let mut words: Vec<String> = Vec::new();
        if !self.environment.is_empty() {
            words.push("env".into());
            words.extend(
                self.environment
                    .iter()
                    .map(|(k, v)| format!("{k}={}", shell_quote(v))),
            );
        }
        words.extend(self.launcher.iter().map(|w| shell_quote(w)));
        words.join(" ")
    }

    /// The human-readable "Profiling" panel of `--dry-run`.
    pub fn panel(&self) -> String {
        const INDENT: &str = "\n                 ";
        let join = |v: &[String]| -> String {
            if v.is_empty() {
                "(none)".to_string()
            } else {
                v.iter()
                    .map(|w| shell_quote(w))
                    .collect::<Vec<_>>()
                    .join(" ")
            }
        };
        let lines = |v: Vec<String>| -> String {
            if v.is_empty() {
                "(none)".to_string()
            } else {
                v.join(INDENT)
            }
        };
        let path = |p: Option<&Path>| p.map_or("(n/a)".into(), crate::sys::progress::printable);
        let mode = match (self.mode, &self.backend) {
            (Some(m), Some(b)) => format!("{} (backend {b})", m.name()),
            (Some(m), None) => m.name().to_string(),
            (None, _) => "(n/a)".to_string(),
        };
        let dirs = self.dirs.as_ref();
        let rows = [
            ("type", self.kind.name().to_string()),
            ("mode", mode),
            ("windows", self.windows.clone()),
            ("launcher", join(&self.launcher)),
            ("tool", path(self.tool.as_deref())),
            ("tool options", join(&self.tool_options)),
            (
                "report output",
                self.report_output.clone().unwrap_or_else(|| "(n/a)".into()),
            ),
            ("log dir", path(dirs.map(|d| d.log_dir.as_path()))),
            ("workspace", path(dirs.and_then(|d| d.workspace.as_deref()))),
            ("direct dir", path(dirs.map(|d| d.direct.as_path()))),
            ("runtime dir", path(dirs.and_then(|d| d.runtime.as_deref()))),
            (
                "wrapper log",
                path(dirs.and_then(|d| d.wrapper_log.as_deref())),
            ),
            ("mounts", lines(self.container_mounts.clone())),
            (
                "environment",
                lines(
                    self.environment
                        .iter()
                        .map(|(k, v)| format!("{k}={}", shell_quote(v)))
                        .collect(),
                ),
            ),
            ("setup", lines(self.setup.iter().map(|c| join(c)).collect())),
            (
                "teardown",
                lines(self.teardown.iter().map(|c| join(c)).collect()),
            ),
        ];
        let mut out = String::from("Profiling\n");
        for (k, v) in rows {
            out.push_str(&format!("  {k:<14} {v}\n"));
        }
        out
    }
}

/// `word` quoted for a shell, as one line: a word with a control character
/// (a newline, an escape) is written in ANSI-C quoting (`$'a\nb'`, which
/// bash, zsh and ksh read back as the same word), so printing a plan never
/// writes a raw control character to the terminal or splits its line.
fn shell_quote(word: &str) -> String {
    if !word.chars().any(char::is_control) {
        return crate::sys::exec::shell_quote(word);
    }
    let mut out = String::from("$'");
    for c in word.chars() {
        match c {
            '\\' => out.push_str("\\\\"),
            '\'' => out.push_str("\\'"),
            '\n' => out.push_str("\\n"),
            '\t' => out.push_str("\\t"),
            '\r' => out.push_str("\\r"),
            c if (c as u32) < 0x80 && c.is_control() => {
                out.push_str(&format!("\\x{:02x}", c as u32))
            }
            c if c.is_control() => out.push_str(&format!("\\u{:04x}", c as u32)),
            c => out.push(c),
        }
    }
    out.push('\'');
    out
}

/// Problems for every string of the config holding a NUL byte: no command
/// line word, environment value or path can hold one.
fn nul_bytes(value: &toml::Value, key: &str, p: &mut Vec<String>) {
    match value {
        toml::Value::String(v) if v.contains('\0') => p.push(format!(
            "{key}: contains a NUL byte, which no command line word, environment value \
             or path can hold; remove it"
        )),
        toml::Value::Array(items) => {
            for (i, v) in items.iter().enumerate() {
                nul_bytes(v, &format!("{key}[{i}]"), p);
            }
        }
        toml::Value::Table(t) => {
            for (k, v) in t {
                let sub = if key.is_empty() {
                    k.clone()
                } else {
                    format!("{key}.{k}")
                };
                nul_bytes(v, &sub, p);
            }
        }
        _ => {}
    }
}

/// The wrapper's set-up calls: configure everything, then start the
/// coordinator.
fn setup_calls(
    wrapper: &Path,
    tool: &Path,
    mode: ProfilingMode,
    tool_options: &[String],
    workspace: &Path,
) -> Vec<Vec<String>> {
    let exe = wrapper.display().to_string();
    let call = |args: &[&str]| -> Vec<String> {
        std::iter::once(exe.clone())
            .chain(args.iter().map(|a| a.to_string()))
            .collect()
    };
    let tool = tool.display().to_string();
    let options = tool_options.join(" ");
    let workspace = workspace.display().to_string();
    vec![
        call(&["configure", "tool-path", &tool]),
        call(&["configure", "tool-command", "profile"]),
        call(&["configure", "profiling-mode", mode.name()]),
        call(&["configure", "tool-options", &options]),
        call(&["configure", "report-output", &workspace]),
        call(&["coordinator", "start"]),
    ]
}

/// Splits `--flag=value` into the flag; returns the flag a word sets, if any.
fn flag_of(word: &str) -> &str {
    word.split_once('=').map_or(word, |(f, _)| f)
}

/// The connector-owned flag `word` sets, if any (also `-oFILE`, `-cX`).
fn owned_flag(word: &str) -> Option<(&'static str, &'static str)> {
    let flag = flag_of(word);
    if let Some(&(f, why)) = CONNECTOR_OWNED.iter().find(|(f, _)| *f == flag) {
        return Some((f, why));
    }
    if flag.starts_with("--capture-range") {
        return CONNECTOR_OWNED
            .iter()
            .find(|(f, _)| *f == "--capture-range")
            .copied();
    }
    // Short options with the value attached: `-oreport`, `-ccudaProfilerApi`.
    for short in ["-o", "-c"] {
        if word.len() > 2 && word.starts_with(short) && !word.starts_with("--") {
            return CONNECTOR_OWNED.iter().find(|(f, _)| *f == short).copied();
        }
    }
    None
}

fn valid_env_name(k: &str) -> bool {
    let mut bytes = k.bytes();
    bytes
        .next()
        .is_some_and(|b| b.is_ascii_alphabetic() || b == b'_')
        && bytes.all(|b| b.is_ascii_alphanumeric() || b == b'_')
}

fn valid_window(w: &str) -> bool {
    let Some((a, b)) = w.split_once('-') else {
        return false;
    };
    let num = |s: &str| -> Option<u64> {
        (!s.is_empty() && s.bytes().all(|c| c.is_ascii_digit()))
            .then(|| s.parse().ok())
            .flatten()
    };
    matches!((num(a), num(b)), (Some(a), Some(b)) if a < b)
}

/// One field of a TOML table, deserialized; a value of the wrong kind is a
/// problem (named `label`) and marks the field invalid.
fn field<T: DeserializeOwned>(
    table: &toml::Table,
    key: &str,
    label: &'static str,
    problems: &mut Vec<String>,
    invalid: &mut BTreeSet<&'static str>,
) -> Option<T> {
    let value = table.get(key)?;
    match value.clone().try_into::<T>() {
        Ok(v) => Some(v),
        Err(e) => {
            let msg = e.to_string();
            problems.push(format!("{label}: {}", msg.trim_end().replace('\n', " ")));
            invalid.insert(label);
            None
        }
    }
}

/// Problems for keys of `table` that are not in `known`.
fn unknown_keys(table: &toml::Table, known: &[&str], prefix: &str) -> Vec<String> {
    table
        .keys()
        .filter(|k| !known.contains(&k.as_str()))
        .map(|k| {
            if prefix.is_empty() && k == "report_root" {
                "report_root: replaced by log_dir (absolute): the wrapper's report workspace, \
                 the per-rank direct output and the runtime workspace all derive from it; \
                 write log_dir = \"/shared/runs/run1\" instead"
                    .to_string()
            } else {
                format!(
                    "{prefix}{k}: unknown field; the fields are {}",
                    known.join(", ")
                )
            }
        })
        .collect()
}

/// The parts of a plan the launch checks produce.
struct LaunchParts {
    srun: Vec<String>,
    mounts: Vec<String>,
    mounts_at: Option<usize>,
    container: bool,
}

impl ProfilingConfig {
    /// Reads a config from TOML text: the config (when at least `type` could
    /// be read) and every problem found so far (syntax, unknown fields,
    /// values of the wrong kind).
    pub fn parse(text: &str) -> (Option<ProfilingConfig>, Vec<String>) {
        let table: toml::Table = match text.parse() {
            Ok(t) => t,
            Err(e) => {
                return (
                    None,
                    vec![format!(
                        "not valid TOML: {}",
                        e.to_string().trim_end().replace('\n', "\n    ")
                    )],
                )
            }
        };
        let mut problems = unknown_keys(&table, FIELDS, "");
        nul_bytes(&toml::Value::Table(table.clone()), "", &mut problems);
        let mut invalid = BTreeSet::new();
        let p = &mut problems;
        let i = &mut invalid;
        let kind = field::<ProfilerType>(&table, "type", "type", p, i);
        if !table.contains_key("type") {
            p.push("type: required: \"nsys\", \"nsight-slurm\" or \"perf\"".into());
        }
        let launch_table = match table.get("launch") {
            None => toml::Table::new(),
            Some(toml::Value::Table(t)) => t.clone(),
            Some(_) => {
                p.push("launch: must be a table ([launch] with srun_options, command, env)".into());
                toml::Table::new()
            }
        };
        p.extend(unknown_keys(&launch_table, LAUNCH_FIELDS, "launch."));
        let lt = &launch_table;
        let launch = Launch {
            srun_options: field(lt, "srun_options", "launch.srun_options", p, i)
                .unwrap_or_default(),
            command: field(lt, "command", "launch.command", p, i).unwrap_or_default(),
            env: field(lt, "env", "launch.env", p, i).unwrap_or_default(),
        };
        let t = &table;
        let config = ProfilingConfig {
            kind: ProfilerType::Perf,
            home: field(t, "home", "home", p, i),
            tool_path: field(t, "tool_path", "tool_path", p, i),
            profiling_mode: field(t, "profiling_mode", "profiling_mode", p, i),
            backend: field(t, "backend", "backend", p, i),
            windows: field(t, "windows", "windows", p, i),
            tool_options: field(t, "tool_options", "tool_options", p, i),
            container_mounts: field(t, "container_mounts", "container_mounts", p, i)
                .unwrap_or_default(),
            log_dir: field(t, "log_dir", "log_dir", p, i),
            nvtx_injection_path: field(t, "nvtx_injection_path", "nvtx_injection_path", p, i),
            launch,
            invalid,
        };
        match kind {
            Some(kind) => (Some(ProfilingConfig { kind, ..config }), problems),
            None => (None, problems),
        }
    }

    /// The tool options as written (split at whitespace when one string);
    /// `None` when the config gives none.
    pub fn tool_options(&self) -> Option<Vec<String>> {
        match &self.tool_options {
            None => None,
            Some(ToolOptions::List(v)) => Some(v.clone()),
            Some(ToolOptions::Line(s)) => Some(s.split_whitespace().map(str::to_string).collect()),
        }
    }

    /// Checks every rule and builds the plan; on failure, every problem.
    pub fn plan(&self) -> Result<Plan, Vec<String>> {
        let mut problems = Vec::new();
        let p = &mut problems;
        self.check_fields_for_type(p);
        self.check_home(p);
        let tool_path = self.check_tool_path(p);
        let mode = self.check_mode(p);
        self.check_windows(mode, p);
        let user_options = self.check_tool_options(p);
        let dirs = self.check_log_dir(p);
        self.check_nvtx_injection_path(p);
        let launch = self.check_srun_options(p);
        let worker_env = self.worker_env(dirs.as_ref());
        let env = self.check_env(&worker_env, p);
        let mounts = self.check_mounts(&launch, dirs.as_ref(), p);
        self.check_command(p);
        if !problems.is_empty() {
            return Err(problems);
        }
        Ok(self.build(tool_path, mode, user_options, dirs, launch, mounts, env))
    }

    fn required(&self, field: &'static str) -> bool {
        !self.invalid.contains(field)
    }

    /// Fields that only mean something for some types.
    fn check_fields_for_type(&self, p: &mut Vec<String>) {
        if self.kind != ProfilerType::NsightSlurm && self.home.is_some() {
            p.push(format!(
                "home: only applies to type = \"nsight-slurm\" (this config has type = \"{}\")",
                self.kind.name()
            ));
        }
        if self.kind.is_nsight() {
            return;
        }
        for (field, set) in [
            ("tool_path", self.tool_path.is_some()),
            ("profiling_mode", self.profiling_mode.is_some()),
            ("windows", self.windows.is_some()),
            ("tool_options", self.tool_options.is_some()),
            ("log_dir", self.log_dir.is_some()),
            ("nvtx_injection_path", self.nvtx_injection_path.is_some()),
        ] {
            if set {
                p.push(format!(
                    "{field}: only applies to the Nsight types (\"nsys\", \"nsight-slurm\"), \
                     not to type = \"perf\""
                ));
            }
        }
    }

    fn check_home(&self, p: &mut Vec<String>) {
        if self.kind != ProfilerType::NsightSlurm {
            return;
        }
        match &self.home {
            None if self.required("home") => p.push(
                "home: required for type = \"nsight-slurm\": the wrapper's install directory \
                 (its launcher is <home>/bin/nsight-slurm)"
                    .into(),
            ),
            None => {}
            Some(h) if !h.is_absolute() => p.push(format!(
                "home: `{}` must be an absolute path: it is used on every compute node, \
                 whose working directory is not yours",
                h.display()
            )),
            Some(h) => check_mountable("home", h, p),
        }
    }

    fn check_tool_path(&self, p: &mut Vec<String>) -> PathBuf {
        let tool_path = self
            .tool_path
            .clone()
            .unwrap_or_else(|| PathBuf::from(DEFAULT_TOOL_PATH));
        if self.kind.is_nsight() && tool_path.as_os_str().is_empty() {
            p.push(format!(
                "tool_path: must not be empty (leave it out for the default {DEFAULT_TOOL_PATH})"
            ));
        }
        tool_path
    }

    /// The profiling mode (Nsight types), checked against type and backend.
    fn check_mode(&self, p: &mut Vec<String>) -> Option<ProfilingMode> {
        if !self.kind.is_nsight() || !self.required("profiling_mode") {
            return None;
        }
        let mode = self.profiling_mode.unwrap_or(ProfilingMode::CudaApi);
        if mode == ProfilingMode::CudaApi && self.backend.as_deref() != Some("trtllm") {
            let default = if self.profiling_mode.is_none() {
                " (the default)"
            } else {
                ""
            };
            let have = self
                .backend
                .as_ref()
                .map_or("no backend".to_string(), |b| format!("backend = \"{b}\""));
            p.push(format!(
                "profiling_mode = \"cuda-api\"{default} requires backend = \"trtllm\" (only \
                 TensorRT-LLM calls cudaProfilerStart/Stop around its profiling windows), but the \
                 config has {have}; set backend = \"trtllm\" or profiling_mode = \"at-launch\" or \"manual\""
            ));
        }
        if self.kind == ProfilerType::Nsys && mode == ProfilingMode::Manual {
            p.push(
                "profiling_mode = \"manual\" needs type = \"nsight-slurm\" (sessions are started \
                 and stopped with `nsight-slurm start/stop`); plain nsys supports \"at-launch\" and \"cuda-api\""
                    .into(),
            );
        }
        Some(mode)
    }

    fn check_windows(&self, mode: Option<ProfilingMode>, p: &mut Vec<String>) {
        let Some(windows) = &self.windows else {
            return;
        };
        if mode != Some(ProfilingMode::CudaApi) && self.required("profiling_mode") {
            p.push(
                "windows: only apply to profiling_mode = \"cuda-api\" (they are the iterations \
                 TensorRT-LLM profiles); remove them or switch the mode"
                    .into(),
            );
        }
        if windows.is_empty() {
            p.push("windows: an empty list; leave the field out to profile every iteration".into());
        }
        for w in windows.iter().filter(|w| !valid_window(w)) {
            p.push(format!(
                "windows: `{w}` is not an iteration window; write START-STOP with \
                 START < STOP, e.g. \"100-150\""
            ));
        }
    }

    /// The user's tool options, or the default set.
    fn check_tool_options(&self, p: &mut Vec<String>) -> Vec<String> {
        let options = self
            .tool_options()
            .unwrap_or_else(|| DEFAULT_TOOL_OPTIONS.iter().map(|s| s.to_string()).collect());
        for word in &options {
            if let Some((flag, why)) = owned_flag(word) {
                p.push(format!(
                    "tool_options: `{word}` sets {flag}, which the connector owns: {why}"
                ));
            }
        }
        if self.kind == ProfilerType::NsightSlurm {
            for word in options.iter().filter(|w| w.contains(char::is_whitespace)) {
                p.push(format!(
                    "tool_options: `{word}` contains whitespace, which cannot pass through \
                     `nsight-slurm configure tool-options` (the wrapper splits the options at \
                     spaces); use the --flag=value form without spaces"
                ));
            }
        }
        options
    }

    /// `log_dir`, and the directories derived from it.
    fn check_log_dir(&self, p: &mut Vec<String>) -> Option<Dirs> {
        if !self.kind.is_nsight() {
            return None;
        }
        let Some(log_dir) = &self.log_dir else {
            if self.required("log_dir") {
                p.push(
                    "log_dir: required: the run's shared log directory; the report workspace, \
                     the per-rank direct output, the runtime workspace and nsight-slurm.out \
                     go under it"
                        .into(),
                );
            }
            return None;
        };
        if !log_dir.is_absolute() {
            p.push(format!(
                "log_dir: `{}` must be an absolute path on the shared filesystem",
                log_dir.display()
            ));
            return None;
        }
        if self.kind == ProfilerType::NsightSlurm {
            if log_dir.to_string_lossy().contains(char::is_whitespace) {
                p.push(format!(
                    "log_dir: `{}` contains whitespace, which cannot pass through \
                     `nsight-slurm configure tool-options` (the -o pattern under it is split at spaces)",
                    log_dir.display()
                ));
            }
            check_mountable("log_dir", log_dir, p);
        }
        Some(Dirs::new(self.kind, log_dir))
    }

    fn check_nvtx_injection_path(&self, p: &mut Vec<String>) {
        if let Some(n) = self
            .nvtx_injection_path
            .as_ref()
            .filter(|n| !n.is_absolute())
        {
            p.push(format!(
                "nvtx_injection_path: `{}` must be an absolute path (the library every worker \
                 loads through NVTX_INJECTION64_PATH)",
                n.display()
            ));
        }
    }

    /// The srun options without their container mounts (collected apart).
    fn check_srun_options(&self, p: &mut Vec<String>) -> LaunchParts {
        let mut parts = LaunchParts {
            srun: Vec::new(),
            mounts: Vec::new(),
            mounts_at: None,
            container: false,
        };
        let mut it = self.launch.srun_options.iter();
        while let Some(word) = it.next() {
            let flag = flag_of(word);
            if flag == "--container-mounts" {
                let value = match word.split_once('=') {
                    Some((_, v)) => Some(v.to_string()),
                    None => it.next().cloned(),
                };
                match value {
                    Some(v) => parts.mounts.extend(v.split(',').map(str::to_string)),
                    None => {
                        p.push("launch.srun_options: --container-mounts without a value".into())
                    }
                }
                parts.mounts_at.get_or_insert(parts.srun.len());
                continue;
            }
            if word == "--" {
                p.push(
                    "launch.srun_options: `--` is added by jobprof between the srun options and \
                     the command; put the command in launch.command"
                        .into(),
                );
                continue;
            }
            if self.kind == ProfilerType::NsightSlurm && flag == "--export" {
                p.push(format!(
                    "launch.srun_options: `{word}` is not allowed with nsight-slurm: the wrapper \
                     adds --export=ALL itself, and a second --export would drop its variables; \
                     put variables in [launch.env]"
                ));
                continue;
            }
            if flag == "--container-image" || flag == "--container-name" {
                parts.container = true;
            }
            parts.srun.push(word.clone());
        }
        parts
    }

    /// The variables jobprof sets for the workers (and, for nsight-slurm,
    /// the wrapper), with the field each comes from.
    fn worker_env(&self, dirs: Option<&Dirs>) -> BTreeMap<String, (String, &'static str)> {
        let mut env = BTreeMap::new();
        if !self.kind.is_nsight() {
            return env;
        }
        if let Some(w) = &self.windows {
            env.insert(TRTLLM_WINDOWS_VAR.into(), (w.join(","), "from windows"));
        }
        env.insert(
            "TLLM_PROFILE_LOG_RANKS".into(),
            ("all".into(), "for every Nsight run"),
        );
        env.insert(
            "DYN_ENABLE_RUST_NVTX".into(),
            ("1".into(), "for every Nsight run"),
        );
        if let Some(n) = &self.nvtx_injection_path {
            env.insert(
                "NVTX_INJECTION64_PATH".into(),
                (n.display().to_string(), "from nvtx_injection_path"),
            );
        }
        if let (ProfilerType::NsightSlurm, Some(d)) = (self.kind, dirs) {
            env.insert(
                "SLURM_SUBMIT_DIR".into(),
                (d.log_dir.display().to_string(), "from log_dir"),
            );
        }
        env
    }

    /// `[launch.env]` merged with jobprof's variables, which it may not set.
    fn check_env(
        &self,
        worker: &BTreeMap<String, (String, &'static str)>,
        p: &mut Vec<String>,
    ) -> BTreeMap<String, String> {
        let mut env: BTreeMap<String, String> = worker
            .iter()
            .map(|(k, (v, _))| (k.clone(), v.clone()))
            .collect();
        for (k, v) in &self.launch.env {
            if !valid_env_name(k) {
                p.push(format!(
                    "launch.env: `{k}` is not a valid variable name (letters, digits, _; not starting with a digit)"
                ));
            } else if let Some((_, from)) = worker.get(k) {
                p.push(format!(
                    "launch.env: `{k}` is set by jobprof ({from}); remove it from [launch.env]"
                ));
            } else {
                env.insert(k.clone(), v.clone());
            }
        }
        env
    }

    /// Every container mount, merged into one list: the user's (srun options
    /// first, then `container_mounts`), then those the profiler needs in a
    /// container.
    fn check_mounts(
        &self,
        launch: &LaunchParts,
        dirs: Option<&Dirs>,
        p: &mut Vec<String>,
    ) -> Vec<String> {
        let mut merged: Vec<String> = Vec::new();
        let user = launch.mounts.iter().chain(&self.container_mounts);
        for m in user.map(|m| m.trim()).filter(|m| !m.is_empty()) {
            let src = m.split(':').next().unwrap_or("");
            if !src.starts_with('/') || m.contains(',') {
                p.push(format!(
                    "container_mounts: `{m}` is not SRC[:DST[:FLAGS]] with an absolute SRC \
                     (mounts are joined with commas into one --container-mounts)"
                ));
            } else if !merged.iter().any(|x| x == m) {
                merged.push(m.to_string());
            }
        }
        if launch.container {
            for m in self.profiler_mounts(dirs) {
                if !merged.contains(&m) {
                    merged.push(m);
                }
            }
        }
        merged
    }

    /// The mounts a containerized rank needs: for nsight-slurm the install
    /// root read-only, the connector binary, the log dir at its host path and
    /// the runtime workspace at `/nsrt`; for nsys the log dir.
    fn profiler_mounts(&self, dirs: Option<&Dirs>) -> Vec<String> {
        let mut v = Vec::new();
        if let (ProfilerType::NsightSlurm, Some(home)) = (self.kind, &self.home) {
            let h = home.display();
            v.push(format!("{h}:{h}:ro"));
            v.push(format!(
                "{h}/bin/nsight-slurm-connector:{CONNECTOR_MOUNT}:ro"
            ));
        }
        if let Some(d) = dirs {
            let l = d.log_dir.display();
            v.push(format!("{l}:{l}"));
            if let Some(r) = &d.runtime {
                v.push(format!("{}:{RUNTIME_MOUNT}", r.display()));
            }
        }
        v
    }

    fn check_command(&self, p: &mut Vec<String>) {
        if self.launch.command.is_empty() && self.required("launch.command") {
            p.push(
                "launch.command: required: the worker command and its arguments, \
                 e.g. command = [\"python\", \"serve.py\"]"
                    .into(),
            );
        }
    }

    /// What is recorded when, in words.
    fn windows_text(&self, mode: Option<ProfilingMode>) -> String {
        match (mode, &self.windows) {
            (None, _) => "set by the perf sidecar (per query)".to_string(),
            (Some(ProfilingMode::AtLaunch), _) => "whole run (launch to exit)".to_string(),
            (Some(ProfilingMode::Manual), _) => {
                "between `nsight-slurm start` and `nsight-slurm stop`".to_string()
            }
            (Some(ProfilingMode::CudaApi), Some(w)) => format!(
                "iterations {} (cudaProfilerStart/Stop, {TRTLLM_WINDOWS_VAR})",
                w.join(",")
            ),
            (Some(ProfilingMode::CudaApi), None) => {
                "every cudaProfilerStart/Stop range of the application".to_string()
            }
        }
    }

    /// Builds the plan from checked parts.
    #[allow(clippy::too_many_arguments)]
    fn build(
        &self,
        tool_path: PathBuf,
        mode: Option<ProfilingMode>,
        tool_options: Vec<String>,
        dirs: Option<Dirs>,
        launch: LaunchParts,
        mounts: Vec<String>,
        environment: BTreeMap<String, String>,
    ) -> Plan {
        let mut srun = launch.srun;
        if !mounts.is_empty() {
            srun.insert(
                launch.mounts_at.unwrap_or(srun.len()),
                format!("--container-mounts={}", mounts.join(",")),
            );
        }
        let report_output = dirs
            .as_ref()
            .map(|d| d.direct.join(REPORT_PATTERN).display().to_string());
        let mut plan = Plan {
            kind: self.kind,
            mode,
            backend: self.backend.clone(),
            windows: self.windows_text(mode),
            launcher: Vec::new(),
            tool: self.kind.is_nsight().then(|| tool_path.clone()),
            tool_options: Vec::new(),
            report_output: report_output.as_ref().map(|o| format!("{o}.nsys-rep")),
            container_mounts: mounts,
            environment,
            home: self.home.clone(),
            dirs: dirs.clone(),
            setup: Vec::new(),
            teardown: Vec::new(),
        };
        let tool_options = self.full_tool_options(mode, tool_options, report_output);
        let launcher = self.launcher(plan.wrapper(), srun, &tool_path, &tool_options);
        if let (Some(wrapper), Some(mode), Some(ws)) = (
            plan.wrapper(),
            mode,
            dirs.as_ref().and_then(|d| d.workspace.as_ref()),
        ) {
            plan.setup = setup_calls(&wrapper, &tool_path, mode, &tool_options, ws);
            plan.teardown = vec![vec![
                wrapper.display().to_string(),
                "coordinator".into(),
                "stop".into(),
                "--force".into(),
            ]];
        }
        plan.launcher = launcher;
        plan.tool_options = tool_options;
        plan
    }

    /// The user's (or default) tool options and what jobprof adds:
    /// `--wait=primary`, the capture range of plain nsys in cuda-api mode,
    /// and the `-o` pattern.
    fn full_tool_options(
        &self,
        mode: Option<ProfilingMode>,
        mut options: Vec<String>,
        report_output: Option<String>,
    ) -> Vec<String> {
        if self.kind.is_nsight() {
            options.push(WAIT_PRIMARY.to_string());
        }
        if self.kind == ProfilerType::Nsys && mode == Some(ProfilingMode::CudaApi) {
            options.extend([
                "--capture-range=cudaProfilerApi".to_string(),
                "--capture-range-end=stop".to_string(),
            ]);
        }
        if let Some(out) = report_output {
            options.extend(["-o".to_string(), out]);
        }
        options
    }

    /// The launcher argv: the wrapper or srun, the srun options, `--`, and
    /// (for plain nsys) `nsys profile <options>` before the command.
    fn launcher(
        &self,
        wrapper: Option<PathBuf>,
        srun: Vec<String>,
        tool_path: &Path,
        tool_options: &[String],
    ) -> Vec<String> {
        let mut launcher = match wrapper {
            Some(w) => vec![w.display().to_string(), "srun".to_string()],
            None => vec!["srun".to_string()],
        };
        launcher.extend(srun);
        launcher.push("--".into());
        if self.kind == ProfilerType::Nsys {
            launcher.push(tool_path.display().to_string());
            launcher.push("profile".into());
            launcher.extend(tool_options.iter().cloned());
        }
        launcher.extend(self.launch.command.iter().cloned());
        launcher
    }
}

/// Paths that go into `--container-mounts` must not contain its separators.
fn check_mountable(field: &str, path: &Path, p: &mut Vec<String>) {
    let s = path.to_string_lossy();
    if s.contains(',') || s.contains(':') {
        p.push(format!(
            "{field}: `{s}` contains `,` or `:`, which cannot be mounted into containers \
             (--container-mounts separates mounts with `,` and fields with `:`)"
        ));
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

    #[test]
    fn connector_owned_flags_in_all_spellings() {
        for w in [
            "-o",
            "-ofile",
            "--output",
            "--output=x",
            "--force-overwrite",
            "--force-overwrite=true",
            "-c",
            "-ccudaProfilerApi",
            "--capture-range=nvtx",
            "--capture-range-end=stop",
            "--start-later",
            "--start-later=true",
            "--wait=all",
        ] {
            assert!(owned_flag(w).is_some(), "{w}");
        }
        for w in [
            "--trace=cuda,nvtx",
            "-t",
            "cuda",
            "--sample=none",
            "--cuda-memory-usage=true",
        ] {
            assert!(owned_flag(w).is_none(), "{w}");
        }
    }

    #[test]
    fn windows_syntax() {
        assert!(valid_window("100-150"));
        for bad in ["150-100", "5-5", "a-b", "100", "-5", "1-2-3", ""] {
            assert!(!valid_window(bad), "{bad}");
        }
    }
}
