//! Reading a config: the TOML text as a plain table, so that unknown
//! fields, values of the wrong kind and NUL bytes are all reported
//! together (each with the field it concerns) before the rules of
//! [`mod@super::check`] run.

use std::collections::BTreeSet;

use serde::de::DeserializeOwned;

use super::{Launch, ProfilerType, ProfilingConfig, ToolOptions};

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
}
