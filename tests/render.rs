//! `jobprof render`, `jobprof diff` and `jobprof fold --split-by`: the SVG
//! parsed as XML, the HTML checked for network references and driven in a
//! real headless Chromium, speedscope JSON read back, differential colours of
//! inner frames, bad input reported with file:line, and per-thread splits of
//! synthetic and real `perf` captures (folding with 1 and N threads).

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};

use quick_xml::events::Event;
use quick_xml::Reader;

use jobprof::output::render::speedscope;

use crate::util;
use crate::util::{dump_dom, have};
use crate::util::{folded_total, jobprof, stderr};

fn run(args: &[&std::ffi::OsStr]) -> Output {
    jobprof().args(args).output().unwrap()
}

fn os(s: &str) -> &std::ffi::OsStr {
    s.as_ref()
}

fn write(dir: &Path, name: &str, text: &str) -> PathBuf {
    let p = dir.join(name);
    std::fs::write(&p, text).unwrap();
    p
}

/// A small profile with a C++ name, a Rust generic, a `main`/`main.cold`
/// pair that a text sort would interleave, and a name with a URL in it.
const PROFILE: &str = "\
app;main;parse_query;tokenize 40
app;main;parse_query 10
app;main;(anonymous namespace)::plan_join 25
app;main;run<alloc::vec::Vec<u8>> 20
app;main.cold;abort_slow 3
app;main;fetch;http://example.invalid/x 2
";

/// One frame of an SVG flamegraph: its tooltip and fill colour.
#[derive(Debug, Clone)]
pub(crate) struct SvgFrame {
    pub(crate) title: String,
    pub(crate) fill: String,
    pub(crate) width_samples: u64,
}

/// Parses the SVG completely (an XML error fails the test) and returns the
/// frames and whether a non-empty script was present.
pub(crate) fn parse_svg(bytes: &[u8]) -> (Vec<SvgFrame>, bool) {
    let mut reader = Reader::from_reader(bytes);
    let mut frames = Vec::new();
    let mut script = false;
    let mut in_title = false;
    let mut in_script = false;
    let mut title = String::new();
    loop {
        match reader.read_event().expect("the SVG is well-formed XML") {
            Event::Eof => break,
            Event::Start(e) if e.name().as_ref() == b"title" => {
                in_title = true;
                title.clear();
            }
            Event::End(e) if e.name().as_ref() == b"title" => in_title = false,
            Event::Start(e) if e.name().as_ref() == b"script" => in_script = true,
            Event::End(e) if e.name().as_ref() == b"script" => in_script = false,
            Event::CData(c) if in_script => {
                script |= String::from_utf8_lossy(&c).contains("function zoom(");
            }
            Event::Text(t) if in_title => title.push_str(&t.decode().unwrap()),
            Event::GeneralRef(r) if in_title => {
                let name = r.decode().unwrap();
                title.push_str(match name.as_ref() {
                    "lt" => "<",
                    "gt" => ">",
                    "amp" => "&",
                    "quot" => "\"",
                    "apos" => "'",
                    other => panic!("unexpected entity &{other};"),
                });
            }
            Event::Empty(e) if e.name().as_ref() == b"rect" => {
                let get = |k: &str| {
                    e.try_get_attribute(k)
                        .unwrap()
                        .map(|a| String::from_utf8_lossy(&a.value).into_owned())
                };
                if let Some(w) = get("fg:w") {
                    frames.push(SvgFrame {
                        title: title.clone(),
                        fill: get("fill").unwrap(),
                        width_samples: w.parse().unwrap(),
                    });
                }
            }
            _ => {}
        }
    }
    (frames, script)
}

pub(crate) fn frames_named<'a>(frames: &'a [SvgFrame], name: &str) -> Vec<&'a SvgFrame> {
    let prefix = format!("{name} (");
    frames
        .iter()
        .filter(|f| f.title.starts_with(&prefix))
        .collect()
}

/// Renders PROFILE to `name` in a temp dir with extra args.
fn render_profile(dir: &Path, name: &str, extra: &[&str]) -> (Output, PathBuf) {
    let input = write(dir, "in.folded", PROFILE);
    let out = dir.join(name);
    let mut args = vec![os("render"), input.as_os_str(), os("-o"), out.as_os_str()];
    args.extend(extra.iter().map(|s| os(s)));
    (run(&args), out)
}

#[test]
fn svg_is_well_formed_with_names_tooltips_and_script() {
    let dir = tempfile::tempdir().unwrap();
    let (o, out) = render_profile(dir.path(), "f.svg", &["--title", "job 7 · worker 0 · q1"]);
    assert!(o.status.success(), "{}", stderr(&o));
    let svg = util::read(&out);
    let (frames, script) = parse_svg(&svg);
    assert!(script, "the SVG carries inferno's script (zoom, search)");
    let text = String::from_utf8_lossy(&svg);
    assert!(text.contains("job 7 · worker 0 · q1"));
    for name in [
        "tokenize",
        "parse_query",
        "(anonymous namespace)::plan_join",
        "run<alloc::vec::Vec<u8>>",
        "abort_slow",
    ] {
        assert_eq!(frames_named(&frames, name).len(), 1, "{name}");
    }
    // Tooltips carry count and percentage.
    let tok = frames_named(&frames, "tokenize")[0];
    assert_eq!(tok.width_samples, 40);
    assert!(tok.title.contains("40 samples, 40.00%"), "{}", tok.title);
    // One frame per call path: `main` is not split around `main.cold`.
    assert_eq!(frames_named(&frames, "main").len(), 1);
    assert_eq!(frames_named(&frames, "main")[0].width_samples, 97);
}

#[test]
fn same_input_renders_the_same_bytes() {
    let dir = tempfile::tempdir().unwrap();
    let (_, a) = render_profile(dir.path(), "a.svg", &[]);
    let (_, b) = render_profile(dir.path(), "b.svg", &[]);
    assert_eq!(util::read(&a), util::read(&b));
}

#[test]
fn options_reach_the_svg() {
    let dir = tempfile::tempdir().unwrap();
    let (o, out) = render_profile(
        dir.path(),
        "f.svg",
        &[
            "--width",
            "800",
            "--inverted",
            "--colors",
            "java",
            "--minwidth",
            "5",
        ],
    );
    assert!(o.status.success(), "{}", stderr(&o));
    let text = String::from_utf8(util::read(&out)).unwrap();
    assert!(text.contains(r#"width="800""#));
    assert!(text.contains("var inverted = true;"));
    let (frames, _) = parse_svg(text.as_bytes());
    // 3 of 100 samples is under 5%: left out.
    assert!(frames_named(&frames, "abort_slow").is_empty());
    assert_eq!(frames_named(&frames, "tokenize").len(), 1);
}

/// Removes `xmlns` attributes (namespace names, never fetched).
fn without_xmlns(html: &str) -> String {
    let mut out = String::new();
    let mut rest = html;
    while let Some(i) = rest.find(" xmlns") {
        out.push_str(&rest[..i]);
        let after = &rest[i + 1..];
        let q1 = after.find('"').unwrap();
        let q2 = after[q1 + 1..].find('"').unwrap();
        rest = &after[q1 + 1 + q2 + 1..];
    }
    out.push_str(rest);
    out
}

#[test]
fn html_is_one_offline_page_around_the_svg() {
    let dir = tempfile::tempdir().unwrap();
    let (o, out) = render_profile(dir.path(), "f.html", &["--title", "see https://x.invalid"]);
    assert!(o.status.success(), "{}", stderr(&o));
    let html = String::from_utf8(util::read(&out)).unwrap();
    assert!(html.starts_with("<!DOCTYPE html>"));
    assert!(html.contains("<svg") && html.contains(r#"id="frames""#));
    assert!(html.contains("function zoom(") && html.contains("function search("));
    assert!(html.contains(r#"id="jp-search""#) && html.contains(r#"id="jp-reset""#));
    assert!(html.contains("tokenize"));
    let stripped = without_xmlns(&html);
    for needle in [
        "http://", "https://", "src=", "href=", "<link", "@import", "<iframe",
    ] {
        assert!(!stripped.contains(needle), "the page contains {needle:?}");
    }
    // The only url() is the SVG's own gradient.
    assert_eq!(stripped.matches("url(").count(), 1);
    assert!(stripped.contains("url(#background)"));
    // The XML prolog (with its DTD URL) is gone; the page is still one
    // document.
    assert!(!html.contains("<?xml") && !html.contains("<!DOCTYPE svg"));
    assert_eq!(html.matches("<html").count(), 1);
}

#[test]
fn speedscope_json_is_consistent_with_the_input() {
    let dir = tempfile::tempdir().unwrap();
    let (o, out) = render_profile(dir.path(), "p.json", &["--title", "q1"]);
    assert!(o.status.success(), "{}", stderr(&o));
    let bytes = util::read(&out);
    let v: serde_json::Value = serde_json::from_slice(&bytes).unwrap();
    assert_eq!(v["$schema"], speedscope::SCHEMA);
    let f: speedscope::File = serde_json::from_slice(&bytes).unwrap();
    assert_eq!(f.profiles.len(), 1);
    let p = &f.profiles[0];
    assert_eq!((p.kind.as_str(), p.unit.as_str()), ("sampled", "none"));
    assert_eq!(p.samples.len(), p.weights.len());
    assert_eq!(p.start_value, 0);
    assert_eq!(p.end_value, p.weights.iter().sum::<u64>());
    assert_eq!(p.end_value, 100);
    let mut names = std::collections::HashSet::new();
    for fr in &f.shared.frames {
        assert!(names.insert(fr.name.as_str()), "frame {} twice", fr.name);
    }
    // Rebuild the stacks from the indexes: exactly the input.
    let mut got: BTreeMap<String, u64> = BTreeMap::new();
    for (s, w) in p.samples.iter().zip(&p.weights) {
        let stack: Vec<&str> = s
            .iter()
            .map(|&i| f.shared.frames[i].name.as_str())
            .collect();
        *got.entry(stack.join(";")).or_default() += w;
    }
    let want: BTreeMap<String, u64> = PROFILE
        .lines()
        .map(|l| {
            let (s, c) = l.rsplit_once(' ').unwrap();
            (s.to_string(), c.parse().unwrap())
        })
        .collect();
    assert_eq!(got, want);
}

#[test]
fn several_inputs_are_merged() {
    let dir = tempfile::tempdir().unwrap();
    let a = write(dir.path(), "a.folded", "x;y 1\nx;z 2\n");
    let b = write(dir.path(), "b.folded", "x;y 3\nw 4\n");
    let out = dir.path().join("m.folded");
    let o = run(&[
        os("render"),
        a.as_os_str(),
        b.as_os_str(),
        os("-o"),
        out.as_os_str(),
    ]);
    assert!(o.status.success(), "{}", stderr(&o));
    assert_eq!(
        std::fs::read_to_string(&out).unwrap(),
        "w 4\nx;y 4\nx;z 2\n"
    );
    // `-o -` writes to stdout; the format is then given explicitly.
    let o = run(&[
        os("render"),
        a.as_os_str(),
        os("-o"),
        os("-"),
        os("--format"),
        os("folded"),
    ]);
    assert!(o.status.success(), "{}", stderr(&o));
    assert_eq!(String::from_utf8_lossy(&o.stdout), "x;y 1\nx;z 2\n");
}

#[test]
fn bad_lines_are_reported_with_file_and_line() {
    let dir = tempfile::tempdir().unwrap();
    let input = write(
        dir.path(),
        "in.folded",
        "# a comment\na;b 3\nno count here\n\na;c 1.5\na;d 2\n",
    );
    let out = dir.path().join("f.svg");
    let o = run(&[os("render"), input.as_os_str(), os("-o"), out.as_os_str()]);
    let err = stderr(&o);
    // Rendered, but partial: exit code 1 and both lines named.
    assert_eq!(o.status.code(), Some(1), "{err}");
    assert!(
        err.contains("in.folded:3: the last word is not a count"),
        "{err}"
    );
    assert!(err.contains("in.folded:5: fractional count"), "{err}");
    let (frames, _) = parse_svg(&util::read(&out));
    assert_eq!(frames_named(&frames, "a")[0].width_samples, 5);

    // Nothing usable: usage error naming the first bad line, no output.
    let junk = write(dir.path(), "junk.folded", "hello\nworld\n");
    let out2 = dir.path().join("g.svg");
    let o = run(&[os("render"), junk.as_os_str(), os("-o"), out2.as_os_str()]);
    assert_eq!(o.status.code(), Some(2));
    assert!(stderr(&o).contains("junk.folded:1:"), "{}", stderr(&o));
    assert!(!out2.exists());

    // Binary input and missing files: exit 2 with the path.
    let bin = dir.path().join("bin.folded");
    std::fs::write(&bin, b"PERFILE2\0\0\0").unwrap();
    let o = run(&[os("render"), bin.as_os_str(), os("-o"), out2.as_os_str()]);
    assert_eq!(o.status.code(), Some(2));
    assert!(stderr(&o).contains("perf.data"), "{}", stderr(&o));
    let o = run(&[
        os("render"),
        os("/nonexistent/x.folded"),
        os("-o"),
        out2.as_os_str(),
    ]);
    assert_eq!(o.status.code(), Some(2));
    assert!(stderr(&o).contains("/nonexistent/x.folded"));
    // Only the temp-file-free results are in the directory.
    let names: Vec<String> = std::fs::read_dir(dir.path())
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    assert!(names.iter().all(|n| !n.ends_with(".tmp")), "{names:?}");
}

#[test]
fn usage_errors_exit_2() {
    let dir = tempfile::tempdir().unwrap();
    let (o, _) = render_profile(dir.path(), "f.png", &[]);
    assert_eq!(o.status.code(), Some(2));
    assert!(stderr(&o).contains("--format"), "{}", stderr(&o));
    let (o, _) = render_profile(dir.path(), "f.svg", &["--colors", "plaid"]);
    assert_eq!(o.status.code(), Some(2));
    assert!(stderr(&o).contains("plaid"));
    let (o, out) = render_profile(dir.path(), "f.out", &["--format", "speedscope"]);
    assert!(o.status.success(), "{}", stderr(&o));
    serde_json::from_slice::<speedscope::File>(&util::read(&out)).unwrap();
    // The output may not be an input.
    let input = dir.path().join("in.folded");
    let o = run(&[os("render"), input.as_os_str(), os("-o"), input.as_os_str()]);
    assert_eq!(o.status.code(), Some(2));
    assert_eq!(std::fs::read_to_string(&input).unwrap(), PROFILE);
}

fn diff(dir: &Path, before: &str, after: &str, name: &str, extra: &[&str]) -> (Output, PathBuf) {
    let b = write(dir, "before.folded", before);
    let a = write(dir, "after.folded", after);
    let out = dir.join(name);
    let mut args = vec![
        os("diff"),
        b.as_os_str(),
        a.as_os_str(),
        os("-o"),
        out.as_os_str(),
    ];
    args.extend(extra.iter().map(|s| os(s)));
    (run(&args), out)
}

fn rgb(fill: &str) -> (u8, u8, u8) {
    let inner = fill
        .strip_prefix("rgb(")
        .unwrap()
        .strip_suffix(')')
        .unwrap();
    let v: Vec<u8> = inner.split(',').map(|x| x.parse().unwrap()).collect();
    (v[0], v[1], v[2])
}

pub(crate) fn is_red(fill: &str) -> bool {
    let (r, g, b) = rgb(fill);
    r == 255 && g == b && g < 210
}

pub(crate) fn is_blue(fill: &str) -> bool {
    let (r, g, b) = rgb(fill);
    b == 255 && r == g && r < 210
}

pub(crate) fn is_grey(fill: &str) -> bool {
    let (r, g, b) = rgb(fill);
    r == g && g == b
}

#[test]
fn diff_colours_inner_frames_by_their_total() {
    // `a` has self time (unchanged) and a callee that doubled: its total
    // grew by 10 although its own line did not change. `c` only shrank
    // through its callee. `main` is unchanged overall.
    let before = "main;a 10\nmain;a;x 10\nmain;c;y 20\n";
    let after = "main;a 10\nmain;a;x 20\nmain;c;y 10\n";
    let dir = tempfile::tempdir().unwrap();
    let (o, out) = diff(dir.path(), before, after, "d.svg", &[]);
    assert!(o.status.success(), "{}", stderr(&o));
    let (frames, script) = parse_svg(&util::read(&out));
    assert!(script);
    let a = frames_named(&frames, "a")[0];
    assert!(is_red(&a.fill), "{a:?}");
    assert!(a.title.contains("before 20, +10 samples"), "{}", a.title);
    let c = frames_named(&frames, "c")[0];
    assert!(is_blue(&c.fill), "{c:?}");
    assert!(c.title.contains("before 20, -10 samples"), "{}", c.title);
    let main = frames_named(&frames, "main")[0];
    assert!(is_grey(&main.fill), "{main:?}");
    assert!(
        main.title.contains("before 40, 0 samples"),
        "{}",
        main.title
    );

    // inferno's own differential mode, on the same data, leaves `a` neutral:
    // the case this command exists for.
    let lines = ["main;a 10 10", "main;a;x 10 20", "main;c;y 20 10"];
    let mut opts = inferno::flamegraph::Options::default();
    let mut svg = Vec::new();
    inferno::flamegraph::from_lines(&mut opts, lines, &mut svg).unwrap();
    let (inf, _) = parse_svg(&svg);
    let inf_a = inf.iter().find(|f| f.title.starts_with("a (")).unwrap();
    assert!(
        !is_red(&inf_a.fill),
        "inferno now colours inner frames: {inf_a:?}"
    );
}

/// Issue 58, item 5: two profiles of different length are compared by
/// shares by default (AFTER ran twice as long with the same shape: nothing
/// changed), the page and stderr saying both raw totals and the scale; a
/// run half as long was blue all over. `--no-normalize` compares the raw
/// counts, and says that every frame takes the colour of the total's
/// change.
#[test]
fn diff_of_runs_of_different_length_is_normalized_by_default() {
    let before = "main;f 10\nmain;g 30\n";
    let after = "main;f 20\nmain;g 60\n";
    let dir = tempfile::tempdir().unwrap();
    for extra in [&[][..], &["--normalize"][..]] {
        let (o, out) = diff(dir.path(), before, after, "n.svg", extra);
        assert!(o.status.success(), "{}", stderr(&o));
        let (frames, _) = parse_svg(&util::read(&out));
        assert!(
            frames.iter().all(|f| is_grey(&f.fill)),
            "{extra:?}: {frames:?}"
        );
        assert!(
            stderr(&o).contains("BEFORE 40 samples, AFTER 80 samples: BEFORE scaled by 2.0000"),
            "{}",
            stderr(&o)
        );
    }
    let (o, out) = diff(dir.path(), after, before, "n.html", &[]);
    assert!(o.status.success(), "{}", stderr(&o));
    let page = std::fs::read_to_string(out).unwrap();
    assert!(
        page.contains("BEFORE 80 samples, AFTER 40 samples: BEFORE scaled by 0.5000"),
        "the raw totals are not in the page"
    );
    let (o, out) = diff(dir.path(), before, after, "raw.svg", &["--no-normalize"]);
    assert!(o.status.success());
    let (frames, _) = parse_svg(&util::read(&out));
    assert!(is_red(&frames_named(&frames, "g")[0].fill));
    assert!(
        stderr(&o).contains("AFTER's total is 200% of BEFORE's"),
        "{}",
        stderr(&o)
    );
    // The folded form is FlameGraph's `stack before after`: data, raw
    // unless --normalize (difffolded.pl normalizes with its own -n).
    let (o, out) = diff(dir.path(), before, after, "raw.folded", &[]);
    assert!(o.status.success());
    assert_eq!(
        std::fs::read_to_string(out).unwrap(),
        "main;f 10 20\nmain;g 30 60\n"
    );
    let (o, out) = diff(dir.path(), before, after, "n.folded", &["--normalize"]);
    assert!(o.status.success());
    assert_eq!(
        std::fs::read_to_string(out).unwrap(),
        "main;f 20 20\nmain;g 60 60\n"
    );
    let (o, _) = diff(
        dir.path(),
        before,
        after,
        "x.svg",
        &["--normalize", "--no-normalize"],
    );
    assert_eq!(o.status.code(), Some(2));
}

#[test]
fn diff_html_is_offline_and_vanished_code_is_reported() {
    let dir = tempfile::tempdir().unwrap();
    let (o, out) = diff(
        dir.path(),
        "main;old 5\nmain;f 5\n",
        "main;f 5\n",
        "d.html",
        &[],
    );
    assert!(o.status.success(), "{}", stderr(&o));
    assert!(
        stderr(&o).contains("5 of BEFORE's 10 samples"),
        "{}",
        stderr(&o)
    );
    let html = String::from_utf8(util::read(&out)).unwrap();
    let stripped = without_xmlns(&html);
    assert!(!stripped.contains("http://") && !stripped.contains("https://"));
    assert!(html.contains("red = grew"));
    let (o, _) = diff(dir.path(), "a 1\n", "a 1\n", "d.json", &[]);
    assert_eq!(o.status.code(), Some(2));
}

// ---------------------------------------------------------------------------
// fold --split-by

/// perf script text of `threads` threads of one process (pid 100) and one
/// thread of another process, each thread with its own call path and
/// period per sample.
fn perf_script_threads(threads: u32) -> (String, BTreeMap<String, u64>) {
    let mut text = String::new();
    let mut totals = BTreeMap::new();
    for t in 0..threads {
        let tid = 100 + t;
        for s in 0..(3 + t) {
            text.push_str(&format!(
                "srv worker 100/{tid} 1.{s}: 1000 cpu-clock:u:\n\t401000 work_{t}+0x10 (/opt/srv)\n\t400500 main+0x5 (/opt/srv)\n\n"
            ));
            *totals.entry(format!("srv_worker-100/{tid}")).or_insert(0) += 1000;
        }
    }
    text.push_str("cc1plus 7/7 2.0: 500 cpu-clock:u:\n\t1 parse (/usr/bin/cc1plus)\n\n");
    totals.insert("cc1plus-7/7".to_string(), 500);
    (text, totals)
}

fn read_index(dir: &Path) -> Vec<Vec<String>> {
    std::fs::read_to_string(dir.join("index.tsv"))
        .unwrap()
        .lines()
        .skip(1)
        .map(|l| l.split('\t').map(str::to_string).collect())
        .collect()
}

/// `jobprof fold INPUT --split-by BY EXTRA... -o OUT`, asserted to
/// succeed; the rows of the `index.tsv` it wrote.
fn split(input: &Path, by: &str, extra: &[&str], out: &Path) -> Vec<Vec<String>> {
    let mut args = vec![os("fold"), input.as_os_str(), os("--split-by"), os(by)];
    args.extend(extra.iter().map(|a| os(a)));
    args.extend([os("-o"), out.as_os_str()]);
    let o = run(&args);
    assert!(o.status.success(), "{}", stderr(&o));
    read_index(out)
}

#[test]
fn split_by_tid_writes_one_file_per_thread() {
    for threads in [1u32, 4] {
        for fold_threads in ["1", "4"] {
            let dir = tempfile::tempdir().unwrap();
            let (text, totals) = perf_script_threads(threads);
            let input = write(dir.path(), "perf.script", &text);
            let out = dir.path().join("split");
            let extra = ["-j", fold_threads, "--formats", "folded,svg"];
            let index = split(&input, "tid", &extra, &out);
            assert_eq!(index.len(), totals.len());
            let mut got = BTreeMap::new();
            for row in &index {
                let files: Vec<&str> = row[4].split(',').collect();
                assert_eq!(files.len(), 2);
                assert!(files[0].ends_with(".folded") && !files[0].contains('/'));
                let total = folded_total(&out.join(files[0]));
                assert_eq!(total.to_string(), row[1], "{row:?}");
                let (frames, _) = parse_svg(&util::read(&out.join(files[1])));
                assert_eq!(frames[0].width_samples, total);
                got.insert(row[0].clone(), total);
            }
            assert_eq!(got, totals, "threads={threads} -j {fold_threads}");
            // The file of a thread holds only that thread's stacks.
            let t0 = std::fs::read_to_string(out.join("srv_worker-100_100.folded")).unwrap();
            assert!(
                t0.lines().all(|l| l.starts_with("srv_worker-100/100;")),
                "{t0}"
            );
        }
    }
}

#[test]
fn split_by_comm_and_pid() {
    let dir = tempfile::tempdir().unwrap();
    let (text, _) = perf_script_threads(3);
    let input = write(dir.path(), "perf.script", &text);
    for (by, want) in [
        ("comm", vec![("srv_worker", 12000u64), ("cc1plus", 500)]),
        ("pid", vec![("srv_worker-100", 12000), ("cc1plus-7", 500)]),
    ] {
        let got: Vec<(String, u64)> = split(&input, by, &[], &dir.path().join(by))
            .iter()
            .map(|r| (r[0].clone(), r[1].parse().unwrap()))
            .collect();
        let want: Vec<(String, u64)> = want.iter().map(|(k, v)| (k.to_string(), *v)).collect();
        assert_eq!(got, want, "--split-by {by}");
    }
    // --split-by needs -o.
    let o = run(&[os("fold"), input.as_os_str(), os("--split-by"), os("tid")]);
    assert_eq!(o.status.code(), Some(2));
}

/// A real multi-threaded process (xz with 2 worker threads) recorded with
/// perf, symbolized with PIDs (`-F +pid`), and split per thread and per
/// process: per-thread totals add up to the whole fold, there are at least
/// two xz threads, and they share one process group.
#[test]
fn split_by_tid_on_a_real_perf_capture() {
    if !util::require(have("perf") && have("xz"), "perf and xz") {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("perf.data");
    // 3 MB in 1 MiB blocks: xz -T2 compresses two blocks at once.
    let rec = Command::new("perf")
        .args(["record", "-q", "-F", "999", "-g", "-o"])
        .arg(&data)
        .args([
            "--",
            "sh",
            "-c",
            "head -c 3000000 /dev/urandom | xz -T2 -1 --block-size=1MiB > /dev/null",
        ])
        .stdout(Stdio::null())
        .output()
        .unwrap();
    assert!(rec.status.success(), "{}", stderr(&rec));
    let script = Command::new("perf")
        .args(["script", "-F", "+pid", "--no-inline", "-i"])
        .arg(&data)
        .output()
        .unwrap();
    assert!(script.status.success(), "{}", stderr(&script));
    let input = dir.path().join("perf.script");
    std::fs::write(&input, &script.stdout).unwrap();
    let whole = dir.path().join("all.folded");
    let o = run(&[
        os("fold"),
        os("--tid"),
        input.as_os_str(),
        os("-o"),
        whole.as_os_str(),
    ]);
    assert!(o.status.success(), "{}", stderr(&o));
    let split_adding_up = |by: &str| {
        let out = dir.path().join(by);
        let index = split(&input, by, &[], &out);
        let sum: u64 = index.iter().map(|r| folded_total(&out.join(&r[4]))).sum();
        assert_eq!(sum, folded_total(&whole), "--split-by {by}");
        index
    };
    let by_tid = split_adding_up("tid");
    let xz: Vec<&str> = by_tid
        .iter()
        .filter(|r| r[0].starts_with("xz-"))
        .map(|r| r[0].as_str())
        .collect();
    assert!(xz.len() >= 2, "{by_tid:?}");
    let xz_pids: std::collections::HashSet<&str> =
        xz.iter().map(|k| k.split('/').next().unwrap()).collect();
    assert_eq!(xz_pids.len(), 1, "{xz:?}");
    let by_pid = split_adding_up("pid");
    let xz_pid = *xz_pids.iter().next().unwrap();
    assert!(by_pid.iter().any(|r| r[0] == xz_pid), "{by_pid:?}");
}

// ---------------------------------------------------------------------------
// A real browser.

/// Loads the HTML page with `?jobprof-selftest=NAME`, which makes the page
/// click frame NAME, press the reset button, focus the frame and press
/// Enter, and search for NAME in upper case, recording the frame's width
/// after each step into `<pre id="jp-selftest">`.
fn browser_selftest(html: &Path, frame: &str) -> serde_json::Value {
    let dom = dump_dom(html, &format!("jobprof-selftest={frame}"));
    let start = dom
        .find(r#"<pre id="jp-selftest">"#)
        .unwrap_or_else(|| panic!("no self-test result in the DOM"));
    let json = &dom[start + r#"<pre id="jp-selftest">"#.len()..];
    let json = &json[..json.find("</pre>").unwrap()];
    serde_json::from_str(&json.replace("&quot;", "\"").replace("&amp;", "&")).unwrap()
}

#[test]
fn chromium_restores_zoom_and_search_from_the_url() {
    if !util::require_chromium() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let (o, html) = render_profile(dir.path(), "f.html", &[]);
    assert!(o.status.success(), "{}", stderr(&o));
    // Where parse_query is drawn (fg:x and y), as a click would record.
    let text = std::fs::read_to_string(&html).unwrap();
    let at = text.find("<title>parse_query (").unwrap();
    let rect = &text[at..at + text[at..].find("/>").unwrap()];
    let attr = |k: &str| {
        let i = rect.find(&format!(" {k}=\"")).unwrap() + k.len() + 3;
        rect[i..i + rect[i..].find('"').unwrap()].to_string()
    };
    let (x, y) = (attr("fg:x"), attr("y"));
    let dom = dump_dom(&html, &format!("x={x}&y={y}&s=%5BtT%5Dokenize"));
    let at = dom.find("<title>parse_query (").unwrap();
    let rect = &dom[at..at + dom[at..].find("</rect>").unwrap()];
    assert!(rect.contains(r#"width="100.0000%""#), "not zoomed: {rect}");
    assert!(dom.contains(r#"class="hide""#));
    assert!(dom.contains("Matched: 40.0%"), "search not restored");
}

#[test]
fn chromium_zooms_on_click_and_enter_and_searches() {
    if !util::require_chromium() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let (o, html) = render_profile(dir.path(), "f.html", &[]);
    assert!(o.status.success(), "{}", stderr(&o));
    let r = browser_selftest(&html, "parse_query");
    assert_eq!(r["found"], true, "{r}");
    // parse_query is 50% wide; a click zooms it to the full width and hides
    // frames outside it; reset restores; Enter on the focused frame zooms.
    assert_eq!(r["initial"], "50.0000%", "{r}");
    assert_eq!(r["afterClick"], "100.0000%", "{r}");
    assert!(r["hiddenAfterClick"].as_u64().unwrap() > 0, "{r}");
    assert_eq!(r["afterReset"], "50.0000%", "{r}");
    assert_eq!(r["hiddenAfterReset"], 0, "{r}");
    assert_eq!(r["focused"], true, "{r}");
    assert_eq!(r["afterEnter"], "100.0000%", "{r}");
    // Case-insensitive search: PARSE_QUERY finds parse_query (50%).
    assert_eq!(r["matched"], "Matched: 50.0%", "{r}");
    assert_eq!(r["highlighted"], 1, "{r}");
    // The fluid graph fills its column of the 1400 px window, the
    // function table beside it taking at most a third (an inline SVG
    // without a width would be 300 px wide).
    let page = r["pageWidth"].as_f64().unwrap();
    let svg = r["svgWidth"].as_f64().unwrap();
    assert!(svg > 0.6 * page, "{r}");
    assert!(r["framesWidth"].as_f64().unwrap() > 0.95 * svg, "{r}");

    // The differential page works the same way.
    let (o, dhtml) = diff(
        dir.path(),
        "main;a 10\nmain;a;x 10\nmain;c;y 20\n",
        "main;a 10\nmain;a;x 20\nmain;c;y 10\n",
        "d.html",
        &[],
    );
    assert!(o.status.success(), "{}", stderr(&o));
    let r = browser_selftest(&dhtml, "c");
    assert_eq!(r["afterClick"], "100.0000%", "{r}");
    assert_eq!(r["matched"], "Matched: 25.0%", "{r}");
}

/// The demo capture processed (cpu-clock: its folded counts are ns of
/// CPU), and its capture directory.
pub(crate) fn processed_demo(root: &Path) -> PathBuf {
    util::copy_demo(root);
    let o = jobprof().arg("process").arg(root).output().unwrap();
    util::ok(&o);
    root.join("profiles/perf/worker_0/q01")
}

/// Folded counts of a cpu-clock capture are ns of CPU, and every total
/// drawn from its `stacks.folded` says so (render, diff, report, fold's
/// split index), where each said "samples" before; pages write them as
/// time (issue 58, item 4).
#[test]
fn totals_of_a_cpu_clock_capture_are_named_ns() {
    let t = tempfile::tempdir().unwrap();
    let cap = processed_demo(&t.path().join("r"));
    let folded = cap.join("stacks.folded");
    // The page's total (`1.20 s in 51 distinct stacks`).
    let ns = folded_total(&folded);
    let time = jobprof::sys::units::format_amount(ns as f64, "ns");
    let total = ns.to_string();
    let total = total
        .as_bytes()
        .rchunks(3)
        .rev()
        .map(|c| std::str::from_utf8(c).unwrap())
        .collect::<Vec<_>>()
        .join(",");
    let html = t.path().join("x.html");
    util::ok(&run(&[
        os("render"),
        folded.as_os_str(),
        os("-o"),
        html.as_os_str(),
    ]));
    let page = std::fs::read_to_string(&html).unwrap();
    assert!(
        page.contains(&format!(">{time} in ")),
        "{time} not in the page"
    );
    assert!(!page.contains(" ns, "), "ns in a tooltip");
    assert!(
        !page.contains(&format!("{total} samples")),
        "ns called samples"
    );
    let json = t.path().join("x.json");
    util::ok(&run(&[
        os("render"),
        folded.as_os_str(),
        os("-o"),
        json.as_os_str(),
    ]));
    let doc: serde_json::Value = serde_json::from_slice(&util::read(&json)).unwrap();
    assert_eq!(doc["profiles"][0]["unit"], "nanoseconds", "{doc}");
    // An explicit --count-name still wins.
    util::ok(&run(&[
        os("render"),
        folded.as_os_str(),
        os("--count-name"),
        os("samples"),
        os("-o"),
        html.as_os_str(),
    ]));
    let page = std::fs::read_to_string(&html).unwrap();
    assert!(page.contains(&format!("{total} samples in ")));

    // A diff of the capture with itself: its tooltips count ns.
    let svg = t.path().join("d.svg");
    let o = run(&[
        os("diff"),
        folded.as_os_str(),
        folded.as_os_str(),
        os("-o"),
        svg.as_os_str(),
    ]);
    util::ok(&o);
    let svg = std::fs::read_to_string(&svg).unwrap();
    assert!(
        svg.contains(&format!("({time}, 100")),
        "diff tooltips: not {time}"
    );

    // report: the folded file's lines are not samples.
    let o = run(&[os("report"), folded.as_os_str()]);
    util::ok(&o);
    let text = util::stdout(&o);
    let lines = std::fs::read_to_string(&folded).unwrap().lines().count();
    assert!(!text.contains(&format!("# Samples: {lines} ")), "{text}");
    assert!(text.contains("# Samples: not known"), "{text}");
    assert!(
        text.contains(&format!("# Event count: {} ns", folded_total(&folded))),
        "{text}"
    );

    // fold: the split index's total column and a note on stderr name ns.
    let script = cap.join("perf.script.zst");
    let dir = t.path().join("split");
    let o = run(&[
        os("fold"),
        script.as_os_str(),
        os("--split-by"),
        os("comm"),
        os("-o"),
        dir.as_os_str(),
    ]);
    util::ok(&o);
    let index = std::fs::read_to_string(dir.join("index.tsv")).unwrap();
    assert!(index.starts_with("group\tns\tpercent\t"), "{index}");
    let o = run(&[os("fold"), script.as_os_str()]);
    util::ok(&o);
    assert!(
        util::stdout(&o).starts_with("# counts: ns\n"),
        "{}",
        stderr(&o)
    );
    assert!(!stderr(&o).contains("--count-name"), "{}", stderr(&o));
}

/// Issue 58, item 4: on a real `perf record -e cpu-clock` (its counts are
/// ns), `jobprof diff p1/perf.data p3/perf.data` said "4,208,416,800
/// samples" and "of BEFORE's 5314629216 samples"; `perf script | jobprof
/// fold | jobprof render` called ns samples, `fold` asking for
/// `--count-name ns` on stderr. The unit now travels in the folded text
/// (`# counts: ns`), and pages and notes write ns as time (`1.07 s`).
#[test]
fn nanoseconds_travel_with_the_stacks_and_read_as_time() {
    if !util::require(
        util::perf_can_record() && util::have("gcc"),
        "perf that can record and gcc",
    ) {
        return;
    }
    let exe = util::program(
        "deep",
        "tests/programs/deep.c",
        &["-O0", "-g", "-fno-omit-frame-pointer"],
    )
    .expect("gcc for tests/programs/deep.c");
    let t = tempfile::tempdir().unwrap();
    let record = |name: &str, secs: &str| {
        let data = t.path().join(name).join("perf.data");
        std::fs::create_dir_all(data.parent().unwrap()).unwrap();
        let o = Command::new("perf")
            .args(["record", "-q", "-e", "cpu-clock", "-g", "-F", "499", "-o"])
            .arg(&data)
            .arg("--")
            .arg(&exe)
            .args([secs, "20"])
            .output()
            .unwrap();
        assert!(o.status.success(), "perf record: {}", util::output_text(&o));
        data
    };
    let (p1, p3) = (record("p1", "1"), record("p3", "1"));
    let is_time = |s: &str| s.ends_with(" s") || s.ends_with(" ms");
    // diff of two perf.data: the page, its tooltips and the note.
    let d = t.path().join("d.html");
    let o = run(&[
        os("diff"),
        p1.as_os_str(),
        p3.as_os_str(),
        os("-o"),
        d.as_os_str(),
    ]);
    util::ok(&o);
    let page = std::fs::read_to_string(&d).unwrap();
    assert!(!page.contains(" samples"), "ns called samples in the diff");
    let facts: Vec<&str> = page
        .split("<span class=\"jp-facts\">")
        .skip(1)
        .map(|s| s.split(" in ").next().unwrap())
        .collect();
    assert!(facts.iter().any(|f| is_time(f)), "{facts:?}");
    // Nanoseconds are written as ns only under a microsecond (`0 ns`).
    for (at, _) in page.match_indices(" ns") {
        let n: String = page[..at]
            .chars()
            .rev()
            .take_while(|c| c.is_ascii_digit() || *c == ',')
            .collect();
        assert!(n.len() <= 3 && !n.contains(','), "{n} ns in the diff page");
    }
    // perf script | fold | render: the unit goes through the pipe.
    let script = Command::new("perf")
        .args(["script", "-i"])
        .arg(&p1)
        .stderr(Stdio::null())
        .output()
        .unwrap();
    assert!(script.status.success());
    let pipe = |cmd: &[&str], input: &[u8]| {
        let mut c = jobprof()
            .args(cmd)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        let mut stdin = c.stdin.take().unwrap();
        let input = input.to_vec();
        let feed = std::thread::spawn(move || {
            use std::io::Write;
            let _ = stdin.write_all(&input);
        });
        let o = c.wait_with_output().unwrap();
        feed.join().unwrap();
        o
    };
    let folded = pipe(&["fold"], &script.stdout);
    util::ok(&folded);
    assert!(folded.stdout.starts_with(b"# counts: ns\n"));
    assert!(
        !stderr(&folded).contains("--count-name"),
        "{}",
        stderr(&folded)
    );
    let svg = pipe(&["render"], &folded.stdout);
    util::ok(&svg);
    let (frames, _) = parse_svg(&svg.stdout);
    let all = frames
        .iter()
        .find(|f| f.title.starts_with("all ("))
        .unwrap();
    assert!(
        all.title.contains(" s, 100%") || all.title.contains(" ms, 100%"),
        "{}",
        all.title
    );
    assert!(frames.iter().all(|f| !f.title.contains("samples")));
    // report reads the unit from the folded text too.
    let f = write(
        t.path(),
        "f.folded",
        std::str::from_utf8(&folded.stdout).unwrap(),
    );
    let o = run(&[os("report"), f.as_os_str()]);
    util::ok(&o);
    assert!(util::stdout(&o).contains(" ns"), "{}", util::stdout(&o));
}

// ---------------------------------------------------------------------------
// The function table and a function's callers and callees, in a real
// browser, against figures computed here from the folded stacks.

/// A profile where `f` recurses directly (`f;f`) and through `g`, is
/// called from `main` and from `g` and from `main.cold`, and calls
/// `tokenize`, which `parse_query` calls too.
const RECURSIVE: &str = "\
app;main;parse_query;tokenize 40
app;main;parse_query 10
app;main;f;g;f;g;f 6
app;main;g;f;tokenize 5
app;main;f;f 4
app;main.cold;f;tokenize 3
app;main;run<alloc::vec::Vec<u8>> 20
";

/// What the page must show for one function, from folded text: self,
/// total (each stack once, however often the function recurses in it),
/// call paths (distinct prefixes ending in it), and its callers and
/// callees merged from its outermost frame in each stack, as `path ->
/// total` with the function first (callers: then its caller, its caller's
/// caller...).
#[derive(Debug, Default, PartialEq)]
struct Sandwich {
    own: u64,
    total: u64,
    paths: u64,
    callers: BTreeMap<String, u64>,
    callees: BTreeMap<String, u64>,
}

fn sandwich_of(folded: &str, f: &str) -> Sandwich {
    let mut s = Sandwich::default();
    let mut prefixes = std::collections::BTreeSet::new();
    for line in folded.lines() {
        let (stack, count) = line.rsplit_once(' ').unwrap();
        let count: u64 = count.parse().unwrap();
        let frames: Vec<&str> = stack.split(';').collect();
        for j in 0..frames.len() {
            if frames[j] == f {
                prefixes.insert(frames[..=j].join(";"));
            }
        }
        if frames.last() == Some(&f) {
            s.own += count;
        }
        let Some(i) = frames.iter().position(|&x| x == f) else {
            continue;
        };
        s.total += count;
        let up: Vec<&str> = frames[..=i].iter().rev().copied().collect();
        for k in 1..=up.len() {
            *s.callers.entry(up[..k].join(";")).or_default() += count;
        }
        for k in i + 1..=frames.len() {
            *s.callees.entry(frames[i..k].join(";")).or_default() += count;
        }
    }
    s.paths = prefixes.len() as u64;
    s
}

/// The JSON a page's self-test wrote into `<pre id="ID">`, read from the
/// DOM Chromium dumped.
fn selftest_json(dom: &str, id: &str) -> serde_json::Value {
    let open = format!(r#"<pre id="{id}">"#);
    let start = dom
        .find(&open)
        .unwrap_or_else(|| panic!("no {id} result in the DOM"));
    let json = &dom[start + open.len()..];
    let json = &json[..json.find("</pre>").unwrap()];
    let json = json
        .replace("&quot;", "\"")
        .replace("&lt;", "<")
        .replace("&gt;", ">")
        .replace("&amp;", "&");
    serde_json::from_str(&json).unwrap()
}

fn u64_map(v: &serde_json::Value) -> BTreeMap<String, u64> {
    v.as_object()
        .unwrap_or_else(|| panic!("not an object: {v}"))
        .iter()
        .map(|(k, v)| (k.clone(), v.as_u64().unwrap()))
        .collect()
}

/// Loads the page with `?jobprof-fn-selftest=NAME&jobprof-fn-frame=FRAME`:
/// it types NAME into the search box, focuses its table row and presses
/// Enter, expands both trees whole and writes every row's path and value,
/// the table's rows in each sort order, and what clicking FRAME's frame
/// in the graph picked.
fn functions_selftest(html: &Path, name: &str, frame: &str) -> serde_json::Value {
    let q = |s: &str| util_encode(s);
    let dom = dump_dom(
        html,
        &format!(
            "jobprof-fn-selftest={}&jobprof-fn-frame={}",
            q(name),
            q(frame)
        ),
    );
    selftest_json(&dom, "jp-fn-selftest")
}

fn util_encode(s: &str) -> String {
    s.bytes()
        .map(|b| match b {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'_' | b'.' => (b as char).to_string(),
            _ => format!("%{b:02X}"),
        })
        .collect()
}

#[test]
fn chromium_shows_callers_and_callees_of_a_picked_function() {
    if !util::require_chromium() {
        return;
    }
    // Counts as cpu-clock's (ns, multiples of one period at 99 Hz): the
    // page stores them over their divisor and shows them multiplied out.
    let folded: String = RECURSIVE
        .lines()
        .map(|l| {
            let (stack, count) = l.rsplit_once(' ').unwrap();
            format!("{stack} {}\n", count.parse::<u64>().unwrap() * 10_101_010)
        })
        .collect();
    let dir = tempfile::tempdir().unwrap();
    let input = write(dir.path(), "r.folded", &folded);
    let html = dir.path().join("r.html");
    util::ok(&run(&[
        os("render"),
        input.as_os_str(),
        os("-o"),
        html.as_os_str(),
    ]));
    for (name, frame) in [("f", "parse_query"), ("tokenize", "g"), ("main", "f")] {
        assert_page_shows_sandwich(&html, &folded, name, frame);
    }
}

/// The page `html` of the stacks `folded` shows NAME's row, self, total,
/// paths, callers and callees as computed here when NAME is typed into
/// the search box and picked by keyboard, and a click on FRAME's frame
/// picks FRAME and zooms into it.
fn assert_page_shows_sandwich(html: &Path, folded: &str, name: &str, frame: &str) {
    let want = sandwich_of(folded, name);
    let r = functions_selftest(html, name, frame);
    assert_eq!(r["rowFound"], true, "{name}: {r}");
    // Reached by keyboard: the row takes the focus, Enter picks it.
    assert_eq!(r["rowFocused"], true, "{name}: {r}");
    assert_eq!(r["picked"], name, "{name}: {r}");
    assert_eq!(r["self"], want.own, "{name} self: {r}");
    assert_eq!(r["total"], want.total, "{name} total: {r}");
    assert_eq!(r["paths"], want.paths, "{name} paths: {r}");
    assert_eq!(u64_map(&r["callers"]), want.callers, "{name} callers");
    assert_eq!(u64_map(&r["callees"]), want.callees, "{name} callees");
    // A click on a frame of the graph picks that function, and still
    // zooms into the frame.
    assert_eq!(r["frameFound"], true, "{r}");
    assert_eq!(r["frameClickPicked"], frame, "{r}");
    assert_eq!(r["frameWidthAfterClick"], "100.0000%", "{r}");
    assert!(
        r["url"].as_str().unwrap().contains(&format!("fn={frame}")),
        "{r}"
    );
}

/// The differential page has the function table too: AFTER's functions
/// (the graph's widths), with callers and callees, picked from the table
/// or by a click on a frame of the recoloured graph.
#[test]
fn chromium_diff_page_shows_callers_and_callees_of_after() {
    if !util::require_chromium() {
        return;
    }
    let before = RECURSIVE.replace("tokenize 40", "tokenize 10");
    let after = RECURSIVE.replace("f;f 4", "f;f 24");
    let dir = tempfile::tempdir().unwrap();
    let (o, html) = diff(dir.path(), &before, &after, "d.html", &[]);
    assert!(o.status.success(), "{}", stderr(&o));
    let page = std::fs::read_to_string(&html).unwrap();
    assert!(page.contains("<strong>Functions of AFTER</strong>"));
    for (name, frame) in [("f", "parse_query"), ("tokenize", "g")] {
        assert_page_shows_sandwich(&html, &after, name, frame);
    }
}

#[test]
fn chromium_function_table_counts_recursion_once_and_sorts() {
    if !util::require_chromium() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let input = write(dir.path(), "r.folded", RECURSIVE);
    let html = dir.path().join("r.html");
    util::ok(&run(&[
        os("render"),
        input.as_os_str(),
        os("-o"),
        html.as_os_str(),
    ]));
    let r = functions_selftest(&html, "f", "f");
    let mut names: Vec<&str> = RECURSIVE
        .lines()
        .flat_map(|l| l.rsplit_once(' ').unwrap().0.split(';'))
        .collect();
    names.sort();
    names.dedup();
    // Every function, with self, total and paths as computed here; by
    // default sorted by self, largest first (ties by name).
    let rows = r["table"].as_array().unwrap();
    assert_eq!(rows.len(), names.len(), "{r}");
    assert_eq!(r["tableSortKey"], "self");
    let mut want: Vec<(String, u64, u64, u64)> = names
        .iter()
        .map(|&n| {
            let s = sandwich_of(RECURSIVE, n);
            (n.to_string(), s.own, s.total, s.paths)
        })
        .collect();
    want.sort_by(|a, b| b.1.cmp(&a.1).then(a.0.cmp(&b.0)));
    let got: Vec<(String, u64, u64, u64)> = rows
        .iter()
        .map(|row| {
            let n = |i: usize| row[i].as_u64().unwrap();
            (row[0].as_str().unwrap().to_string(), n(1), n(2), n(3))
        })
        .collect();
    assert_eq!(got, want);
    // f recurses (f;g;f;g;f and f;f) and is still counted once per stack.
    let f = got.iter().find(|r| r.0 == "f").unwrap();
    assert_eq!((f.1, f.2), (6 + 4, 6 + 5 + 4 + 3), "{f:?}");
    // The header's buttons sort by total (largest first) and by name.
    want.sort_by(|a, b| b.2.cmp(&a.2).then(a.0.cmp(&b.0)));
    let by_total: Vec<&str> = want.iter().map(|w| w.0.as_str()).collect();
    assert_eq!(r["byTotal"], serde_json::json!(by_total));
    assert_eq!(r["byName"], serde_json::json!(names));
}

#[test]
fn html_embeds_the_stacks_once_compactly() {
    let dir = tempfile::tempdir().unwrap();
    let input = write(dir.path(), "r.folded", RECURSIVE);
    let html = dir.path().join("r.html");
    util::ok(&run(&[
        os("render"),
        input.as_os_str(),
        os("-o"),
        html.as_os_str(),
    ]));
    let page = std::fs::read_to_string(&html).unwrap();
    let open = r#"<script type="application/json" id="jp-fn-data">"#;
    let at = page.find(open).expect("the function data is in the page") + open.len();
    let json = &page[at..at + page[at..].find("</script>").unwrap()];
    let v: serde_json::Value = serde_json::from_str(json).unwrap();
    // Each name once; nodes are the distinct prefixes (two numbers each).
    let names = v["names"].as_array().unwrap();
    assert_eq!(names.len(), 8, "{v}");
    let prefixes: std::collections::BTreeSet<String> = RECURSIVE
        .lines()
        .flat_map(|l| {
            let f: Vec<&str> = l.rsplit_once(' ').unwrap().0.split(';').collect();
            (1..=f.len()).map(move |k| f[..k].join(";"))
        })
        .collect();
    assert_eq!(v["nodes"].as_array().unwrap().len(), 2 * prefixes.len());
    assert_eq!(
        v["self"].as_array().unwrap().len(),
        2 * RECURSIVE.lines().count()
    );
    // The table and trees come before the frames (Tab reaches them first).
    assert!(page.find(r#"id="jp-fn-table""#).unwrap() < page.find(r#"id="frames""#).unwrap());
}
