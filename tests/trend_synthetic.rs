//! `jobprof trend` on synthetic series (folded files written by the
//! test, no engine, no perf): links that are paths never scripts, the gate
//! that fails closed, functions judged by their own time (issue 49, item
//! 4) and the cause named once with its callers folded under it (issue 49).

use std::fs;
use std::path::{Path, PathBuf};
use std::process::Output;

use crate::trend::{json, significant, trend};
use crate::util::{self, dump_dom, output_text};

// Small synthetic runs: what `jobprof process` leaves that the trend reads
// (`capture.json` and `stacks.folded` per capture, the job view's page per
// query), written by hand, for the tests of the links and the gate, which
// need no real profile.

/// What a synthetic capture holds.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Cap {
    /// `stacks.folded` with two functions.
    Processed,
    /// No `stacks.folded`: not processed.
    Unprocessed,
    /// An empty `stacks.folded`.
    Empty,
}

/// Run `dir`: per (query, state), three replicates
/// `profiles/perf/worker_0/<query>_iter<k>/`, and the job view page
/// of the base query, `profiles/perf/queries/<query>/flamegraph.html`
/// (the views merge replicates), which says
/// `stub flamegraph of <run's file name>`.
fn synthetic_run(dir: &Path, queries: &[(&str, Cap)]) {
    let perf = dir.join("profiles/perf");
    let run = dir.file_name().unwrap().to_string_lossy().into_owned();
    for &(q, cap) in queries {
        for k in 1..=3u64 {
            let c = perf.join(format!("worker_0/{q}_iter{k}"));
            fs::create_dir_all(&c).unwrap();
            fs::write(c.join("capture.json"), "{}\n").unwrap();
            match cap {
                Cap::Processed => fs::write(
                    c.join("stacks.folded"),
                    format!("w;main;work {}\nw;main;io {}\n", 600 + k, 400 - k),
                )
                .unwrap(),
                Cap::Empty => fs::write(c.join("stacks.folded"), "").unwrap(),
                Cap::Unprocessed => {}
            }
        }
        let page = perf.join(format!("queries/{q}"));
        fs::create_dir_all(&page).unwrap();
        fs::write(
            page.join("flamegraph.html"),
            format!("<!DOCTYPE html><html><body><p>stub flamegraph of {run}</p></body></html>\n"),
        )
        .unwrap();
    }
}

/// A run directory named as a `javascript:` URL (issue 45, item 8), with
/// `-o` its parent: the link to its flamegraph is `./` and the name
/// percent-encoded, so a click opens the page in that directory and runs
/// no script; and the page's own script refuses an href with a scheme even
/// when the data block holds one (an edited or older page).
#[test]
fn a_run_named_like_a_javascript_url_is_a_path_never_a_script() {
    if !util::require_chromium() {
        return;
    }
    let tmp = tempfile::tempdir().unwrap();
    let script = "void(document.body.setAttribute('data-pwned','yes'))";
    let evil = format!("javascript:{script}%2F%2F");
    let runs: Vec<PathBuf> = ["run_1", "run_2", evil.as_str()]
        .iter()
        .map(|n| tmp.path().join(n))
        .collect();
    for r in &runs {
        synthetic_run(r, &[("q1", Cap::Processed)]);
    }
    let dirs: Vec<&Path> = runs.iter().map(PathBuf::as_path).collect();
    let out = trend(&dirs, tmp.path(), &["--order", "args"]);
    assert_eq!(out.status.code(), Some(0), "{}", output_text(&out));
    let t = json(&tmp.path().join("trend.json"));
    let link = t["queries"][0]["flamegraphs"][2]
        .as_str()
        .unwrap()
        .to_string();
    assert!(link.starts_with("./") && !link.contains(':'), "{link}");
    let page = tmp.path().join("trend.html");
    let dom = dump_dom(&page, "jobprof-selftest=click&query=q1&run=3");
    assert!(
        !dom.contains("data-pwned=\"yes\""),
        "the run's name ran as a script"
    );
    assert!(
        dom.contains(&format!("stub flamegraph of {evil}")),
        "the click opens the run's page: {}",
        &dom[..dom.len().min(600)]
    );
    // The page's script refuses a link with a scheme on its own.
    let html = fs::read_to_string(&page).unwrap();
    let in_data = serde_json::to_string(&link).unwrap().replace('/', "\\/");
    assert!(html.contains(&in_data), "{in_data} not in the data block");
    let planted = serde_json::to_string(&format!("javascript:{script}")).unwrap();
    fs::write(&page, html.replace(&in_data, &planted)).unwrap();
    let dom = dump_dom(&page, "jobprof-selftest=click&query=q1&run=3");
    assert!(!dom.contains("data-pwned=\"yes\""), "a planted link ran");
    assert!(dom.contains("refused"), "{}", &dom[..dom.len().min(600)]);
}

/// `trend` over `base` and `newest` (`--order args`, `-o` `out`) with
/// `extra`.
fn gate(base: &[PathBuf], newest: &Path, out: &Path, extra: &[&str]) -> Output {
    let mut dirs: Vec<&Path> = base.iter().map(PathBuf::as_path).collect();
    dirs.push(newest);
    trend(&dirs, out, &[&["--order", "args"], extra].concat())
}

/// The gate fails closed (issue 45, item 9): three processed runs and a
/// newest run with nothing to judge (no capture processed; a query
/// missing; a query whose folded files are empty). Each query not judged
/// is named on stderr (with `-q` too) and in `trend.json`'s `unjudged`;
/// `--fail-on-regression` exits 6; without the gate, exit 0. A healthy
/// newest run passes the gate and says nothing of the kind.
#[test]
fn the_gate_fails_closed_when_the_newest_run_has_nothing_to_judge() {
    use Cap::{Empty, Processed, Unprocessed};
    let tmp = tempfile::tempdir().unwrap();
    let both = [("q1", Processed), ("q6", Processed)];
    let base: Vec<PathBuf> = (1..=3)
        .map(|k| {
            let r = tmp.path().join(format!("run_{k}"));
            synthetic_run(&r, &both);
            r
        })
        .collect();
    let healthy = tmp.path().join("run_ok");
    synthetic_run(&healthy, &both);
    let out = gate(
        &base,
        &healthy,
        &tmp.path().join("o_ok"),
        &["--fail-on-regression", "2"],
    );
    assert_eq!(out.status.code(), Some(0), "{}", output_text(&out));
    assert!(
        !util::stderr(&out).contains("nothing to judge"),
        "{}",
        output_text(&out)
    );
    let t = json(&tmp.path().join("o_ok/trend.json"));
    assert_eq!(t["unjudged"], serde_json::json!([]));

    /// (run name, its captures, the queries not judged, the reason's words)
    type Case<'a> = (&'a str, &'a [(&'a str, Cap)], &'a [&'a str], &'a str);
    let cases: [Case; 3] = [
        (
            "run_bare",
            &[("q1", Unprocessed), ("q6", Unprocessed)],
            &["q1", "q6"],
            "not processed",
        ),
        (
            "run_no_q6",
            &[("q1", Processed)],
            &["q6"],
            "not in this run",
        ),
        (
            "run_empty_q6",
            &[("q1", Processed), ("q6", Empty)],
            &["q6"],
            "empty",
        ),
    ];
    for (name, caps, missing, why) in cases {
        let newest = tmp.path().join(name);
        synthetic_run(&newest, caps);
        for quiet in [false, true] {
            let o = tmp.path().join(format!("o_{name}_{quiet}"));
            let mut extra = vec!["--fail-on-regression", "2"];
            if quiet {
                extra.push("-q");
            }
            let out = gate(&base, &newest, &o, &extra);
            let all = output_text(&out);
            assert_eq!(out.status.code(), Some(6), "{name}: {all}");
            let err = util::stderr(&out);
            assert!(err.contains(&format!("run 4 ({name})")), "{name}: {err}");
            assert!(
                err.contains("nothing to judge") && err.contains(why),
                "{name}: {err}"
            );
            assert!(err.contains("--fail-on-regression 2"), "{name}: {err}");
            for q in missing {
                assert!(err.contains(q), "{name}: {q} not named: {err}");
            }
            let text = util::stdout(&out);
            assert!(!text.contains("no significant change"), "{all}");
            assert!(quiet || text.contains("not judged"), "{all}");
            let t = json(&o.join("trend.json"));
            let unjudged: Vec<&str> = t["unjudged"]
                .as_array()
                .unwrap_or_else(|| panic!("{name}: no unjudged in trend.json"))
                .iter()
                .map(|u| {
                    assert_eq!(u["run"], 3, "{u}");
                    u["query"].as_str().unwrap()
                })
                .collect();
            assert_eq!(unjudged, missing, "{name}");
        }
        // Without the gate: said just as clearly, exit 0.
        let out = gate(
            &base,
            &newest,
            &tmp.path().join(format!("o_{name}")),
            &["-q"],
        );
        assert_eq!(out.status.code(), Some(0), "{name}: {}", output_text(&out));
        let err = util::stderr(&out);
        assert!(
            err.contains("nothing to judge") && err.contains(why),
            "{name}: {err}"
        );
    }
}

/// Run `dir`: query q1 as the captures `names` (`q1` alone is one
/// replicate), each with `sort_run` taking `sort` of 1,000 samples.
fn sort_run(dir: &Path, names: &[&str], sort: u32) {
    for (k, name) in names.iter().enumerate() {
        let c = dir.join(format!("profiles/perf/worker_0/{name}"));
        fs::create_dir_all(&c).unwrap();
        fs::write(c.join("capture.json"), "{}\n").unwrap();
        let sort = sort + k as u32;
        fs::write(
            c.join("stacks.folded"),
            format!("w;main;sort_run {sort}\nw;main;scan {}\n", 1000 - sort),
        )
        .unwrap();
    }
}

/// Issue 58, item 1: `trend p3 p1 --order args --fail-on-regression 2`,
/// `sort_run` from 21.8% to 34.5%, one replicate per run, passed ("no
/// significant change", exit 0) although nothing could be tested; so did
/// `--baseline 1` (the README's `trend base_run new_run`) and 3 replicates
/// against 3 (no permutation p below 0.1). The gate fails closed (exit
/// 6) naming why and the fix; without the gate stdout says "not judged"
/// and the exit is 0; 4 replicates against 4 are tested and gated (3).
#[test]
fn the_gate_fails_closed_when_no_test_is_possible() {
    let tmp = tempfile::tempdir().unwrap();
    let cases: [(&[&str], &str); 3] = [
        (&["q1"], "no test is possible"),
        (&["q1_iter1", "q1_iter2"], "no p-value below 0.333"),
        (
            &["q1_iter1", "q1_iter2", "q1_iter3"],
            "no p-value below 0.100",
        ),
    ];
    for (names, why) in cases {
        let n = names.len();
        let (p3, p1) = (
            tmp.path().join(format!("p3_{n}")),
            tmp.path().join(format!("p1_{n}")),
        );
        sort_run(&p3, names, 218);
        sort_run(&p1, names, 345);
        for extra in [&[][..], &["--baseline", "1"][..]] {
            let o = tmp.path().join(format!("o_{n}_{}", extra.len()));
            let args = [&["--fail-on-regression", "2"][..], extra].concat();
            let out = gate(std::slice::from_ref(&p3), &p1, &o, &args);
            let all = output_text(&out);
            assert_eq!(out.status.code(), Some(6), "{n} {extra:?}: {all}");
            let err = util::stderr(&out);
            assert!(
                err.contains(why) && err.contains("query q1") && err.contains("q1_iter2, ..."),
                "{n}: {err}"
            );
            assert!(err.contains("failing closed"), "{n}: {err}");
            let text = util::stdout(&out);
            assert!(!text.contains("no significant change"), "{all}");
            assert!(text.contains("not judged"), "{all}");
            let t = json(&o.join("trend.json"));
            assert_eq!(t["unjudged"][0]["query"], "q1", "{t}");
        }
        let out = gate(
            std::slice::from_ref(&p3),
            &p1,
            &tmp.path().join(format!("o_{n}")),
            &[],
        );
        assert_eq!(out.status.code(), Some(0), "{n}: {}", output_text(&out));
        assert!(
            util::stdout(&out).contains("not judged"),
            "{}",
            output_text(&out)
        );
    }
    // 4 replicates against 4 can be tested: the rise fails the gate.
    let names = ["q1_iter1", "q1_iter2", "q1_iter3", "q1_iter4"];
    let (p3, p1) = (tmp.path().join("p3_4"), tmp.path().join("p1_4"));
    sort_run(&p3, &names, 218);
    sort_run(&p1, &names, 345);
    let out = gate(
        &[p3],
        &p1,
        &tmp.path().join("o_4"),
        &["--fail-on-regression", "2"],
    );
    assert_eq!(out.status.code(), Some(3), "{}", output_text(&out));
    assert!(
        util::stderr(&out).contains("sort_run"),
        "{}",
        output_text(&out)
    );
}

/// Run `dir` of `cpu-clock` captures: per query, 4 replicates whose
/// functions (leaves under `main`) take the given ms, times `load` (the
/// machine's run-to-run noise) and a small replicate jitter.
fn timed_run(dir: &Path, queries: &[(&str, &[(&str, f64)])], load: f64) {
    for &(q, functions) in queries {
        for k in 1..=4u32 {
            let c = dir.join(format!("profiles/perf/worker_0/{q}_iter{k}"));
            fs::create_dir_all(&c).unwrap();
            fs::write(c.join("capture.json"), "{}\n").unwrap();
            fs::write(c.join("summary.json"), "{\"event\": \"cpu-clock\"}\n").unwrap();
            let jitter = 1.0 + 0.003 * f64::from(k);
            let text: String = functions
                .iter()
                .map(|(f, ms)| format!("w;main;{f} {:.0}\n", ms * 1e6 * load * jitter))
                .collect();
            fs::write(c.join("stacks.folded"), text).unwrap();
        }
    }
}

/// Four runs of q1 and q6 (issue 49, item 4): q1's `work` doubles in the
/// newest, q6's `b` and `c` take less time.
fn own_time_runs(tmp: &Path) -> Vec<PathBuf> {
    let q1: &[(&str, f64)] = &[("work", 600.0), ("io", 300.0), ("cpu", 100.0)];
    let q6: &[(&str, f64)] = &[("a", 400.0), ("b", 300.0), ("c", 200.0), ("d", 100.0)];
    let mut runs: Vec<PathBuf> = Vec::new();
    for (k, load) in [1.0, 1.02, 0.99].into_iter().enumerate() {
        let r = tmp.join(format!("run_{}", k + 1));
        timed_run(&r, &[("q1", q1), ("q6", q6)], load);
        runs.push(r);
    }
    let newest = tmp.join("run_4");
    let q1_new: &[(&str, f64)] = &[("work", 1200.0), ("io", 300.0), ("cpu", 100.0)];
    let q6_new: &[(&str, f64)] = &[("a", 400.0), ("b", 150.0), ("c", 40.0), ("d", 100.0)];
    timed_run(&newest, &[("q1", q1_new), ("q6", q6_new)], 1.01);
    runs.push(newest);
    runs
}

/// `jobprof trend --order args` over [`own_time_runs`] made under `tmp`
/// (it must exit 0): its output and its `-o` directory.
fn own_time_trend(tmp: &Path) -> (std::process::Output, PathBuf) {
    let runs = own_time_runs(tmp);
    let dirs: Vec<&Path> = runs.iter().map(PathBuf::as_path).collect();
    let o = tmp.join("out");
    let out = trend(&dirs, &o, &["--order", "args"]);
    assert_eq!(out.status.code(), Some(0), "{}", output_text(&out));
    (out, o)
}

/// Issue 58, item 8: the page's "Most regressed functions" listed the
/// improved rows too, and its threshold said "1.0" with no unit. Rises and
/// falls are now two tables, their change and threshold in points.
#[test]
fn the_page_lists_regressions_and_improvements_apart_in_points() {
    let tmp = tempfile::tempdir().unwrap();
    let (_, o) = own_time_trend(tmp.path());
    let html = fs::read_to_string(o.join("trend.html")).unwrap();
    let table = |id: &str| {
        let t = &html[html.find(&format!("id=\"{id}\"")).expect(id)..];
        t[..t.find("</table>").unwrap()].to_string()
    };
    let regressed = table("jp-findings");
    assert!(regressed.contains(">work<"), "{regressed}");
    assert!(!regressed.contains(">improved<"), "{regressed}");
    assert!(
        regressed.contains("<th>Threshold (points)</th>"),
        "{regressed}"
    );
    let improved = table("jp-improved");
    assert!(
        improved.contains(">c<") && improved.contains(">b<"),
        "{improved}"
    );
    assert!(!improved.contains(">regressed<"), "{improved}");
    assert!(html.contains("<h2>Most improved functions</h2>"));
    assert!(!html.contains("0.0e0"));
}

/// Issue 49, item 4: a share moves when other functions' time does, so a
/// function is judged by its own time per replicate too. q1's `work`
/// doubles: `io` and `cpu`, whose time did not change, lose share
/// (dilution) and are not "improved". q6's `b` and `c` take less time:
/// they improved, the larger fall (`c`) first, and `a` and `d`, whose
/// time did not change, gain share and are not "regressed". The page's
/// totals say seconds as stdout does, and its p-values are stdout's.
#[test]
fn only_functions_whose_own_time_moved_are_flagged_largest_first() {
    let tmp = tempfile::tempdir().unwrap();
    let (out, o) = own_time_trend(tmp.path());
    let text = util::stdout(&out);
    let flagged: Vec<&str> = text
        .lines()
        .filter(|l| l.starts_with("regressed ") || l.starts_with("improved "))
        .collect();
    // "regressed q1 work [total] 60.0% -> 75.0% (...)": up to the share.
    let heads: Vec<&str> = flagged
        .iter()
        .map(|l| l.split(" -> ").next().unwrap().rsplit_once(' ').unwrap().0)
        .collect();
    assert_eq!(
        heads,
        // Each function's own [total] is folded under its self finding.
        ["regressed q1 work", "improved q6 c", "improved q6 b"],
        "{text}"
    );
    let t = json(&o.join("trend.json"));
    let sig = significant(&t);
    let changes: Vec<f64> = sig.iter().map(|f| f["change"].as_f64().unwrap()).collect();
    assert!(
        changes
            .windows(2)
            .all(|w| w[0] >= 0.0 && w[1] < 0.0 || w[0].abs() >= w[1].abs()),
        "largest first, rises before falls: {changes:?}"
    );
    let io = t["findings"]
        .as_array()
        .unwrap()
        .iter()
        .find(|f| f["function"] == "io" && f["kind"] == "self")
        .expect("io's share change is listed");
    assert!(io["own_time_change"].as_f64().unwrap().abs() < 1.0, "{io}");
    assert_eq!(io["significant"], false, "{io}");
    // One way to write amounts and p-values: the page's totals table
    // says what stdout says.
    let html = fs::read_to_string(o.join("trend.html")).unwrap();
    let times = &html[html.find("id=\"jp-times\"").expect("a totals table")..];
    let times = &times[..times.find("</table>").unwrap()];
    for l in text
        .lines()
        .filter(|l| l.starts_with("slower ") || l.starts_with("faster "))
    {
        // slower q1 1.01 s -> 1.62 s per replicate (+60%, p=...)
        let words: Vec<&str> = l.split_whitespace().collect();
        let (from, to) = (format!("{} s", words[2]), format!("{} s", words[5]));
        let p = l.rsplit_once("p=").unwrap().1.trim_end_matches(')');
        for want in [&from, &to, &p.to_string()] {
            assert!(
                times.contains(want.as_str()),
                "{want} not in the page's totals: {times}"
            );
        }
    }
    assert!(text.lines().any(|l| l.starts_with("slower q1")), "{text}");
}

/// Run `dir`: query q1, 4 replicates whose stacks (under the thread `w`)
/// take the given ms, times `load` and a small replicate jitter.
fn stacks_run(dir: &Path, stacks: &[(&str, f64)], load: f64) {
    for k in 1..=4u32 {
        let c = dir.join(format!("profiles/perf/worker_0/q1_iter{k}"));
        fs::create_dir_all(&c).unwrap();
        fs::write(c.join("capture.json"), "{}\n").unwrap();
        fs::write(c.join("summary.json"), "{\"event\": \"cpu-clock\"}\n").unwrap();
        let jitter = 1.0 + 0.003 * f64::from(k);
        let text: String = stacks
            .iter()
            .map(|(s, ms)| format!("w;{s} {:.0}\n", ms * 1e6 * load * jitter))
            .collect();
        fs::write(c.join("stacks.folded"), text).unwrap();
    }
}

/// Issue 49: one run adds work to one function (`hash_row`, called from
/// `probe <- join <- main`); its callers' total time rises with it, but
/// the trend names the cause once, with its callers folded under it
/// ("called from: probe <- join <- main"), in stdout, the page and the
/// gate's message, not one `[total]` finding per caller.
#[test]
fn one_cause_is_named_with_its_callers_folded_under_it() {
    let tmp = tempfile::tempdir().unwrap();
    let base: &[(&str, f64)] = &[
        ("main;join;probe;hash_row", 200.0),
        ("main;join;probe;compare", 300.0),
        ("main;scan;decode", 400.0),
        ("main;scan;filter", 100.0),
    ];
    let mut runs: Vec<PathBuf> = Vec::new();
    for (k, load) in [1.0, 1.02, 0.99].into_iter().enumerate() {
        let r = tmp.path().join(format!("run_{}", k + 1));
        stacks_run(&r, base, load);
        runs.push(r);
    }
    let mut newer = base.to_vec();
    newer[0].1 = 700.0;
    let newest = tmp.path().join("run_4");
    stacks_run(&newest, &newer, 1.01);
    runs.push(newest);
    let dirs: Vec<&Path> = runs.iter().map(PathBuf::as_path).collect();
    let o = tmp.path().join("out");
    let out = trend(&dirs, &o, &["--order", "args", "--fail-on-regression", "1"]);
    assert_eq!(out.status.code(), Some(3), "{}", output_text(&out));
    let text = util::stdout(&out);
    let flagged: Vec<&str> = text
        .lines()
        .filter(|l| l.starts_with("regressed ") || l.starts_with("improved "))
        .collect();
    assert_eq!(flagged.len(), 1, "{text}");
    assert!(flagged[0].starts_with("regressed q1 hash_row "), "{text}");
    assert!(
        text.contains(&format!(
            "{}\n  called from: probe <- join <- main\n",
            flagged[0]
        )),
        "{text}"
    );
    // The gate names the cause, not its callers.
    let err = util::stderr(&out);
    assert!(
        err.contains("hash_row") && !err.contains("[total]"),
        "{err}"
    );
    // trend.json keeps every finding, each caller naming its cause.
    let t = json(&o.join("trend.json"));
    let sig = significant(&t);
    for caller in ["probe", "join"] {
        let f = sig
            .iter()
            .find(|f| f["function"] == caller && f["kind"] == "total")
            .unwrap_or_else(|| panic!("{caller} [total]: {sig:#?}"));
        assert_eq!(f["cause"], "hash_row", "{f}");
    }
    let cause = sig
        .iter()
        .find(|f| f["function"] == "hash_row" && f["kind"] == "self")
        .unwrap();
    assert_eq!(
        cause["callers"],
        serde_json::json!(["probe", "join", "main"])
    );
    // The page: one row, the callers under the function.
    let html = fs::read_to_string(o.join("trend.html")).unwrap();
    let table = &html[html.find("id=\"jp-findings\"").expect("a findings table")..];
    let table = &table[..table.find("</table>").unwrap()];
    assert_eq!(table.matches("<tr><td class=").count(), 1, "{table}");
    assert!(
        table.contains("called from: probe &lt;- join &lt;- main"),
        "{table}"
    );
}
