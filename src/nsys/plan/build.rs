//! Building the plan from a checked config: the launcher argv (the
//! wrapper or srun, the srun options with the merged container mounts,
//! `--`, `nsys profile <options>` for plain nsys, the command), the full
//! tool options (with `--wait=primary` and the `-o` pattern), and the
//! wrapper's set-up and teardown calls.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use super::{
    Dirs, Plan, ProfilerType, ProfilingConfig, ProfilingMode, TRTLLM_WINDOWS_VAR, WAIT_PRIMARY,
};
use crate::nsys::REPORT_PATTERN;

/// The parts of a plan the launch checks produce.
pub(super) struct LaunchParts {
    pub(super) srun: Vec<String>,
    pub(super) mounts: Vec<String>,
    pub(super) mounts_at: Option<usize>,
    pub(super) container: bool,
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

impl ProfilingConfig {
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
    pub(super) fn build(
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
