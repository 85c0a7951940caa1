//! The trend's page and links: `trend.html` (offline: inline style, script
//! and data; one line chart per query drawn as inline SVG by the script,
//! hover for the values, click a point to open that run's flamegraph or its
//! diff against the baseline; the most regressed functions in a table),
//! the links to each run's merged flamegraph (the job views' page of the
//! query's first replicate, when the run has it) and the run-versus-baseline
//! differential flamegraphs of the runs with a significant finding. Every
//! name is escaped: in HTML by [`esc`], in the data block as JSON with `<`
//! and `/` escaped, and the script sets names as text, never as markup.
//! Every link is `./` and percent-encoded segments ([`relative_href`]), so
//! no run or query name can give it a scheme (`javascript:`), and the
//! script refuses to open any other.

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::io::Write as _;
use std::path::Path;

use super::assess::{Finding, TimeFinding};
use super::load::{Replicate, Series};
use super::tally::Tally;
use super::{amount, count_name_of, fmt_p, relative, Trend, DIFFS_DIR};
use crate::error::Result;
use crate::output::render::diff::render_diff;
use crate::output::render::folded::read_folded;
use crate::output::render::html::{esc, relative_href};
use crate::output::render::{Format, RenderOptions};
use crate::sys::atomic::AtomicFile;
use crate::sys::input::Source;

/// Points each query's chart at its runs' flamegraphs.
pub fn link_flamegraphs(trend: &mut Trend, series: &Series, out_dir: &Path) {
    for qt in &mut trend.assessment.queries {
        let Some(q) = series.queries.get(&qt.query) else {
            continue;
        };
        for (i, reps) in q.runs.iter().enumerate() {
            let page = reps.iter().find_map(|r| r.flamegraph.as_ref());
            qt.flamegraphs[i] = page
                .and_then(|p| relative(out_dir, p))
                .and_then(|p| relative_href(&p));
        }
    }
}

/// A file name made of `s`: letters, digits, `.`, `_` and `-` kept.
fn file_safe(s: &str) -> String {
    let t: String = s
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || matches!(c, '_' | '-' | '.') {
                c
            } else {
                '_'
            }
        })
        .collect();
    if t.starts_with('.') {
        format!("_{t}")
    } else {
        t
    }
}

/// Draws `diffs/<Q>.run<N>.diff.html` for every query and run with a
/// significant finding: the run against its latest baseline run (or the
/// chosen one), both sides' replicates and workers added up; for stacks a
/// differential flamegraph (the baseline scaled to the run's total), for
/// a table series (GPU kernels, NVTX ranges) each row's total per
/// replicate in both runs and its change.
pub fn draw_diffs(trend: &mut Trend, series: &Series, out_dir: &Path) -> Result<()> {
    let mut pairs: Vec<(String, usize, usize)> = trend
        .significant()
        .filter_map(|f| Some((f.query.clone(), f.run, *f.baseline_runs.iter().max()?)))
        .collect();
    pairs.sort();
    pairs.dedup_by(|a, b| a.0 == b.0 && a.1 == b.1);
    if pairs.is_empty() {
        return Ok(());
    }
    let dir = out_dir.join(DIFFS_DIR);
    std::fs::create_dir_all(&dir).map_err(|e| crate::error::Error::io(&dir, e))?;
    for (query, run, base) in pairs {
        let Some(q) = series.queries.get(&query) else {
            continue;
        };
        let name = format!("{}.run{}.diff.html", file_safe(&query), run + 1);
        let title = format!(
            "query {query} · run {} ({}) against run {} ({})",
            run + 1,
            trend.runs[run].name,
            base + 1,
            trend.runs[base].name
        );
        let (before, after) = (&q.runs[base], &q.runs[run]);
        let path = dir.join(&name);
        // A table's series (GPU kernels, NVTX ranges) has no stacks: its
        // rows side by side instead.
        if q.runs.iter().flatten().any(|r| !r.tables.is_empty()) {
            let page = table_diff(&title, before, after)?;
            let mut f = AtomicFile::create(&path)?;
            f.write_all(page.as_bytes())
                .map_err(|e| crate::error::Error::io(&path, e))?;
            f.commit()?;
        } else if q.runs.iter().flatten().any(|r| !r.folded.is_empty()) {
            let count_name = trend.settings.count_name.clone();
            stack_diff(&path, title, count_name, before, after)?;
        } else {
            continue;
        }
        if let Some(qt) = trend
            .assessment
            .queries
            .iter_mut()
            .find(|qt| qt.query == query)
        {
            qt.diffs[run] = relative_href(&Path::new(DIFFS_DIR).join(&name));
        }
    }
    Ok(())
}

/// The differential flamegraph of `after`'s stacks against `before`'s.
fn stack_diff(
    path: &Path,
    title: String,
    count_name: String,
    before: &[Replicate],
    after: &[Replicate],
) -> Result<()> {
    let stacks = |reps: &[Replicate]| -> Result<Vec<(String, u64)>> {
        let files: Vec<Source> = reps
            .iter()
            .flat_map(|r| r.folded.iter().map(|p| Source::Path(p.clone())))
            .collect();
        Ok(read_folded(&files)?.stacks)
    };
    let opts = RenderOptions {
        title,
        subtitle: Some("red grew, blue shrank; the baseline is scaled to the run's total".into()),
        count_name,
        ..RenderOptions::default()
    };
    let mut f = AtomicFile::create(path)?;
    render_diff(
        &stacks(before)?,
        &stacks(after)?,
        true,
        Format::Html,
        &opts,
        &mut f,
    )?;
    f.commit()
}

/// Each row's total per replicate (ns) over `reps`, by name.
fn table_rows(reps: &[Replicate]) -> Result<BTreeMap<String, f64>> {
    let mut rows = BTreeMap::new();
    for r in reps {
        let mut tally = Tally::default();
        for path in &r.tables {
            tally.add_table(path)?;
        }
        for (name, ns, _) in tally.into_counts() {
            *rows.entry(name).or_insert(0.0) += ns as f64;
        }
    }
    let n = reps.len().max(1) as f64;
    rows.values_mut().for_each(|v| *v /= n);
    Ok(rows)
}

/// The run-versus-baseline page of a table series: every row's total per
/// replicate in both runs and its change, the most grown first.
fn table_diff(title: &str, base: &[Replicate], run: &[Replicate]) -> Result<String> {
    let (before, after) = (table_rows(base)?, table_rows(run)?);
    let mut rows: Vec<(&str, f64, f64)> = before
        .keys()
        .chain(after.keys())
        .map(|k| {
            let get = |m: &BTreeMap<String, f64>| m.get(k).copied().unwrap_or(0.0);
            (k.as_str(), get(&before), get(&after))
        })
        .collect();
    rows.sort_by(|a, b| (b.2 - b.1).total_cmp(&(a.2 - a.1)).then(a.0.cmp(b.0)));
    rows.dedup_by(|a, b| a.0 == b.0);
    let mut body = String::new();
    for (name, b, a) in rows {
        let pct = if b > 0.0 {
            format!("{:+.1}%", 100.0 * (a - b) / b)
        } else {
            "new".into()
        };
        let _ = writeln!(
            body,
            "<tr><td>{}</td><td class=\"num\">{b:.0}</td><td class=\"num\">{a:.0}</td>\
             <td class=\"num\">{:+.0}</td><td class=\"num\">{pct}</td></tr>",
            esc(name),
            a - b
        );
    }
    Ok(format!(
        "<!DOCTYPE html>\n<html><head><meta charset=\"utf-8\"><title>{t}</title>\
         <style>{TABLE_STYLE}</style></head><body><h1>{t}</h1>\
         <p>each row's total per replicate (ns), the most grown first</p>\n\
         <table><tr><th>name</th><th>baseline ns</th><th>run ns</th><th>change ns</th>\
         <th>change</th></tr>\n{body}</table></body></html>\n",
        t = esc(title)
    ))
}

const TABLE_STYLE: &str = "body { font-family: sans-serif; margin: 1em; } \
    table { border-collapse: collapse; } td, th { padding: 0.2em 0.6em; text-align: left; } \
    td.num { text-align: right; font-variant-numeric: tabular-nums; } \
    tr:nth-child(even) { background: #f6f6f6; }";

const STYLE: &str = r##"
body { margin: 0; font-family: sans-serif; color: #222; background: #fff; }
header { padding: 0.6em 1em; border-bottom: 1px solid #ddd; background: #f6f6f6; }
header h1 { font-size: 1.2em; margin: 0 0 0.3em 0; }
dl.jp-facts { display: grid; grid-template-columns: max-content auto; gap: 0.1em 1em; margin: 0; font-size: 0.9em; }
dl.jp-facts dt { color: #555; } dl.jp-facts dd { margin: 0; }
main { padding: 0.5em 1em 2em 1em; }
h2 { font-size: 1.05em; margin: 1em 0 0.4em 0; }
p.jp-note, ul.jp-notes { font-size: 0.9em; color: #555; margin: 0.2em 0 0.6em 0; }
table { border-collapse: collapse; font-size: 0.88em; }
th, td { border: 1px solid #ddd; padding: 0.25em 0.5em; text-align: left; vertical-align: top; }
th { background: #eee; }
td.num { text-align: right; font-variant-numeric: tabular-nums; white-space: nowrap; }
td.fn { font-family: monospace; font-size: 0.95em; max-width: 40em; overflow-wrap: anywhere; }
div.jp-callers { font-family: sans-serif; color: #555; margin-top: 0.2em; }
.up { color: #b00; } .down { color: #00b; }
section.jp-query { margin: 1em 0 1.5em 0; }
section.jp-query h3 { font-size: 1em; margin: 0 0 0.3em 0; }
.jp-controls { font-size: 0.85em; margin-bottom: 0.3em; }
svg.jp-chart { border: 1px solid #ddd; background: #fff; }
svg.jp-chart circle { cursor: pointer; }
svg.jp-chart circle.jp-flag { stroke: #000; stroke-width: 2; }
/* The legend beside the chart (below it on a narrow window), so that a
   query's chart and its names fit in one screen. */
div.jp-plot { display: flex; flex-wrap: wrap; gap: 0.3em 1.2em; align-items: flex-start; }
ul.jp-legend { list-style: none; padding: 0; margin: 0.3em 0; font-family: monospace; font-size: 14px; }
ul.jp-legend li span.sw { display: inline-block; width: 1.2em; height: 0.6em; margin-right: 0.4em; }
#jp-tip { position: fixed; pointer-events: none; background: #ffe; border: 1px solid #aaa; padding: 0.3em 0.5em; font-size: 0.85em; display: none; max-width: 40em; overflow-wrap: anywhere; }
"##;

/// The chart script: draws every `section.jp-query` from the data block.
/// With `?jobprof-selftest=chart` it writes what it drew into
/// `<pre id="jp-selftest">`; with `?jobprof-selftest=click&query=Q&run=N`
/// (`&fn=F`, `&mode=diff`) it clicks that point (for the browser test).
const SCRIPT: &str = r##"
(function () {
  var data = JSON.parse(document.getElementById("jp-trend-data").textContent);
  var NS = "http:" + "//www.w3.org/2000/svg";
  var COLORS = ["#d62728", "#1f77b4", "#2ca02c", "#ff7f0e", "#9467bd", "#8c564b",
                "#e377c2", "#7f7f7f", "#bcbd22", "#17becf"];
  var tip = document.getElementById("jp-tip");
  function el(name, attrs) {
    var e = document.createElementNS(NS, name);
    for (var k in attrs) e.setAttribute(k, attrs[k]);
    return e;
  }
  function runLabel(i) {
    var r = data.runs[i];
    return "run " + (i + 1) + " · " + r.name + (r.started ? " · " + r.started : "");
  }
  function fmt(x) { return x.toFixed(x < 10 ? 2 : 1) + "%"; }
  function flagged(q, fn, kind, run) {
    return data.findings.some(function (f) {
      return f.significant && f.query === q && f.function === fn && f.kind === kind && f.run === run;
    });
  }
  // The page writes every link as "./" and percent-encoded segments;
  // anything else (a scheme such as javascript:, an edited page) is
  // refused, and so is a link that resolves to another scheme.
  function safe(href) {
    if (typeof href !== "string" || !/^\.\.?\//.test(href)) return false;
    try {
      return new URL(href, window.location.href).protocol === window.location.protocol;
    } catch (e) {
      return false;
    }
  }
  function open(q, run, mode) {
    var href = mode === "diff" ? (q.diffs[run] || null) : (q.flamegraphs[run] || null);
    if (!href && mode === "diff") href = q.flamegraphs[run] || null;
    if (!href) { return null; }
    if (!safe(href)) { return false; }
    window.location.href = href;
    return href;
  }
  function draw(section, q) {
    var kind = section.querySelector("select.jp-kind").value;
    var series = kind === "total" ? q.total_series : q.self_series;
    var svg = section.querySelector("svg.jp-chart");
    while (svg.firstChild) svg.removeChild(svg.firstChild);
    var W = 720, H = 280, L = 48, R = 12, T = 12, B = 30, n = data.runs.length;
    var max = 1;
    series.forEach(function (s) { s.points.forEach(function (p) { if (p && p.max > max) max = p.max; }); });
    max = Math.ceil(max / 5) * 5;
    function x(i) { return L + (n > 1 ? i * (W - L - R) / (n - 1) : (W - L - R) / 2); }
    function y(v) { return T + (H - T - B) * (1 - v / max); }
    for (var g = 0; g <= 5; g++) {
      var v = max * g / 5;
      svg.appendChild(el("line", { x1: L, x2: W - R, y1: y(v), y2: y(v), stroke: "#eee" }));
      var t = el("text", { x: L - 4, y: y(v) + 4, "text-anchor": "end", "font-size": 12 });
      t.textContent = v.toFixed(0) + "%";
      svg.appendChild(t);
    }
    for (var i = 0; i < n; i++) {
      var t2 = el("text", { x: x(i), y: H - 10, "text-anchor": "middle", "font-size": 12 });
      t2.textContent = String(i + 1);
      svg.appendChild(t2);
    }
    var legend = section.querySelector("ul.jp-legend");
    while (legend.firstChild) legend.removeChild(legend.firstChild);
    series.forEach(function (s, k) {
      var color = COLORS[k % COLORS.length];
      var d = "";
      s.points.forEach(function (p, i) {
        if (!p) return;
        d += (d ? " L" : "M") + x(i).toFixed(1) + " " + y(p.mean).toFixed(1);
      });
      svg.appendChild(el("path", { d: d, fill: "none", stroke: color, "stroke-width": 1.5, "class": "jp-line" }));
      s.points.forEach(function (p, i) {
        if (!p) return;
        if (p.n > 1) svg.appendChild(el("line", { x1: x(i), x2: x(i), y1: y(p.min), y2: y(p.max), stroke: color, "stroke-opacity": 0.5 }));
        var c = el("circle", { cx: x(i), cy: y(p.mean), r: 4, fill: color, "class": "jp-point" });
        if (flagged(q.query, s.function, kind, i)) c.setAttribute("class", "jp-point jp-flag");
        c.jpRun = i; c.jpFn = s.function;
        c.addEventListener("mousemove", function (e) {
          tip.textContent = runLabel(i) + " — " + s.function + " (" + kind + "): " + fmt(p.mean) +
            (p.n > 1 ? " (replicates " + fmt(p.min) + " to " + fmt(p.max) + ", n=" + p.n + ")" : "");
          tip.style.display = "block";
          tip.style.left = (e.clientX + 12) + "px"; tip.style.top = (e.clientY + 12) + "px";
        });
        c.addEventListener("mouseleave", function () { tip.style.display = "none"; });
        c.addEventListener("click", function () {
          var mode = section.querySelector("select.jp-open").value;
          var opened = open(q, i, mode);
          if (opened === false) {
            tip.textContent = "link of run " + (i + 1) + " refused: not a relative path";
            tip.style.display = "block";
          } else if (!opened) {
            tip.textContent = "no page for run " + (i + 1) + " (process it with jobprof reprocess)";
            tip.style.display = "block";
          }
        });
        svg.appendChild(c);
      });
      var li = document.createElement("li");
      var sw = document.createElement("span");
      sw.className = "sw"; sw.style.background = color;
      li.appendChild(sw);
      li.appendChild(document.createTextNode(s.function));
      legend.appendChild(li);
    });
  }
  var sections = document.querySelectorAll("section.jp-query");
  Array.prototype.forEach.call(sections, function (section) {
    var q = data.queries[Number(section.getAttribute("data-index"))];
    draw(section, q);
    section.querySelector("select.jp-kind").addEventListener("change", function () { draw(section, q); });
  });
  var p = new URLSearchParams(window.location.search);
  var st = p.get("jobprof-selftest");
  if (st === "chart") {
    var out = [];
    Array.prototype.forEach.call(sections, function (s) {
      var q = data.queries[Number(s.getAttribute("data-index"))];
      out.push({ query: q.query, lines: s.querySelectorAll("path.jp-line").length,
                 points: s.querySelectorAll("circle.jp-point").length,
                 flagged: s.querySelectorAll("circle.jp-flag").length,
                 legend: Array.prototype.map.call(s.querySelectorAll("ul.jp-legend li"), function (li) { return li.textContent; }) });
    });
    var pre = document.createElement("pre");
    pre.id = "jp-selftest";
    pre.textContent = JSON.stringify(out);
    document.body.appendChild(pre);
  } else if (st === "click") {
    Array.prototype.forEach.call(sections, function (s) {
      var q = data.queries[Number(s.getAttribute("data-index"))];
      if (q.query !== p.get("query")) return;
      if (p.get("mode")) s.querySelector("select.jp-open").value = p.get("mode");
      var run = Number(p.get("run")) - 1;
      var pts = s.querySelectorAll("circle.jp-point");
      for (var i = 0; i < pts.length; i++) {
        if (pts[i].jpRun === run && (!p.get("fn") || pts[i].jpFn === p.get("fn"))) {
          pts[i].dispatchEvent(new MouseEvent("click", { bubbles: true }));
          break;
        }
      }
    });
  }
})();
"##;

/// JSON for a `<script type="application/json">` block: no `<` or `/`
/// that could end it.
fn script_json(trend: &Trend) -> String {
    serde_json::to_string(trend)
        .expect("the trend serializes")
        .replace('<', "\\u003c")
        .replace('/', "\\/")
}

fn pct(x: f64) -> String {
    format!("{x:.1}%")
}

/// The page.
pub fn html(t: &Trend) -> String {
    let mut o = String::with_capacity(64 << 10);
    let title = format!("Trend of {} runs", t.runs.len());
    let _ = write!(
        o,
        "<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n\
         <meta name=\"generator\" content=\"jobprof {}\">\n<title>{}</title>\n\
         <style>{STYLE}</style>\n</head>\n<body>\n<header>\n<h1>{}</h1>\n<dl class=\"jp-facts\">\n",
        env!("CARGO_PKG_VERSION"),
        esc(&title),
        esc(&title)
    );
    for (k, v) in facts(t) {
        let _ = writeln!(o, "<dt>{}</dt><dd>{}</dd>", esc(&k), esc(&v));
    }
    o.push_str("</dl>\n</header>\n<main>\n");
    if !t.assessment.notes.is_empty() || !t.assessment.unjudged.is_empty() {
        o.push_str("<ul class=\"jp-notes\">\n");
        for u in &t.assessment.unjudged {
            let _ = writeln!(
                o,
                "<li class=\"up\">Not judged: run {} ({}), query {}: {}</li>",
                u.run + 1,
                esc(&t.runs[u.run].name),
                esc(&u.query),
                esc(&u.reason)
            );
        }
        for n in &t.assessment.notes {
            let _ = writeln!(o, "<li>{}</li>", esc(n));
        }
        o.push_str("</ul>\n");
    }
    findings_table(&mut o, t);
    times_table(&mut o, &t.assessment.time_findings, &t.settings.count_name);
    runs_table(&mut o, t);
    o.push_str(
        "<h2>Queries</h2>\n<p class=\"jp-note\">Each line is a function's share of the \
        query's samples per run (the mean over the run's replicates; the vertical bar spans them). \
        Circled points are significant changes. Hover a point for its values; click it to open \
        that run's flamegraph or its diff against the baseline.</p>\n",
    );
    for (i, q) in t.assessment.queries.iter().enumerate() {
        let _ = write!(
            o,
            "<section class=\"jp-query\" data-index=\"{i}\" id=\"q-{}\">\n<h3>Query {}</h3>\n\
             <div class=\"jp-controls\"><label>Share <select class=\"jp-kind\">\
             <option value=\"self\">self</option><option value=\"total\">total</option></select></label> \
             <label>Click opens <select class=\"jp-open\"><option value=\"flamegraph\">the run's \
             flamegraph</option><option value=\"diff\">the run against the baseline</option>\
             </select></label></div>\n\
             <div class=\"jp-plot\"><svg class=\"jp-chart\" width=\"720\" height=\"280\" role=\"img\" \
             aria-label=\"Shares of query {} per run\"></svg>\n\
             <ul class=\"jp-legend\"></ul></div>\n</section>\n",
            esc(&file_id(&q.query)),
            esc(&q.query),
            esc(&q.query)
        );
    }
    let _ = write!(
        o,
        "</main>\n<div id=\"jp-tip\"></div>\n<script type=\"application/json\" id=\"jp-trend-data\">{}</script>\n\
         <script>{SCRIPT}</script>\n</body>\n</html>\n",
        script_json(t)
    );
    o
}

fn file_id(q: &str) -> String {
    file_safe(q)
}

fn facts(t: &Trend) -> Vec<(String, String)> {
    let s = &t.settings;
    let runs = match (t.runs.first(), t.runs.last()) {
        (Some(a), Some(b)) => format!("{} ({} .. {})", t.runs.len(), a.name, b.name),
        _ => "0".into(),
    };
    let tested: Vec<String> = t
        .assessment
        .tested_runs
        .iter()
        .map(|i| (i + 1).to_string())
        .collect();
    vec![
        ("Runs".into(), runs),
        ("Queries".into(), t.assessment.queries.len().to_string()),
        (
            "Profile".into(),
            format!("{} ({})", s.profile, s.count_name),
        ),
        ("Tested".into(), format!("run {}", tested.join(", "))),
        ("Baseline".into(), s.baseline.clone()),
        (
            "Threshold".into(),
            format!(
                "a change of more than {} points and {} standard deviations of the baseline runs",
                s.min_change, s.noise_sigmas
            ),
        ),
        (
            "Test".into(),
            format!(
                "permutation over replicates (two-sided), one family per query and run \
                 (Simes), Benjamini-Hochberg at {}",
                s.alpha
            ),
        ),
        ("Replicates".into(), s.replicate_rule.into()),
        (
            "Written".into(),
            format!("{} by jobprof {}", t.generated, t.tool_version),
        ),
    ]
}

fn findings_table(o: &mut String, t: &Trend) {
    let sig: Vec<&Finding> = t.reported().collect();
    let (up, down): (Vec<&Finding>, Vec<&Finding>) = sig.iter().partition(|f| f.change > 0.0);
    o.push_str("<h2>Most regressed functions</h2>\n");
    if sig.is_empty() && t.assessment.plan_changes.is_empty() {
        o.push_str("<p class=\"jp-note\">No significant change: nothing regressed or improved beyond the threshold and the noise.</p>\n");
        return;
    }
    if up.is_empty() {
        o.push_str(
            "<p class=\"jp-note\">Nothing regressed beyond the threshold and the noise.</p>\n",
        );
    } else {
        o.push_str(
            "<p class=\"jp-note\">Significant rises of a function's share whose own time per \
             replicate rose too, largest first. A function whose own time rose is listed once, \
             with its callers under it (their total time rose with it; trend.json keeps their \
             findings, each naming its cause). Change and threshold are in percentage points \
             of the query's samples.</p>\n",
        );
        finding_rows(o, t, "jp-findings", &up);
    }
    if !down.is_empty() {
        o.push_str("<h2>Most improved functions</h2>\n");
        o.push_str(
            "<p class=\"jp-note\">Significant falls of a function's share whose own time per \
             replicate fell too, largest first.</p>\n",
        );
        finding_rows(o, t, "jp-improved", &down);
    }
    plan_rows(o, t);
}

/// The plan changes: per query and run, the functions that appeared and
/// vanished, each once ([`super::PlanChange`]).
fn plan_rows(o: &mut String, t: &Trend) {
    if t.assessment.plan_changes.is_empty() {
        return;
    }
    o.push_str(
        "<h2>Plan changes</h2>\n<p class=\"jp-note\">Functions with a significant change \
         that no baseline replicate has (appeared; their share in the run) or no replicate \
         of the run has (vanished; their share in the baseline): the query's plan changed. \
         trend.json keeps their findings, each marked with its <code>plan_change</code>.</p>\n\
         <table id=\"jp-plan\"><thead><tr><th>Query</th><th>Run</th><th>Appeared</th>\
         <th>Vanished</th></tr></thead>\n<tbody>\n",
    );
    let list = |v: &[super::PlanFunction]| -> String {
        let items: Vec<String> = v
            .iter()
            .map(|e| format!("{} ({})", esc(&e.function), pct(e.share)))
            .collect();
        if items.is_empty() {
            "-".to_string()
        } else {
            items.join("<br>")
        }
    };
    for p in &t.assessment.plan_changes {
        let _ = writeln!(
            o,
            "<tr><td>{}</td><td class=\"num\">{}</td><td class=\"fn up\">{}</td>\
             <td class=\"fn down\">{}</td></tr>",
            esc(&p.query),
            p.run + 1,
            list(&p.appeared),
            list(&p.vanished)
        );
    }
    o.push_str("</tbody></table>\n");
}

/// One table of findings (`id`), a row each.
fn finding_rows(o: &mut String, t: &Trend, id: &str, sig: &[&Finding]) {
    let _ = write!(
        o,
        "<table id=\"{id}\"><thead><tr><th>Verdict</th><th>Query</th><th>Function</th>\
        <th>Share</th><th>Run</th><th>Baseline</th><th>New</th><th>Change (points)</th>\
        <th>Own time</th><th>p</th><th>q</th><th>Threshold (points)</th><th>Diff</th></tr>\
        </thead>\n<tbody>\n",
    );
    for &f in sig {
        let class = if f.change > 0.0 { "up" } else { "down" };
        let diff = t
            .assessment
            .queries
            .iter()
            .find(|q| q.query == f.query)
            .and_then(|q| q.diffs[f.run].as_deref())
            .map_or("-".to_string(), |d| {
                format!("<a href=\"{}\">diff</a>", esc(d))
            });
        let callers = if f.callers.is_empty() {
            String::new()
        } else {
            let shown = super::CALLERS_SHOWN;
            let mut names: Vec<&str> = f.callers.iter().take(shown).map(String::as_str).collect();
            let more = format!("... ({} more)", f.callers.len().saturating_sub(shown));
            if f.callers.len() > shown {
                names.push(&more);
            }
            format!(
                "<div class=\"jp-callers\" title=\"{}\">called from: {}</div>",
                esc(&f.callers.join(" <- ")),
                esc(&names.join(" <- "))
            )
        };
        let _ = writeln!(
            o,
            "<tr><td class=\"{class}\">{}</td><td>{}</td><td class=\"fn\">{}{callers}</td><td>{}</td>\
             <td class=\"num\">{}</td><td class=\"num\">{}</td><td class=\"num\">{} ± {:.1}</td>\
             <td class=\"num {class}\">{:+.1}</td><td class=\"num\">{} → {}</td>\
             <td class=\"num\">{}</td><td class=\"num\">{}</td>\
             <td class=\"num\">{:.1}</td><td>{diff}</td></tr>",
            f.verdict,
            esc(&f.query),
            esc(&f.function),
            f.kind.as_str(),
            f.run + 1,
            pct(f.baseline),
            pct(f.new),
            f.new_spread.sd,
            f.change,
            esc(&amount(
                f.baseline_time,
                count_name_of(&f.query, &t.settings.count_name)
            )),
            esc(&amount(
                f.new_time,
                count_name_of(&f.query, &t.settings.count_name)
            )),
            fmt_p(f.p),
            fmt_p(f.q),
            f.threshold
        );
    }
    o.push_str("</tbody></table>\n");
}

fn times_table(o: &mut String, times: &[TimeFinding], count_name: &str) {
    let sig: Vec<&TimeFinding> = times.iter().filter(|f| f.significant).collect();
    if sig.is_empty() {
        return;
    }
    o.push_str(
        "<h2>Queries whose total changed</h2>\n<table id=\"jp-times\"><thead><tr>\
        <th>Verdict</th><th>Query</th><th>Run</th><th>Baseline</th><th>New</th><th>Change</th>\
        <th>p</th></tr></thead>\n<tbody>\n",
    );
    for f in sig {
        let _ = writeln!(
            o,
            "<tr><td>{}</td><td>{}</td><td class=\"num\">{}</td><td class=\"num\">{}</td>\
             <td class=\"num\">{}</td><td class=\"num\">{:+.1}%</td><td class=\"num\">{}</td></tr>",
            f.verdict,
            esc(&f.query),
            f.run + 1,
            esc(&amount(f.baseline, count_name_of(&f.query, count_name))),
            esc(&amount(f.new, count_name_of(&f.query, count_name))),
            f.change_pct,
            fmt_p(f.p)
        );
    }
    o.push_str("</tbody></table>\n");
}

fn runs_table(o: &mut String, t: &Trend) {
    o.push_str(
        "<h2>Runs</h2>\n<table id=\"jp-runs\"><thead><tr><th>Run</th><th>Name</th>\
        <th>Job</th><th>Started</th><th>Labels</th></tr></thead>\n<tbody>\n",
    );
    for (i, r) in t.runs.iter().enumerate() {
        let labels: Vec<String> = r.labels.iter().map(|(k, v)| format!("{k}={v}")).collect();
        let jobs: Vec<&str> = r.job_ids.iter().map(String::as_str).collect();
        let _ = writeln!(
            o,
            "<tr><td class=\"num\">{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td></tr>",
            i + 1,
            esc(&r.name),
            esc(&jobs.join(", ")),
            esc(r.started.as_deref().unwrap_or("-")),
            esc(&labels.join(", "))
        );
    }
    o.push_str("</tbody></table>\n");
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::sys::stats::Method;

    /// Pixel sizes of `font-size` in `text` (`font-size: 14px` in the
    /// style, `"font-size": 12` in the script).
    fn font_sizes(text: &str) -> Vec<(String, f64)> {
        text.match_indices("font-size")
            .map(|(i, _)| {
                let rest = &text[i + "font-size".len()..];
                let v: String = rest
                    .trim_start_matches(['"', ':', ' '])
                    .chars()
                    .take_while(|c| c.is_ascii_alphanumeric() || *c == '.')
                    .collect();
                let line = text[..i].rsplit('\n').next().unwrap_or("").to_string();
                let px = match v.strip_suffix("em") {
                    Some(em) => em.parse::<f64>().unwrap_or(0.0) * 16.0,
                    None => v.trim_end_matches("px").parse().unwrap_or(0.0),
                };
                (line, px)
            })
            .collect()
    }

    #[test]
    fn chart_labels_and_function_names_are_readable() {
        // The legend (the charted functions' names) and the axis labels.
        let legend: Vec<(String, f64)> = font_sizes(STYLE)
            .into_iter()
            .filter(|(l, _)| l.contains("jp-legend"))
            .collect();
        assert!(
            !legend.is_empty() && legend.iter().all(|(_, px)| *px >= 14.0),
            "{legend:?}"
        );
        let axes = font_sizes(SCRIPT);
        assert!(
            !axes.is_empty() && axes.iter().all(|(_, px)| *px >= 12.0),
            "{axes:?}"
        );
    }

    #[test]
    fn the_totals_table_writes_amounts_and_p_as_stdout_does() {
        let f = TimeFinding {
            verdict: "slower",
            significant: true,
            query: "q1".into(),
            run: 3,
            baseline_runs: 3,
            load_sd: Some(0.01),
            load_df: 2,
            baseline: 735_343_292.0,
            new: 1_503_000_000.0,
            change_pct: 104.4,
            threshold_pct: 10.0,
            p: 0.0004,
            q: 0.0008,
            method: Method::BetweenRuns,
        };
        let mut o = String::new();
        times_table(&mut o, &[f], "ns");
        for want in ["0.74 s", "1.50 s", &fmt_p(0.0004)] {
            assert!(o.contains(want), "{want}: {o}");
        }
        assert!(!o.contains("735343292"), "raw ns: {o}");
    }
}
