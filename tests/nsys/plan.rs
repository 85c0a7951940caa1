//! `jobprof nsys plan`: the nsight-slurm launcher it builds from a
//! profiling TOML (container mounts, default tool options, the dry-run
//! panel), every rule it checks with its message, and its handling of NUL
//! bytes and control characters.

use std::fs;
use std::process::Output;

use super::run;
use crate::util::stdout;
use crate::util::{jobprof, stderr};

const BASE: &str = r#"
type = "nsight-slurm"
home = "/opt/nsight-slurm"
backend = "trtllm"
log_dir = "/shared/run1"
#TOP

[launch]
srun_options = ["--nodes=2", "--ntasks-per-node=4"]
command = ["python", "serve.py", "--port", "8000"]
#LAUNCH
"#;

/// Runs `plan` on BASE without the lines starting with a `drop` entry, with
/// `top` replacing the `#TOP` line and `launch` appended to `[launch]`.
fn plan_with(top: &str, launch: &str, drop: &[&str], extra_args: &[&str]) -> Output {
    let d = tempfile::tempdir().unwrap();
    // Lines are dropped from BASE before `top` and `launch` go in.
    let text = BASE
        .lines()
        .filter(|l| !drop.iter().any(|d| l.starts_with(d)))
        .collect::<Vec<_>>()
        .join("\n")
        .replace("#TOP", top)
        .replace("#LAUNCH", launch);
    let cfg = d.path().join("profiling.toml");
    fs::write(&cfg, text).unwrap();
    let mut c = jobprof();
    c.args(["nsys", "plan", "--config"])
        .arg(&cfg)
        .args(extra_args);
    run(&mut c)
}

fn plan_json(top: &str, launch: &str, drop: &[&str]) -> serde_json::Value {
    let out = plan_with(top, launch, drop, &["--json"]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    serde_json::from_slice(&out.stdout).unwrap()
}

/// Asserts the config fails with exit 2 and a message containing each of `needles`.
fn plan_fails(top: &str, launch: &str, drop: &[&str], needles: &[&str]) {
    let out = plan_with(top, launch, drop, &[]);
    assert_eq!(out.status.code(), Some(2), "{}", stdout(&out));
    let err = stderr(&out);
    assert!(err.contains("profiling.toml"), "{err}");
    for n in needles {
        assert!(err.contains(n), "message lacks {n:?}:\n{err}");
    }
}

#[test]
fn plan_builds_the_nsight_slurm_launcher() {
    let p = plan_json(
        r#"tool_options = ["--trace=cuda,nvtx", "--sample=none"]
container_mounts = ["/data:/data", "/models:/models:ro"]"#,
        r#"srun_options = ["--nodes=2", "--container-mounts=/scratch:/scratch", "--ntasks-per-node=4"]
env = { HF_HOME = "/data/hf" }"#,
        &["srun_options"],
    );
    // No container image: only the user's mounts, merged into one option.
    assert_eq!(
        p["launcher"],
        serde_json::json!([
            "/opt/nsight-slurm/bin/nsight-slurm",
            "srun",
            "--nodes=2",
            "--container-mounts=/scratch:/scratch,/data:/data,/models:/models:ro",
            "--ntasks-per-node=4",
            "--",
            "python",
            "serve.py",
            "--port",
            "8000"
        ])
    );
    let pattern =
        "/shared/run1/nsight-slurm-direct/%q{SLURM_JOB_ID}_%q{SLURMD_NODENAME}_rank%q{SLURM_PROCID}";
    assert_eq!(
        p["tool_options"],
        serde_json::json!([
            "--trace=cuda,nvtx",
            "--sample=none",
            "--wait=primary",
            "-o",
            pattern
        ])
    );
    assert_eq!(p["report_output"], format!("{pattern}.nsys-rep"));
    assert_eq!(p["type"], "nsight-slurm");
    assert_eq!(p["mode"], "cuda-api");
    assert_eq!(p["tool"], "/usr/local/bin/nsys");
    let env = &p["environment"];
    assert_eq!(env["HF_HOME"], "/data/hf");
    assert_eq!(env["TLLM_PROFILE_LOG_RANKS"], "all");
    assert_eq!(env["DYN_ENABLE_RUST_NVTX"], "1");
    assert_eq!(env["SLURM_SUBMIT_DIR"], "/shared/run1");
    assert!(env.get("NVTX_INJECTION64_PATH").is_none());
    // The wrapper gets its settings through its own CLI, not variables.
    assert!(env
        .as_object()
        .unwrap()
        .keys()
        .all(|k| !k.starts_with("NSIGHT_SLURM")));
    assert_eq!(p["dirs"]["workspace"], "/shared/run1/nsight-slurm-reports");
    assert_eq!(p["dirs"]["direct"], "/shared/run1/nsight-slurm-direct");
    assert_eq!(p["dirs"]["runtime"], "/shared/run1/nsight-slurm-runtime");
    assert_eq!(p["dirs"]["wrapper_log"], "/shared/run1/nsight-slurm.out");
    let w = "/opt/nsight-slurm/bin/nsight-slurm";
    assert_eq!(
        p["setup"],
        serde_json::json!([
            [w, "configure", "tool-path", "/usr/local/bin/nsys"],
            [w, "configure", "tool-command", "profile"],
            [w, "configure", "profiling-mode", "cuda-api"],
            [
                w,
                "configure",
                "tool-options",
                format!("--trace=cuda,nvtx --sample=none --wait=primary -o {pattern}")
            ],
            [
                w,
                "configure",
                "report-output",
                "/shared/run1/nsight-slurm-reports"
            ],
            [w, "coordinator", "start"]
        ])
    );
    assert_eq!(
        p["teardown"],
        serde_json::json!([[w, "coordinator", "stop", "--force"]])
    );
    let argv: Vec<&str> = p["launcher"]
        .as_array()
        .unwrap()
        .iter()
        .map(|v| v.as_str().unwrap())
        .collect();
    assert!(argv.iter().all(|a| !a.starts_with("--export")));
}

#[test]
fn plan_in_a_container_mounts_what_the_connector_needs_in_one_option() {
    let p = plan_json(
        r#"container_mounts = ["/data:/data"]
nvtx_injection_path = "/opt/nvtx/libinj.so""#,
        r#"srun_options = ["--container-image=/img/trtllm.sqsh", "--container-mounts", "/scratch:/scratch"]"#,
        &["srun_options"],
    );
    let mounts = "--container-mounts=/scratch:/scratch,/data:/data,\
                  /opt/nsight-slurm:/opt/nsight-slurm:ro,\
                  /opt/nsight-slurm/bin/nsight-slurm-connector:/usr/local/bin/nsight-slurm-connector:ro,\
                  /shared/run1:/shared/run1,\
                  /shared/run1/nsight-slurm-runtime:/nsrt";
    assert_eq!(
        p["launcher"],
        serde_json::json!([
            "/opt/nsight-slurm/bin/nsight-slurm",
            "srun",
            "--container-image=/img/trtllm.sqsh",
            mounts,
            "--",
            "python",
            "serve.py",
            "--port",
            "8000"
        ])
    );
    assert_eq!(
        p["environment"]["NVTX_INJECTION64_PATH"],
        "/opt/nvtx/libinj.so"
    );
    plan_fails(
        r#"nvtx_injection_path = "libinj.so""#,
        "",
        &[],
        &["nvtx_injection_path: `libinj.so` must be an absolute path"],
    );
    plan_fails(
        "",
        r#"env = { DYN_ENABLE_RUST_NVTX = "0", TLLM_PROFILE_LOG_RANKS = "0" }"#,
        &[],
        &[
            "launch.env: `DYN_ENABLE_RUST_NVTX` is set by jobprof",
            "launch.env: `TLLM_PROFILE_LOG_RANKS` is set by jobprof",
        ],
    );
}

#[test]
fn plan_default_tool_options_and_wait_primary() {
    let p = plan_json("", "", &[]);
    let opts: Vec<&str> = p["tool_options"]
        .as_array()
        .unwrap()
        .iter()
        .map(|v| v.as_str().unwrap())
        .collect();
    assert_eq!(
        opts[..5],
        [
            "--trace=cuda,nvtx",
            "--cuda-graph-trace=node",
            "--sample=none",
            "--cpuctxsw=none",
            "--wait=primary"
        ]
    );
    plan_fails(
        r#"tool_options = ["--wait=all"]"#,
        "",
        &[],
        &["`--wait=all` sets --wait", "--wait=primary"],
    );
    // A user's set replaces the default.
    let p = plan_json(r#"tool_options = "--trace=cuda""#, "", &[]);
    assert_eq!(p["tool_options"][0], "--trace=cuda");
    assert_eq!(p["tool_options"][1], "--wait=primary");
}

#[test]
fn plan_dry_run_prints_the_profiling_panel() {
    let out = plan_with(r#"windows = ["100-150"]"#, "", &[], &["--dry-run"]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let s = stdout(&out);
    assert!(s.starts_with("Profiling\n"), "{s}");
    for field in [
        "type ",
        "nsight-slurm",
        "mode ",
        "cuda-api (backend trtllm)",
        "windows ",
        "iterations 100-150",
        "launcher ",
        "/opt/nsight-slurm/bin/nsight-slurm srun --nodes=2",
        "tool options ",
        "--wait=primary -o ",
        "report output ",
        "_rank%q{SLURM_PROCID}.nsys-rep",
        "workspace ",
        "/shared/run1/nsight-slurm-reports",
        "environment ",
        "TLLM_PROFILE_START_STOP=100-150",
        "setup ",
        "nsight-slurm coordinator start",
        "teardown ",
        "coordinator stop --force",
    ] {
        assert!(s.contains(field), "panel lacks {field:?}:\n{s}");
    }
    // Without flags: one shell-ready command line.
    let out = plan_with("", "", &[], &[]);
    let line = stdout(&out);
    assert!(
        line.starts_with("env DYN_ENABLE_RUST_NVTX=1 SLURM_SUBMIT_DIR=/shared/run1 "),
        "{line}"
    );
    assert!(line.contains(" /opt/nsight-slurm/bin/nsight-slurm srun --nodes=2 --ntasks-per-node=4 -- python serve.py --port 8000"), "{line}");
}

#[test]
fn plan_rule_type() {
    plan_fails("", "", &["type"], &["type"]);
    let out = plan_with("", "", &[], &[]);
    assert_eq!(out.status.code(), Some(0));
    let d = tempfile::tempdir().unwrap();
    let cfg = d.path().join("profiling.toml");
    fs::write(&cfg, BASE.replace("\"nsight-slurm\"", "\"vtune\"")).unwrap();
    let out = run(jobprof().args(["nsys", "plan", "--config"]).arg(&cfg));
    assert_eq!(out.status.code(), Some(2));
    assert!(stderr(&out).contains("vtune") && stderr(&out).contains("nsight-slurm"));
}

#[test]
fn plan_rule_home_required_and_absolute() {
    plan_fails("", "", &["home"], &["home: required"]);
    let p = |home: &str| format!("home = \"{home}\"");
    plan_fails(
        &p("opt/ns"),
        "",
        &["home"],
        &["home: `opt/ns` must be an absolute path"],
    );
    assert_eq!(
        plan_json(&p("/usr/ns"), "", &["home"])["launcher"][0],
        "/usr/ns/bin/nsight-slurm"
    );
}

#[test]
fn plan_rule_home_only_for_nsight_slurm() {
    let nsys = r#"type = "nsys""#;
    plan_fails(
        nsys,
        "",
        &["type"],
        &["home: only applies to type = \"nsight-slurm\""],
    );
    let p = plan_json(nsys, "", &["type", "home"]);
    assert_eq!(p["launcher"][0], "srun");
    let argv = p["launcher"].as_array().unwrap();
    let dashdash = argv.iter().position(|a| a == "--").unwrap();
    assert_eq!(argv[dashdash + 1], "/usr/local/bin/nsys");
    assert_eq!(argv[dashdash + 2], "profile");
    assert!(argv.contains(&serde_json::json!("--capture-range=cudaProfilerApi")));
}

#[test]
fn plan_rule_profiling_mode_values() {
    plan_fails(
        r#"profiling_mode = "sometimes""#,
        "",
        &[],
        &["sometimes", "at-launch"],
    );
    for mode in ["at-launch", "manual", "cuda-api"] {
        let p = plan_json(&format!("profiling_mode = \"{mode}\""), "", &[]);
        assert_eq!(p["mode"], mode);
    }
}

#[test]
fn plan_rule_cuda_api_requires_trtllm() {
    plan_fails(
        "",
        "",
        &["backend"],
        &["cuda-api\" (the default) requires backend = \"trtllm\""],
    );
    plan_fails(
        r#"backend = "vllm""#,
        "",
        &["backend"],
        &["backend = \"vllm\""],
    );
    assert_eq!(
        plan_json(r#"profiling_mode = "at-launch""#, "", &["backend"])["mode"],
        "at-launch"
    );
    assert_eq!(plan_json("", "", &[])["backend"], "trtllm");
}

#[test]
fn plan_rule_connector_owned_tool_options() {
    for (opt, flag) in [
        ("-o", "-o"),
        ("-oreport", "-o"),
        ("--output=/x", "--output"),
        ("--force-overwrite=true", "--force-overwrite"),
        ("-c", "-c"),
        ("--capture-range=cudaProfilerApi", "--capture-range"),
        ("--capture-range-end=stop", "--capture-range-end"),
        ("--start-later=true", "--start-later"),
    ] {
        plan_fails(
            &format!("tool_options = [\"{opt}\", \"x\"]"),
            "",
            &[],
            &[&format!(
                "tool_options: `{opt}` sets {flag}, which the connector owns: "
            )],
        );
    }
    // One string is split at whitespace and checked the same way.
    plan_fails(
        r#"tool_options = "--trace=cuda -o out""#,
        "",
        &[],
        &["`-o` sets -o"],
    );
    let p = plan_json(
        r#"tool_options = "--trace=cuda,nvtx --cuda-memory-usage=true""#,
        "",
        &[],
    );
    assert_eq!(p["tool_options"][0], "--trace=cuda,nvtx");
    assert_eq!(p["tool_options"][1], "--cuda-memory-usage=true");
}

#[test]
fn plan_rule_container_mounts() {
    plan_fails(
        r#"container_mounts = ["data:/data"]"#,
        "",
        &[],
        &["container_mounts: `data:/data`"],
    );
    plan_fails(
        "",
        r#"srun_options = ["--container-mounts", "/a:/a,rel:/b"]"#,
        &["srun_options"],
        &["`rel:/b`"],
    );
    let p = plan_json(
        r#"container_mounts = ["/a:/a"]"#,
        r#"srun_options = ["--container-mounts", "/b:/b", "--container-mounts=/a:/a,/c:/c"]"#,
        &["srun_options"],
    );
    assert_eq!(
        p["launcher"],
        serde_json::json!([
            "/opt/nsight-slurm/bin/nsight-slurm",
            "srun",
            "--container-mounts=/b:/b,/a:/a,/c:/c",
            "--",
            "python",
            "serve.py",
            "--port",
            "8000"
        ])
    );
}

#[test]
fn plan_rule_log_dir_required_and_absolute() {
    plan_fails("", "", &["log_dir"], &["log_dir: required"]);
    plan_fails(
        r#"log_dir = "runs/1""#,
        "",
        &["log_dir"],
        &["log_dir: `runs/1` must be an absolute path"],
    );
    plan_fails(
        r#"log_dir = "/runs/a b""#,
        "",
        &["log_dir"],
        &["log_dir: `/runs/a b` contains whitespace"],
    );
    plan_fails(
        r#"log_dir = "/runs/a,b""#,
        "",
        &["log_dir"],
        &["log_dir: `/runs/a,b` contains `,` or `:`"],
    );
    plan_fails(
        r#"report_root = "/r""#,
        "",
        &[],
        &["report_root: replaced by log_dir"],
    );
    assert!(
        plan_json(r#"log_dir = "/r""#, "", &["log_dir"])["report_output"]
            .as_str()
            .unwrap()
            .starts_with("/r/nsight-slurm-direct/")
    );
    // Plain nsys writes to <log_dir>/nsys-direct.
    let p = plan_json(r#"type = "nsys""#, "", &["type", "home"]);
    assert!(p["report_output"]
        .as_str()
        .unwrap()
        .starts_with("/shared/run1/nsys-direct/"));
    assert!(p["dirs"]["workspace"].is_null());
}

#[test]
fn plan_rule_no_export_with_nsight_slurm() {
    plan_fails(
        "",
        r#"srun_options = ["--export=ALL,FOO=1"]"#,
        &["srun_options"],
        &[
            "`--export=ALL,FOO=1` is not allowed with nsight-slurm",
            "[launch.env]",
        ],
    );
    let p = plan_json("", r#"env = { FOO = "1" }"#, &[]);
    assert_eq!(p["environment"]["FOO"], "1");
    // Plain srun (type nsys) keeps --export unchanged.
    let p = plan_json(
        r#"type = "nsys""#,
        r#"srun_options = ["--export=ALL"]"#,
        &["type", "home", "srun_options"],
    );
    assert_eq!(p["launcher"][1], "--export=ALL");
}

#[test]
fn plan_rule_windows() {
    plan_fails(
        r#"windows = ["100-150"]
profiling_mode = "at-launch""#,
        "",
        &[],
        &["windows: only apply to profiling_mode = \"cuda-api\""],
    );
    plan_fails(
        r#"windows = ["150-100"]"#,
        "",
        &[],
        &["`150-100` is not an iteration window"],
    );
    let p = plan_json(r#"windows = ["10-20", "40-50"]"#, "", &[]);
    assert_eq!(p["environment"]["TLLM_PROFILE_START_STOP"], "10-20,40-50");
}

#[test]
fn plan_rule_launch_command_and_separator() {
    plan_fails("", "", &["command"], &["launch.command: required"]);
    plan_fails(
        "",
        r#"srun_options = ["-N2", "--"]"#,
        &["srun_options"],
        &["`--` is added by jobprof"],
    );
    assert_eq!(plan_json("", "", &[])["launcher"][5], "python");
}

#[test]
fn plan_rule_env_names() {
    plan_fails(
        "",
        r#"env = { "1BAD" = "x" }"#,
        &[],
        &["launch.env: `1BAD`"],
    );
    assert_eq!(
        plan_json("", r#"env = { GOOD_1 = "x" }"#, &[])["environment"]["GOOD_1"],
        "x"
    );
}

#[test]
fn plan_rule_manual_needs_nsight_slurm() {
    plan_fails(
        r#"type = "nsys"
profiling_mode = "manual""#,
        "",
        &["type", "home"],
        &["profiling_mode = \"manual\" needs type = \"nsight-slurm\""],
    );
    assert_eq!(
        plan_json(r#"profiling_mode = "manual""#, "", &[])["mode"],
        "manual"
    );
}

#[test]
fn plan_rule_perf_takes_no_nsight_fields() {
    plan_fails(
        r#"type = "perf""#,
        "",
        &["type", "home", "backend"],
        &["log_dir: only applies to the Nsight types"],
    );
    let p = plan_json(
        r#"type = "perf""#,
        "",
        &["type", "home", "backend", "log_dir"],
    );
    assert_eq!(
        p["launcher"],
        serde_json::json!([
            "srun",
            "--nodes=2",
            "--ntasks-per-node=4",
            "--",
            "python",
            "serve.py",
            "--port",
            "8000"
        ])
    );
    assert!(p["tool"].is_null());
}

#[test]
fn plan_rule_unknown_fields_and_all_problems_at_once() {
    plan_fails(r#"tool_option = ["-t", "cuda"]"#, "", &[], &["tool_option"]);
    plan_fails(
        r#"tool_options = ["-o", "x"]
tool_option = 1
profiling_mode = "often""#,
        r#"shell = true"#,
        &["home", "log_dir"],
        &[
            "6 problems",
            "home: required",
            "log_dir: required",
            "`-o` sets -o",
            "tool_option: unknown field",
            "launch.shell: unknown field",
            "profiling_mode: unknown variant `often`",
        ],
    );
}

#[test]
fn plan_refuses_a_nul_byte_and_prints_control_characters_escaped() {
    // A NUL byte can be in no argv word: refused, naming where it is.
    plan_fails(
        "",
        r#"env = { TAG = "a\u0000b" }"#,
        &[],
        &["launch.env.TAG: contains a NUL byte"],
    );
    // Other control characters are printed escaped, on one line.
    let out = plan_with(
        "",
        r#"env = { BANNER = "line1\nline2\u001b[31m" }"#,
        &[],
        &[],
    );
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let text = stdout(&out);
    assert!(
        !text.trim_end().contains('\n') && !text.contains('\u{1b}'),
        "{text:?}"
    );
    assert!(text.contains(r"BANNER=$'line1\nline2\x1b[31m'"), "{text}");
    let panel = stdout(&plan_with(
        "",
        r#"env = { BANNER = "x\u0007" }"#,
        &[],
        &["--dry-run"],
    ));
    assert!(!panel.contains('\u{7}'), "{panel:?}");
    assert!(panel.contains(r"BANNER=$'x\x07'"), "{panel}");
}
