//! The flamegraph page's timeline in a real headless Chromium, on a real
//! capture: tests/programs/phases.c runs phase A (`phase_alpha_work`) and
//! then phase B (`phase_beta_work`) while the real sidecar records it;
//! selecting A's time range (from the URL fragment, and by a drag with real
//! mouse events) draws a flamegraph with only A's function, B's range only
//! B's. Where each phase ran is read independently from the archived perf
//! script text.

use std::fs;
use std::io::Read;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::Duration;

use crate::util::{self, jobprof, stderr};

const A: &str = "phase_alpha_work";
const B: &str = "phase_beta_work";

fn wait_ack(cue: &Path, phase: char) {
    let ack = cue.with_extension("ack");
    util::wait_every(
        &format!("the worker to switch to {phase}"),
        Duration::from_secs(30),
        Duration::from_millis(5),
        || fs::read_to_string(&ack).is_ok_and(|s| s.trim() == phase.to_string()),
    );
}

/// Records phase A for `secs`, then phase B for `secs`, and processes the
/// capture with `--formats folded,html`; returns the capture directory.
fn capture_phases(dir: &Path, secs: f64) -> PathBuf {
    let prog = util::program("record-phases", "tests/programs/phases.c", &["-O1"])
        .expect("gcc builds tests/programs/phases.c");
    let cue = dir.join("cue");
    let mut worker = Command::new(prog)
        .args([
            "2".as_ref(),
            cue.as_os_str(),
            "3000".as_ref(),
            "1000".as_ref(),
        ])
        .stdout(Stdio::null())
        .spawn()
        .unwrap();
    wait_ack(&cue, 'A');
    let tokens = dir.join("tokens");
    let perf_root = dir.join("result/profiles/perf");
    fs::create_dir_all(&tokens).unwrap();
    fs::create_dir_all(&perf_root).unwrap();
    let mut sidecar =
        util::sidecar_command(&tokens, 0, worker.id(), &perf_root, &dir.join("staging"))
            .args([
                "--frequency",
                "499",
                "--start-timeout",
                "30",
                "--stop-timeout",
                "20",
            ])
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
    util::wait_sidecar_ready(&mut sidecar, &mut worker, &tokens, Duration::from_secs(60));
    util::record_driver(&tokens, 0, &["start", "--query", "q1"]);
    std::thread::sleep(Duration::from_secs_f64(secs));
    fs::write(&cue, "B\n").unwrap();
    wait_ack(&cue, 'B');
    std::thread::sleep(Duration::from_secs_f64(secs));
    util::record_driver(&tokens, 0, &["stop", "--query", "q1"]);
    util::record_driver(&tokens, 0, &["shutdown"]);
    let out = sidecar.wait_with_output().unwrap();
    fs::write(&cue, "Q\n").unwrap();
    let _ = worker.wait();
    assert!(out.status.success(), "sidecar: {}", util::output_text(&out));
    let cap = perf_root.join("worker_0/q1");
    let o = jobprof()
        .arg("process")
        .arg(&cap)
        .args(["--formats", "folded,html"])
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", stderr(&o));
    cap
}

/// (time in ms, is A, is B) of every sample of the archived text.
fn phase_samples(cap: &Path) -> Vec<(f64, bool, bool)> {
    let mut text = String::new();
    zstd::Decoder::new(fs::File::open(cap.join("perf.script.zst")).unwrap())
        .unwrap()
        .read_to_string(&mut text)
        .unwrap();
    text.split("\n\n")
        .filter_map(|s| {
            let header = s.trim_start_matches('\n').lines().next()?;
            let t = header
                .split_whitespace()
                .find_map(|w| w.strip_suffix(':')?.parse::<f64>().ok())?;
            Some((t * 1e3, s.contains(A), s.contains(B)))
        })
        .collect()
}

/// The names drawn in the page's range flamegraph.
fn range_frames(dom: &str) -> String {
    let at = dom
        .find("id=\"jp-tl-flame\"")
        .expect("the timeline's flamegraph");
    let rest = &dom[at..];
    rest[..rest.find("</section>").unwrap()].to_string()
}

#[test]
fn chromium_draws_only_the_selected_phase() {
    if !util::require(util::perf_can_record(), "perf that can record (root)")
        || !util::require_chromium()
    {
        return;
    }
    let t = tempfile::tempdir().unwrap();
    let cap = capture_phases(t.path(), 1.5);
    let html = cap.join("flamegraph.html");
    let page = fs::read_to_string(&html).unwrap();
    assert!(
        page.contains("id=\"jp-tl-data\""),
        "no timeline in the page"
    );
    let start_s: f64 = {
        let i = page.find("\"startS\":").unwrap() + 9;
        page[i..i + page[i..].find(',').unwrap()].parse().unwrap()
    };
    let samples = phase_samples(&cap);
    let span = |a: bool| {
        let ts: Vec<f64> = samples
            .iter()
            .filter(|s| if a { s.1 } else { s.2 })
            .map(|s| s.0 - start_s * 1e3)
            .collect();
        assert!(
            ts.len() > 50,
            "too few samples of phase {}: {}",
            if a { A } else { B },
            ts.len()
        );
        (
            ts.iter().cloned().fold(f64::MAX, f64::min),
            ts.iter().cloned().fold(0.0, f64::max),
        )
    };
    let (a0, a1) = span(true);
    let (b0, b1) = span(false);
    assert!(
        a1 < b0 + 40.0,
        "phase A ({a0}..{a1} ms) must run before B ({b0}..{b1} ms)"
    );
    // Whole cells strictly inside each phase's run.
    let cell = |ms: f64| (ms / 20.0).floor() as i64 * 20;
    let (sel_a, sel_b) = ((cell(a0) + 20, cell(b0) - 20), (cell(a1) + 40, cell(b1)));
    let url = |frag: String| format!("file://{}#{frag}", html.display());
    let dom = util::dump_dom_url(&url(format!("t={}-{}", sel_a.0, sel_a.1)));
    let f = range_frames(&dom);
    assert!(f.contains(A) && !f.contains(B), "phase A's range: {f}");
    let dom = util::dump_dom_url(&url(format!("t={}-{}", sel_b.0, sel_b.1)));
    let f = range_frames(&dom);
    assert!(f.contains(B) && !f.contains(A), "phase B's range: {f}");
    // The whole capture has both, in inferno's SVG.
    let dom = util::dump_dom_url(&format!("file://{}", html.display()));
    assert!(dom.contains(A) && dom.contains(B));
    assert!(
        !range_frames(&dom).contains("class=\"jp-tl-f\""),
        "nothing selected, nothing drawn"
    );
    // A drag with real mouse events over A's cells selects them and keeps
    // the selection in the fragment.
    let (c0, c1) = (sel_a.0 / 20, sel_a.1 / 20 - 1);
    let dom = util::dump_dom_url(&format!(
        "file://{}?jobprof-tl-drag={c0}-{c1}",
        html.display()
    ));
    let i = dom
        .find("<pre id=\"jp-tl-selftest\">")
        .expect("drag self-test ran");
    let json = &dom[i + 25..];
    let json: serde_json::Value =
        serde_json::from_str(&json[..json.find("</pre>").unwrap()].replace("&quot;", "\""))
            .unwrap();
    assert_eq!(
        json["hash"],
        format!("#t={}-{}", sel_a.0, sel_a.1),
        "{json}"
    );
    assert_eq!(json["svgHidden"], true, "{json}");
    let f = range_frames(&dom);
    assert!(
        f.contains(A) && !f.contains(B),
        "dragged over A's range: {f}"
    );
}
