//! The job pages: self-contained offline HTML (inline style and script, no
//! request, no `http(s)://` text) with sortable tables: the job index
//! (`profiles/perf/index.html`, with `index.json` beside it) and the index
//! of a run-versus-run diff. A column header sorts its table on click (again
//! to reverse); `?sort=KEY` or `?sort=-KEY` in the URL sorts on load.

use std::fmt::Write as _;
use std::path::Path;

use super::scan::{Index, NsysCell, NsysProfileCell, OffCpuCells, QueryView, Row, State};
use super::{INDEX_HTML, INDEX_JSON};
use crate::error::Result;
use crate::output::render::html::{esc, group_digits, href_esc};
use crate::sys::atomic::write_in;
use crate::sys::confined::Dir;
use crate::sys::units::format_bytes;

const STYLE: &str = concat!("\n", include_str!("../../assets/job-index.css"));

/// Sorting: every `table.jp-sortable` sorts by a clicked header, on the
/// cells' `data-v` (numbers when the header has `data-num`). With
/// `?jobprof-selftest=sort&table=ID` the page clicks each header of table
/// ID (default: the first) twice and writes what it saw into `<pre id="jp-selftest">`
/// (for the browser test).
const SCRIPT: &str = concat!("\n", include_str!("../../assets/job-index.js"));

/// A table column.
pub struct Col {
    /// Sort key (`?sort=KEY`), also the `data-key` attribute.
    pub key: &'static str,
    /// Header text.
    pub label: &'static str,
    /// Numeric (sorted by number, right-aligned).
    pub num: bool,
}

/// A cell: HTML content (already escaped) and the value it sorts by.
pub struct Cell {
    /// Content (escaped HTML).
    pub html: String,
    /// Sort value (`data-v`); `None` sorts by the text.
    pub v: Option<String>,
    /// Extra class.
    pub class: &'static str,
}

impl Cell {
    /// Text (escaped here), sorted by itself.
    pub fn text(s: &str) -> Cell {
        Cell {
            html: esc(s),
            v: None,
            class: "",
        }
    }

    /// A number shown as `shown`, sorted by `v` ("-" and no value sort
    /// first ascending).
    pub fn num(shown: String, v: Option<f64>) -> Cell {
        Cell {
            html: esc(&shown),
            v: Some(v.map_or_else(|| "-1e300".to_string(), |x| x.to_string())),
            class: "num",
        }
    }

    /// A link (relative path), or "-" without one.
    pub fn link(text: &str, href: Option<&str>) -> Cell {
        match href {
            Some(h) => Cell {
                html: format!("<a href=\"{}\">{}</a>", href_esc(h), esc(text)),
                v: Some(text.to_string()),
                class: "",
            },
            None => Cell::text("-"),
        }
    }
}

/// A sortable table.
pub struct Table {
    /// `id` of the table element.
    pub id: &'static str,
    /// Columns.
    pub cols: Vec<Col>,
    /// Rows: (row class, cells).
    pub rows: Vec<(String, Vec<Cell>)>,
}

impl Table {
    fn write(&self, out: &mut String) {
        let _ = write!(
            out,
            "<table class=\"jp-sortable\" id=\"{}\">\n<thead><tr>",
            self.id
        );
        for c in &self.cols {
            let num = if c.num { " data-num" } else { "" };
            let _ = write!(
                out,
                "<th data-key=\"{}\"{num} title=\"Sort by {}\">{}</th>",
                c.key,
                esc(c.label),
                esc(c.label)
            );
        }
        out.push_str("</tr></thead>\n<tbody>\n");
        for (class, cells) in &self.rows {
            debug_assert_eq!(cells.len(), self.cols.len(), "table {}", self.id);
            let _ = write!(out, "<tr class=\"{}\">", esc(class));
            for c in cells {
                out.push_str("<td");
                if !c.class.is_empty() {
                    let _ = write!(out, " class=\"{}\"", c.class);
                }
                if let Some(v) = &c.v {
                    let _ = write!(out, " data-v=\"{}\"", esc(v));
                }
                let _ = write!(out, ">{}</td>", c.html);
            }
            out.push_str("</tr>\n");
        }
        out.push_str("</tbody>\n</table>\n");
    }
}

/// A section of a page: heading, a note, a table.
pub struct Section {
    /// `<h2>` text.
    pub heading: String,
    /// A line under it.
    pub note: Option<String>,
    /// The table.
    pub table: Table,
}

/// A whole page: title, header facts (label, value), sections.
pub fn page(title: &str, facts: &[(String, String)], sections: &[Section]) -> String {
    let mut o = String::with_capacity(16 << 10);
    let _ = write!(
        o,
        "<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n\
         <meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">\n\
         <meta name=\"generator\" content=\"jobprof {}\">\n<title>{}</title>\n\
         <style>{STYLE}</style>\n</head>\n<body>\n<header>\n<h1>{}</h1>\n<dl class=\"jp-facts\">\n",
        env!("CARGO_PKG_VERSION"),
        esc(title),
        esc(title)
    );
    for (k, v) in facts {
        let _ = writeln!(o, "<dt>{}</dt><dd>{}</dd>", esc(k), esc(v));
    }
    o.push_str("</dl>\n</header>\n<main>\n");
    for s in sections {
        let _ = writeln!(o, "<h2>{}</h2>", esc(&s.heading));
        if let Some(n) = &s.note {
            let _ = writeln!(o, "<p class=\"jp-note\">{}</p>", esc(n));
        }
        s.table.write(&mut o);
    }
    let _ = write!(o, "</main>\n<script>{SCRIPT}</script>\n</body>\n</html>\n");
    o
}

/// `0.9731` as `97.3%`; `None` as `-`.
pub fn pct(share: Option<f64>) -> String {
    share.map_or("-".into(), |s| format!("{:.1}%", 100.0 * s))
}

fn opt_digits(n: Option<u64>) -> String {
    n.map_or("-".into(), group_digits)
}

fn joined(set: &std::collections::BTreeSet<String>, max: usize) -> String {
    if set.is_empty() {
        return "-".into();
    }
    let mut v: Vec<&str> = set.iter().map(String::as_str).take(max).collect();
    let more = set.len().saturating_sub(max);
    let extra = if more > 0 {
        format!(" and {more} more")
    } else {
        String::new()
    };
    v.dedup();
    format!("{}{extra}", v.join(", "))
}

/// Writes `index.json` and `index.html` of `perf_root`, each atomically.
pub fn write_index(root: &Dir, index: &Index) -> Result<()> {
    let mut json = serde_json::to_string_pretty(index).expect("the index serializes");
    json.push('\n');
    write_in(root, INDEX_JSON, true, json.as_bytes())?;
    let html = index_html(root.path(), index);
    write_in(root, INDEX_HTML, true, html.as_bytes())
}

fn index_html(perf_root: &Path, index: &Index) -> String {
    let h = &index.job;
    let result_name = perf_root
        .parent()
        .and_then(Path::parent)
        .and_then(Path::file_name)
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    let title = match h.job_ids.len() {
        0 => format!("{result_name}: job profile"),
        _ => format!("job {} · {result_name}", joined(&h.job_ids, 3)),
    };
    let mut counts: Vec<String> = Vec::new();
    for st in [
        State::Processed,
        State::NotRendered,
        State::Failed,
        State::Refused,
        State::Outdated,
        State::NotProcessed,
        State::NsysOnly,
    ] {
        let n = index.captures.iter().filter(|r| r.state == st).count();
        if n > 0 {
            counts.push(format!("{n} {}", st.as_str()));
        }
    }
    let mut facts = vec![
        ("Job".to_string(), joined(&h.job_ids, 5)),
        (
            "Nodes".to_string(),
            format!("{} ({})", h.hosts.len(), joined(&h.hosts, 8)),
        ),
        (
            "Workers".to_string(),
            format!(
                "{} · queries {} · captures {}",
                h.workers.len(),
                h.queries.len(),
                index.captures.len()
            ),
        ),
        ("State".to_string(), counts.join(", ")),
    ];
    let settings: Vec<String> = h
        .settings
        .iter()
        .map(|(k, v)| format!("{k} {}", joined(v, 3)))
        .collect();
    facts.push(("Capture".to_string(), settings.join(" · ")));
    facts.push((
        "Written".to_string(),
        format!(
            "{} by jobprof {} from the captures' summaries",
            index.generated, index.tool_version
        ),
    ));
    let sections = [queries_section(index), captures_section(index)];
    page(&title, &facts, &sections)
}

fn queries_section(index: &Index) -> Section {
    let rows = index
        .queries
        .iter()
        .map(|q| {
            let cells = vec![
                Cell::text(&q.query),
                replicates_cell(q),
                Cell::num(
                    format!("{} of {}", q.captures_merged, q.captures),
                    Some(q.captures_merged as f64),
                ),
                Cell::num(
                    q.workers_merged.len().to_string(),
                    Some(q.workers_merged.len() as f64),
                ),
                Cell::num(group_digits(q.samples), Some(q.samples as f64)),
                Cell::num(
                    q.imbalance.map_or("-".into(), |x| format!("{x:.2}")),
                    q.imbalance,
                ),
                Cell::link("all workers", q.flamegraph.as_deref()),
            ];
            (String::new(), cells)
        })
        .collect();
    Section {
        heading: "Queries".into(),
        note: Some(
            "One flamegraph per query, merged over its completely processed captures: \
             replicates (q01_iter1, q01_iter2, ... of q01) and workers summed (imbalance: \
             the largest worker's samples over the mean; 1.00 = balanced)."
                .into(),
        ),
        table: Table {
            id: "jp-queries",
            cols: vec![
                Col {
                    key: "query",
                    label: "Query",
                    num: false,
                },
                Col {
                    key: "replicates",
                    label: "Replicates",
                    num: true,
                },
                Col {
                    key: "captures",
                    label: "Captures merged",
                    num: true,
                },
                Col {
                    key: "workers",
                    label: "Workers",
                    num: true,
                },
                Col {
                    key: "samples",
                    label: "Samples",
                    num: true,
                },
                Col {
                    key: "imbalance",
                    label: "Imbalance",
                    num: true,
                },
                Col {
                    key: "flamegraph",
                    label: "Flamegraph",
                    num: false,
                },
            ],
            rows,
        },
    }
}

/// A query's replicate count, with their names when there are several.
fn replicates_cell(q: &QueryView) -> Cell {
    let n = q.replicates.len();
    let names = match n {
        0 | 1 => String::new(),
        _ => format!("<small>{}</small>", esc(&q.replicates.join(", "))),
    };
    Cell {
        html: format!("{n}{names}"),
        v: Some(n.to_string()),
        class: "num",
    }
}

fn capture_cells(r: &Row) -> Vec<Cell> {
    let state = {
        let reason = r
            .reason
            .as_deref()
            .map_or(String::new(), |why| format!("<small>{}</small>", esc(why)));
        Cell {
            html: format!("{}{reason}", esc(r.state.as_str())),
            v: Some(r.state.as_str().to_string()),
            class: "st",
        }
    };
    let fns = r
        .top_self
        .iter()
        .map(|f| format!("{} {:.1}%", esc(&f.name), f.percent))
        .collect::<Vec<_>>()
        .join("<br>");
    vec![
        Cell::text(&r.query),
        Cell::num(
            r.worker.map_or("-".into(), |w| w.to_string()),
            r.worker.map(f64::from),
        ),
        Cell::text(r.host.as_deref().unwrap_or("-")),
        state,
        Cell::num(opt_digits(r.samples), r.samples.map(|x| x as f64)),
        Cell::num(
            r.window_seconds.map_or("-".into(), |s| format!("{s:.2}")),
            r.window_seconds,
        ),
        Cell::num(pct(r.symbolized_share), r.symbolized_share),
        Cell::num(pct(r.truncated_share), r.truncated_share),
        Cell {
            html: if fns.is_empty() { "-".into() } else { fns },
            v: r.top_self.first().map(|f| f.name.clone()),
            class: "fns",
        },
        Cell::link("flamegraph", r.flamegraph.as_deref()),
        nsys_cell(r.nsys.as_ref()),
    ]
    .into_iter()
    .chain(offcpu_cells(r.off_cpu.as_ref()))
    .collect()
}

fn captures_section(index: &Index) -> Section {
    let rows = index
        .captures
        .iter()
        .map(|r| {
            let class = format!("st-{}", r.state.as_str().replace(' ', "-"));
            (class, capture_cells(r))
        })
        .collect();
    Section {
        heading: "Captures".into(),
        note: Some(
            "One row per query and worker. Window: seconds sampled; symbolized: samples \
             with a named frame; truncated: samples whose stack was cut short (\"-\" where \
             the summary does not say)."
                .into(),
        ),
        table: Table {
            id: "jp-captures",
            cols: vec![
                Col {
                    key: "query",
                    label: "Query",
                    num: false,
                },
                Col {
                    key: "worker",
                    label: "Worker",
                    num: true,
                },
                Col {
                    key: "host",
                    label: "Node",
                    num: false,
                },
                Col {
                    key: "state",
                    label: "State",
                    num: false,
                },
                Col {
                    key: "samples",
                    label: "Samples",
                    num: true,
                },
                Col {
                    key: "window",
                    label: "Window (s)",
                    num: true,
                },
                Col {
                    key: "symbolized",
                    label: "Symbolized",
                    num: true,
                },
                Col {
                    key: "truncated",
                    label: "Truncated",
                    num: true,
                },
                Col {
                    key: "top",
                    label: "Top self functions",
                    num: false,
                },
                Col {
                    key: "flamegraph",
                    label: "Flamegraph",
                    num: false,
                },
                nsys_col(),
            ]
            .into_iter()
            .chain(offcpu_cols())
            .collect(),
            rows,
        },
    }
}

/// The page cells of the on/off/wall columns ("-" without off-CPU data).
pub fn offcpu_cells(c: Option<&OffCpuCells>) -> Vec<Cell> {
    let pct = |x: f64| format!("{:.1}%", 100.0 * x);
    match c {
        None => vec![Cell::text("-"), Cell::text("-"), Cell::text("-")],
        Some(c) => vec![
            Cell::num(pct(c.on_cpu_share), Some(c.on_cpu_share)),
            Cell::num(
                format!("{} ({} R)", pct(c.off_cpu_share), pct(c.runnable_share)),
                Some(c.off_cpu_share),
            ),
            match (&c.offcpu, &c.wallclock) {
                (Some(o), Some(w)) => Cell {
                    html: format!(
                        "<a href=\"{}\">off-CPU</a> <a href=\"{}\">wall</a>",
                        href_esc(o),
                        href_esc(w)
                    ),
                    v: Some("off-CPU".into()),
                    class: "",
                },
                _ => Cell::text("-"),
            },
        ],
    }
}

/// The page columns of [`offcpu_cells`].
pub fn offcpu_cols() -> Vec<Col> {
    vec![
        Col {
            key: "on_cpu",
            label: "On-CPU",
            num: true,
        },
        Col {
            key: "off_cpu",
            label: "Off-CPU",
            num: true,
        },
        Col {
            key: "wall",
            label: "Off-CPU / wall",
            num: false,
        },
    ]
}
/// The captures table's Nsight Systems column (`profiles/nsys`, see
/// `nsys_views`).
fn nsys_col() -> Col {
    Col {
        key: "nsys",
        label: "Nsight Systems",
        num: false,
    }
}

/// The job page's cell: a link with the kind and size, and the settle
/// figure (or why the report is not a settled `.nsys-rep`).
fn nsys_cell(c: Option<&NsysCell>) -> Cell {
    let Some(c) = c else {
        return Cell::text("-");
    };
    let label = format!("{} {}", c.kind, format_bytes(c.bytes));
    let link = match &c.report {
        Some(h) => format!("<a href=\"{}\">{}</a>", href_esc(h), esc(&label)),
        None => esc(&label),
    };
    let note = if c.settled {
        format!(
            "settled {:.1} s after stop ({} s unchanged)",
            c.wait_seconds, c.settle_seconds
        )
    } else {
        format!(
            "not settled: {}",
            c.reason.as_deref().unwrap_or("see nsys-capture.json")
        )
    };
    let profile = c
        .profile
        .as_ref()
        .map(nsys_profile_html)
        .unwrap_or_default();
    Cell {
        html: format!("{link}<small>{}</small>{profile}", esc(&note)),
        v: Some(c.bytes.to_string()),
        class: "",
    }
}

/// What `jobprof process` read from the report: its flamegraph link and
/// samples, then the longest waits, NVTX ranges and kernels.
fn nsys_profile_html(p: &NsysProfileCell) -> String {
    let label = format!("CPU {} samples", p.samples);
    let mut html = match &p.flamegraph {
        Some(h) => format!("<br><a href=\"{}\">{}</a>", href_esc(h), esc(&label)),
        None => format!("<br>{}", esc(&label)),
    };
    let top = |what: &str, rows: &[(String, u64)]| {
        let list: Vec<String> = (rows.iter())
            .map(|(n, ns)| format!("{n} {:.1} ms", *ns as f64 / 1e6))
            .collect();
        format!("<small>{what}: {}</small>", esc(&list.join(", ")))
    };
    for (what, rows) in [
        ("waits", &p.top_waits),
        ("NVTX", &p.nvtx),
        ("GPU kernels", &p.gpu_kernels),
    ] {
        if !rows.is_empty() {
            html.push_str(&top(what, rows));
        }
    }
    html
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pages_name_no_url() {
        let p = page(
            "t",
            &[("k".into(), "v://x".into())],
            &[Section {
                heading: "h".into(),
                note: None,
                table: Table {
                    id: "x",
                    cols: vec![Col {
                        key: "a",
                        label: "A",
                        num: true,
                    }],
                    rows: vec![(String::new(), vec![Cell::num("1".into(), Some(1.0))])],
                },
            }],
        );
        assert!(!p.contains("://"), "{p}");
        assert!(p.contains("data-v=\"1\""));
    }

    /// `<td>`s of each body row of the table `id` (none of the job pages
    /// uses `colspan`).
    fn cells_per_row(html: &str, id: &str) -> (usize, Vec<usize>) {
        let start = html.find(&format!("id=\"{id}\"")).unwrap();
        let table = &html[start..start + html[start..].find("</table>").unwrap()];
        let (head, body) = table.split_once("</thead>").unwrap();
        let rows = body.split("</tr>").filter(|r| r.contains("<tr"));
        (
            head.matches("<th ").count(),
            rows.map(|r| r.matches("<td").count()).collect(),
        )
    }

    #[test]
    fn every_row_of_the_job_page_has_a_cell_per_header() {
        let row = Row {
            capture: "worker_0/q".into(),
            worker: Some(0),
            query: "q".into(),
            base: "q".into(),
            replicate: 1,
            state: State::Processed,
            reason: None,
            host: None,
            samples: Some(7),
            period_total: None,
            event: None,
            window_seconds: None,
            symbolized_share: None,
            truncated_share: None,
            top_self: vec![],
            flamegraph: None,
            folded: None,
            completed: None,
            off_cpu: Some(OffCpuCells {
                on_cpu_share: 0.5,
                off_cpu_share: 0.5,
                runnable_share: 0.1,
                offcpu: Some("o.html".into()),
                wallclock: Some("w.html".into()),
            }),
            nsys: None,
        };
        let index = Index {
            tool: "jobprof".into(),
            tool_version: "0".into(),
            generated: "now".into(),
            job: Default::default(),
            captures: vec![
                row.clone(),
                Row {
                    off_cpu: None,
                    ..row
                },
            ],
            queries: vec![super::super::scan::QueryView {
                query: "q".into(),
                replicates: vec!["q_iter1".into(), "q_iter2".into()],
                workers_merged: vec![0],
                captures_merged: 2,
                captures: 1,
                samples: 7,
                imbalance: None,
                flamegraph: None,
            }],
        };
        let html = index_html(Path::new("/r/profiles/perf"), &index);
        for id in ["jp-queries", "jp-captures"] {
            let (heads, rows) = cells_per_row(&html, id);
            assert!(!rows.is_empty(), "{id}");
            assert!(
                rows.iter().all(|&n| n == heads),
                "{id}: {heads} headers, {rows:?} cells"
            );
        }
    }

    #[test]
    fn a_cell_shows_size_link_and_settle_figure() {
        let mut c = NsysCell {
            report: Some("../nsys/worker_0/q 1/r.nsys-rep".into()),
            kind: "nsys-rep".into(),
            bytes: 1536,
            settled: true,
            wait_seconds: 4.25,
            settle_seconds: 15.0,
            reason: None,
            profile: None,
        };
        let html = nsys_cell(Some(&c)).html;
        assert!(
            html.contains("href=\"../nsys/worker_0/q%201/r.nsys-rep\""),
            "{html}"
        );
        assert!(html.contains("nsys-rep 1.5 KiB"), "{html}");
        assert!(
            html.contains("settled 4.2 s after stop (15 s unchanged)"),
            "{html}"
        );
        c.settled = false;
        c.reason = Some("<no .nsys-rep>".into());
        c.report = None;
        let html = nsys_cell(Some(&c)).html;
        assert!(html.contains("not settled: &lt;no .nsys-rep&gt;") && !html.contains("href"));
        assert_eq!(nsys_cell(None).html, "-");
        // A processed report: its flamegraph and its longest waits, NVTX
        // ranges and kernels under the report's link.
        c.profile = Some(NsysProfileCell {
            flamegraph: Some("../nsys/worker_0/q1/jobprof/flamegraph.html".into()),
            samples: 139,
            read: "nsys 2022.4.2.1, schema 3.0.0".into(),
            top_waits: vec![("usleep".into(), 241_380_310)],
            nvtx: vec![("<outer>".into(), 2_000_000)],
            gpu_kernels: Vec::new(),
        });
        let html = nsys_cell(Some(&c)).html;
        assert!(
            html.contains(
                "href=\"../nsys/worker_0/q1/jobprof/flamegraph.html\">CPU 139 samples</a>"
            ),
            "{html}"
        );
        assert!(html.contains("waits: usleep 241.4 ms"), "{html}");
        assert!(
            html.contains("NVTX: &lt;outer&gt; 2.0 ms") && !html.contains("GPU"),
            "{html}"
        );
    }
}
