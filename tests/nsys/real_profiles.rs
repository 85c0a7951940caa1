//! A real report made here by the real nsys (Debian's 2022.4.2, installed
//! by `.ci/run`) read by `jobprof process`, against the ground truth:
//! `nsys stats` of the same nsys on the same report. A CPU-only C worker,
//! annotated with the NVTX C API (the headers ship with nsys), runs under
//! `nsys profile -t osrt,nvtx --sample=cpu`.

use std::collections::BTreeMap;
use std::fs;
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};

use crate::util::{self, have, output_text};

/// Queries in NVTX ranges: CPU work, a sleep and file calls in each.
const WORKER: &str = r#"
#include <nvtx3/nvToolsExt.h>
#include <stdio.h>
#include <unistd.h>
static volatile double sink;
__attribute__((noinline)) static void spin(long n) {
    double s = 0;
    for (long i = 0; i < n; i++) s += i * 0.5;
    sink = s;
}
__attribute__((noinline)) static void query(int q) {
    nvtxRangePushA(q % 2 ? "odd query" : "even query");
    spin(15000000);
    usleep(10000);
    FILE *f = fopen("/dev/null", "w");
    fputs("x", f);
    fclose(f);
    nvtxRangePop();
}
int main(void) {
    for (int q = 0; q < 8; q++) {
        nvtxRangePushA("outer");
        query(q);
        nvtxRangePop();
    }
    return 0;
}
"#;

/// Where nsys keeps the NVTX headers (Debian's nsight-systems-target).
const NVTX_INCLUDE: &str = "/usr/lib/x86_64-linux-gnu/nsight-systems/target-linux-x64/nvtx/include";
/// Debian's importer, where `nsys profile` does not look for it.
const IMPORTER: &str = "/usr/lib/nsight-systems/host-linux-x64/QdstrmImporter";

fn timeout(secs: u32, program: &str) -> Command {
    let mut c = Command::new("timeout");
    c.arg(secs.to_string()).arg(program).stdin(Stdio::null());
    c
}

/// A real report of the worker: `nsys profile` (five times at most, a
/// minute each, where a run takes seconds: its CPU sampling's stop can
/// hang, a lost wakeup in nsys 2022.4's agent, docs/nsys.md; the timeout
/// then prints "No transition in ...Shutdown"), then the importer when it
/// left a `.qdstrm`.
pub(super) fn real_report(dir: &Path, worker: &str) -> PathBuf {
    let src = dir.join("worker.c");
    fs::write(&src, worker).unwrap();
    let exe = dir.join("worker");
    let cc = Command::new("gcc")
        .args(["-O1", "-g", "-fno-omit-frame-pointer", "-I", NVTX_INCLUDE])
        .arg(&src)
        .arg("-o")
        .arg(&exe)
        .args(["-ldl", "-pthread"])
        .output()
        .unwrap();
    assert!(cc.status.success(), "{}", output_text(&cc));
    let out = dir.join("r");
    let (rep, qd) = (dir.join("r.nsys-rep"), dir.join("r.qdstrm"));
    let mut log = String::new();
    for attempt in 0..5 {
        let session = format!("jobprof-profiles-{}-{attempt}", std::process::id());
        let o = timeout(60, "nsys")
            .args(["profile", "-t", "osrt,nvtx", "--sample=cpu", "-f", "true"])
            .arg(format!("--session-new={session}"))
            .arg("-o")
            .arg(&out)
            .arg(&exe)
            .output()
            .unwrap();
        log.push_str(&output_text(&o));
        // A hung run's agent outlives the run: end it.
        end_agent(&session);
        if rep.exists() || qd.exists() {
            break;
        }
    }
    if !rep.exists() && qd.exists() {
        let home = dir.join("importer-home");
        fs::create_dir_all(&home).unwrap();
        let o = timeout(300, IMPORTER)
            .arg("-i")
            .arg(&qd)
            .env("HOME", &home)
            .output()
            .unwrap();
        log.push_str(&output_text(&o));
    }
    assert!(rep.is_file(), "no report:\n{log}");
    rep
}

/// Kills the nsys agent of `session` (`--session-name=SESSION`), if any.
fn end_agent(session: &str) {
    let agent = format!("--session-name={session}");
    for e in fs::read_dir("/proc").into_iter().flatten().flatten() {
        let Ok(pid) = e.file_name().to_string_lossy().parse::<i32>() else {
            continue;
        };
        let cmd = fs::read(e.path().join("cmdline")).unwrap_or_default();
        if cmd.split(|b| *b == 0).any(|a| a == agent.as_bytes()) {
            // SAFETY: kill has no memory-safety preconditions.
            unsafe {
                libc::kill(pid, libc::SIGKILL);
            }
        }
    }
}

/// `nsys stats -r NAME --format csv` of the report: name -> (count, total
/// ns), from the columns named `Name`/`Range`, `Num Calls`/`Instances`
/// and `Total Time (ns)`. Its export goes to `sqlite`.
pub(super) fn stats(report: &Path, name: &str, sqlite: &Path) -> BTreeMap<String, (u64, u64)> {
    let mut c = timeout(300, "nsys");
    c.args(["stats", "-q", "-r", name, "--format", "csv", "--sqlite"])
        .arg(sqlite)
        .arg(report);
    stats_of(&mut c)
}

/// `nsys stats -r NAME --format csv` of an export (`.sqlite`) itself.
pub(super) fn export_stats(sqlite: &Path, name: &str) -> BTreeMap<String, (u64, u64)> {
    let mut c = timeout(300, "nsys");
    c.args(["stats", "-q", "-r", name, "--format", "csv"])
        .arg(sqlite);
    stats_of(&mut c)
}

/// The rows of the CSV an `nsys stats` command prints ([`stats`]).
fn stats_of(c: &mut Command) -> BTreeMap<String, (u64, u64)> {
    let o = c.output().unwrap();
    assert!(o.status.success(), "{}", output_text(&o));
    let text = String::from_utf8_lossy(&o.stdout).into_owned();
    let mut lines = text.lines().filter(|l| l.contains(','));
    let header: Vec<&str> = lines.next().expect("a header").split(',').collect();
    let col = |names: &[&str]| {
        header
            .iter()
            .position(|h| names.contains(&h.trim_matches('"')))
            .unwrap_or_else(|| panic!("none of {names:?} in {header:?}"))
    };
    let (n, c, t) = (
        col(&["Name", "Range"]),
        col(&["Num Calls", "Instances"]),
        col(&["Total Time (ns)"]),
    );
    lines
        .map(|l| {
            // Only the name may hold a comma: it is the last column.
            let f: Vec<&str> = l.splitn(header.len(), ',').collect();
            let num = |i: usize| f[i].trim_matches('"').parse::<u64>().unwrap();
            (f[n].trim_matches('"').to_string(), (num(c), num(t)))
        })
        .collect()
}

/// jobprof's table `file`: name -> (count, total ns).
pub(super) fn table(file: &Path) -> BTreeMap<String, (u64, u64)> {
    fs::read_to_string(file)
        .unwrap_or_else(|e| panic!("{}: {e}", file.display()))
        .lines()
        .skip(1)
        .map(|l| {
            let f: Vec<&str> = l.split('\t').collect();
            (
                f[0].to_string(),
                (f[1].parse().unwrap(), f[2].parse().unwrap()),
            )
        })
        .collect()
}

/// The report names of this nsys: `osrtsum`/`nvtxsum` in 2022.4,
/// `osrt_sum`/`nvtx_sum` in newer ones.
pub(super) fn report_names() -> (&'static str, &'static str) {
    let o = timeout(60, "nsys")
        .args(["stats", "--help-reports"])
        .output()
        .unwrap();
    if String::from_utf8_lossy(&o.stdout).contains("osrt_sum") {
        ("osrt_sum", "nvtx_sum")
    } else {
        ("osrtsum", "nvtxsum")
    }
}

/// The CPU samples of the export `sqlite` (`COMPOSITE_EVENTS`; 0 when
/// the report has none, as a collection without sampling leaves it).
pub(super) fn cpu_samples(sqlite: &Path) -> u64 {
    let db = rusqlite::Connection::open(sqlite).unwrap();
    let has: i64 = db
        .query_row(
            "SELECT count(*) FROM sqlite_master WHERE name = 'COMPOSITE_EVENTS'",
            [],
            |r| r.get(0),
        )
        .unwrap();
    if has == 0 {
        return 0;
    }
    db.query_row("SELECT count(*) FROM COMPOSITE_EVENTS", [], |r| r.get(0))
        .unwrap()
}

/// Whether the real nsys, its importer, the NVTX headers and gcc are
/// here ([`util::require`]: a skip said loudly, a failure under CI).
pub(super) fn require_real() -> bool {
    let real = have("nsys")
        && have("gcc")
        && Path::new(IMPORTER).is_file()
        && Path::new(NVTX_INCLUDE).join("nvtx3/nvToolsExt.h").is_file();
    util::require(
        real,
        "the real Nsight Systems CLI, its importer and NVTX headers (Debian non-free's \
         nsight-systems-target and nsight-systems, as .ci/run installs them) and gcc",
    )
}

pub(super) fn jobprof_process(report: &Path) -> Output {
    jobprof_process_with(report, &[])
}

/// `jobprof process REPORT ARGS...`.
pub(super) fn jobprof_process_with(report: &Path, args: &[&str]) -> Output {
    (util::jobprof().arg("process").arg(report).args(args))
        .output()
        .unwrap()
}

/// jobprof reads the real report through the real `nsys export`: its
/// stacks total exactly the report's CPU samples, and its OS runtime and
/// NVTX tables equal `nsys stats` of the same nsys on the same report.
#[test]
fn a_real_report_read_by_jobprof_matches_nsys_stats() {
    if !require_real() {
        return;
    }
    let t = tempfile::tempdir().unwrap();
    let report = real_report(t.path(), WORKER);
    // No export beside the report yet: jobprof runs `nsys export` itself.
    let o = jobprof_process(&report);
    assert!(o.status.success(), "{}", output_text(&o));
    let out = t.path().join("r.nsys-rep.jobprof");
    let s = util::json(&out.join("summary.json"));
    assert!(s["read"].as_str().unwrap().starts_with("nsys 20"), "{s}");
    assert!(
        s["read_through"].as_str().unwrap().contains("nsys export"),
        "{s}"
    );

    let sqlite = t.path().join("stats.sqlite");
    let (osrt, nvtx) = report_names();
    let osrt_stats = stats(&report, osrt, &sqlite);
    let nvtx_stats = stats(&report, nvtx, &sqlite);
    let samples = cpu_samples(&sqlite);
    assert!(samples > 50, "only {samples} CPU samples");
    assert_eq!(util::folded_total(&out.join("stacks.folded")), samples);
    assert_eq!(s["samples"], samples);
    assert_eq!(table(&out.join("osrt.tsv")), osrt_stats);
    assert_eq!(table(&out.join("nvtx.tsv")), nvtx_stats);
    assert!(nvtx_stats.contains_key("outer") && osrt_stats.contains_key("usleep"));
    let waits: u64 = osrt_stats.values().map(|v| v.1).sum();
    assert_eq!(util::folded_total(&out.join("offcpu.folded")), waits);
    // The worker's own frames are named.
    let folded = fs::read_to_string(out.join("stacks.folded")).unwrap();
    assert!(folded.contains(";main;query;spin "), "{folded}");
}
