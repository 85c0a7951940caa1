//! Hostile Nsight Systems exports and swapped query directories (issue
//! 55): each test plants the attack in a result tree owned by `nobody`
//! and runs `jobprof process` as root, as a post-job step or a bulk
//! reprocess over many users' runs does. docs/reliability.md lists the
//! guarantee each one proves.

use std::fs;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use super::profiles::{export, manifest, DATA, SCHEMA};
use crate::util::{self, as_nobody, have, is_root, output_text};

fn ready() -> bool {
    util::require(is_root() && have("setpriv"), "root and setpriv")
}

/// A result tree in a 0755 directory under /tmp: `profiles/nsys/worker_0/`
/// with one query per `(name, data)`, each a report whose export beside it
/// is made from `SCHEMA` then `data`; everything then given to `nobody`,
/// as a worker's own results are. `secret` beside it: a root-only
/// directory outside the tree.
struct Tree {
    _t: tempfile::TempDir,
    root: PathBuf,
    secret: PathBuf,
}

impl Tree {
    fn new(queries: &[(&str, &str)]) -> Tree {
        Self::with_schema(queries, SCHEMA)
    }

    fn with_schema(queries: &[(&str, &str)], schema: &str) -> Tree {
        let t = tempfile::Builder::new().tempdir_in("/tmp").unwrap();
        fs::set_permissions(t.path(), fs::Permissions::from_mode(0o755)).unwrap();
        let root = t.path().join("result");
        for (q, data) in queries {
            let dir = root.join("profiles/nsys/worker_0").join(q);
            fs::create_dir_all(&dir).unwrap();
            let file = format!("nsys_worker_w0_{q}");
            export(&dir, &file, schema, data);
            let m = manifest(q, &format!("{file}.nsys-rep"), "nsys-rep");
            fs::write(dir.join("nsys-capture.json"), m).unwrap();
        }
        let st = Command::new("chown")
            .args(["-R", "nobody:nogroup"])
            .arg(&root)
            .status()
            .unwrap();
        assert!(st.success());
        let secret = t.path().join("secret");
        fs::create_dir(&secret).unwrap();
        fs::set_permissions(&secret, fs::Permissions::from_mode(0o700)).unwrap();
        Tree {
            _t: t,
            root,
            secret,
        }
    }

    fn q(&self, q: &str) -> PathBuf {
        self.root.join("profiles/nsys/worker_0").join(q)
    }

    fn out(&self, q: &str, file: &str) -> PathBuf {
        self.q(q).join("jobprof").join(file)
    }
}

/// `jobprof process ARGS ROOT` with no nsys on PATH, killed after `secs`
/// (`None` then).
fn process_within(args: &[&str], root: &Path, secs: u64) -> Option<std::process::Output> {
    let mut c = util::jobprof();
    c.arg("process")
        .args(args)
        .arg(root)
        .env("PATH", "/nonexistent");
    let child = c
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    wait_within(child, secs)
}

fn wait_within(mut child: std::process::Child, secs: u64) -> Option<std::process::Output> {
    let started = Instant::now();
    while started.elapsed() < Duration::from_secs(secs) {
        if child.try_wait().unwrap().is_some() {
            return Some(child.wait_with_output().unwrap());
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    let _ = child.kill();
    let _ = child.wait();
    None
}

/// Every byte of every file under `dir` is free of control characters
/// but the newline ending lines (and tabs in TSVs), and no line of a
/// folded file holds more than one count.
fn no_control_bytes(dir: &Path) {
    for e in fs::read_dir(dir).unwrap() {
        let p = e.unwrap().path();
        let name = p.file_name().unwrap().to_string_lossy().to_string();
        if name.ends_with(".gz") || name.ends_with(".zst") {
            continue;
        }
        let bytes = fs::read(&p).unwrap();
        let bad = bytes
            .iter()
            .position(|&b| (b < 0x20 && b != b'\n' && b != b'\t') || b == 0x7f);
        assert_eq!(bad, None, "{}: a raw control byte", p.display());
    }
}

/// A `COMPOSITE_EVENTS` that is a view over a recursive query that never
/// ends: the report is refused at once, naming the view (exit 1), and the
/// job's other report is still processed.
#[test]
fn a_view_under_a_table_name_refuses_the_report_at_once() {
    if !ready() {
        return;
    }
    let endless = "DROP TABLE COMPOSITE_EVENTS;
        CREATE VIEW COMPOSITE_EVENTS AS WITH RECURSIVE c(x) AS
          (SELECT 1 UNION ALL SELECT x + 1 FROM c) SELECT x AS id, 0 AS start, 0 AS cpu,
          0 AS threadState, MAIN AS globalTid, 1 AS cpuCycles FROM c;";
    let t = Tree::new(&[("q1", &format!("{DATA}{endless}")), ("q2", DATA)]);
    let started = Instant::now();
    let o = process_within(&[], &t.root, 60).expect("an endless view hung jobprof");
    let text = output_text(&o);
    assert!(started.elapsed() < Duration::from_secs(30), "{text}");
    assert_eq!(o.status.code(), Some(1), "{text}");
    assert!(
        text.contains("q1/jobprof: nsys report not processed")
            && text.contains("`COMPOSITE_EVENTS` is a view, not a plain table"),
        "{text}"
    );
    assert!(text.contains("q2/jobprof: nsys report processed"), "{text}");
    assert!(!t.out("q1", "summary.json").exists());
    assert!(t.out("q2", "stacks.folded").is_file());
}

/// A trigger on a table jobprof reads, and a virtual table under such a
/// name, refuse the report the same way.
#[test]
fn triggers_and_virtual_tables_under_read_names_refuse_the_report() {
    if !ready() {
        return;
    }
    let trigger = "CREATE TRIGGER t AFTER INSERT ON StringIds BEGIN SELECT 1; END;";
    let virt = "DROP TABLE NVTX_EVENTS; CREATE VIRTUAL TABLE NVTX_EVENTS USING rtree(id, a, b);";
    let t = Tree::new(&[
        ("q1", &format!("{DATA}{trigger}")),
        ("q2", &format!("{DATA}{virt}")),
    ]);
    let o = process_within(&[], &t.root, 60).expect("jobprof hung");
    let text = output_text(&o);
    assert_eq!(o.status.code(), Some(1), "{text}");
    assert!(
        text.contains("`StringIds` is a table with a trigger"),
        "{text}"
    );
    assert!(text.contains("`NVTX_EVENTS` is a virtual table"), "{text}");
}

/// An export too slow to read within `--nsys-read-limit` fails naming the
/// limit (the query is interrupted by SQLite, not waited out).
#[test]
fn an_export_past_the_read_limit_fails_naming_the_limit() {
    if !ready() {
        return;
    }
    // 2 million samples of one chain: seconds to read in a debug build.
    let many = "INSERT INTO COMPOSITE_EVENTS WITH RECURSIVE c(x) AS
          (SELECT 10 UNION ALL SELECT x + 1 FROM c WHERE x < 2000000)
          SELECT x, x, 0, 1, MAIN, 1 FROM c;";
    let t = Tree::new(&[("q1", &format!("{DATA}{many}")), ("q2", DATA)]);
    let started = Instant::now();
    let o = process_within(&["--nsys-read-limit", "300ms"], &t.root, 120).expect("jobprof hung");
    let text = output_text(&o);
    assert_eq!(o.status.code(), Some(1), "{text}");
    assert!(
        text.contains("reading the export took longer than") && text.contains("--nsys-read-limit"),
        "{text}"
    );
    assert!(text.contains("q2/jobprof: nsys report processed"), "{text}");
    assert!(started.elapsed() < Duration::from_secs(60), "{text}");
}

/// One sample whose chain has 60,000 rows, all at depth 0 or deeper, each
/// the same 16 KiB name: cut at 127 frames and 4096 bytes, each cut
/// counted in summary.json and the run's line.
#[test]
fn a_deep_chain_of_long_names_is_cut_and_counted() {
    if !ready() {
        return;
    }
    let depths = "WITH RECURSIVE c(x) AS (SELECT 0 UNION ALL SELECT x + 1 FROM c WHERE x < 29999)
           SELECT 9, 100, 5, x FROM c;";
    let bomb = format!(
        "INSERT INTO StringIds VALUES (100, '{}');
         INSERT INTO COMPOSITE_EVENTS VALUES (9, 900, 0, 1, MAIN, 1);
         INSERT INTO SAMPLING_CALLCHAINS (id, symbol, module, stackDepth) {depths}
         INSERT INTO SAMPLING_CALLCHAINS (id, symbol, module, stackDepth) {depths}",
        "n".repeat(16 << 10)
    );
    // Without the table's primary key, as a hostile export may be: every
    // depth twice, 30,000 repeated stackDepth rows.
    let schema = SCHEMA.replace(
        "stackDepth INTEGER NOT NULL, PRIMARY KEY (id, stackDepth));\nCREATE TABLE OSRT_API",
        "stackDepth INTEGER NOT NULL);\nCREATE TABLE OSRT_API",
    );
    assert_ne!(schema, SCHEMA);
    let t = Tree::with_schema(&[("q1", &format!("{DATA}{bomb}"))], &schema);
    let started = Instant::now();
    let o = process_within(&[], &t.root, 120).expect("jobprof hung on the bomb");
    let text = output_text(&o);
    assert!(o.status.success(), "{text}");
    assert!(started.elapsed() < Duration::from_secs(60), "{text}");
    assert!(
        text.contains("cut: 1 chain cut at 127 frames, 1 name cut at 4096 bytes, 30000 chain rows with a repeated stackDepth skipped"),
        "{text}"
    );
    let s = util::json(&t.out("q1", "summary.json"));
    assert_eq!(s["cut"]["deep_chains"], 1, "{s}");
    assert_eq!(s["cut"]["long_names"], 1, "{s}");
    assert_eq!(s["cut"]["repeated_depths"], 30000, "{s}");
    // Cut per NVTX range, the report's counts stay its own: each window's
    // pass reads the chain again, and those reads were counted too.
    let o = process_within(&["--force", "--slice-by", "nvtx:query"], &t.root, 120)
        .expect("jobprof hung on the bomb, sliced");
    assert!(o.status.success(), "{}", output_text(&o));
    for summary in [
        t.out("q1", "summary.json"),
        t.out("q1", "slices/query_iter2/summary.json"),
    ] {
        let s = util::json(&summary);
        assert_eq!(s["cut"]["deep_chains"], 1, "{}: {s}", summary.display());
        assert_eq!(
            s["cut"]["repeated_depths"],
            30000,
            "{}: {s}",
            summary.display()
        );
    }
    let folded = fs::read_to_string(t.out("q1", "stacks.folded")).unwrap();
    let deep = folded
        .lines()
        .find(|l| l.contains("nnnn"))
        .expect("the deep sample's stack");
    // The thread, then 127 frames; each name 4096 bytes and `...`.
    let frames: Vec<&str> = deep.rsplit_once(' ').unwrap().0.split(';').collect();
    assert_eq!(frames.len(), 128, "{}", &deep[..200]);
    assert!(frames[1..].iter().all(|f| f.len() == 4096 + 3));
    let total: u64 = folded
        .lines()
        .map(|l| l.rsplit_once(' ').unwrap().1.parse::<u64>().unwrap())
        .sum();
    assert_eq!(total, 5);
}

/// 30,000 OS runtime calls sharing one 30,000-frame chain: each chain is
/// read once and each stack's text built once, so this takes seconds, not
/// minutes (before: 77 s of CPU in a release build).
#[test]
fn many_calls_on_one_deep_chain_cost_the_export_not_calls_times_depth() {
    if !ready() {
        return;
    }
    let calls = "INSERT INTO OSRT_CALLCHAINS (id, symbol, module, stackDepth)
           WITH RECURSIVE c(x) AS (SELECT 0 UNION ALL SELECT x + 1 FROM c WHERE x < 29999)
           SELECT 7, 3, 5, x FROM c;
         INSERT INTO OSRT_API
           WITH RECURSIVE c(x) AS (SELECT 0 UNION ALL SELECT x + 1 FROM c WHERE x < 29999)
           SELECT 100000 + 10 * x, 100000 + 10 * x + 5, 27, MAIN, 12, 0, 0, 7 FROM c;";
    let t = Tree::new(&[("q1", &format!("{DATA}{calls}"))]);
    let started = Instant::now();
    let o = process_within(&[], &t.root, 120).expect("jobprof hung");
    let text = output_text(&o);
    assert!(o.status.success(), "{text}");
    assert!(started.elapsed() < Duration::from_secs(30), "{text}");
    let tsv = fs::read_to_string(t.out("q1", "osrt.tsv")).unwrap();
    // `read`: 1 call of DATA and the 30,000 added, 5 ns each.
    assert!(tsv.contains("read\t30001\t"), "{tsv}");
    let waits = fs::read_to_string(t.out("q1", "offcpu.folded")).unwrap();
    let deep = waits
        .lines()
        .find(|l| l.ends_with(" 150000"))
        .expect(&waits);
    assert_eq!(deep.split(';').count(), 1 + 127 + 1, "{deep}");
}

/// A name holding a newline, a count and an escape byte: the folded
/// stacks keep one line per stack and the report's true total, and no
/// output holds a raw control byte.
#[test]
fn a_name_cannot_forge_a_folded_line() {
    if !ready() {
        return;
    }
    let forged = "UPDATE StringIds SET value = 'leaf' || char(10) || 'forged;stack 1000000'
           || char(27) || '[31m' WHERE id = 3;";
    let t = Tree::new(&[("q1", &format!("{DATA}{forged}"))]);
    let o = process_within(&[], &t.root, 60).expect("jobprof hung");
    let text = output_text(&o);
    assert!(o.status.success(), "{text}");
    let folded = fs::read_to_string(t.out("q1", "stacks.folded")).unwrap();
    let counts: Vec<u64> = folded
        .lines()
        .map(|l| l.rsplit_once(' ').unwrap().1.parse().unwrap())
        .collect();
    assert_eq!(counts.iter().sum::<u64>(), 4, "{folded}");
    assert_eq!(counts.len(), 3, "{folded}");
    assert!(
        folded.contains(r"leaf\nforged;stack 1000000\u{1b}[31m"),
        "{folded}"
    );
    no_control_bytes(&t.q("q1").join("jobprof"));
    let s = util::json(&t.out("q1", "summary.json"));
    assert_eq!(s["samples"], 4);
}

/// The pid's open files point at `target`.
fn has_open(pid: u32, target: &Path) -> bool {
    fs::read_dir(format!("/proc/{pid}/fd"))
        .into_iter()
        .flatten()
        .flatten()
        .any(|e| fs::read_link(e.path()).is_ok_and(|l| l == target))
}

/// `jobprof process TARGET` on a tree whose q1 export is slow to read;
/// once jobprof holds the export open, `nobody` swaps `q1` for a link to
/// the root-only directory. Nothing may land there, and `out` (relative
/// to the renamed `q1.old`) must be the complete outputs.
fn swap_while_read(target: impl Fn(&Tree) -> PathBuf, out: &str) {
    let many = "INSERT INTO COMPOSITE_EVENTS WITH RECURSIVE c(x) AS
          (SELECT 10 UNION ALL SELECT x + 1 FROM c WHERE x < 1500000)
          SELECT x, x, 0, 1, MAIN, 1 FROM c;";
    let t = Tree::new(&[("q1", &format!("{DATA}{many}"))]);
    let q1 = t.q("q1");
    let sqlite = q1.join("nsys_worker_w0_q1.sqlite");
    let mut c = util::jobprof();
    c.arg("process").arg(target(&t)).env("PATH", "/nonexistent");
    let child = c
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let pid = child.id();
    let started = Instant::now();
    while !has_open(pid, &sqlite) && started.elapsed() < Duration::from_secs(60) {
        std::thread::sleep(Duration::from_millis(5));
    }
    assert!(has_open(pid, &sqlite), "jobprof never opened the export");
    let workers = q1.parent().unwrap();
    as_nobody(&format!(
        "cd {} && mv q1 q1.old && ln -s {} q1",
        workers.display(),
        t.secret.display()
    ));
    let o = wait_within(child, 120).expect("jobprof hung");
    let text = output_text(&o);
    let inside: Vec<_> = fs::read_dir(&t.secret).unwrap().collect();
    assert!(
        inside.is_empty(),
        "written into the root-only dir: {inside:?}\n{text}"
    );
    assert!(o.status.success(), "{text}");
    let moved = workers.join("q1.old").join(out);
    assert!(moved.join("summary.json").is_file(), "{text}");
    assert!(moved.join("stacks.folded").is_file(), "{text}");
}

/// While root reads a slow export, the worker swaps its query directory
/// for a link to a root-only directory: nothing is read or written there;
/// the outputs go to the directory that was opened (the one renamed).
#[test]
fn a_query_directory_swapped_while_read_redirects_no_write() {
    if !ready() {
        return;
    }
    swap_while_read(|t| t.root.clone(), "jobprof");
}

/// The same for a lone report: its directory swapped while the export is
/// read; `REPORT.nsys-rep.jobprof/` is written in the directory opened.
#[test]
fn a_lone_reports_directory_swapped_while_read_redirects_no_write() {
    if !ready() {
        return;
    }
    swap_while_read(
        |t| t.q("q1").join("nsys_worker_w0_q1.nsys-rep"),
        "nsys_worker_w0_q1.nsys-rep.jobprof",
    );
}

/// Without an export beside the report, `nsys export` runs with the rights
/// of the query directory's owner (here `nobody`), never root's; the
/// export it leaves in its private directory is read as any other.
#[test]
fn nsys_export_runs_with_the_query_directorys_owners_rights() {
    if !ready() {
        return;
    }
    let trusted = util::root_only_dir().expect("a directory only root can change");
    let t = Tree::new(&[("q1", DATA)]);
    let prepared = trusted.path().join("prepared.sqlite");
    fs::rename(t.q("q1").join("nsys_worker_w0_q1.sqlite"), &prepared).unwrap();
    let fake = trusted.path().join("nsys");
    fs::write(
        &fake,
        format!(
            "#!/bin/sh\n\
             if [ \"$1\" = --version ]; then echo 'NVIDIA Nsight Systems version 2022.4.2.1-fake'; exit 0; fi\n\
             # export --type sqlite --force-overwrite true -o OUT INPUT\n\
             /usr/bin/id -u > \"$(/usr/bin/dirname \"$8\")/exported-by\"\n\
             /bin/cp {} \"$7\"\n",
            prepared.display()
        ),
    )
    .unwrap();
    fs::set_permissions(&fake, fs::Permissions::from_mode(0o755)).unwrap();
    let o = util::jobprof()
        .arg("process")
        .arg(&t.root)
        .env("PATH", trusted.path())
        .output()
        .unwrap();
    let text = output_text(&o);
    assert!(o.status.success(), "{text}");
    let by = fs::read_to_string(t.q("q1").join("exported-by")).unwrap();
    assert_eq!(by.trim(), "65534", "nsys export ran as uid {by}");
    let s = util::json(&t.out("q1", "summary.json"));
    assert!(
        s["read_through"].as_str().unwrap().contains("nsys export"),
        "{s}"
    );
    assert_eq!(s["samples"], 4, "{s}");
}
