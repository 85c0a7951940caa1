//! `jobprof nsys flush`: against fake `nsight-slurm`, `squeue` and `scancel`
//! on `PATH` that record their argv (sessions stopped, connectors signalled,
//! reports collected; failing commands; array tasks; bad job ids), and
//! against real Slurm steps when a test cluster is running.

use std::fs;

use super::{entry, flushed_one_report, make_executable, manifest, run, sbatch, sha256_file};
use super::{wait_ok, wait_started, Fakes, POLL, SETTLE};
use crate::util::require;
use crate::util::{jobprof, slurm_available, stderr};

#[test]
fn flush_stops_sessions_signals_connectors_and_collects() {
    let d = tempfile::tempdir().unwrap();
    let root = d.path().join("reports");
    fs::create_dir_all(root.join("direct")).unwrap();
    // A report of an earlier job: the baseline ignores it.
    fs::write(root.join("direct/76_old_rank0.nsys-rep"), b"old job").unwrap();
    let fakes = Fakes::new(
        d.path(),
        "77.0|batch\n77.1|nsight-slurm-connector\n77.2|nsight-slurm-connector\n77.3|worker\n",
        0,
    );
    let c1 = fakes.connector("77.1", &root.join("direct/77_n1_rank0.nsys-rep"));
    let c2 = fakes.connector("77.2", &root.join("direct/77_n2_rank1.nsys-rep"));
    let out = run(jobprof()
        .env("PATH", fakes.path_env())
        .args(["nsys", "flush", "--job", "77", "--report-root"])
        .arg(&root)
        .arg("--nsight-slurm")
        .arg(fakes.dir.join("home"))
        .args([
            "--expect-ranks",
            "2",
            "--poll",
            POLL,
            "--settle",
            SETTLE,
            "--timeout",
            "30s",
        ]));
    wait_ok(c1);
    wait_ok(c2);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    assert_eq!(
        fakes.calls(),
        [
            "nsight-slurm stop --job 77 --timeout 30",
            "squeue -s -j 77 -h -o %i|%j",
            "scancel --signal=TERM 77.1",
            "scancel --signal=TERM 77.2",
        ]
    );
    let m = manifest(&root);
    assert_eq!(m["report_count"], 2, "{m:#}");
    for k in [0, 1] {
        let name = format!("77_n{}_rank{k}.nsys-rep", k + 1);
        let e = entry(&m, &name);
        assert_eq!(e["bytes"], 80_000);
        assert_eq!(e["sha256"], sha256_file(&root.join("direct").join(&name)));
    }
    let err = stderr(&out);
    for logged in [
        "running: ",
        "nsight-slurm stop --job 77 --timeout 30",
        "squeue -s -j 77 -h -o '%i|%j'",
        "scancel --signal=TERM 77.1",
        "exited 0",
    ] {
        assert!(err.contains(logged), "log lacks {logged:?}:\n{err}");
    }
}

#[test]
fn flush_goes_on_when_commands_fail_and_keeps_this_jobs_reports() {
    let d = tempfile::tempdir().unwrap();
    let root = d.path().join("reports");
    fs::create_dir_all(root.join("direct")).unwrap();
    // Written while `nsight-slurm stop` ran: before the baseline, but this
    // job's own report, so it is collected.
    fs::write(root.join("direct/78_n_rank0.nsys-rep"), b"already there").unwrap();
    let fakes = Fakes::new(
        d.path(),
        "slurm_load_jobs error: Invalid job id specified\n",
        1,
    );
    let out = run(jobprof()
        .env("PATH", fakes.path_env())
        .args(["nsys", "flush", "--job", "78", "--report-root"])
        .arg(&root)
        .args(["--nsight-slurm", "/nonexistent/nsight-slurm"])
        .args(["--poll", POLL, "--settle", "300ms", "--timeout", "10s"]));
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let err = stderr(&out);
    assert!(
        err.contains("could not start /nonexistent/nsight-slurm"),
        "{err}"
    );
    assert!(err.contains("Invalid job id specified"), "{err}");
    assert_eq!(fakes.calls(), ["squeue -s -j 78 -h -o %i|%j"], "no scancel");
    entry(&manifest(&root), "78_n_rank0.nsys-rep");
}

#[test]
fn flush_resolves_an_array_task_to_its_job_id() {
    let d = tempfile::tempdir().unwrap();
    let root = d.path().join("reports");
    fs::create_dir_all(root.join("direct")).unwrap();
    let fakes = Fakes::new(d.path(), "80.0|nsight-slurm-connector\n", 0);
    fs::write(fakes.dir.join("squeue-job.out"), "vm|RUNNING|80\n").unwrap();
    // Task 79_1 runs as job 80: its report, present before the flush, is
    // this job's own and therefore not baselined away.
    fs::write(root.join("direct/80_vm_rank0.nsys-rep"), b"x").unwrap();
    let c = fakes.connector("80.0", &root.join("direct/80_vm_rank1.nsys-rep"));
    let out = run(jobprof()
        .env("PATH", fakes.path_env())
        .args(["nsys", "flush", "--job", "79_1", "--report-root"])
        .arg(&root)
        .args([
            "--expect-ranks",
            "2",
            "--poll",
            POLL,
            "--settle",
            SETTLE,
            "--timeout",
            "30s",
        ]));
    wait_ok(c);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    assert_eq!(
        fakes.calls(),
        [
            "squeue -j 79_1 -t all -h -o %N|%T|%A",
            "squeue -s -j 80 -h -o %i|%j",
            "scancel --signal=TERM 80.0",
        ]
    );
    assert!(stderr(&out).contains("array task 79_1 runs as job 80"));
    assert_eq!(manifest(&root)["report_count"], 2);
}

#[test]
fn flush_rejects_a_bad_job_id_before_running_anything() {
    let d = tempfile::tempdir().unwrap();
    let fakes = Fakes::new(d.path(), "", 0);
    let out = run(jobprof()
        .env("PATH", fakes.path_env())
        .args(["nsys", "flush", "--job", "77;true", "--report-root"])
        .arg(d.path()));
    assert_eq!(out.status.code(), Some(2));
    assert!(
        stderr(&out).contains("is not a Slurm job id"),
        "{}",
        stderr(&out)
    );
    assert!(fakes.calls().is_empty());
}

#[test]
fn flush_against_real_slurm_steps() {
    if !require(
        slurm_available(),
        "a running Slurm cluster (scripts/slurm-cluster.sh start)",
    ) {
        return;
    }
    let d = tempfile::tempdir().unwrap();
    let root = d.path().join("reports");
    fs::create_dir_all(root.join("direct")).unwrap();
    // The connector step: a stand-in for nsys that writes its report only
    // after SIGTERM, in two bursts, named like the launch pattern.
    let connector = d.path().join("connector.sh");
    fs::write(
        &connector,
        format!(
            "#!/bin/sh\n\
             out='{}'/\"${{SLURM_JOB_ID}}_${{SLURMD_NODENAME}}_rank${{SLURM_PROCID}}.nsys-rep\"\n\
             trap ': > \"$out\"; sleep 0.5; head -c 50000 /dev/urandom >> \"$out\"; sleep 0.5; \
             head -c 50000 /dev/urandom >> \"$out\"; exit 0' TERM\n\
             touch '{}'/connector-started\n\
             while :; do sleep 0.1; done\n",
            root.join("direct").display(),
            d.path().display()
        ),
    )
    .unwrap();
    let batch = d.path().join("job.sh");
    fs::write(
        &batch,
        format!(
            "#!/bin/sh\n\
             srun --overlap -n1 -J nsight-slurm-connector '{}' &\n\
             wait\n",
            connector.display()
        ),
    )
    .unwrap();
    make_executable(&connector);
    make_executable(&batch);
    let job = sbatch("jobprof-nsys-flush", d.path(), &batch);
    // Wait for the connector step to run.
    let started = d.path().join("connector-started");
    wait_started("connector step", &job, d.path(), 60, || started.exists());
    let out = run(jobprof()
        .args(["nsys", "flush", "--job", &job, "--report-root"])
        .arg(&root)
        .args([
            "--expect-ranks",
            "1",
            "--poll",
            POLL,
            "--settle",
            SETTLE,
            "--timeout",
            "60s",
        ]));
    let e = flushed_one_report(&out, &job, &root);
    assert_eq!(e["status"], "ok");
}
