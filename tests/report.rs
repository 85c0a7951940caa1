//! `report.txt` and `jobprof report`: checked against real `perf report
//! --stdio --no-children` on the old pipeline's captures (same top
//! functions, shares within 0.5 points, over all shards together), and
//! read from a capture directory, `perf script` text and folded stacks
//! alike, deterministic and 80 columns wide.

use std::collections::BTreeMap;
use std::ffi::OsStr;
use std::fs;
use std::path::{Path, PathBuf};
use std::process::Command;

use crate::util::{self, jobprof, output_text};
use crate::util::{copy_seed, seeds};

/// `(dso, symbol) -> percent` of all shards together, from `perf report
/// --no-children --show-total-period` of each shard (whose own
/// percentages are per shard): the periods are summed. `kallsyms`: the
/// kernel table jobprof named kernel frames from, given to perf too.
fn perf_report_shares(
    capture: &Path,
    symfs: &Path,
    kallsyms: Option<&Path>,
) -> BTreeMap<(String, String), f64> {
    let mut periods: BTreeMap<(String, String), u64> = BTreeMap::new();
    let mut shards: Vec<_> = fs::read_dir(capture)
        .unwrap()
        .flatten()
        .map(|e| e.path())
        .filter(|p| {
            let n = p.file_name().unwrap().to_string_lossy();
            n == "perf.data" || n.starts_with("perf.data.part")
        })
        .collect();
    shards.sort();
    assert!(!shards.is_empty());
    for shard in shards {
        let out = Command::new("perf")
            .args(["report", "--stdio", "--no-children", "--show-total-period"])
            .args([
                "-g",
                "none",
                "--percent-limit",
                "0",
                "--sort",
                "dso,sym",
                "--symfs",
            ])
            .arg(symfs)
            .args(
                kallsyms
                    .map(|k| [OsStr::new("--kallsyms"), k.as_os_str()])
                    .into_iter()
                    .flatten(),
            )
            .arg("-i")
            .arg(&shard)
            .output()
            .unwrap();
        let text = String::from_utf8_lossy(&out.stdout);
        for l in text
            .lines()
            .filter(|l| l.trim_start().starts_with(|c: char| c.is_ascii_digit()))
        {
            // `  97.92%    1509018024  presto_server  [.] burn`
            let f: Vec<&str> = l.split_whitespace().collect();
            if f.len() < 5 || !f[0].ends_with('%') {
                continue;
            }
            let period: u64 = f[1].parse().unwrap();
            let key = (f[2].to_string(), f[4..].join(" "));
            *periods.entry(key).or_default() += period;
        }
    }
    let total: u64 = periods.values().sum();
    periods
        .into_iter()
        .map(|(k, p)| (k, 100.0 * p as f64 / total as f64))
        .collect()
}

/// `(dso, symbol) -> percent` of a jobprof report's entries.
fn jobprof_shares(report: &str) -> BTreeMap<(String, String), f64> {
    let mut out = BTreeMap::new();
    for l in report.lines() {
        let f: Vec<&str> = l.split_whitespace().collect();
        if f.len() >= 4 && f[0].ends_with('%') && f[2].starts_with('[') && f[2].len() == 3 {
            let pct: f64 = f[0].trim_end_matches('%').parse().unwrap();
            out.insert((f[1].to_string(), f[3..].join(" ")), pct);
        }
    }
    out
}

/// The kernel table jobprof named capture `q`'s kernel frames from, when it
/// was this machine's (`summary.json` `kernel_symbols`): the capture's
/// kernel build id is the running kernel's.
fn live_kernel_table(q: &Path) -> Option<PathBuf> {
    let s: serde_json::Value =
        serde_json::from_slice(&fs::read(q.join("jobprof/summary.json")).unwrap()).unwrap();
    let from = s["kernel_symbols"].as_str()?;
    from.starts_with("/proc/kallsyms")
        .then(|| PathBuf::from("/proc/kallsyms"))
}

fn assert_like_perf_report(capture: &Path, symfs: &Path, kallsyms: Option<&Path>, report: &str) {
    let perf = perf_report_shares(capture, symfs, kallsyms);
    let ours = jobprof_shares(report);
    // The named functions perf reports at 0.5% or more (perf prints
    // unnamed ones as raw addresses, one entry each; jobprof one
    // `[unknown]` per DSO).
    let top: Vec<(&(String, String), &f64)> = perf
        .iter()
        .filter(|((_, s), p)| **p >= 0.5 && !s.contains("0x"))
        .collect();
    assert!(!top.is_empty(), "perf report found no named function");
    for (key, p) in top {
        let o = ours.get(key).copied().unwrap_or(0.0);
        assert!(
            (o - p).abs() <= 0.5,
            "{}: {key:?}: perf report {p:.2}%, jobprof {o:.2}%\n{report}",
            capture.display()
        );
    }
    for ((dso, sym), o) in &ours {
        if *o >= 0.5 && sym != "[unknown]" {
            let p = perf
                .get(&(dso.clone(), sym.clone()))
                .copied()
                .unwrap_or(0.0);
            assert!(
                (o - p).abs() <= 0.5,
                "{sym}: jobprof {o}%, perf report {p}%"
            );
        }
    }
}

#[test]
fn report_txt_matches_perf_report_over_all_shards_and_jobprof_report_prints_it() {
    let Some(seeds) = seeds() else { return };
    if !util::require(util::perf_available(), "perf") {
        return;
    }
    let tmp = tempfile::tempdir().unwrap();
    let a = copy_seed(&seeds, "result_dir_4242", tmp.path());
    let b = copy_seed(&seeds, "result_dir_4243", tmp.path());
    let out = jobprof().arg("process").arg(&a).arg(&b).output().unwrap();
    assert_eq!(out.status.code(), Some(0), "{}", output_text(&out));
    for (rd, q, shards) in [
        (&a, "Q1_iter1", 3),
        (&a, "Q2_iter1", 3),
        (&b, "Q5_iter1", 1),
    ] {
        let w = rd.join("profiles/perf/worker_0");
        let q = w.join(q);
        let report = fs::read_to_string(q.join("jobprof/report.txt")).unwrap();
        assert!(
            report.contains(&format!("{shards} shard(s) together"))
                && report.contains("of event 'cpu-clock'")
                && report.contains("# Window: ")
                && report.contains("named leaf"),
            "{report}"
        );
        assert!(report.lines().all(|l| l.chars().count() <= 80), "{report}");
        let kallsyms = live_kernel_table(&q);
        assert_like_perf_report(&q, &w.join("symfs"), kallsyms.as_deref(), &report);
        // `jobprof report DIR` prints the same, every time.
        let printed = jobprof().arg("report").arg(&q).output().unwrap();
        assert_eq!(printed.status.code(), Some(0), "{}", output_text(&printed));
        assert_eq!(String::from_utf8_lossy(&printed.stdout), report);
    }
    let q1 = a.join("profiles/perf/worker_0/Q1_iter1");
    // From the old pipeline's perf.script.gz (all shards in one text) and
    // from folded stacks: the same functions.
    let gz = jobprof()
        .arg("report")
        .arg(q1.join("perf.script.gz"))
        .output()
        .unwrap();
    assert_eq!(gz.status.code(), Some(0), "{}", output_text(&gz));
    let gz = String::from_utf8_lossy(&gz.stdout);
    // (Its text has no kernel names: perf report gets no kernel table.)
    assert_like_perf_report(&q1, &a.join("profiles/perf/worker_0/symfs"), None, &gz);
    let folded = jobprof()
        .args(["report", "--limit", "1"])
        .arg(q1.join("jobprof/stacks.folded"))
        .output()
        .unwrap();
    let folded = String::from_utf8_lossy(&folded.stdout);
    assert!(
        folded.contains("97.92%  -") && folded.contains("burn"),
        "{folded}"
    );
    assert_eq!(
        folded.matches("[.] ").count() + folded.matches("[k] ").count(),
        1
    );
    assert!(folded.contains("more function(s)"), "{folded}");
    // Not a profile: exit 2, the file named.
    let bad = tmp.path().join("notes.txt");
    fs::write(&bad, "hello\n").unwrap();
    let out = jobprof().arg("report").arg(&bad).output().unwrap();
    assert_eq!(out.status.code(), Some(2), "{}", output_text(&out));
    assert!(util::stderr(&out).contains("notes.txt"));
}

/// `perf script` of a `perf record` without `-g`: one line per sample, the
/// sampled frame on the header line, the command name right-aligned.
const NO_CALL_GRAPH: &str = "\
              sh  6837  1928.639501:     250000 cpu-clock:pppH:      7ff57a65d389 update_active+0x219 (/usr/lib/ld-linux-x86-64.so.2)
            gzip  6840  1928.639744:     250000 cpu-clock:pppH:      55d0c0a1b2c3 deflate_slow+0x122 (/usr/bin/gzip)
            gzip  6840  1928.639992:     250000 cpu-clock:pppH:  ffffffff8162d03d __mmap_region+0x2d ([kernel.kallsyms])
";

/// Text without call graphs gets one answer: `fold` and `report` both read
/// its samples (the sampled function alone) and both warn, naming `-g`.
#[test]
fn text_without_call_graphs_is_folded_and_reported_with_a_warning_naming_g() {
    let t = tempfile::tempdir().unwrap();
    let text = t.path().join("nog.txt");
    fs::write(&text, NO_CALL_GRAPH).unwrap();
    let fold = jobprof().arg("fold").arg(&text).output().unwrap();
    util::ok(&fold);
    assert_eq!(
        util::stdout(&fold),
        "# counts: ns\ngzip;__mmap_region 250000\ngzip;deflate_slow 250000\nsh;update_active 250000\n"
    );
    let warning = "3 of 3 sample(s) have no call graph (recorded without `perf record -g`)";
    assert!(
        util::stderr(&fold).contains(warning),
        "{}",
        output_text(&fold)
    );
    let report = jobprof().arg("report").arg(&text).output().unwrap();
    util::ok(&report);
    let out = util::stdout(&report);
    assert!(
        out.contains("# Samples: 3  of event 'cpu-clock:pppH'"),
        "{out}"
    );
    assert!(
        out.contains("deflate_slow") && out.contains("update_active"),
        "{out}"
    );
    let header: String = out.lines().take(8).collect::<Vec<_>>().join(" ");
    assert!(header.replace("#   ", "").contains(warning), "{out}");
    assert!(out.lines().all(|l| l.chars().count() <= 80), "{out}");
}

/// Folded input with a line that is not `stack COUNT`: reported as
/// `render` and `diff` do (a warning naming the file, exit 1), not skipped
/// silently with exit 0 (docs/exit-codes.md).
#[test]
fn report_on_folded_input_with_bad_lines_warns_and_exits_1() {
    let t = tempfile::tempdir().unwrap();
    let f = t.path().join("mix.folded");
    fs::write(&f, "w;main;work 3\nthis is no stack line\nw;main;idle 1\n").unwrap();
    let o = jobprof().arg("report").arg(&f).output().unwrap();
    assert_eq!(o.status.code(), Some(1), "{}", output_text(&o));
    let err = util::stderr(&o);
    assert!(
        err.contains(&f.display().to_string()) && err.contains("1 line(s)"),
        "{err}"
    );
    assert!(util::stdout(&o).contains("work"), "{}", output_text(&o));
    // A clean file: 0.
    fs::write(&f, "w;main;work 3\n").unwrap();
    let o = jobprof().arg("report").arg(&f).output().unwrap();
    assert_eq!(o.status.code(), Some(0), "{}", output_text(&o));
}

/// The first entry of a `perf report --stdio` style table (perf's or
/// jobprof's): its share as printed (`98.48`) and its symbol, after `[.] `
/// or `[k] `.
fn top_entry(report: &str) -> Option<(String, String)> {
    report
        .lines()
        .filter(|l| l.trim_start().starts_with(|c: char| c.is_ascii_digit()))
        .find_map(|l| {
            let (_, sym) = l.split_once("] ")?;
            let pct = l.split_whitespace().next()?.strip_suffix('%')?;
            Some((pct.to_string(), sym.trim().to_string()))
        })
}

/// A memcpy loop recorded with `--call-graph dwarf`: under libc's debug
/// info perf 6.1 prints the sampled address's line as inlined alone
/// (`__memcpy_avx512_unaligned_erms (inlined)`), and `perf report
/// --no-children` charges the ELF symbol (`__memmove_avx512_unaligned_erms`).
/// `jobprof report`, `report.txt` and `summary.json`'s `top_self` name the
/// same function (they gave the caller `copyit`, and the inlined name).
#[test]
fn an_inlined_leaf_is_charged_to_the_function_perf_report_names() {
    if !util::require(util::perf_can_record(), "perf record (root)") {
        return;
    }
    let exe = util::program(
        "memcpy_loop",
        "tests/programs/memcpy_loop.c",
        &["-O2", "-g"],
    );
    if !util::require(exe.is_some(), "gcc (tests/programs/memcpy_loop.c)") {
        return;
    }
    let exe = exe.unwrap();
    let t = tempfile::tempdir().unwrap();
    let data = t.path().join("perf.data");
    let rec = Command::new("perf")
        .args(["record", "-q", "-F", "999", "--call-graph", "dwarf", "-o"])
        .arg(&data)
        .arg(&exe)
        .arg("1")
        .output()
        .unwrap();
    assert!(rec.status.success(), "{}", output_text(&rec));
    let perf = Command::new("perf")
        .args(["report", "--no-children", "--stdio", "-i"])
        .arg(&data)
        .output()
        .unwrap();
    assert!(perf.status.success(), "{}", output_text(&perf));
    let perf = String::from_utf8_lossy(&perf.stdout);
    let want = top_entry(&perf).unwrap_or_else(|| panic!("no entry in perf report:\n{perf}"));
    assert!(
        want.1.contains("mem"),
        "perf report's top is not memcpy's:\n{perf}"
    );

    let printed = jobprof().arg("report").arg(&data).output().unwrap();
    assert_eq!(printed.status.code(), Some(0), "{}", output_text(&printed));
    let printed = util::stdout(&printed);
    let out = t.path().join("out");
    let p = jobprof()
        .args(["process", "-o"])
        .arg(&out)
        .arg(&data)
        .output()
        .unwrap();
    assert_eq!(p.status.code(), Some(0), "{}", output_text(&p));
    let report_txt = fs::read_to_string(out.join("report.txt")).unwrap();
    let summary = util::json(&out.join("summary.json"));
    // One shard: perf report's shares are jobprof's, to the printed digit.
    let top_self = &summary["top_self"][0];
    let figures = [
        ("jobprof report", top_entry(&printed)),
        ("report.txt", top_entry(&report_txt)),
        (
            "summary.json top_self",
            top_self["percent"].as_f64().and_then(|p| {
                let name = top_self["name"].as_str()?;
                Some((format!("{p:.2}"), name.to_string()))
            }),
        ),
    ];
    for (what, got) in figures {
        assert_eq!(
            got.as_ref(),
            Some(&want),
            "{what} disagrees with perf report --no-children\nperf:\n{perf}\n\
             jobprof report:\n{printed}\nreport.txt:\n{report_txt}"
        );
    }
}
