//! Headless Chromium for the tests of the HTML pages: finding it, dumping a
//! page's DOM with the network blocked, measuring a page laid out in a
//! 1400x900 window, taking its screenshot, and checking that a page's
//! tables line up.

use std::io::Read;
use std::path::Path;
use std::process::{Command, Stdio};

use super::output_text;

/// The window the pages are checked at: a laptop's, 1400x900.
pub const WINDOW: (u32, u32) = (1400, 900);

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

/// True when Chromium is here; otherwise the loud skip of
/// [`super::require`] (a failure under CI). `if !require_chromium() { return; }`
pub fn require_chromium() -> bool {
    super::require(chromium().is_some(), "chromium (apt-get install chromium)")
}

/// Runs headless Chromium on `url` with `what` (`--dump-dom`,
/// `--screenshot=FILE`, and for the layout probe's frame
/// `--allow-file-access-from-files`): a fresh profile, a [`WINDOW`]-sized
/// window, and every host name unresolvable, so the page must not need
/// the network.
fn headless(what: &[&str], url: &str) -> std::process::Output {
    let profile = tempfile::tempdir().unwrap();
    Command::new(chromium().expect("callers require chromium"))
        .args([
            "--headless",
            "--no-sandbox",
            "--disable-gpu",
            "--no-first-run",
            "--disable-background-networking",
            "--disable-component-update",
            "--disable-sync",
            "--hide-scrollbars",
            "--host-resolver-rules=MAP * ~NOTFOUND",
            "--virtual-time-budget=10000",
        ])
        .arg(format!("--window-size={},{}", WINDOW.0, WINDOW.1))
        .arg(format!("--user-data-dir={}", profile.path().display()))
        .args(what)
        .arg(url)
        .stdin(Stdio::null())
        .output()
        .unwrap()
}

/// The DOM of `url` after its scripts ran (`--dump-dom`, see [`headless`]).
pub fn dump_dom_url(url: &str) -> String {
    dump_dom_with(url, &[])
}

fn dump_dom_with(url: &str, extra: &[&str]) -> String {
    let out = headless(&[&["--dump-dom"], extra].concat(), url);
    let dom = String::from_utf8_lossy(&out.stdout).into_owned();
    assert!(dom.contains("<html"), "no DOM: {}", output_text(&out));
    dom
}

/// What the page `html` (with `query`) looks like to a user of a
/// [`WINDOW`]-sized browser: the page is laid out in a frame of that size,
/// its scripts run, then `probe`, a JavaScript expression over `doc` (the
/// page's document) and the helpers `box(selector)` (the first match's
/// `getBoundingClientRect`, or null) and `shown(text)` (how many leaf
/// elements with a size show exactly `text`, the SVG's included), is
/// evaluated and returned as JSON.
pub fn probe_layout(html: &Path, query: &str, probe: &str) -> serde_json::Value {
    let dir = tempfile::tempdir().unwrap();
    let wrapper = dir.path().join("probe.html");
    let src = format!("file://{}?{query}", html.display());
    let page = format!(
        r#"<!DOCTYPE html><html><body style="margin:0">
<iframe id="f" src="{src}" width="{w}" height="{h}" style="border:0;display:block"></iframe>
<script>
document.getElementById("f").addEventListener("load", function () {{ setTimeout(function () {{
  var out, doc = document.getElementById("f").contentDocument;
  function box(sel) {{
    var e = doc.querySelector(sel); if (!e) return null;
    var r = e.getBoundingClientRect();
    return {{ top: r.top, bottom: r.bottom, left: r.left, right: r.right, width: r.width, height: r.height }};
  }}
  function shown(text) {{
    return Array.prototype.filter.call(doc.querySelectorAll("body *"), function (e) {{
      var r = e.getBoundingClientRect();
      return e.children.length === 0 && e.textContent.trim() === text && r.width > 0 && r.height > 0;
    }}).length;
  }}
  try {{ out = ({probe}); }} catch (e) {{ out = {{ error: String(e) }}; }}
  var pre = document.createElement("pre"); pre.id = "jp-probe";
  pre.textContent = JSON.stringify(out); document.body.appendChild(pre);
}}, 200); }});
</script></body></html>"#,
        w = WINDOW.0,
        h = WINDOW.1,
    );
    std::fs::write(&wrapper, page).unwrap();
    let dom = dump_dom_with(
        &format!("file://{}", wrapper.display()),
        &["--allow-file-access-from-files"],
    );
    let open = r#"<pre id="jp-probe">"#;
    let at = dom
        .find(open)
        .unwrap_or_else(|| panic!("{}: the probe wrote nothing", html.display()));
    let json = &dom[at + open.len()..];
    let json = html_unescape(&json[..json.find("</pre>").unwrap()]);
    let v: serde_json::Value = serde_json::from_str(&json).unwrap();
    assert!(v.get("error").is_none(), "{}: probe: {v}", html.display());
    v
}

fn html_unescape(s: &str) -> String {
    s.replace("&quot;", "\"")
        .replace("&lt;", "<")
        .replace("&gt;", ">")
        .replace("&amp;", "&")
}

/// A screenshot: `width` x `height` pixels of RGB, row by row.
pub struct Screenshot {
    pub width: usize,
    pub height: usize,
    pub rgb: Vec<[u8; 3]>,
}

impl Screenshot {
    /// The pixel at column `x` of row `y`.
    pub fn at(&self, x: usize, y: usize) -> [u8; 3] {
        self.rgb[y * self.width + x]
    }
}

/// What a user sees of the page `html` (with `query`) in a [`WINDOW`]-sized
/// browser, decoded; the PNG is also left at `png`, for a person to look at.
pub fn screenshot(html: &Path, query: &str, png: &Path) -> Screenshot {
    let url = format!("file://{}?{query}", html.display());
    // A picture left by an earlier run must not pass for this one's.
    let _ = std::fs::remove_file(png);
    let out = headless(&[&format!("--screenshot={}", png.display())], &url);
    assert!(out.status.success(), "chromium: {}", output_text(&out));
    let bytes = std::fs::read(png).unwrap_or_else(|e| {
        panic!(
            "no screenshot {}: {e}: {}",
            png.display(),
            output_text(&out)
        )
    });
    decode_png(&bytes)
}

/// Decodes the PNGs Chromium writes: 8 bits per channel, RGB or RGBA, not
/// interlaced (anything else panics, naming it).
fn decode_png(bytes: &[u8]) -> Screenshot {
    assert_eq!(&bytes[..8], b"\x89PNG\r\n\x1a\n", "not a PNG");
    let (mut at, mut ihdr, mut idat) = (8, Vec::new(), Vec::new());
    while at + 8 <= bytes.len() {
        let len = u32::from_be_bytes(bytes[at..at + 4].try_into().unwrap()) as usize;
        let (kind, data) = (&bytes[at + 4..at + 8], &bytes[at + 8..at + 8 + len]);
        match kind {
            b"IHDR" => ihdr = data.to_vec(),
            b"IDAT" => idat.extend_from_slice(data),
            _ => {}
        }
        at += 12 + len;
    }
    let be = |i: usize| u32::from_be_bytes(ihdr[i..i + 4].try_into().unwrap()) as usize;
    let (width, height, depth, colour, interlace) = (be(0), be(4), ihdr[8], ihdr[9], ihdr[12]);
    let channels = match colour {
        2 => 3,
        6 => 4,
        _ => panic!("PNG colour type {colour}"),
    };
    assert_eq!((depth, interlace), (8, 0), "PNG depth / interlace");
    let mut raw = Vec::new();
    flate2::read::ZlibDecoder::new(&idat[..])
        .read_to_end(&mut raw)
        .unwrap();
    let stride = width * channels;
    let mut prev = vec![0u8; stride];
    let mut rgb = Vec::with_capacity(width * height);
    for row in raw.chunks(stride + 1).take(height) {
        let (filter, line) = (row[0], &row[1..]);
        let mut cur = vec![0u8; stride];
        for i in 0..stride {
            let a = if i >= channels { cur[i - channels] } else { 0 };
            let (b, c) = (prev[i], if i >= channels { prev[i - channels] } else { 0 });
            cur[i] = line[i].wrapping_add(match filter {
                0 => 0,
                1 => a,
                2 => b,
                3 => ((u16::from(a) + u16::from(b)) / 2) as u8,
                4 => paeth(a, b, c),
                f => panic!("PNG filter {f}"),
            });
        }
        rgb.extend(cur.chunks(channels).map(|p| [p[0], p[1], p[2]]));
        prev = cur;
    }
    assert_eq!(rgb.len(), width * height, "PNG data short");
    Screenshot { width, height, rgb }
}

fn paeth(a: u8, b: u8, c: u8) -> u8 {
    let p = i16::from(a) + i16::from(b) - i16::from(c);
    let (pa, pb, pc) = (
        (p - i16::from(a)).abs(),
        (p - i16::from(b)).abs(),
        (p - i16::from(c)).abs(),
    );
    if pa <= pb && pa <= pc {
        a
    } else if pb <= pc {
        b
    } else {
        c
    }
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
