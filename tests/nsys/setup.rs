//! `jobprof nsys setup|teardown` against a faithful fake `nsight-slurm`
//! (`fake-nsight-slurm.sh`: records argv, environment and working directory
//! of every call, keeps its state under `SLURM_SUBMIT_DIR`, refuses a second
//! coordinator and a non-empty workspace), and a real-Slurm run where the
//! fake wrapper launches steps named `nsight-slurm-connector`.

use std::fs;
use std::path::{Path, PathBuf};
use std::process::Command;

use super::{
    flushed_one_report, jobprof, make_executable, manifest, run, sbatch, slurm_available, stderr,
    stdout, wait_started, POLL, SETTLE,
};
use crate::util::require;

const PATTERN: &str = "%q{SLURM_JOB_ID}_%q{SLURMD_NODENAME}_rank%q{SLURM_PROCID}";

/// One recorded wrapper call.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Call {
    cwd: PathBuf,
    submit: String,
    node: String,
    argv: Vec<String>,
}

/// A run: the fake install, the call log, the log dir and the config.
struct Run {
    base: PathBuf,
    home: PathBuf,
    log_dir: PathBuf,
    config: PathBuf,
    calls_log: PathBuf,
}

impl Run {
    fn new(base: &Path, extra_top: &str) -> Run {
        let home = base.join("nsight-slurm");
        fs::create_dir_all(home.join("bin")).unwrap();
        let here = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/nsys");
        for (src, dst) in [
            ("fake-nsight-slurm.sh", "nsight-slurm"),
            ("fake-nsys-rank.sh", "fake-nsys-rank"),
        ] {
            let to = home.join("bin").join(dst);
            fs::copy(here.join(src), &to).unwrap();
            make_executable(&to);
        }
        let r = Run {
            base: base.to_path_buf(),
            log_dir: base.join("run1"),
            config: base.join("profiling.toml"),
            calls_log: base.join("calls.log"),
            home,
        };
        r.write_config(extra_top);
        r
    }

    fn write_config(&self, extra_top: &str) {
        fs::write(
            &self.config,
            format!(
                "type = \"nsight-slurm\"\nhome = \"{}\"\nprofiling_mode = \"at-launch\"\n\
                 log_dir = \"{}\"\n{extra_top}\n[launch]\n\
                 srun_options = [\"-n1\", \"--overlap\"]\ncommand = [\"sleep\", \"600\"]\n",
                self.home.display(),
                self.log_dir.display()
            ),
        )
        .unwrap();
    }

    fn jobprof(&self, args: &[&str]) -> Command {
        let mut c = jobprof();
        c.args(["nsys"])
            .args(args)
            .arg("--config")
            .arg(&self.config)
            .env("FAKE_NSIGHT_SLURM_CALLS", &self.calls_log)
            .env_remove("SLURM_JOB_ID")
            .env_remove("SLURMD_NODENAME");
        c
    }

    fn setup(&self, head_ip: &str) -> std::process::Output {
        run(&mut self.jobprof(&["setup", "--head-ip", head_ip]))
    }

    fn calls(&self) -> Vec<Call> {
        let text = fs::read_to_string(&self.calls_log).unwrap_or_default();
        let mut out = Vec::new();
        let mut cur: Option<Call> = None;
        for line in text.lines() {
            let c = cur.get_or_insert_with(|| Call {
                cwd: PathBuf::new(),
                submit: String::new(),
                node: String::new(),
                argv: Vec::new(),
            });
            if let Some(v) = line.strip_prefix("cwd=") {
                c.cwd = PathBuf::from(v);
            } else if let Some(v) = line.strip_prefix("submit=") {
                c.submit = v.to_string();
            } else if let Some(v) = line.strip_prefix("node=") {
                c.node = v.to_string();
            } else if let Some(v) = line.strip_prefix("arg=") {
                c.argv.push(v.to_string());
            } else if line == "end" {
                out.extend(cur.take());
            }
        }
        out
    }

    fn argvs(&self) -> Vec<Vec<String>> {
        self.calls().into_iter().map(|c| c.argv).collect()
    }

    /// The six set-up calls for the default tool options.
    fn expected_setup(&self, options: &str) -> Vec<Vec<String>> {
        let l = self.log_dir.display();
        let v = |a: &[&str]| a.iter().map(|s| s.to_string()).collect::<Vec<_>>();
        vec![
            v(&["configure", "tool-path", "/usr/local/bin/nsys"]),
            v(&["configure", "tool-command", "profile"]),
            v(&["configure", "profiling-mode", "at-launch"]),
            v(&[
                "configure",
                "tool-options",
                &format!("{options} --wait=primary -o {l}/nsight-slurm-direct/{PATTERN}"),
            ]),
            v(&[
                "configure",
                "report-output",
                &format!("{l}/nsight-slurm-reports"),
            ]),
            v(&["coordinator", "start"]),
        ]
    }
}

const DEFAULT_OPTIONS: &str =
    "--trace=cuda,nvtx --cuda-graph-trace=node --sample=none --cpuctxsw=none";

#[test]
fn setup_configures_the_wrapper_in_order_with_its_environment() {
    let d = tempfile::tempdir().unwrap();
    let r = Run::new(d.path(), "");
    let out = r.setup("10.9.8.7");
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    assert!(
        stdout(&out).contains("coordinator started"),
        "{}",
        stdout(&out)
    );
    let calls = r.calls();
    assert_eq!(
        calls.iter().map(|c| c.argv.clone()).collect::<Vec<_>>(),
        r.expected_setup(DEFAULT_OPTIONS)
    );
    for c in &calls {
        assert_eq!(c.cwd, r.log_dir, "{c:?}");
        assert_eq!(c.submit, r.log_dir.display().to_string(), "{c:?}");
        assert_eq!(c.node, "10.9.8.7", "{c:?}");
    }
    for sub in [
        "nsight-slurm-reports",
        "nsight-slurm-direct",
        "nsight-slurm-runtime",
    ] {
        assert!(r.log_dir.join(sub).is_dir(), "{sub}");
    }
    // The wrapper's job state lives under the run, and the coordinator
    // publishes the head address.
    let published = fs::read_to_string(r.log_dir.join(".nsight-slurm/coordinator")).unwrap();
    assert_eq!(published.trim(), "tcp://10.9.8.7:29500");
    // Every call and its output in nsight-slurm.out.
    let log = fs::read_to_string(r.log_dir.join("nsight-slurm.out")).unwrap();
    for (argv, said) in r.expected_setup(DEFAULT_OPTIONS).iter().zip([
        "configured tool-path",
        "configured tool-command",
        "configured profiling-mode",
        "configured tool-options",
        "configured report-output",
        "coordinator listening on tcp://10.9.8.7:29500",
    ]) {
        let line = format!("nsight-slurm {}", argv[..2].join(" "));
        assert!(log.contains(&line), "{line:?} not in:\n{log}");
        assert!(log.contains(said), "{said:?} not in:\n{log}");
    }
    assert!(log.contains("SLURMD_NODENAME=10.9.8.7"), "{log}");
    assert_eq!(log.matches("exit status: 0").count(), 6, "{log}");
}

#[test]
fn setup_is_idempotent_and_a_changed_config_reconfigures() {
    let d = tempfile::tempdir().unwrap();
    let r = Run::new(d.path(), "");
    assert_eq!(r.setup("10.9.8.7").status.code(), Some(0));
    let out = r.setup("10.9.8.7");
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    assert!(stdout(&out).contains("already set up"), "{}", stdout(&out));
    assert_eq!(r.calls().len(), 6, "a second set-up ran wrapper calls");
    // A changed config: stop the coordinator, configure anew, start it.
    r.write_config(r#"tool_options = ["--trace=cuda", "--sample=none"]"#);
    let out = r.setup("10.9.8.7");
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    assert!(stdout(&out).contains("config changed"), "{}", stdout(&out));
    let argvs = r.argvs();
    assert_eq!(argvs[6], ["coordinator", "stop", "--force"]);
    assert_eq!(
        argvs[7..].to_vec(),
        r.expected_setup("--trace=cuda --sample=none")
    );
    // A different head address is a change too.
    let out = r.setup("10.9.8.8");
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    assert_eq!(r.calls().len(), 6 + 7 + 7);
    assert_eq!(r.calls().last().unwrap().node, "10.9.8.8");
}

#[test]
fn setup_resolves_the_head_node_to_ipv4_or_says_why_not() {
    let d = tempfile::tempdir().unwrap();
    let r = Run::new(d.path(), "");
    let out = run(r.jobprof(&["setup"]).env("SLURMD_NODENAME", "localhost"));
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    assert!(r.calls().iter().all(|c| c.node == "127.0.0.1"));
    assert!(stderr(&out).contains("loopback"), "{}", stderr(&out));

    let d = tempfile::tempdir().unwrap();
    let r = Run::new(d.path(), "");
    let out = run(r
        .jobprof(&["setup"])
        .env("SLURMD_NODENAME", "no-such-node.invalid"));
    assert_eq!(out.status.code(), Some(2), "{}", stderr(&out));
    let err = stderr(&out);
    assert!(
        err.contains("`no-such-node.invalid` does not resolve to an IPv4 address")
            && err.contains("--head-ip"),
        "{err}"
    );
    assert!(r.calls().is_empty());
    let out = r.setup("not-an-ip");
    assert_eq!(out.status.code(), Some(2), "{}", stderr(&out));
}

#[test]
fn setup_without_the_install_names_the_missing_path() {
    let d = tempfile::tempdir().unwrap();
    let r = Run::new(d.path(), "");
    fs::remove_file(r.home.join("bin/nsight-slurm")).unwrap();
    let out = r.setup("10.0.0.1");
    assert_eq!(out.status.code(), Some(2), "{}", stderr(&out));
    let err = stderr(&out);
    let exe = r.home.join("bin/nsight-slurm");
    assert!(err.contains(&exe.display().to_string()), "{err}");
    assert!(err.contains("not installed there"), "{err}");
    assert!(
        !r.log_dir.exists(),
        "nothing is created without the wrapper"
    );
}

#[test]
fn a_failing_call_exits_1_naming_it_and_the_next_setup_starts_over() {
    let d = tempfile::tempdir().unwrap();
    let r = Run::new(d.path(), "");
    let out = run(r
        .jobprof(&["setup", "--head-ip", "10.0.0.1"])
        .env("FAKE_NSIGHT_SLURM_FAIL", "coordinator"));
    assert_eq!(out.status.code(), Some(1), "{}", stderr(&out));
    let err = stderr(&out);
    assert!(
        err.contains("nsight-slurm coordinator start failed"),
        "{err}"
    );
    assert!(err.contains("simulated failure"), "{err}");
    assert!(err.contains("nsight-slurm.out"), "{err}");
    let log = fs::read_to_string(r.log_dir.join("nsight-slurm.out")).unwrap();
    assert!(log.contains("coordinator: simulated failure"), "{log}");
    assert!(log.contains("exit status: 7"), "{log}");
    // Not recorded as set up: the next run does everything again.
    let out = r.setup("10.0.0.1");
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    assert_eq!(r.argvs()[6..].to_vec(), r.expected_setup(DEFAULT_OPTIONS));
}

#[test]
fn setup_refuses_a_non_empty_workspace_before_calling_the_wrapper() {
    let d = tempfile::tempdir().unwrap();
    let r = Run::new(d.path(), "");
    fs::create_dir_all(r.log_dir.join("nsight-slurm-reports")).unwrap();
    fs::write(r.log_dir.join("nsight-slurm-reports/old.nsys-rep"), b"x").unwrap();
    let out = r.setup("10.0.0.1");
    assert_eq!(out.status.code(), Some(2), "{}", stderr(&out));
    assert!(stderr(&out).contains("report workspace is not empty"));
    assert!(r.calls().is_empty());
}

#[test]
fn a_call_past_its_time_limit_is_killed_and_fails() {
    let d = tempfile::tempdir().unwrap();
    let r = Run::new(d.path(), "");
    let exe = r.home.join("bin/nsight-slurm");
    let real = fs::read_to_string(&exe).unwrap();
    // `exec`: the killed process is the one holding the output pipes.
    fs::write(&exe, real.replacen("calls=", "exec sleep 30\ncalls=", 1)).unwrap();
    let out = run(&mut r.jobprof(&["setup", "--head-ip", "10.0.0.1", "--call-timeout", "1s"]));
    assert_eq!(out.status.code(), Some(1), "{}", stderr(&out));
    assert!(stderr(&out).contains("killed after 1s"), "{}", stderr(&out));
    let log = fs::read_to_string(r.log_dir.join("nsight-slurm.out")).unwrap();
    assert!(log.contains("failed: killed after 1s"), "{log}");
}

#[test]
fn teardown_stops_the_coordinator_with_the_recorded_head_address() {
    let d = tempfile::tempdir().unwrap();
    let r = Run::new(d.path(), "");
    assert_eq!(r.setup("10.9.8.7").status.code(), Some(0));
    let out = run(&mut r.jobprof(&["teardown"]));
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let last = r.calls().pop().unwrap();
    assert_eq!(last.argv, ["coordinator", "stop", "--force"]);
    assert_eq!(last.node, "10.9.8.7");
    assert_eq!(last.submit, r.log_dir.display().to_string());
    assert!(!r.log_dir.join(".nsight-slurm/coordinator").exists());
    let log = fs::read_to_string(r.log_dir.join("nsight-slurm.out")).unwrap();
    assert!(
        log.contains("coordinator stop --force\ncoordinator stopped"),
        "{log}"
    );
    // The next set-up starts a coordinator again.
    assert_eq!(r.setup("10.9.8.7").status.code(), Some(0));
    assert_eq!(r.argvs()[7..].to_vec(), r.expected_setup(DEFAULT_OPTIONS));
    // --flush needs the job.
    let out = run(&mut r.jobprof(&["teardown", "--flush"]));
    assert_eq!(out.status.code(), Some(2), "{}", stderr(&out));
}

/// Real Slurm: the job runs the planned launcher; the fake wrapper launches
/// the rank as a step named nsight-slurm-connector; teardown --flush stops
/// the sessions, sends that step SIGTERM by name, collects the report the
/// rank then writes into the direct dir, and stops the coordinator.
#[test]
fn teardown_flush_against_real_slurm_steps_launched_by_the_wrapper() {
    if !require(
        slurm_available(),
        "a running Slurm cluster (scripts/slurm-cluster.sh start)",
    ) {
        return;
    }
    let d = tempfile::tempdir().unwrap();
    let r = Run::new(d.path(), "");
    assert_eq!(r.setup("127.0.0.1").status.code(), Some(0));
    let out = run(&mut r.jobprof(&["plan"]));
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let launch = stdout(&out);
    let batch = r.base.join("job.sh");
    fs::write(
        &batch,
        format!(
            "#!/bin/sh\nexport FAKE_NSIGHT_SLURM_CALLS='{}'\n{}\n",
            r.calls_log.display(),
            launch.trim()
        ),
    )
    .unwrap();
    let job = sbatch("jobprof-nsys-teardown", &r.base, &batch);
    let direct = r.log_dir.join("nsight-slurm-direct");
    let started = || {
        fs::read_dir(&direct)
            .map(|rd| {
                rd.flatten()
                    .any(|e| e.file_name().to_string_lossy().ends_with(".started"))
            })
            .unwrap_or(false)
    };
    wait_started("rank", &job, &r.base, 90, started);
    let out = run(&mut r.jobprof(&[
        "teardown",
        "--flush",
        "--job",
        &job,
        "--expect-ranks",
        "1",
        "--poll",
        POLL,
        "--settle",
        SETTLE,
        "--timeout",
        "90s",
    ]));
    // Its report was collected, and the step received SIGTERM.
    let e = flushed_one_report(&out, &job, &r.log_dir);
    let received: Vec<_> = fs::read_dir(&direct)
        .unwrap()
        .flatten()
        .filter(|e| e.file_name().to_string_lossy().ends_with(".term-received"))
        .collect();
    assert_eq!(received.len(), 1, "the connector step never got SIGTERM");
    assert!(e["path"]
        .as_str()
        .unwrap()
        .starts_with("nsight-slurm-direct/"));
    // The wrapper saw the launch, the stop and the coordinator stop, all
    // under the run's log dir.
    let calls = r.calls();
    let srun = calls.iter().find(|c| c.argv[0] == "srun").unwrap();
    assert_eq!(srun.argv[1..], ["-n1", "--overlap", "--", "sleep", "600"]);
    let stop = calls.iter().find(|c| c.argv[0] == "stop").unwrap();
    assert_eq!(stop.argv, ["stop", "--job", &job, "--timeout", "30"]);
    assert_eq!(stop.submit, r.log_dir.display().to_string());
    assert_eq!(
        calls.last().unwrap().argv,
        ["coordinator", "stop", "--force"]
    );
}

#[test]
fn collect_with_a_config_finds_reports_in_the_workspace_and_the_direct_dir() {
    let d = tempfile::tempdir().unwrap();
    let r = Run::new(d.path(), "");
    assert_eq!(r.setup("10.0.0.1").status.code(), Some(0));
    let l = &r.log_dir;
    fs::write(
        l.join("nsight-slurm-direct/5_n1_rank0.nsys-rep"),
        b"rank zero",
    )
    .unwrap();
    fs::write(
        l.join("nsight-slurm-reports/5_n2_rank1.nsys-rep"),
        b"rank one",
    )
    .unwrap();
    fs::create_dir_all(l.join("nsight-slurm-runtime/n3")).unwrap();
    fs::write(
        l.join("nsight-slurm-runtime/n3/5_n3_rank2.nsys-rep"),
        b"rank two",
    )
    .unwrap();
    let out = run(&mut r.jobprof(&[
        "collect",
        "--expect-ranks",
        "3",
        "--poll",
        POLL,
        "--settle",
        SETTLE,
        "--timeout",
        "60s",
    ]));
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let m = manifest(l);
    assert_eq!(m["report_count"], 3, "{m:#}");
    let mut paths: Vec<String> = m["reports"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| e["path"].as_str().unwrap().to_string())
        .collect();
    paths.sort();
    assert_eq!(
        paths,
        [
            "nsight-slurm-direct/5_n1_rank0.nsys-rep",
            "nsight-slurm-reports/5_n2_rank1.nsys-rep",
            "rescued/n3/5_n3_rank2.nsys-rep"
        ]
    );
    // --config and --report-root exclude each other.
    let out = run(&mut r.jobprof(&["collect", "--report-root", "/tmp"]));
    assert_eq!(out.status.code(), Some(2), "{}", stderr(&out));
}

#[test]
fn flush_with_a_config_stops_the_sessions_like_a_setup_call() {
    let d = tempfile::tempdir().unwrap();
    let r = Run::new(d.path(), "");
    assert_eq!(r.setup("10.9.8.7").status.code(), Some(0));
    fs::write(
        r.log_dir.join("nsight-slurm-direct/41_n1_rank0.nsys-rep"),
        b"report",
    )
    .unwrap();
    let fakes = super::Fakes::new(d.path(), "41.0|batch\n", 0);
    let out = run(r
        .jobprof(&[
            "flush",
            "--job",
            "41",
            "--poll",
            POLL,
            "--settle",
            SETTLE,
            "--timeout",
            "60s",
        ])
        .env("PATH", fakes.path_env()));
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let stop = r.calls().pop().unwrap();
    assert_eq!(stop.argv, ["stop", "--job", "41", "--timeout", "30"]);
    assert_eq!(stop.node, "10.9.8.7", "the head address recorded by setup");
    assert_eq!(stop.submit, r.log_dir.display().to_string());
    let log = fs::read_to_string(r.log_dir.join("nsight-slurm.out")).unwrap();
    assert!(log.contains("sessions of job 41 stopped"), "{log}");
    assert_eq!(manifest(&r.log_dir)["report_count"], 1);
}

#[test]
fn teardown_without_a_setup_or_a_coordinator_says_why() {
    let d = tempfile::tempdir().unwrap();
    let r = Run::new(d.path(), "");
    let out = run(&mut r.jobprof(&["teardown", "--head-ip", "10.0.0.1"]));
    assert_eq!(out.status.code(), Some(2), "{}", stderr(&out));
    assert!(stderr(&out).contains("does not exist: nothing was set up there"));
    assert!(r.calls().is_empty());
    // Plain nsys: setup creates the directories only, teardown only flushes.
    fs::write(
        &r.config,
        format!(
            "type = \"nsys\"\nprofiling_mode = \"at-launch\"\nlog_dir = \"{}\"\n\
             [launch]\ncommand = [\"true\"]\n",
            r.log_dir.display()
        ),
    )
    .unwrap();
    let out = run(&mut r.jobprof(&["setup"]));
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    assert!(r.log_dir.join("nsys-direct").is_dir());
    assert!(!r.log_dir.join("nsight-slurm-reports").exists());
    let out = run(&mut r.jobprof(&["teardown"]));
    assert_eq!(out.status.code(), Some(2), "{}", stderr(&out));
    assert!(stderr(&out).contains("no coordinator to stop"));
    assert!(r.calls().is_empty());
}
