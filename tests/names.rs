//! Names never break a line (issue 55, item 4): control characters in a
//! frame, thread, module or call name are escaped one way
//! (`jobprof::sys::printable`, `\n`, `\r`, `\u{1b}`) in every output, so a
//! name cannot split a line of `stacks.folded` (the input of `diff` and
//! `trend`) to forge or hide weight, nor reach a page or a terminal raw.
//! docs/reliability.md lists the guarantee.

use std::collections::BTreeMap;
use std::fs;
use std::io::Read;
use std::path::{Path, PathBuf};

use crate::util::{self, copy_demo, jobprof, output_text};

/// The demo worker's leaf function, and what the attack renames it to in
/// the capture's own ELF (same length, so the file stays whole): read
/// as-is, its folded line would end in `\nf 9999999\n COUNT`, a stack `f`
/// of 9,999,999 samples.
const LEAF: &[u8] = b"demo_compare";
const FORGED_LEAF: &[u8] = b"x\nf 9999999\n";
const FORGED_LEAF_SHOWN: &str = "x\\nf 9999999\\n";
/// The worker's thread name, and its attacked version (`prctl(PR_SET_NAME)`
/// takes any bytes): an escape sequence, a newline and a carriage return.
const COMM: &[u8] = b"demo_worker";
const FORGED_COMM: &[u8] = b"w\x1b[2J\n\rdemo";
const FORGED_COMM_SHOWN: &str = "w\\u{1b}[2J\\n\\rdemo";

/// Every `from` in `data` (not preceded by `not_after`) becomes `to`, of
/// the same length; how many.
fn patch(data: &mut [u8], from: &[u8], to: &[u8], not_after: Option<u8>) -> usize {
    assert_eq!(from.len(), to.len());
    let mut n = 0;
    let mut i = 0;
    while let Some(at) = data[i..].windows(from.len()).position(|w| w == from) {
        let at = i + at;
        if not_after.is_none() || at == 0 || Some(data[at - 1]) != not_after {
            data[at..at + from.len()].copy_from_slice(to);
            n += 1;
        }
        i = at + from.len();
    }
    n
}

/// Where a control character (C0 but `allowed`, DEL, C1) is in `bytes`.
fn raw_control(bytes: &[u8], allowed: &[u8]) -> Option<usize> {
    bytes.iter().enumerate().position(|(i, &b)| {
        (b < 0x20 && !allowed.contains(&b))
            || b == 0x7f
            || (b == 0xc2 && matches!(bytes.get(i + 1), Some(0x80..=0x9f)))
    })
}

fn assert_no_raw_control(what: &str, bytes: &[u8], allowed: &[u8]) {
    if let Some(i) = raw_control(bytes, allowed) {
        let from = i.saturating_sub(60);
        panic!(
            "{what}: raw control byte {:#04x} at {i}: {:?}",
            bytes[i],
            String::from_utf8_lossy(&bytes[from..(i + 60).min(bytes.len())])
        );
    }
}

/// Every string in a JSON value.
fn json_strings(v: &serde_json::Value, out: &mut Vec<String>) {
    match v {
        serde_json::Value::String(s) => out.push(s.clone()),
        serde_json::Value::Array(a) => a.iter().for_each(|v| json_strings(v, out)),
        serde_json::Value::Object(o) => {
            for (k, v) in o {
                out.push(k.clone());
                json_strings(v, out);
            }
        }
        _ => {}
    }
}

/// The strings of a gzipped pprof profile, decoded as the library's own
/// tests decode it.
fn pprof_strings(path: &Path) -> Vec<String> {
    use prost::Message;
    let mut raw = Vec::new();
    flate2::read::GzDecoder::new(&util::read(path)[..])
        .read_to_end(&mut raw)
        .unwrap();
    jobprof::output::pprof::proto::Profile::decode(&raw[..])
        .unwrap()
        .string_table
}

/// Checks one output file: no raw control character (a line-based file's
/// newlines and a page's layout apart), inside compressed files and in
/// the strings of JSON and pprof files too; returns its text (decompressed).
fn check_output(path: &Path) -> String {
    let name = path.file_name().unwrap().to_string_lossy().into_owned();
    let what = path.display().to_string();
    if name.ends_with(".pb.gz") {
        let strings = pprof_strings(path);
        for s in &strings {
            assert_no_raw_control(&format!("{what}: string table"), s.as_bytes(), &[]);
        }
        return strings.join("\n");
    }
    let bytes = match () {
        _ if name.ends_with(".zst") => zstd::decode_all(&util::read(path)[..]).unwrap(),
        _ => util::read(path),
    };
    // Lines end in `\n`; TSV columns, pages and JSON may hold tabs.
    assert_no_raw_control(&what, &bytes, b"\n\t");
    let text = String::from_utf8(bytes).unwrap_or_else(|e| panic!("{what}: {e}"));
    if name.ends_with(".json") {
        let v: serde_json::Value = serde_json::from_str(&text).unwrap();
        let mut strings = Vec::new();
        json_strings(&v, &mut strings);
        for s in &strings {
            assert_no_raw_control(&format!("{what}: JSON string"), s.as_bytes(), &[]);
        }
    }
    if name.ends_with(".folded") || name.ends_with(".tsv") || name == "report.txt" {
        assert!(
            !text.contains('\t') || name.ends_with(".tsv"),
            "{what}: a tab"
        );
    }
    text
}

/// Every `stack count` line of folded text, checked to be one: a stack
/// and a count, nothing else, no line lost.
fn folded_lines(what: &str, text: &str) -> BTreeMap<String, u64> {
    let mut m = BTreeMap::new();
    for l in text.lines() {
        let (stack, n) = l
            .rsplit_once(' ')
            .unwrap_or_else(|| panic!("{what}: not a folded line: {l:?}"));
        let n: u64 = n
            .parse()
            .unwrap_or_else(|_| panic!("{what}: no count: {l:?}"));
        assert!(
            m.insert(stack.to_string(), n).is_none(),
            "{what}: {l:?} twice"
        );
    }
    m
}

/// Files under `dir`, recursively.
fn files_under(dir: &Path) -> Vec<PathBuf> {
    let mut out = Vec::new();
    for e in fs::read_dir(dir).unwrap() {
        let p = e.unwrap().path();
        if p.is_dir() {
            out.extend(files_under(&p));
        } else {
            out.push(p);
        }
    }
    out.sort();
    out
}

/// `jobprof process --formats all` on the demo result directory at `dir`.
fn process(dir: &Path) {
    let o = jobprof()
        .args(["process", "--formats", "all", "-q"])
        .arg(dir)
        .output()
        .unwrap();
    assert!(o.status.success(), "process: {}", output_text(&o));
}

#[test]
fn a_name_with_control_characters_never_breaks_a_line_of_any_output() {
    let t = tempfile::tempdir().unwrap();
    let (clean, forged) = (t.path().join("clean"), t.path().join("forged"));
    copy_demo(&clean);
    copy_demo(&forged);
    // The attack: a leaf function of the worker's own ELF (its symbol
    // table and its DWARF) and its threads' name (COMM records; not the
    // paths that end in the same name).
    let elf = forged.join("profiles/perf/worker_0/symfs/opt/jobprof-demo/demo_worker");
    let mut b = fs::read(&elf).unwrap();
    let mut leaf = LEAF.to_vec();
    leaf.push(0);
    let mut forged_leaf = FORGED_LEAF.to_vec();
    forged_leaf.push(0);
    assert!(patch(&mut b, &leaf, &forged_leaf, None) >= 1);
    fs::write(&elf, b).unwrap();
    let q = forged.join("profiles/perf/worker_0/q01");
    let mut comms = 0;
    for part in ["perf.data.part000", "perf.data.part001"] {
        let mut b = fs::read(q.join(part)).unwrap();
        let mut from = COMM.to_vec();
        from.push(0);
        let mut to = FORGED_COMM.to_vec();
        to.push(0);
        comms += patch(&mut b, &from, &to, Some(b'/'));
        fs::write(q.join(part), b).unwrap();
    }
    assert!(comms >= 1, "no COMM record patched");
    process(&clean);
    process(&forged);

    // stacks.folded: the clean run's lines, renamed; the same total.
    let cq = clean.join("profiles/perf/worker_0/q01");
    let clean_stacks = folded_lines("clean", &check_output(&cq.join("stacks.folded")));
    let forged_stacks = folded_lines("forged", &check_output(&q.join("stacks.folded")));
    let leaf = std::str::from_utf8(LEAF).unwrap();
    let comm = std::str::from_utf8(COMM).unwrap();
    let renamed: BTreeMap<String, u64> = clean_stacks
        .iter()
        .map(|(s, n)| {
            let s = s.replace(leaf, FORGED_LEAF_SHOWN);
            let s = match s.strip_prefix(comm) {
                Some(rest) => format!("{FORGED_COMM_SHOWN}{rest}"),
                None => s,
            };
            (s, *n)
        })
        .collect();
    assert_eq!(forged_stacks, renamed);
    assert!(
        forged_stacks.keys().any(|s| s.contains(FORGED_LEAF_SHOWN))
            && forged_stacks.keys().all(|s| !s.starts_with(comm)),
        "the attack reached no stack: {forged_stacks:?}"
    );
    let total: u64 = clean_stacks.values().sum();
    assert_eq!(util::folded_total(&q.join("stacks.folded")), total);

    // Every other output of the capture and of the job views: nothing raw,
    // and the names shown escaped.
    let mut seen = Vec::new();
    for f in files_under(&forged.join("profiles/perf")) {
        let name = f.file_name().unwrap().to_string_lossy().into_owned();
        let input = name.starts_with("perf.data")
            || name.ends_with(".log")
            || f.components().any(|c| c.as_os_str() == "symfs")
            || ["capture.json", "perf-shards.tsv", "perf-dropped-tids.tsv"]
                .contains(&name.as_str())
            || name.starts_with('.')
            || name == "kallsyms"
            || name.ends_with(".txt") && name != "report.txt" && name != "build-ids.txt"
            || name.ends_with(".maps")
            || name == "symbol-manifest.tsv";
        if input {
            continue;
        }
        let text = check_output(&f);
        if name.ends_with(".folded") {
            let lines = folded_lines(&name, &text);
            assert_eq!(lines.values().sum::<u64>(), total, "{}", f.display());
        }
        seen.push(name);
    }
    for want in [
        "stacks.folded",
        "flamegraph.svg",
        "flamegraph.html",
        "profile.speedscope.json",
        "profile.pb.gz",
        "report.txt",
        "summary.json",
        "perf.script.zst",
    ] {
        assert!(
            seen.iter().any(|s| s == want),
            "{want} not written: {seen:?}"
        );
    }
    let svg = fs::read_to_string(q.join("flamegraph.svg")).unwrap();
    assert!(
        svg.contains(FORGED_LEAF_SHOWN) && svg.contains("\\u{1b}[2J"),
        "svg"
    );
    let strings = pprof_strings(&q.join("profile.pb.gz"));
    assert!(
        strings.iter().any(|s| s == FORGED_LEAF_SHOWN),
        "{strings:?}"
    );
    let report = fs::read_to_string(q.join("report.txt")).unwrap();
    assert!(report.contains(FORGED_LEAF_SHOWN), "{report}");
    let archive = zstd::decode_all(&util::read(&q.join("perf.script.zst"))[..]).unwrap();
    let archive = String::from_utf8(archive).unwrap();
    assert!(archive.contains(FORGED_LEAF_SHOWN) && archive.contains(FORGED_COMM_SHOWN));
    assert!(!archive.lines().any(|l| l.starts_with("f 9999999")));

    // `diff` (and `trend`) read these files: BEFORE and AFTER keep their
    // totals, the forged stack `f` is nowhere.
    let d = t.path().join("d.folded");
    let o = jobprof()
        .arg("diff")
        .arg(cq.join("stacks.folded"))
        .arg(q.join("stacks.folded"))
        .arg("-o")
        .arg(&d)
        .output()
        .unwrap();
    assert!(o.status.success(), "diff: {}", output_text(&o));
    let text = check_output(&d);
    let (mut before, mut after) = (0u64, 0u64);
    for l in text.lines() {
        let mut w = l.rsplitn(3, ' ');
        after += w.next().unwrap().parse::<u64>().unwrap();
        before += w.next().unwrap().parse::<u64>().unwrap();
        let stack = w.next().unwrap();
        assert!(stack != "f" && !stack.starts_with("f;"), "{l:?}");
    }
    assert_eq!((before, after), (total, total));
}

/// `perf script` text whose thread, symbols and modules hold an escape
/// sequence, a carriage return, a C1 character and DEL.
const SCRIPT: &str = "w\u{1b}]0;pwn\u{7} 10 [000]     1.000000:          1 cpu-clock: \n\
    \t            1000 leaf\r\u{1b}[31m\u{9b}x+0x1 (/lib/li\u{7f}b.so)\n\
    \t            2000 main+0x2 (/bin/w)\n\
    \n\
    w\u{1b}]0;pwn\u{7} 10 [000]     1.000100:          1 cpu-clock: \n\
    \t            3000 [unknown] (/lib/odd\u{1b}\r.so)\n\
    \t            2000 main+0x2 (/bin/w)\n\
    \n";

/// The stacks `jobprof fold` makes of [`SCRIPT`].
fn script_stacks() -> BTreeMap<String, u64> {
    [
        ("w\\u{1b}]0;pwn\\u{7};main;leaf\\r\\u{1b}[31m\\u{9b}x", 1),
        ("w\\u{1b}]0;pwn\\u{7};main;[odd\\u{1b}\\r.so]", 1),
    ]
    .into_iter()
    .map(|(s, n)| (s.to_string(), n))
    .collect()
}

#[test]
fn fold_render_and_report_escape_control_characters_in_names() {
    let t = tempfile::tempdir().unwrap();
    let script = t.path().join("perf.txt");
    fs::write(&script, SCRIPT).unwrap();
    let run = |args: &[&std::ffi::OsStr]| {
        let o = jobprof().args(args).output().unwrap();
        assert!(o.status.success(), "{args:?}: {}", output_text(&o));
        o
    };
    let os = |s: &'static str| std::ffi::OsStr::new(s);

    // fold, whole and split by thread.
    let folded = t.path().join("stacks.folded");
    run(&[os("fold"), script.as_os_str(), os("-o"), folded.as_os_str()]);
    let want = script_stacks();
    assert_eq!(folded_lines("fold", &check_output(&folded)), want);
    let split = t.path().join("split");
    run(&[
        os("fold"),
        script.as_os_str(),
        os("--split-by"),
        os("comm"),
        os("--formats"),
        os("all"),
        os("-o"),
        split.as_os_str(),
    ]);
    let split_files = files_under(&split);
    assert!(split_files.len() >= 3, "{split_files:?}");
    for f in &split_files {
        let text = check_output(f);
        if f.extension().is_some_and(|e| e == "folded") {
            assert_eq!(folded_lines("split", &text), want);
        }
        if f.ends_with("index.tsv") {
            assert_eq!(text.lines().count(), 2, "{text}");
        }
    }

    // render of folded text another tool wrote, names raw: each format.
    let raw = t.path().join("raw.folded");
    fs::write(&raw, "w\u{1b};a\rb;c\u{9b}d\u{7f} 5\nw\u{1b};a\rb 3\n").unwrap();
    let raw_want: BTreeMap<String, u64> = [
        ("w\\u{1b};a\\rb;c\\u{9b}d\\u{7f}".to_string(), 5),
        ("w\\u{1b};a\\rb".to_string(), 3),
    ]
    .into_iter()
    .collect();
    for out in ["r.folded", "r.svg", "r.html", "r.json", "r.pb.gz"] {
        let p = t.path().join(out);
        run(&[os("render"), raw.as_os_str(), os("-o"), p.as_os_str()]);
        let text = check_output(&p);
        match out {
            "r.folded" => assert_eq!(folded_lines(out, &text), raw_want),
            "r.pb.gz" => assert!(text.lines().any(|s| s == "c\\u{9b}d\\u{7f}"), "{text}"),
            _ => assert!(text.contains("a\\\\rb") || text.contains("a\\rb"), "{out}"),
        }
    }

    // report, of the text and of the folded stacks.
    for input in [&script, &raw] {
        let report = t.path().join("report.txt");
        run(&[
            os("report"),
            input.as_os_str(),
            os("-o"),
            report.as_os_str(),
        ]);
        let text = check_output(&report);
        assert!(text.contains("\\u{9b}"), "{text}");
    }

    // diff of the raw file against the text's fold: totals kept, one line a
    // stack of either side.
    let d = t.path().join("d.folded");
    run(&[
        os("diff"),
        raw.as_os_str(),
        folded.as_os_str(),
        os("-o"),
        d.as_os_str(),
    ]);
    let text = check_output(&d);
    assert_eq!(text.lines().count(), raw_want.len() + want.len(), "{text}");
}
