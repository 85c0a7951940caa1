//! Nsight Systems reports become profiles: `jobprof process` reads a
//! report's SQLite export (here one made by the test, with the tables and
//! columns of NVIDIA's documented export schema, CUDA activity included)
//! into folded CPU stacks, waits and the NVTX / OS runtime / CUDA tables.
//! The real nsys's reports are checked against `nsys stats` in
//! `real_profiles`.

use std::fs;
use std::path::{Path, PathBuf};

use crate::util::{self, output_text};

/// The export schema's tables jobprof reads (nsys 2022.4's DDL, the CUDA
/// tables as the export schema reference documents them).
pub(super) const SCHEMA: &str = "
CREATE TABLE StringIds (id INTEGER NOT NULL PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE EXPORT_META_DATA (name TEXT NOT NULL, value TEXT);
CREATE TABLE ThreadNames (nameId INTEGER NOT NULL, priority INTEGER, globalTid INTEGER);
CREATE TABLE PROCESSES (globalPid INTEGER, pid INTEGER, name TEXT);
CREATE TABLE COMPOSITE_EVENTS (id INTEGER NOT NULL PRIMARY KEY, start INTEGER NOT NULL,
  cpu INTEGER, threadState INTEGER, globalTid INTEGER, cpuCycles INTEGER NOT NULL);
CREATE TABLE SAMPLING_CALLCHAINS (id INTEGER NOT NULL, symbol INTEGER NOT NULL,
  module INTEGER NOT NULL, kernelMode INTEGER, thumbCode INTEGER, unresolved INTEGER,
  specialEntry INTEGER, originalIP INTEGER, unwindMethod INTEGER,
  stackDepth INTEGER NOT NULL, PRIMARY KEY (id, stackDepth));
CREATE TABLE OSRT_API (start INTEGER NOT NULL, end INTEGER NOT NULL,
  eventClass INTEGER NOT NULL, globalTid INTEGER, nameId INTEGER NOT NULL,
  returnValue INTEGER NOT NULL, nestingLevel INTEGER, callchainId INTEGER NOT NULL);
CREATE TABLE OSRT_CALLCHAINS (id INTEGER NOT NULL, symbol INTEGER NOT NULL,
  module INTEGER NOT NULL, kernelMode INTEGER, thumbCode INTEGER, unresolved INTEGER,
  specialEntry INTEGER, originalIP INTEGER, unwindMethod INTEGER,
  stackDepth INTEGER NOT NULL, PRIMARY KEY (id, stackDepth));
CREATE TABLE NVTX_EVENTS (start INTEGER NOT NULL, end INTEGER, eventType INTEGER NOT NULL,
  rangeId INTEGER, category INTEGER, color INTEGER, text TEXT, globalTid INTEGER,
  endGlobalTid INTEGER, textId INTEGER, domainId INTEGER, uint64Value INTEGER,
  int64Value INTEGER, doubleValue REAL, uint32Value INTEGER, int32Value INTEGER,
  floatValue REAL, jsonTextId INTEGER, jsonText TEXT);
CREATE TABLE CUPTI_ACTIVITY_KIND_KERNEL (start INTEGER NOT NULL, end INTEGER NOT NULL,
  deviceId INTEGER NOT NULL, contextId INTEGER NOT NULL, streamId INTEGER NOT NULL,
  correlationId INTEGER, globalPid INTEGER, demangledName INTEGER NOT NULL,
  shortName INTEGER NOT NULL, mangledName INTEGER, launchType INTEGER, cacheConfig INTEGER,
  registersPerThread INTEGER NOT NULL, gridX INTEGER NOT NULL, gridY INTEGER NOT NULL,
  gridZ INTEGER NOT NULL, blockX INTEGER NOT NULL, blockY INTEGER NOT NULL,
  blockZ INTEGER NOT NULL, staticSharedMemory INTEGER NOT NULL,
  dynamicSharedMemory INTEGER NOT NULL, localMemoryPerThread INTEGER NOT NULL,
  localMemoryTotal INTEGER NOT NULL, gridId INTEGER NOT NULL,
  sharedMemoryExecuted INTEGER, graphNodeId INTEGER, sharedMemoryLimitConfig INTEGER);
CREATE TABLE CUPTI_ACTIVITY_KIND_MEMCPY (start INTEGER NOT NULL, end INTEGER NOT NULL,
  deviceId INTEGER NOT NULL, contextId INTEGER NOT NULL, streamId INTEGER NOT NULL,
  correlationId INTEGER, globalPid INTEGER, bytes INTEGER NOT NULL,
  copyKind INTEGER NOT NULL, deprecatedSrcId INTEGER, srcKind INTEGER, dstKind INTEGER,
  srcDeviceId INTEGER, srcContextId INTEGER, dstDeviceId INTEGER, dstContextId INTEGER,
  migrationCause INTEGER, graphNodeId INTEGER);
CREATE TABLE ENUM_CUDA_MEMCPY_OPER (id INTEGER NOT NULL PRIMARY KEY, name TEXT, label TEXT);
";

/// pid 77 (`/opt/app/engine`), its main thread 77 (named `engine`) and a
/// thread 78 without a name of its own.
const MAIN: i64 = (77 << 24) | 77;
const OTHER: i64 = (77 << 24) | 78;
const PID: i64 = 77 << 24;

/// A small report's export: 4 CPU samples (one without a call chain, one
/// through an unresolved frame and a kernel frame), OS runtime calls (two
/// sharing a call chain, one without, one of the trace's own events),
/// NVTX ranges (one in a named domain, one never ended), kernels and
/// copies.
pub(super) const DATA: &str = "
INSERT INTO EXPORT_META_DATA VALUES ('EXPORT_PRODUCT_VERSION', '2024.1.1.59'),
  ('EXPORT_SCHEMA_VERSION', '3.11.1');
INSERT INTO StringIds VALUES (0, '[Unknown]'), (1, 'engine'), (2, 'main'), (3, 'scan'),
  (4, 'hash_join'), (5, '/opt/app/engine'), (6, '0x7f0012'), (7, '/usr/lib/libc.so.6'),
  (8, 'do_syscall_64'), (9, '[kernel.kallsyms]'), (10, '[Broken backtraces]'),
  (11, 'pthread_cond_wait'), (12, 'read'), (13, 'query'), (14, 'void gemm<float>(int)'),
  (15, 'gemm'), (16, 'reduce(float*)'), (17, 'reduce');
INSERT INTO ThreadNames VALUES (1, 10, MAIN);
INSERT INTO PROCESSES VALUES (PID, 77, '/opt/app/engine');
INSERT INTO COMPOSITE_EVENTS VALUES (1, 100, 0, 1, MAIN, 1), (2, 200, 0, 1, MAIN, 1),
  (3, 300, 1, 1, OTHER, 1), (4, 400, 1, 1, OTHER, 1);
INSERT INTO SAMPLING_CALLCHAINS (id, symbol, module, kernelMode, unresolved, stackDepth)
  VALUES (1, 3, 5, NULL, NULL, 0), (1, 2, 5, NULL, NULL, 1), (1, 10, 10, NULL, NULL, 2),
  (2, 3, 5, NULL, NULL, 0), (2, 2, 5, NULL, NULL, 1),
  (3, 8, 9, 1, NULL, 0), (3, 6, 7, NULL, 1, 1), (3, 4, 5, NULL, NULL, 2);
INSERT INTO OSRT_API VALUES (10, 10, 31, MAIN, 12, 0, NULL, 0),
  (100, 1100, 27, MAIN, 11, 0, 0, 5), (2000, 2500, 27, MAIN, 11, 0, 0, 5),
  (3000, 3040, 27, OTHER, 12, 0, 0, 0), (4000, 7000, 27, OTHER, 11, 0, 0, 6);
INSERT INTO OSRT_CALLCHAINS (id, symbol, module, stackDepth) VALUES (5, 11, 7, 0),
  (5, 3, 5, 1), (5, 2, 5, 2), (6, 11, 7, 0), (6, 4, 5, 1);
INSERT INTO NVTX_EVENTS (start, end, eventType, text, globalTid, domainId) VALUES
  (0, 0, 75, 'engine', MAIN, 1),
  (100, 600, 59, 'query', MAIN, 0), (700, 1000, 59, 'query', MAIN, 0),
  (1000, 1400, 59, 'query', MAIN, 0), (200, 300, 60, 'scan', MAIN, 1),
  (5000, NULL, 60, 'open', OTHER, 0), (9000, 9000, 34, 'a mark', MAIN, 0);
INSERT INTO ENUM_CUDA_MEMCPY_OPER VALUES (1, 'CUDA_MEMCPY_KIND_HTOD', 'Host-to-Device'),
  (2, 'CUDA_MEMCPY_KIND_DTOH', 'Device-to-Host');
INSERT INTO CUPTI_ACTIVITY_KIND_KERNEL (start, end, deviceId, contextId, streamId,
  demangledName, shortName, registersPerThread, gridX, gridY, gridZ, blockX, blockY, blockZ,
  staticSharedMemory, dynamicSharedMemory, localMemoryPerThread, localMemoryTotal, gridId)
  VALUES (0, 40, 0, 1, 7, 14, 15, 32, 1, 1, 1, 128, 1, 1, 0, 0, 0, 0, 1),
  (50, 70, 0, 1, 7, 14, 15, 32, 1, 1, 1, 128, 1, 1, 0, 0, 0, 0, 2),
  (80, 85, 0, 1, 7, 16, 17, 32, 1, 1, 1, 128, 1, 1, 0, 0, 0, 0, 3);
INSERT INTO CUPTI_ACTIVITY_KIND_MEMCPY (start, end, deviceId, contextId, streamId, bytes,
  copyKind) VALUES (0, 10, 0, 1, 7, 4096, 1), (20, 50, 0, 1, 7, 4096, 1),
  (60, 61, 0, 1, 7, 16, 2);
";

/// Writes `dir/NAME.sqlite` from SQL (the schema, then `data`) and a
/// placeholder `dir/NAME.nsys-rep` beside it; returns the report.
pub(super) fn export(dir: &Path, name: &str, schema: &str, data: &str) -> PathBuf {
    let sql = format!("{schema}\n{data}")
        .replace("MAIN", &MAIN.to_string())
        .replace("OTHER", &OTHER.to_string())
        .replace("PID", &PID.to_string());
    let db = rusqlite::Connection::open(dir.join(format!("{name}.sqlite"))).unwrap();
    db.execute_batch(&sql).unwrap();
    let report = dir.join(format!("{name}.nsys-rep"));
    fs::write(
        &report,
        b"the report itself is not read: its export is beside it",
    )
    .unwrap();
    report
}

/// `jobprof process ARGS` with no nsys on PATH.
pub(super) fn process(args: &[&Path]) -> std::process::Output {
    util::jobprof()
        .arg("process")
        .args(args)
        .env("PATH", "/nonexistent")
        .output()
        .unwrap()
}

fn read(dir: &Path, f: &str) -> String {
    fs::read_to_string(dir.join(f)).unwrap_or_else(|e| panic!("{}: {e}", dir.join(f).display()))
}

#[test]
fn an_nsys_export_becomes_folded_stacks_waits_and_tables() {
    let t = tempfile::tempdir().unwrap();
    let report = export(t.path(), "run", SCHEMA, DATA);
    let o = process(&[&report]);
    assert!(o.status.success(), "{}", output_text(&o));
    let out = t.path().join("run.nsys-rep.jobprof");
    assert!(
        String::from_utf8_lossy(&o.stdout).contains("nsys report processed"),
        "{}",
        output_text(&o)
    );
    // Thread 78 has no name: its process's; the unwind mark is left out,
    // an unnamed frame is its module, a kernel frame `_[k]`.
    assert_eq!(
        read(&out, "stacks.folded"),
        "engine;[unknown] 1\nengine;hash_join;[libc.so.6];do_syscall_64_[k] 1\n\
         engine;main;scan 2\n"
    );
    assert_eq!(
        read(&out, "offcpu.folded"),
        "engine;hash_join;pthread_cond_wait 3000\nengine;main;scan;pthread_cond_wait 1500\n\
         engine;read 40\n"
    );
    let header = "name\tcount\ttotal_ns\tmedian_ns\n";
    assert_eq!(
        read(&out, "osrt.tsv"),
        format!("{header}pthread_cond_wait\t3\t4500\t1000\nread\t1\t40\t40\n")
    );
    // `open` never ends: it lasts to the last NVTX time (9000).
    assert_eq!(
        read(&out, "nvtx.tsv"),
        format!("{header}open\t1\t4000\t4000\nquery\t3\t1200\t400\nengine:scan\t1\t100\t100\n")
    );
    assert_eq!(
        read(&out, "gpu-kernels.tsv"),
        format!("{header}void gemm<float>(int)\t2\t60\t30\nreduce(float*)\t1\t5\t5\n")
    );
    assert_eq!(
        read(&out, "gpu-memcpy.tsv"),
        format!("{header}Host-to-Device\t2\t40\t20\nDevice-to-Host\t1\t1\t1\n")
    );
    let s = util::json(&out.join("summary.json"));
    assert_eq!(s["read"], "nsys 2024.1.1.59, schema 3.11.1", "{s}");
    assert_eq!(s["source"], "nsys");
    assert_eq!(s["samples"], 4);
    assert_eq!(s["wait_ns"], 4540);
    assert!(
        s["read_through"].as_str().unwrap().contains("run.sqlite"),
        "{s}"
    );
    for f in [
        "flamegraph.svg",
        "flamegraph.html",
        "offcpu.svg",
        "report.txt",
    ] {
        assert!(out.join(f).is_file(), "{f} missing");
    }
    assert!(read(&out, "report.txt").contains("CUDA kernels (gpu-kernels.tsv)"));
    // Done once; again only with --force.
    let again = process(&[&report]);
    assert!(String::from_utf8_lossy(&again.stdout).contains("already processed"));
}

/// An `nsys-capture.json` as the sidecar publishes it, for `file` of `kind`.
pub(super) fn manifest(q: &str, file: &str, kind: &str) -> String {
    let call = r#"{"argv": ["nsys"], "exit_code": 0, "unix_ns": 1000}"#;
    format!(
        r#"{{"format_version": 1, "query": "{q}", "worker": 0, "host": "n1",
  "slurm_job_id": "4242", "start": {call}, "stop": {call}, "settle_ms": 1000,
  "report_timeout_ms": 60000, "settled_at_ns": 2000, "published_at_ns": 3000,
  "file": "{file}", "kind": "{kind}", "settled": true, "bytes": 10, "sha256": "00",
  "reason": null}}"#
    )
}

/// Every query the nsys sidecar published under a result directory is
/// read into its own `jobprof/` directory; a `.qdstrm` fallback is named
/// with the way to convert it (exit 1); `--query` narrows the run.
#[test]
fn each_published_query_report_is_processed_into_its_own_jobprof_dir() {
    let t = tempfile::tempdir().unwrap();
    let root = t.path().join("result");
    let q = |name: &str| root.join("profiles/nsys/worker_0").join(name);
    for name in ["q1", "q2"] {
        fs::create_dir_all(q(name)).unwrap();
        let file = format!("nsys_worker_w0_{name}");
        export(&q(name), &file, SCHEMA, DATA);
        let m = manifest(name, &format!("{file}.nsys-rep"), "nsys-rep");
        fs::write(q(name).join("nsys-capture.json"), m).unwrap();
    }
    fs::create_dir_all(q("q3")).unwrap();
    fs::write(q("q3").join("nsys_worker_w0_q3.qdstrm"), b"raw").unwrap();
    let m = manifest("q3", "nsys_worker_w0_q3.qdstrm", "qdstrm");
    fs::write(q("q3").join("nsys-capture.json"), m).unwrap();

    let only = util::jobprof()
        .args(["process", "--query", "q2"])
        .arg(&root)
        .env("PATH", "/nonexistent")
        .output()
        .unwrap();
    assert!(only.status.success(), "{}", output_text(&only));
    assert!(!q("q1").join("jobprof").exists());
    let s = util::json(&q("q2").join("jobprof/summary.json"));
    assert_eq!(
        (s["capture"].as_str(), s["job_id"].as_str()),
        (Some("worker_0/q2"), Some("4242"))
    );

    let all = process(&[&root]);
    let text = output_text(&all);
    assert_eq!(all.status.code(), Some(1), "{text}");
    assert!(q("q1").join("jobprof/stacks.folded").is_file(), "{text}");
    assert!(
        text.contains("q2/jobprof: nsys report already processed"),
        "{text}"
    );
    assert!(
        text.contains("q3/jobprof: nsys report not processed")
            && text.contains("is a .qdstrm")
            && text.contains("QdstrmImporter -i"),
        "{text}"
    );
    // `reprocess --force` reads them again.
    let again = util::jobprof()
        .args(["reprocess", "--force"])
        .arg(&root)
        .env("PATH", "/nonexistent")
        .output()
        .unwrap();
    let text = output_text(&again);
    assert_eq!(again.status.code(), Some(1), "{text}");
    for q in ["q1", "q2"] {
        assert!(
            text.contains(&format!("{q}/jobprof: nsys report processed")),
            "{text}"
        );
    }
}

/// A report with no export beside it, on a host without nsys: the line
/// names the report and both fixes; exit 1, nothing written.
#[test]
fn a_report_without_an_export_or_an_nsys_says_so_and_how_to_fix_it() {
    let t = tempfile::tempdir().unwrap();
    let report = t.path().join("lone.nsys-rep");
    fs::write(&report, b"a report").unwrap();
    let o = process(&[&report]);
    let text = output_text(&o);
    assert_eq!(o.status.code(), Some(1), "{text}");
    let sqlite = t.path().join("lone.sqlite");
    for want in [
        format!("{}: no {} beside it", report.display(), sqlite.display()),
        "no `nsys` on PATH".into(),
        format!("nsys export --type sqlite -o {}", sqlite.display()),
    ] {
        assert!(text.contains(&want), "{want}\n{text}");
    }
    assert!(!t.path().join("lone.nsys-rep.jobprof/summary.json").exists());
}

/// An export whose schema lacks a column jobprof reads is refused naming
/// the table, the column and the nsys version that wrote it.
#[test]
fn an_export_missing_a_column_names_the_table_column_and_version() {
    let t = tempfile::tempdir().unwrap();
    let schema = SCHEMA.replace(
        "cpu INTEGER, threadState INTEGER, globalTid INTEGER, cpuCycles",
        "cpu INTEGER, threadState INTEGER, cpuCycles",
    );
    let data = DATA
        .replace(
            "(1, 100, 0, 1, MAIN, 1), (2, 200, 0, 1, MAIN, 1),",
            "(1, 100, 0, 1, 1),",
        )
        .replace(
            "(3, 300, 1, 1, OTHER, 1), (4, 400, 1, 1, OTHER, 1);",
            "(2, 200, 0, 1, 1);",
        );
    let report = export(t.path(), "old", &schema, &data);
    let o = process(&[&report]);
    let text = output_text(&o);
    assert_eq!(o.status.code(), Some(1), "{text}");
    assert!(
        text.contains("table COMPOSITE_EVENTS has no column `globalTid`")
            && text.contains("nsys 2024.1.1.59, schema 3.11.1"),
        "{text}"
    );
}

/// The job page lists each query's nsys profile next to its perf
/// flamegraph: the nsys flamegraph's link, its samples, the longest waits,
/// NVTX ranges and kernels (and `index.json` the same).
#[test]
fn the_job_page_lists_the_nsys_profile_beside_the_perf_capture() {
    let t = tempfile::tempdir().unwrap();
    let root = t.path().join("result");
    util::copy_demo(&root);
    let q = root.join("profiles/nsys/worker_0/q01");
    fs::create_dir_all(&q).unwrap();
    export(&q, "nsys_worker_w0_q01", SCHEMA, DATA);
    let m = manifest("q01", "nsys_worker_w0_q01.nsys-rep", "nsys-rep");
    fs::write(q.join("nsys-capture.json"), m).unwrap();
    let o = process(&[&root]);
    assert!(o.status.success(), "{}", output_text(&o));
    let perf_root = root.join("profiles/perf");
    let index = util::json(&perf_root.join("index.json"));
    let p = &index["captures"][0]["nsys"]["profile"];
    assert_eq!(p["samples"], 4, "{index}");
    assert_eq!(
        p["flamegraph"],
        "../nsys/worker_0/q01/jobprof/flamegraph.html"
    );
    assert_eq!(p["top_waits"][0][0], "pthread_cond_wait");
    assert_eq!(p["gpu_kernels"][0][0], "void gemm<float>(int)");
    let html = fs::read_to_string(perf_root.join("index.html")).unwrap();
    for want in [
        "href=\"../nsys/worker_0/q01/jobprof/flamegraph.html\">CPU 4 samples</a>",
        "waits: pthread_cond_wait 0.0 ms, read 0.0 ms",
        "NVTX: open 0.0 ms, query 0.0 ms, engine:scan 0.0 ms",
        "GPU kernels: void gemm&lt;float&gt;(int) 0.0 ms",
    ] {
        assert!(html.contains(want), "{want}");
    }
}

/// A result directory of Nsight Systems reports only (no perf capture)
/// gets its job page too: one row per query and worker, each with its nsys
/// report and profile, the job's id from the reports' manifests.
#[test]
fn a_result_dir_of_nsys_reports_only_gets_a_job_page() {
    let t = tempfile::tempdir().unwrap();
    let root = t.path().join("result");
    for name in ["q1_iter1", "q1_iter2"] {
        let q = root.join("profiles/nsys/worker_0").join(name);
        fs::create_dir_all(&q).unwrap();
        let file = format!("nsys_worker_w0_{name}");
        export(&q, &file, SCHEMA, DATA);
        let m = manifest(name, &format!("{file}.nsys-rep"), "nsys-rep");
        fs::write(q.join("nsys-capture.json"), m).unwrap();
    }
    let o = process(&[&root]);
    let text = output_text(&o);
    assert!(o.status.success(), "{text}");
    let perf_root = root.join("profiles/perf");
    assert!(
        text.contains(&format!(
            "{}: job index",
            perf_root.join("index.html").display()
        )),
        "{text}"
    );
    let index = util::json(&perf_root.join("index.json"));
    let rows = index["captures"].as_array().unwrap();
    assert_eq!(rows.len(), 2, "{index}");
    for (row, q) in rows.iter().zip(["q1_iter1", "q1_iter2"]) {
        assert_eq!(row["capture"], format!("worker_0/{q}"), "{index}");
        assert_eq!(row["state"], "nsys-only", "{index}");
        assert_eq!(row["base"], "q1");
        assert_eq!(row["nsys"]["profile"]["samples"], 4, "{index}");
    }
    assert_eq!(index["job"]["job_ids"][0], "4242", "{index}");
    let html = fs::read_to_string(perf_root.join("index.html")).unwrap();
    for want in [
        "href=\"../nsys/worker_0/q1_iter2/jobprof/flamegraph.html\">CPU 4 samples</a>",
        "2 nsys only",
        "job 4242",
    ] {
        assert!(html.contains(want), "{want}");
    }
    // `reprocess` keeps it.
    fs::remove_file(perf_root.join("index.json")).unwrap();
    let again = util::jobprof()
        .args(["reprocess", "--force"])
        .arg(&root)
        .env("PATH", "/nonexistent")
        .output()
        .unwrap();
    assert!(again.status.success(), "{}", output_text(&again));
    assert!(
        perf_root.join("index.json").is_file(),
        "{}",
        output_text(&again)
    );
}

/// The `profiles/perf` a job of nsys reports only gets is made in place:
/// a link planted there is not followed (the views are not written, exit
/// 1, nothing appears where it points).
#[test]
fn the_views_of_nsys_reports_only_are_not_written_through_a_planted_link() {
    let t = tempfile::tempdir().unwrap();
    let root = t.path().join("result");
    let q = root.join("profiles/nsys/worker_0/q1");
    fs::create_dir_all(&q).unwrap();
    export(&q, "nsys_worker_w0_q1", SCHEMA, DATA);
    let m = manifest("q1", "nsys_worker_w0_q1.nsys-rep", "nsys-rep");
    fs::write(q.join("nsys-capture.json"), m).unwrap();
    let elsewhere = t.path().join("elsewhere");
    fs::create_dir(&elsewhere).unwrap();
    std::os::unix::fs::symlink(&elsewhere, root.join("profiles/perf")).unwrap();
    let o = process(&[&root]);
    let text = output_text(&o);
    assert_eq!(o.status.code(), Some(1), "{text}");
    assert!(
        text.contains("index.html: not written") && text.contains("symbolic link"),
        "{text}"
    );
    assert_eq!(fs::read_dir(&elsewhere).unwrap().count(), 0, "{text}");
    assert!(q.join("jobprof/summary.json").is_file(), "{text}");
}

/// `jobprof diff` compares two nsys profiles (their `jobprof/` or query
/// directories): the CPU stacks, or the waits with `--kind off-cpu`.
#[test]
fn diff_compares_two_nsys_profiles() {
    let t = tempfile::tempdir().unwrap();
    let before = export(t.path(), "before", SCHEMA, DATA);
    let more = DATA
        .replace("(3, 300, 1, 1, OTHER, 1),", "(3, 300, 1, 1, OTHER, 1), (5, 500, 0, 1, MAIN, 1),")
        .replace("(2, 3, 5, NULL, NULL, 0), (2, 2, 5, NULL, NULL, 1),", "(2, 3, 5, NULL, NULL, 0), (2, 2, 5, NULL, NULL, 1), (5, 3, 5, NULL, NULL, 0), (5, 2, 5, NULL, NULL, 1),");
    let after = export(t.path(), "after", SCHEMA, &more);
    let o = process(&[&before, &after]);
    assert!(o.status.success(), "{}", output_text(&o));
    let dir = |r: &Path| PathBuf::from(format!("{}.jobprof", r.display()));
    let out = t.path().join("d.folded");
    let o = util::jobprof()
        .arg("diff")
        .args([dir(&before), dir(&after)])
        .arg("-o")
        .arg(&out)
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", output_text(&o));
    let d = fs::read_to_string(&out).unwrap();
    assert!(d.contains("engine;main;scan 2 3\n"), "{d}");
    let o = util::jobprof()
        .args(["diff", "--kind", "off-cpu"])
        .args([dir(&before), dir(&after)])
        .arg("-o")
        .arg(&out)
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", output_text(&o));
    let d = fs::read_to_string(&out).unwrap();
    assert!(
        d.contains("engine;main;scan;pthread_cond_wait 1500 1500\n"),
        "{d}"
    );
}

/// As root, an `nsys` that others can change (here in a directory under
/// /tmp) is never run to export a report: the line says which and why.
#[test]
fn as_root_an_nsys_others_can_change_is_not_run() {
    // SAFETY: geteuid has no preconditions.
    if unsafe { libc::geteuid() } != 0 {
        eprintln!("not root: the rule applies to root only");
        return;
    }
    let t = tempfile::tempdir_in("/tmp").unwrap();
    let bin = t.path().join("bin");
    fs::create_dir(&bin).unwrap();
    let ran = t.path().join("ran");
    let fake = bin.join("nsys");
    fs::write(&fake, format!("#!/bin/sh\ntouch {}\n", ran.display())).unwrap();
    use std::os::unix::fs::PermissionsExt;
    fs::set_permissions(&fake, fs::Permissions::from_mode(0o755)).unwrap();
    let report = t.path().join("r.nsys-rep");
    fs::write(&report, b"a report").unwrap();
    let o = util::jobprof()
        .arg("process")
        .arg(&report)
        .env("PATH", &bin)
        .output()
        .unwrap();
    let text = output_text(&o);
    assert_eq!(o.status.code(), Some(1), "{text}");
    assert!(
        text.contains("not running") && text.contains("others can change it"),
        "{text}"
    );
    assert!(!ran.exists(), "the fake nsys ran");
}
