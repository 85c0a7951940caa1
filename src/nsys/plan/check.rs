//! The rules of a config, one `check_*` step per field or group: each
//! broken rule is a problem naming the field or flag, why, and what to
//! write instead; every problem is collected, none stops the others.
//! [`ProfilingConfig::plan`] runs them all and, when none is broken, hands
//! the checked parts to [`mod@super::build`].

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use super::build::LaunchParts;
use super::{
    Dirs, Plan, ProfilerType, ProfilingConfig, ProfilingMode, CONNECTOR_MOUNT,
    DEFAULT_TOOL_OPTIONS, DEFAULT_TOOL_PATH, RUNTIME_MOUNT, TRTLLM_WINDOWS_VAR,
};

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

impl ProfilingConfig {
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
