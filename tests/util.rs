//! Helpers shared by the integration test modules.

#![allow(dead_code)]

use std::path::{Path, PathBuf};

/// The repository root (where Cargo.toml is).
pub fn repo_root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

/// `../shared/compat` beside the checkout, when it exists.
pub fn shared_compat() -> Option<PathBuf> {
    let p = repo_root().join("../shared/compat");
    p.is_dir().then_some(p)
}

/// True when running under CI (`CI=true`): missing real components are then
/// failures, not skips.
pub fn under_ci() -> bool {
    std::env::var("CI")
        .map(|v| v == "true" || v == "1")
        .unwrap_or(false)
}

/// Reports a missing real component: panics under CI, prints loudly otherwise.
/// Returns `false` so callers can `if !require(...) { return; }`.
pub fn require(available: bool, what: &str) -> bool {
    if available {
        return true;
    }
    if under_ci() {
        panic!("required component missing under CI: {what}");
    }
    eprintln!("\n*** SKIPPED: {what} is not available on this machine ***\n");
    false
}

/// The path of the fixtures directory.
pub fn fixtures() -> PathBuf {
    repo_root().join("fixtures")
}

/// Reads a file, naming it on failure.
pub fn read(path: &Path) -> Vec<u8> {
    std::fs::read(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

/// True when a real Slurm cluster answers: `SLURM_CONF` is set (as
/// `eval "$(scripts/slurm-cluster.sh start)"` does) and `sinfo` succeeds.
/// Checked once per test run.
pub fn slurm_available() -> bool {
    static AVAILABLE: std::sync::OnceLock<bool> = std::sync::OnceLock::new();
    *AVAILABLE.get_or_init(|| {
        std::env::var_os("SLURM_CONF").is_some()
            && std::process::Command::new("sinfo")
                .arg("-h")
                .stdin(std::process::Stdio::null())
                .stdout(std::process::Stdio::null())
                .stderr(std::process::Stdio::null())
                .status()
                .is_ok_and(|s| s.success())
    })
}
