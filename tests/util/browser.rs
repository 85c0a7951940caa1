//! Headless Chromium for the tests of the HTML pages: finding it, dumping a
//! page's DOM with the network blocked, and checking that a page's tables
//! line up.

use std::path::Path;
use std::process::{Command, Stdio};

use super::output_text;

/// The headless Chromium on PATH, if any.
pub fn chromium() -> Option<&'static str> {
    ["chromium", "chromium-browser", "google-chrome"]
        .into_iter()
        .find(|c| {
            Command::new(c)
                .arg("--version")
                .stdout(Stdio::null())
                .stderr(Stdio::null())
                .status()
                .is_ok_and(|s| s.success())
        })
}

/// The DOM of `url` after its scripts ran (headless Chromium's
/// `--dump-dom`, a fresh profile), with every host name unresolvable: the
/// page must not need the network.
pub fn dump_dom_url(url: &str) -> String {
    let profile = tempfile::tempdir().unwrap();
    let out = Command::new(chromium().expect("callers require chromium"))
        .args([
            "--headless",
            "--no-sandbox",
            "--disable-gpu",
            "--no-first-run",
            "--disable-background-networking",
            "--disable-component-update",
            "--disable-sync",
            "--host-resolver-rules=MAP * ~NOTFOUND",
            "--virtual-time-budget=10000",
        ])
        .arg(format!("--user-data-dir={}", profile.path().display()))
        .arg("--dump-dom")
        .arg(url)
        .stdin(Stdio::null())
        .output()
        .unwrap();
    let dom = String::from_utf8_lossy(&out.stdout).into_owned();
    assert!(dom.contains("<html"), "no DOM: {}", output_text(&out));
    dom
}

/// Asserts that every row of every `<table>` of the page `html` has as
/// many cells (`<td>` and `<th>`, with their `colspan`) as the table's
/// header row, naming the page, the table and the row. A small tag scanner
/// (scripts and styles skipped); returns the number of tables checked.
pub fn assert_tables_line_up(html: &Path) -> usize {
    let text = std::fs::read_to_string(html).unwrap();
    let body = without_elements(
        &without_elements(&text, "<script", "</script>"),
        "<style",
        "</style>",
    );
    let tables: Vec<&str> = body.split("<table").skip(1).collect();
    for (t, table) in tables.iter().enumerate() {
        let table = &table[..table.find("</table>").unwrap_or(table.len())];
        let widths: Vec<usize> = table
            .split("<tr")
            .skip(1)
            .map(|row| {
                row.split('<')
                    .filter(|tag| {
                        ["td", "th"].iter().any(|n| {
                            tag.strip_prefix(n)
                                .is_some_and(|r| r.starts_with([' ', '>', '\t', '\n']))
                        })
                    })
                    .map(|tag| {
                        let attrs = &tag[..tag.find('>').unwrap_or(tag.len())];
                        attrs
                            .split("colspan=")
                            .nth(1)
                            .and_then(|v| {
                                let v = v.trim_start_matches(['"', '\'']);
                                let n = v.find(|c: char| !c.is_ascii_digit()).unwrap_or(v.len());
                                v[..n].parse().ok()
                            })
                            .unwrap_or(1)
                    })
                    .sum()
            })
            .collect();
        let id = table
            .split("id=\"")
            .nth(1)
            .and_then(|r| r.split('"').next())
            .unwrap_or("");
        assert!(
            !widths.is_empty(),
            "{}: table {t} ({id}) has no row",
            html.display()
        );
        for (r, w) in widths.iter().enumerate() {
            assert_eq!(
                *w,
                widths[0],
                "{}: table {t} ({id}), row {r}: {w} cells under {} headers",
                html.display(),
                widths[0]
            );
        }
    }
    tables.len()
}

/// `text` without the elements from `open` to `close` (scripts, styles).
fn without_elements(text: &str, open: &str, close: &str) -> String {
    let mut kept = String::with_capacity(text.len());
    let mut rest = text;
    while let Some(i) = rest.find(open) {
        kept.push_str(&rest[..i]);
        rest = rest[i..]
            .find(close)
            .map_or("", |j| &rest[i + j + close.len()..]);
    }
    kept.push_str(rest);
    kept
}

/// [`dump_dom_url`] of the local page `html` with the query string `query`.
pub fn dump_dom(html: &Path, query: &str) -> String {
    dump_dom_url(&format!("file://{}?{query}", html.display()))
}
