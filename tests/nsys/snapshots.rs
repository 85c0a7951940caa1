//! `jobprof nsys plan` snapshots: for every config in
//! `tests/expected/nsys-plan/*.toml`, the command line, the `--dry-run`
//! panel and the `--json` plan (or the exit code and message of an invalid
//! config) must equal `<name>.out`. Bless changes with `JOBPROF_BLESS=1`.

use std::fs;
use std::path::Path;

use super::{jobprof, run};

fn render(config: &Path) -> String {
    let name = config.file_name().unwrap().to_string_lossy().into_owned();
    let mut text = String::new();
    for extra in [&[][..], &["--dry-run"][..], &["--json"][..]] {
        let out = run(jobprof()
            .current_dir(config.parent().unwrap())
            .args(["nsys", "plan", "--config", &name])
            .args(extra));
        text.push_str(&format!(
            "$ jobprof nsys plan --config {name} {}\n",
            extra.join(" ")
        ));
        text.push_str(&format!("exit {}\n", out.status.code().unwrap_or(-1)));
        text.push_str(&String::from_utf8_lossy(&out.stdout));
        text.push_str(&String::from_utf8_lossy(&out.stderr));
        text.push('\n');
    }
    text
}

#[test]
fn plan_outputs_match_the_expected_files() {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/expected/nsys-plan");
    let bless = std::env::var_os("JOBPROF_BLESS").is_some();
    let mut configs: Vec<_> = fs::read_dir(&dir)
        .unwrap()
        .flatten()
        .map(|e| e.path())
        .filter(|p| p.extension().is_some_and(|x| x == "toml"))
        .collect();
    configs.sort();
    assert!(configs.len() >= 5, "configs missing in {}", dir.display());
    let mut changed = Vec::new();
    for config in configs {
        let got = render(&config);
        let expected_path = config.with_extension("out");
        if bless {
            fs::write(&expected_path, &got).unwrap();
            continue;
        }
        let expected = fs::read_to_string(&expected_path).unwrap_or_else(|_| {
            panic!(
                "{} missing: run with JOBPROF_BLESS=1 to create it",
                expected_path.display()
            )
        });
        if got != expected {
            eprintln!(
                "--- {} (expected)\n{expected}\n+++ got\n{got}",
                expected_path.display()
            );
            changed.push(expected_path.display().to_string());
        }
    }
    assert!(
        changed.is_empty(),
        "plan output changed (JOBPROF_BLESS=1 to accept): {changed:?}"
    );
}
