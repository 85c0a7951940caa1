//! Profiling configs (TOML): validation and the worker launch argv.
//!
//! A config names the profiler (`type = "nsys" | "nsight-slurm" | "perf"`),
//! its options and the worker launch (`[launch]`: native srun options, the
//! command, exported variables). [`Plan::from_path`] checks every rule, with
//! a message that names the field or flag and says why, and builds:
//!
//! - for `nsight-slurm`: `<home>/bin/nsight-slurm srun <srun options> -- <cmd>`
//!   with no `--export=...` (the wrapper adds `--export=ALL`, so exported
//!   variables go into the wrapper's environment), all container mounts merged
//!   into one `--container-mounts` (pyxis keeps only the last one), and the
//!   report pattern `-o <report_root>/direct/<job>_<node>_rank<k>` added to the
//!   tool options, which reach the wrapper as `NSIGHT_SLURM_*` variables;
//! - for `nsys`: `srun <srun options> -- <tool_path> profile <tool options> -o ... <cmd>`;
//! - for `perf`: `srun <srun options> -- <cmd>` (perf attaches from its
//!   sidecar, not through the launcher).
//!
//! Nothing is launched here: the binary prints the plan.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use super::flush::shell_quote;
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
    fn name(self) -> &'static str {
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
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Launch {
    /// Native srun options, passed through unchanged (apart from merged
    /// container mounts).
    #[serde(default)]
    pub srun_options: Vec<String>,
    /// The worker command and its arguments.
    #[serde(default)]
    pub command: Vec<String>,
    /// Variables exported to the workers.
    #[serde(default)]
    pub env: BTreeMap<String, String>,
}

/// A profiling config as written in the TOML file.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ProfilingConfig {
    /// `nsys`, `nsight-slurm` or `perf`.
    #[serde(rename = "type")]
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
    #[serde(default)]
    tool_options: Option<ToolOptions>,
    /// Container mounts `SRC[:DST[:FLAGS]]`.
    #[serde(default)]
    pub container_mounts: Vec<String>,
    /// The shared report root (absolute); reports go to `<report_root>/direct/`.
    pub report_root: Option<PathBuf>,
    /// How workers are launched.
    #[serde(default)]
    pub launch: Launch,
}

/// The default nsys path on compute nodes.
pub const DEFAULT_TOOL_PATH: &str = "/usr/local/bin/nsys";

/// The variable TensorRT-LLM reads its profiling iteration windows from.
pub const TRTLLM_WINDOWS_VAR: &str = "TLLM_PROFILE_START_STOP";

/// nsys flags the connector owns, with why a user may not set them.
const CONNECTOR_OWNED: &[(&str, &str)] = &[
    ("-o", "the connector sets the report output (-o <report_root>/direct/<job>_<node>_rank<k>) so that collect finds every rank's report"),
    ("--output", "the connector sets the report output (-o <report_root>/direct/<job>_<node>_rank<k>) so that collect finds every rank's report"),
    ("--force-overwrite", "the connector decides whether reports are overwritten; an overwrite would destroy a report another flush is collecting"),
    ("-c", "the capture range follows profiling_mode; set profiling_mode instead"),
    ("--capture-range", "the capture range follows profiling_mode; set profiling_mode instead"),
    ("--capture-range-end", "the capture range follows profiling_mode; set profiling_mode instead"),
    ("--start-later", "when sessions start follows profiling_mode (manual = nsight-slurm start/stop); set profiling_mode instead"),
];

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
    /// The tool options including the connector's `-o` pattern.
    pub tool_options: Vec<String>,
    /// The report output pattern (`null` for perf).
    pub report_output: Option<String>,
    /// The merged container mounts.
    pub container_mounts: Vec<String>,
    /// Variables the launcher must run with.
    pub environment: BTreeMap<String, String>,
}

impl Plan {
    /// Reads, validates and plans the config at `path`.
    pub fn from_path(path: &Path) -> Result<Plan, Error> {
        let text = std::fs::read_to_string(path).map_err(|e| Error::io(path, e))?;
        Plan::from_toml(&text, path)
    }

    /// Validates and plans a config given as TOML text (`path` names it in
    /// messages).
    pub fn from_toml(text: &str, path: &Path) -> Result<Plan, Error> {
        let config: ProfilingConfig = toml::from_str(text).map_err(|e| Error::Config {
            path: path.to_path_buf(),
            message: format!("not a valid profiling config: {}", e.to_string().trim_end()),
        })?;
        config.plan().map_err(|problems| Error::Config {
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
        })
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
        let kind = match self.kind {
            ProfilerType::Nsys => "nsys",
            ProfilerType::NsightSlurm => "nsight-slurm",
            ProfilerType::Perf => "perf",
        };
        let mode = match (self.mode, &self.backend) {
            (Some(m), Some(b)) => format!("{} (backend {b})", m.name()),
            (Some(m), None) => m.name().to_string(),
            (None, _) => "(n/a)".to_string(),
        };
        let env = if self.environment.is_empty() {
            "(none)".to_string()
        } else {
            self.environment
                .iter()
                .map(|(k, v)| format!("{k}={}", shell_quote(v)))
                .collect::<Vec<_>>()
                .join("\n                 ")
        };
        let rows = [
            ("type", kind.to_string()),
            ("mode", mode),
            ("windows", self.windows.clone()),
            ("launcher", join(&self.launcher)),
            (
                "tool",
                self.tool
                    .as_ref()
                    .map_or("(n/a)".into(), |t| t.display().to_string()),
            ),
            ("tool options", join(&self.tool_options)),
            (
                "report output",
                self.report_output.clone().unwrap_or_else(|| "(n/a)".into()),
            ),
            ("environment", env),
        ];
        let mut out = String::from("Profiling\n");
        for (k, v) in rows {
            out.push_str(&format!("  {k:<14} {v}\n"));
        }
        out
    }
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

fn is_abs(p: &Path) -> bool {
    p.is_absolute()
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

impl ProfilingConfig {
    /// The tool options as a list.
    pub fn tool_options(&self) -> Vec<String> {
        match &self.tool_options {
            None => Vec::new(),
            Some(ToolOptions::List(v)) => v.clone(),
            Some(ToolOptions::Line(s)) => s.split_whitespace().map(str::to_string).collect(),
        }
    }

    /// Checks every rule and builds the plan; on failure, every problem.
    pub fn plan(&self) -> Result<Plan, Vec<String>> {
        let mut problems = Vec::new();
        let nsight = matches!(self.kind, ProfilerType::Nsys | ProfilerType::NsightSlurm);
        let type_name = match self.kind {
            ProfilerType::Nsys => "nsys",
            ProfilerType::NsightSlurm => "nsight-slurm",
            ProfilerType::Perf => "perf",
        };

        // Fields that only mean something for some types.
        if self.kind != ProfilerType::NsightSlurm && self.home.is_some() {
            problems.push(format!(
                "home: only applies to type = \"nsight-slurm\" (this config has type = \"{type_name}\")"
            ));
        }
        if !nsight {
            for (field, set) in [
                ("tool_path", self.tool_path.is_some()),
                ("profiling_mode", self.profiling_mode.is_some()),
                ("windows", self.windows.is_some()),
                ("tool_options", self.tool_options.is_some()),
                ("report_root", self.report_root.is_some()),
            ] {
                if set {
                    problems.push(format!(
                        "{field}: only applies to the Nsight types (\"nsys\", \"nsight-slurm\"), \
                         not to type = \"perf\""
                    ));
                }
            }
        }

        // home
        if self.kind == ProfilerType::NsightSlurm {
            match &self.home {
                None => problems.push(
                    "home: required for type = \"nsight-slurm\": the wrapper's install directory \
                     (its launcher is <home>/bin/nsight-slurm)"
                        .into(),
                ),
                Some(h) if !is_abs(h) => problems.push(format!(
                    "home: `{}` must be an absolute path: it is used on every compute node, \
                     whose working directory is not yours",
                    h.display()
                )),
                _ => {}
            }
        }

        // tool_path
        let tool_path = self
            .tool_path
            .clone()
            .unwrap_or_else(|| PathBuf::from(DEFAULT_TOOL_PATH));
        if nsight && tool_path.as_os_str().is_empty() {
            problems.push(format!(
                "tool_path: must not be empty (leave it out for the default {DEFAULT_TOOL_PATH})"
            ));
        }

        // profiling_mode and backend
        let mode = nsight.then(|| self.profiling_mode.unwrap_or(ProfilingMode::CudaApi));
        if mode == Some(ProfilingMode::CudaApi) && self.backend.as_deref() != Some("trtllm") {
            let default = if self.profiling_mode.is_none() {
                " (the default)"
            } else {
                ""
            };
            let have = self
                .backend
                .as_ref()
                .map_or("no backend".to_string(), |b| format!("backend = \"{b}\""));
            problems.push(format!(
                "profiling_mode = \"cuda-api\"{default} requires backend = \"trtllm\" (only \
                 TensorRT-LLM calls cudaProfilerStart/Stop around its profiling windows), but the \
                 config has {have}; set backend = \"trtllm\" or profiling_mode = \"at-launch\" or \"manual\""
            ));
        }
        if self.kind == ProfilerType::Nsys && mode == Some(ProfilingMode::Manual) {
            problems.push(
                "profiling_mode = \"manual\" needs type = \"nsight-slurm\" (sessions are started \
                 and stopped with `nsight-slurm start/stop`); plain nsys supports \"at-launch\" and \"cuda-api\""
                    .into(),
            );
        }

        // windows
        if let Some(windows) = &self.windows {
            if mode != Some(ProfilingMode::CudaApi) {
                problems.push(
                    "windows: only apply to profiling_mode = \"cuda-api\" (they are the iterations \
                     TensorRT-LLM profiles); remove them or switch the mode"
                        .into(),
                );
            }
            if windows.is_empty() {
                problems.push(
                    "windows: an empty list; leave the field out to profile every iteration".into(),
                );
            }
            for w in windows {
                if !valid_window(w) {
                    problems.push(format!(
                        "windows: `{w}` is not an iteration window; write START-STOP with \
                         START < STOP, e.g. \"100-150\""
                    ));
                }
            }
        }

        // tool_options
        let user_options = self.tool_options();
        for word in &user_options {
            if let Some((flag, why)) = owned_flag(word) {
                problems.push(format!(
                    "tool_options: `{word}` sets {flag}, which the connector owns: {why}"
                ));
            }
        }

        if self.kind == ProfilerType::NsightSlurm {
            for word in user_options
                .iter()
                .filter(|w| w.contains(char::is_whitespace))
            {
                problems.push(format!(
                    "tool_options: `{word}` contains whitespace, which cannot pass through \
                     NSIGHT_SLURM_TOOL_OPTIONS (the wrapper splits it at spaces); use the \
                     --flag=value form without spaces"
                ));
            }
            if let Some(r) = self
                .report_root
                .as_ref()
                .filter(|r| r.to_string_lossy().contains(char::is_whitespace))
            {
                problems.push(format!(
                    "report_root: `{}` contains whitespace, which cannot pass through \
                     NSIGHT_SLURM_TOOL_OPTIONS (the wrapper splits it at spaces)",
                    r.display()
                ));
            }
        }

        // report_root
        if nsight {
            match &self.report_root {
                None => problems.push(
                    "report_root: required: the shared directory every rank writes its report \
                     to (reports go to <report_root>/direct/)"
                        .into(),
                ),
                Some(r) if !is_abs(r) => problems.push(format!(
                    "report_root: `{}` must be an absolute path on the shared filesystem",
                    r.display()
                )),
                _ => {}
            }
        }

        // launch
        let mut mounts: Vec<String> = Vec::new();
        let mut srun: Vec<String> = Vec::new();
        let mut mounts_at: Option<usize> = None;
        let mut it = self.launch.srun_options.iter();
        while let Some(word) = it.next() {
            let flag = flag_of(word);
            if flag == "--container-mounts" {
                let value = match word.split_once('=') {
                    Some((_, v)) => Some(v.to_string()),
                    None => it.next().cloned(),
                };
                match value {
                    Some(v) => mounts.extend(v.split(',').map(str::to_string)),
                    None => problems.push(
                        "launch.srun_options: --container-mounts without a value".to_string(),
                    ),
                }
                mounts_at.get_or_insert(srun.len());
                continue;
            }
            if word == "--" {
                problems.push(
                    "launch.srun_options: `--` is added by jobprof between the srun options and \
                     the command; put the command in launch.command"
                        .into(),
                );
                continue;
            }
            if self.kind == ProfilerType::NsightSlurm && flag == "--export" {
                problems.push(format!(
                    "launch.srun_options: `{word}` is not allowed with nsight-slurm: the wrapper \
                     adds --export=ALL itself, and a second --export would drop its variables; \
                     put variables in [launch.env]"
                ));
                continue;
            }
            srun.push(word.clone());
        }
        mounts.extend(self.container_mounts.iter().cloned());
        let mut merged: Vec<String> = Vec::new();
        for m in mounts {
            let m = m.trim().to_string();
            if m.is_empty() {
                continue;
            }
            let src = m.split(':').next().unwrap_or("");
            if !src.starts_with('/') || m.contains(',') {
                problems.push(format!(
                    "container_mounts: `{m}` is not SRC[:DST[:FLAGS]] with an absolute SRC \
                     (mounts are joined with commas into one --container-mounts)"
                ));
                continue;
            }
            if !merged.contains(&m) {
                merged.push(m);
            }
        }
        if !merged.is_empty() {
            srun.insert(
                mounts_at.unwrap_or(srun.len()),
                format!("--container-mounts={}", merged.join(",")),
            );
        }
        if self.launch.command.is_empty() {
            problems.push(
                "launch.command: required: the worker command and its arguments, \
                 e.g. command = [\"python\", \"serve.py\"]"
                    .into(),
            );
        }
        for k in self.launch.env.keys() {
            if !valid_env_name(k) {
                problems.push(format!(
                    "launch.env: `{k}` is not a valid variable name (letters, digits, _; not starting with a digit)"
                ));
            }
        }
        if !problems.is_empty() {
            return Err(problems);
        }

        // Build.
        let report_output = self.report_root.as_ref().map(|r| {
            r.join("direct")
                .join(REPORT_PATTERN)
                .to_string_lossy()
                .into_owned()
        });
        let mut tool_options = user_options;
        let mut env = self.launch.env.clone();
        if let Some(w) = &self.windows {
            env.insert(TRTLLM_WINDOWS_VAR.to_string(), w.join(","));
        }
        let windows = match (mode, &self.windows) {
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
        };
        let command = self.launch.command.clone();
        let launcher = match self.kind {
            ProfilerType::NsightSlurm => {
                if let Some(out) = &report_output {
                    tool_options.extend(["-o".to_string(), out.clone()]);
                }
                env.insert(
                    "NSIGHT_SLURM_TOOL_PATH".into(),
                    tool_path.display().to_string(),
                );
                // A space-separated list: the wrapper splits it into words.
                env.insert("NSIGHT_SLURM_TOOL_OPTIONS".into(), tool_options.join(" "));
                env.insert(
                    "NSIGHT_SLURM_PROFILING_MODE".into(),
                    mode.map(|m| m.name()).unwrap_or_default().to_string(),
                );
                let home = self.home.clone().unwrap_or_default();
                let mut argv = vec![
                    home.join("bin/nsight-slurm").display().to_string(),
                    "srun".to_string(),
                ];
                argv.extend(srun);
                argv.push("--".into());
                argv.extend(command);
                argv
            }
            ProfilerType::Nsys => {
                if mode == Some(ProfilingMode::CudaApi) {
                    tool_options.extend([
                        "--capture-range=cudaProfilerApi".to_string(),
                        "--capture-range-end=stop".to_string(),
                    ]);
                }
                if let Some(out) = &report_output {
                    tool_options.extend(["-o".to_string(), out.clone()]);
                }
                let mut argv = vec!["srun".to_string()];
                argv.extend(srun);
                argv.push("--".into());
                argv.push(tool_path.display().to_string());
                argv.push("profile".into());
                argv.extend(tool_options.iter().cloned());
                argv.extend(command);
                argv
            }
            ProfilerType::Perf => {
                let mut argv = vec!["srun".to_string()];
                argv.extend(srun);
                argv.push("--".into());
                argv.extend(command);
                argv
            }
        };
        Ok(Plan {
            kind: self.kind,
            mode,
            backend: self.backend.clone(),
            windows,
            launcher,
            tool: nsight.then_some(tool_path),
            tool_options,
            report_output: report_output.map(|o| format!("{o}.nsys-rep")),
            container_mounts: merged,
            environment: env,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const BASE: &str = r#"
type = "nsight-slurm"
home = "/opt/nsight-slurm"
backend = "trtllm"
report_root = "/shared/reports"
[launch]
command = ["python", "serve.py"]
"#;

    fn plan(extra_top: &str, extra_launch: &str) -> Result<Plan, String> {
        let text = BASE.replace("[launch]", &format!("{extra_top}\n[launch]")) + extra_launch;
        Plan::from_toml(&text, Path::new("cfg.toml")).map_err(|e| e.to_string())
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
        assert_eq!(
            p.tool_options,
            [
                "-o",
                "/shared/reports/direct/%q{SLURM_JOB_ID}_%q{SLURMD_NODENAME}_rank%q{SLURM_PROCID}"
            ]
        );
        assert_eq!(p.mode, Some(ProfilingMode::CudaApi));
        assert_eq!(p.tool.as_deref(), Some(Path::new(DEFAULT_TOOL_PATH)));
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
