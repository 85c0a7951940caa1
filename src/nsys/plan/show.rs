//! Printing a plan: the launcher as one shell-quoted line (for an sbatch
//! script) and the human-readable "Profiling" panel of `--dry-run`. A word
//! with a control character is written in ANSI-C quoting, so printing a
//! plan never writes a raw control character to the terminal.

use std::path::Path;

use super::Plan;

impl Plan {
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
