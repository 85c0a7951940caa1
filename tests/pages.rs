//! Every HTML page as a user sees it in a 1400x900 browser window (issue
//! 58, item 9): real headless Chromium lays out pages made from the real
//! demo capture (fixtures/result_dir_demo, recorded by perf) and measures
//! them ([`util::probe_layout`]), or takes the screenshot and reads its
//! pixels ([`util::screenshot`]; the PNGs are left in
//! target/test-screenshots/ for a person to look at). What is checked:
//! the title said once, the flamegraph in the first screen, the heat map
//! no taller than needed and no empty space beside it, the diff's legend
//! said once, the trend's legend beside its chart.

use std::path::{Path, PathBuf};

use serde_json::Value;

use crate::render::processed_demo;
use crate::util::{self, jobprof, probe_layout, require_chromium, WINDOW};

/// Boxes and counts of a flamegraph page: how often its title shows, the
/// heat map and its section, the graph, the top of its highest frame and
/// the bottom of its root frame (`all`).
const FLAMEGRAPH_PROBE: &str = r##"(function () {
  var top = Infinity, root = null;
  Array.prototype.forEach.call(doc.querySelectorAll("#frames > g"), function (g) {
    var r = g.querySelector("rect").getBoundingClientRect();
    if (r.height > 0) top = Math.min(top, r.top);
    if (g.querySelector("title").textContent.indexOf("all (") === 0) root = r.bottom;
  });
  return { titles: shown(doc.title), heat: box("#jp-tl-heat"), section: box("#jp-timeline"),
           svg: box("#jp-main > svg"), framesTop: top, rootBottom: root };
})()"##;

fn num(v: &Value, path: &str) -> f64 {
    path.split('.')
        .fold(v, |v, k| &v[k])
        .as_f64()
        .unwrap_or_else(|| panic!("no number at {path}: {v}"))
}

/// The demo capture processed under `dir`: its page, and the page of its
/// query over all workers.
fn demo_pages(dir: &Path) -> (PathBuf, PathBuf) {
    let root = dir.join("r");
    let capture = processed_demo(&root);
    let query = root.join("profiles/perf/queries/q01/flamegraph.html");
    assert!(query.is_file(), "{}", query.display());
    (capture.join("flamegraph.html"), query)
}

#[test]
fn flamegraph_page_fits_a_1400x900_window() {
    if !require_chromium() {
        return;
    }
    let t = tempfile::tempdir().unwrap();
    let (capture, query) = demo_pages(t.path());
    let p = probe_layout(&capture, "", FLAMEGRAPH_PROBE);
    eprintln!("at {WINDOW:?}: {p}");
    // The title once (the header's h1; the SVG drew it again).
    assert_eq!(p["titles"], 1, "{p}");
    // The heat map: 100 px a second plus its axis (it was a 316 px box)
    // across its section (it was 192 px of 920, the rest empty).
    assert!(num(&p, "heat.height") <= 130.0, "{p}");
    assert!(
        num(&p, "heat.width") >= 0.9 * num(&p, "section.width"),
        "{p}"
    );
    // The graph starts within the first third of the window, its frames
    // at its top (no band for a title), and its root frame is on screen.
    assert!(num(&p, "svg.top") <= WINDOW.1 as f64 / 3.0, "{p}");
    assert!(num(&p, "framesTop") - num(&p, "svg.top") <= 12.0, "{p}");
    assert!(num(&p, "rootBottom") <= WINDOW.1 as f64, "{p}");

    // The query's page over all workers (no timeline): the same.
    let p = probe_layout(&query, "", FLAMEGRAPH_PROBE);
    assert_eq!(p["titles"], 1, "{p}");
    assert!(p["heat"].is_null(), "{p}");
    assert!(num(&p, "svg.top") <= 150.0, "{p}");
    assert!(num(&p, "framesTop") - num(&p, "svg.top") <= 12.0, "{p}");
}

/// The screenshot of the demo capture's page: the heat map is painted
/// across its section's width (not a narrow box beside empty space) and
/// the graph's root frames are painted across the graph, all in the first
/// 900 px. The PNG stays in target/test-screenshots/flamegraph.png.
#[test]
fn screenshot_of_the_flamegraph_page_shows_heat_map_and_graph() {
    if !require_chromium() {
        return;
    }
    let t = tempfile::tempdir().unwrap();
    let (capture, _) = demo_pages(t.path());
    let p = probe_layout(&capture, "", FLAMEGRAPH_PROBE);
    let shots = util::repo_root().join("target/test-screenshots");
    std::fs::create_dir_all(&shots).unwrap();
    let png = shots.join("flamegraph.png");
    let shot = util::screenshot(&capture, "", &png);
    assert_eq!((shot.width, shot.height), (1400, 900), "{}", png.display());
    // Share of a row's pixels from x0 to x1 that `is` picks.
    let share = |y: f64, x0: f64, x1: f64, is: &dyn Fn([u8; 3]) -> bool| {
        let (y, x0, x1) = (y as usize, x0 as usize, x1 as usize);
        (x0..x1).filter(|&x| is(shot.at(x, y))).count() as f64 / (x1 - x0) as f64
    };
    // Heat cells are warm (light orange to dark red); empty is white/grey.
    let warm = |[r, g, b]: [u8; 3]| r > 150 && i16::from(r) - i16::from(b) > 60 && g < 235;
    let y = num(&p, "heat.top") + 10.0;
    let (x0, x1) = (num(&p, "section.left"), num(&p, "section.right"));
    let heat = share(y, x0 + 2.0, x1 - 2.0, &warm);
    assert!(
        heat > 0.85,
        "{}: heat map paints {heat:.2} of row {y}",
        png.display()
    );
    // The root frame `all`, on screen and painted across the graph.
    let y = num(&p, "rootBottom") - 5.0;
    assert!(y < WINDOW.1 as f64, "{p}");
    let (x0, x1) = (num(&p, "svg.left") + 20.0, num(&p, "svg.right") - 20.0);
    let root = share(y, x0, x1, &warm);
    assert!(
        root > 0.95,
        "{}: root frame paints {root:.2} of row {y}",
        png.display()
    );
}

#[test]
fn diff_page_says_its_title_and_legend_once() {
    if !require_chromium() {
        return;
    }
    let t = tempfile::tempdir().unwrap();
    let (capture, _) = demo_pages(t.path());
    let before = capture.parent().unwrap().join("stacks.folded");
    // AFTER: demo_hash_key three times as long.
    let after: String = std::fs::read_to_string(&before)
        .unwrap()
        .lines()
        .map(|l| match l.rsplit_once(' ') {
            Some((s, n)) if s.ends_with("demo_hash_key") => {
                format!("{s} {}\n", n.parse::<u64>().unwrap() * 3)
            }
            _ => format!("{l}\n"),
        })
        .collect();
    let after_path = t.path().join("after.folded");
    std::fs::write(&after_path, after).unwrap();
    let page = t.path().join("d.html");
    util::ok(
        &jobprof()
            .arg("diff")
            .args([&before, &after_path])
            .arg("-o")
            .arg(&page)
            .output()
            .unwrap(),
    );
    let p = probe_layout(
        &page,
        "",
        r##"({ titles: shown(doc.title),
              legends: Array.prototype.filter.call(doc.querySelectorAll("body *"), function (e) {
                var r = e.getBoundingClientRect();
                return e.children.length === 0 && r.width > 0 && e.textContent.indexOf("red = grew") >= 0;
              }).length,
              svg: box("#jp-main > svg") })"##,
    );
    // Header subtitle, header note and the SVG's subtitle said it thrice.
    assert_eq!(p["titles"], 1, "{p}");
    assert_eq!(p["legends"], 1, "{p}");
    assert!(num(&p, "svg.top") <= 150.0, "{p}");
}

#[test]
fn trend_page_draws_each_legend_beside_its_chart() {
    if !require_chromium() {
        return;
    }
    let t = tempfile::tempdir().unwrap();
    let (a, b) = (t.path().join("a"), t.path().join("b"));
    for run in [&a, &b] {
        processed_demo(run);
    }
    let out = t.path().join("trend");
    let o = jobprof()
        .arg("trend")
        .args([&a, &b])
        .arg("-o")
        .arg(&out)
        .output()
        .unwrap();
    assert!(
        out.join("trend.html").is_file(),
        "{}",
        util::output_text(&o)
    );
    let p = probe_layout(
        &out.join("trend.html"),
        "",
        r#"({ titles: shown(doc.title), chart: box("svg.jp-chart"), legend: box("ul.jp-legend") })"#,
    );
    assert_eq!(p["titles"], 1, "{p}");
    // Beside: right of the chart, starting above its bottom (it was below).
    assert!(num(&p, "legend.left") >= num(&p, "chart.right"), "{p}");
    assert!(num(&p, "legend.top") < num(&p, "chart.bottom"), "{p}");
    assert!(num(&p, "legend.bottom") <= WINDOW.1 as f64, "{p}");
}

/// A graph taller than the window (stacks of 130 frames, as deep as a
/// dwarf capture's: about 2,100 px) opens on its root frames, not on the
/// empty tips of its deepest stacks (the window showed nothing but a
/// column of narrow frames); an icicle graph opens at its top, where its
/// root is.
#[test]
fn a_deep_flamegraph_opens_on_its_root() {
    if !require_chromium() {
        return;
    }
    let t = tempfile::tempdir().unwrap();
    let chain = |leaf: &str| -> String {
        let frames: Vec<String> = (0..128).map(|i| format!("f{i}")).collect();
        format!("worker;{};{leaf}", frames.join(";"))
    };
    let folded = t.path().join("deep.folded");
    let text = format!("{} 5\n{} 3\nworker;main;run 90\n", chain("a"), chain("b"));
    std::fs::write(&folded, text).unwrap();
    for (name, extra) in [("deep.html", None), ("icicle.html", Some("--inverted"))] {
        let page = t.path().join(name);
        let mut cmd = jobprof();
        cmd.arg("render").arg(&folded).arg("-o").arg(&page);
        cmd.args(extra);
        util::ok(&cmd.output().unwrap());
        let p = probe_layout(&page, "", FLAMEGRAPH_PROBE);
        eprintln!("{name} at {WINDOW:?}: {p}");
        assert!(num(&p, "svg.height") > 2.0 * WINDOW.1 as f64, "{p}");
        // The root frame, `all`, on screen.
        let root = num(&p, "rootBottom");
        assert!(root > 0.0 && root <= WINDOW.1 as f64, "{name}: {p}");
    }
}
