//! The self-contained HTML page around a flamegraph SVG.
//!
//! The SVG is inlined (not referenced), and its own script drives the page:
//! the header's search box and reset button call inferno's `search`,
//! `unzoom` and `zoom`. The page makes no network request and contains no
//! `http(s)://` text except the SVG's `xmlns` attributes (namespace names,
//! never fetched): the SVG's XML declaration, DOCTYPE (a DTD URL) and
//! comments are dropped, URLs in inferno's script comments are cut, and
//! `://` in text content is written as `:&#47;/`, which displays the same.

use std::io::{self, Write};
use std::path::{Component, Path};

use quick_xml::events::{BytesCData, BytesStart, BytesText, Event};
use quick_xml::{Reader, Writer};

use super::{Error, Format, RenderOptions, Result};

/// Numbers shown in the page header.
#[derive(Debug)]
pub(crate) struct Summary {
    /// Sum of all counts.
    pub total: u64,
    /// Distinct stacks.
    pub stacks: u64,
    /// Extra line (e.g. the colour legend of a differential flamegraph).
    pub note: Option<String>,
}

const STYLE: &str = concat!("\n", include_str!("../../../assets/flamegraph-page.css"));

/// Runs before the SVG's script: inferno restores a zoom from `?x=&y=` with
/// a namespaced selector that never matches in an HTML document (there
/// `fg:x` is a plain attribute name), so the page takes those two
/// parameters out and restores the zoom itself.
const PRE_SCRIPT: &str = concat!("\n", include_str!("../../../assets/flamegraph-page-pre.js"));

/// Wires the header to the SVG's functions, adds keyboard zoom, and (only
/// when the URL asks with `?jobprof-selftest=NAME`) runs a scripted check
/// used by the browser test: click, reset, Enter and search on frame NAME,
/// with the outcome written into `<pre id="jp-selftest">`.
const POST_SCRIPT: &str = concat!("\n", include_str!("../../../assets/flamegraph-page.js"));

/// The function table and the callers / callees of a picked function,
/// drawn from the embedded stacks ([`super::functions`]); its own
/// self-test runs only with `?jobprof-fn-selftest=NAME`.
const FUNCTIONS_SCRIPT: &str = concat!(
    "\n",
    include_str!("../../../assets/flamegraph-functions.js")
);

/// What a page shows besides the flamegraph, each part already in the form
/// the page embeds.
#[derive(Debug, Default)]
pub(crate) struct Parts<'a> {
    /// The timeline's JSON ([`super::timeline::Timeline::to_json`]).
    pub timeline: Option<&'a str>,
    /// The function table's JSON ([`super::functions::CallTree::to_json`]).
    pub functions: Option<&'a str>,
    /// Whose functions the table lists, after "Functions" (`of AFTER` on
    /// a diff page); empty: the graph's.
    pub functions_of: &'a str,
    /// `(text, href)` links in the header.
    pub links: &'a [(String, String)],
}

/// Escapes text for HTML; `/` is written as a character reference so that
/// no `://` appears in the page's source.
pub(crate) fn esc(s: &str) -> String {
    let mut o = String::with_capacity(s.len());
    for c in s.chars() {
        match c {
            '&' => o.push_str("&amp;"),
            '<' => o.push_str("&lt;"),
            '>' => o.push_str("&gt;"),
            '"' => o.push_str("&quot;"),
            '\'' => o.push_str("&#39;"),
            '/' => o.push_str("&#47;"),
            c => o.push(c),
        }
    }
    o
}

/// A path as an `href`: every byte but the unreserved ones and `/`
/// percent-encoded (so `:` is never a scheme's).
pub(crate) fn href_esc(path: impl AsRef<[u8]>) -> String {
    let path = path.as_ref();
    let mut o = String::with_capacity(path.len());
    for &b in path {
        match b {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'_' | b'.' | b'~' | b'/' => {
                o.push(b as char)
            }
            _ => o.push_str(&format!("%{b:02X}")),
        }
    }
    o
}

/// The link to `rel`, a path relative to the page's directory: `./` and
/// its segments percent-encoded ([`href_esc`]), so that no name on the
/// way (a run directory named `javascript:...`) can make it a URL with a
/// scheme. `None` for a path that is not relative.
pub(crate) fn relative_href(rel: &Path) -> Option<String> {
    use std::os::unix::ffi::OsStrExt;
    let mut o = String::from(".");
    for c in rel.components() {
        match c {
            Component::Normal(s) => {
                o.push('/');
                o.push_str(&href_esc(s.as_bytes()));
            }
            Component::ParentDir => o.push_str("/.."),
            Component::CurDir => {}
            Component::RootDir | Component::Prefix(_) => return None,
        }
    }
    (o.len() > 1).then_some(o)
}

/// Writes the page around `svg` (a complete SVG document from inferno).
pub(crate) fn wrap<W: Write>(
    svg: &[u8],
    opts: &RenderOptions,
    summary: &Summary,
    w: W,
) -> Result<()> {
    wrap_with(svg, opts, summary, &Parts::default(), w)
}

/// [`wrap`] with `parts`: a timeline above the flamegraph, the function
/// table beside it, links in the header.
pub(crate) fn wrap_with<W: Write>(
    svg: &[u8],
    opts: &RenderOptions,
    summary: &Summary,
    parts: &Parts<'_>,
    w: W,
) -> Result<()> {
    let mut w = io::BufWriter::new(w);
    write_page(svg, opts, summary, parts, &mut w)
        .and_then(|()| w.flush())
        .map_err(|source| Error::Write {
            format: Format::Html,
            source,
        })
}

fn write_page<W: Write>(
    svg: &[u8],
    opts: &RenderOptions,
    summary: &Summary,
    parts: &Parts<'_>,
    w: &mut W,
) -> io::Result<()> {
    let (timeline, links) = (parts.timeline, parts.links);
    let title = esc(&opts.title);
    write!(
        w,
        "<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n\
         <meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">\n\
         <meta name=\"generator\" content=\"jobprof {}\">\n<title>{title}</title>\n\
         <style>{STYLE}{}</style>\n<script>{PRE_SCRIPT}</script>\n</head>\n<body>\n",
        env!("CARGO_PKG_VERSION"),
        if timeline.is_some() {
            super::timeline_page::style()
        } else {
            ""
        }
    )?;
    write!(w, "<header id=\"jp-header\">\n<h1>{title}</h1>\n")?;
    if let Some(sub) = &opts.subtitle {
        writeln!(w, "<span class=\"jp-facts\">{}</span>", esc(sub))?;
    }
    writeln!(
        w,
        "<span class=\"jp-facts\">{} in {} distinct stacks</span>",
        esc(&crate::sys::units::format_amount(
            summary.total as f64,
            &opts.count_name
        )),
        group_digits(summary.stacks)
    )?;
    w.write_all(
        b"<form id=\"jp-search-form\" role=\"search\">\
          <input id=\"jp-search\" type=\"search\" placeholder=\"Search functions (case-insensitive)\" \
          aria-label=\"Search functions\" size=\"32\">\
          <button type=\"submit\">Search</button>\
          <button type=\"button\" id=\"jp-clear\">Clear</button></form>\n\
          <span id=\"jp-matched\" aria-live=\"polite\"></span>\n\
          <button type=\"button\" id=\"jp-reset\" title=\"Show the whole graph again\">Reset zoom</button>\n",
    )?;
    if let Some(note) = &summary.note {
        writeln!(w, "<span class=\"jp-note\">{}</span>", esc(note))?;
    }
    if !links.is_empty() {
        w.write_all(b"<nav class=\"jp-facts\" id=\"jp-links\">")?;
        for (text, href) in links {
            write!(w, "<a href=\"{}\">{}</a> ", esc(href), esc(text))?;
        }
        w.write_all(b"</nav>\n")?;
    }
    w.write_all(b"</header>\n")?;
    match parts.functions {
        // First in the document, so that Tab reaches the table before the
        // flamegraph's frames; the style places it beside (or below) them.
        Some(json) => {
            w.write_all(b"<main id=\"jp-main\" class=\"jp-with-fn\">\n")?;
            write_functions_section(json, parts.functions_of, &opts.count_name, w)?;
        }
        None => w.write_all(b"<main id=\"jp-main\">\n")?,
    }
    if let Some(json) = timeline {
        super::timeline_page::write_section(json, w)?;
    }
    inline_svg(svg, w)?;
    write!(w, "\n</main>\n<script>{POST_SCRIPT}</script>\n")?;
    if timeline.is_some() {
        super::timeline_page::write_script(w)?;
    }
    if parts.functions.is_some() {
        writeln!(w, "<script>{FUNCTIONS_SCRIPT}</script>")?;
    }
    w.write_all(b"</body>\n</html>\n")?;
    Ok(())
}

/// The function table, the callers / callees of the picked function, and
/// their data ([`super::functions`]); the script fills them in.
fn write_functions_section<W: Write>(
    json: &str,
    of: &str,
    count_name: &str,
    w: &mut W,
) -> io::Result<()> {
    let unit = esc(count_name);
    let of = if of.is_empty() {
        String::new()
    } else {
        format!(" {}", esc(of))
    };
    write!(
        w,
        "<aside id=\"jp-fn\" aria-label=\"Functions, their callers and callees\" data-unit=\"{unit}\">\n\
         <div class=\"jp-fn-bar\"><strong>Functions{of}</strong>\
         <span id=\"jp-fn-info\" aria-live=\"polite\">reading the stacks...</span></div>\n\
         <section id=\"jp-fn-pick\" aria-label=\"Callers and callees\" hidden>\n\
         <h2 id=\"jp-fn-name\" tabindex=\"-1\"></h2><p id=\"jp-fn-facts\"></p>\n\
         <h3>Callers <small>(who calls it, merged over every call path; {unit})</small></h3>\
         <ul id=\"jp-fn-callers\" class=\"jp-fn-tree\" role=\"tree\" aria-label=\"Callers\"></ul>\n\
         <h3>Callees <small>(what it calls, merged wherever it runs; {unit})</small></h3>\
         <ul id=\"jp-fn-callees\" class=\"jp-fn-tree\" role=\"tree\" aria-label=\"Callees\"></ul>\n\
         </section>\n\
         <div id=\"jp-fn-scroll\"><table id=\"jp-fn-table\">\
         <caption>Functions: self is time in the function itself, total also counts what it calls \
         (once per stack, even when it recurses), paths is how many frames of the graph it is. \
         Arrow keys move, Enter shows callers and callees.</caption>\
         <thead><tr>\
         <th scope=\"col\"><button type=\"button\" data-key=\"name\">Function</button></th>\
         <th scope=\"col\" aria-sort=\"descending\"><button type=\"button\" data-key=\"self\">Self</button></th>\
         <th scope=\"col\"><button type=\"button\" data-key=\"total\">Total</button></th>\
         <th scope=\"col\"><button type=\"button\" data-key=\"paths\">Paths</button></th>\
         </tr></thead><tbody></tbody></table></div>\n</aside>\n\
         <script type=\"application/json\" id=\"jp-fn-data\">"
    )?;
    w.write_all(json.as_bytes())?;
    w.write_all(b"</script>\n")
}

/// Copies the SVG element, leaving out what does not belong inside HTML or
/// would name a URL (see the module docs), and the SVG's own title and
/// subtitle: the page's header already shows them, and the band they take
/// at the top is cut ([`title_band`]), so that the frames start near the
/// top of the graph.
fn inline_svg<W: Write>(svg: &[u8], w: &mut W) -> io::Result<()> {
    let band = title_band(svg)?;
    let mut reader = Reader::from_reader(svg);
    let mut writer = Writer::new(w);
    let mut in_title = false;
    loop {
        let ev = reader
            .read_event()
            .map_err(|e| io::Error::new(io::ErrorKind::InvalidData, e))?;
        match ev {
            Event::Eof => break,
            Event::Start(e) if e.name().as_ref() == b"text" && is_title(&e) => in_title = true,
            Event::End(e) if in_title && e.name().as_ref() == b"text" => in_title = false,
            _ if in_title => {}
            Event::Start(e) => writer.write_event(Event::Start(moved_up(&e, band)))?,
            Event::Empty(e) => writer.write_event(Event::Empty(moved_up(&e, band)))?,
            Event::Decl(_) | Event::DocType(_) | Event::Comment(_) | Event::PI(_) => {}
            Event::Text(t) => {
                let raw = t.into_inner();
                let raw = String::from_utf8_lossy(&raw);
                if raw.contains("://") {
                    let text = raw.replace("://", ":&#47;/");
                    writer.write_event(Event::Text(BytesText::from_escaped(text)))?;
                } else {
                    writer.write_event(Event::Text(BytesText::from_escaped(raw)))?;
                }
            }
            Event::CData(c) => {
                let raw = c.into_inner();
                let code = String::from_utf8_lossy(&raw)
                    .replace("https://", "")
                    .replace("http://", "");
                writer.write_event(Event::CData(BytesCData::new(code)))?;
            }
            ev => writer.write_event(ev)?,
        }
    }
    Ok(())
}

/// Whether `e` is inferno's title or subtitle text.
fn is_title(e: &BytesStart<'_>) -> bool {
    attr(e, b"id").is_some_and(|id| id == "title" || id == "subtitle")
}

/// The value of `e`'s attribute `name`, unescaped as written.
fn attr(e: &BytesStart<'_>, name: &[u8]) -> Option<String> {
    e.attributes()
        .flatten()
        .find(|a| a.key.as_ref() == name)
        .map(|a| String::from_utf8_lossy(&a.value).into_owned())
}

/// Pixels cut from the top of the SVG: down to 6 px under the baseline of
/// the lower of its title and subtitle, but never through the line of a
/// hovered frame's details (above the frames in an icicle graph). Read
/// from the header, which inferno writes before the frames; 0 without a
/// title.
fn title_band(svg: &[u8]) -> io::Result<f64> {
    let mut reader = Reader::from_reader(svg);
    let (mut title, mut details) = (None::<f64>, f64::INFINITY);
    loop {
        let ev = reader
            .read_event()
            .map_err(|e| io::Error::new(io::ErrorKind::InvalidData, e))?;
        let e = match ev {
            Event::Start(e) | Event::Empty(e) => e,
            Event::Eof => break,
            _ => continue,
        };
        if attr(&e, b"id").as_deref() == Some("frames") {
            break;
        }
        let y = attr(&e, b"y").and_then(|y| y.parse::<f64>().ok());
        match (attr(&e, b"id").as_deref(), y) {
            (Some("title" | "subtitle"), Some(y)) => title = Some(title.map_or(y, |t| t.max(y))),
            (Some("details"), Some(y)) => details = y,
            _ => {}
        }
    }
    Ok(title.map_or(0.0, |t| (t + 6.0).min(details - 16.0).max(0.0)))
}

/// `e` with its `y` (and, for the `<svg>` element, its `height` and
/// `viewBox`) moved up by `band` pixels.
fn moved_up<'a>(e: &BytesStart<'a>, band: f64) -> BytesStart<'a> {
    if band == 0.0 {
        return e.clone();
    }
    let svg = e.name().as_ref() == b"svg";
    let mut out = BytesStart::new(String::from_utf8_lossy(e.name().as_ref()).into_owned());
    for a in e.attributes().flatten() {
        let (key, value) = (a.key.as_ref(), String::from_utf8_lossy(&a.value));
        let num = || value.parse::<f64>().ok();
        let new = match key {
            b"y" => num().map(|y| fmt_px(y - band)),
            b"height" if svg => num().map(|h| fmt_px(h - band)),
            b"viewBox" if svg => {
                let mut v: Vec<String> = value.split(' ').map(str::to_string).collect();
                if let Some(h) = v.get_mut(3).and_then(|h| h.parse::<f64>().ok()) {
                    v[3] = fmt_px(h - band);
                }
                Some(v.join(" "))
            }
            _ => None,
        };
        match new {
            Some(v) => out.push_attribute((key, v.as_bytes())),
            None => out.push_attribute(a),
        }
    }
    out
}

/// A length as inferno writes it: whole pixels bare, others to 2 places.
fn fmt_px(v: f64) -> String {
    if v.fract() == 0.0 {
        format!("{v:.0}")
    } else {
        format!("{v:.2}")
    }
}

/// `1234567` as `1,234,567`.
pub(crate) fn group_digits(n: u64) -> String {
    crate::sys::units::group_digits(n)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hrefs_are_encoded() {
        assert_eq!(
            href_esc("worker_0/q 1/flamegraph.html"),
            "worker_0/q%201/flamegraph.html"
        );
        assert_eq!(href_esc("a\"b"), "a%22b");
    }

    #[test]
    fn relative_links_are_dot_slash_and_encoded_segments() {
        assert_eq!(
            relative_href(Path::new("../runs/javascript:alert(1)/q.html")).unwrap(),
            "./../runs/javascript%3Aalert%281%29/q.html"
        );
        assert_eq!(
            relative_href(Path::new("diffs/q1.html")).unwrap(),
            "./diffs/q1.html"
        );
        // A name holding what decodes to `//` or `%` stays one segment.
        assert_eq!(
            relative_href(Path::new("a%2F%2Fb")).unwrap(),
            "./a%252F%252Fb"
        );
        assert_eq!(relative_href(Path::new("/etc/passwd")), None);
        assert_eq!(relative_href(Path::new("")), None);
        let bytes = <std::ffi::OsStr as std::os::unix::ffi::OsStrExt>::from_bytes(b"r\xff");
        assert_eq!(relative_href(Path::new(bytes)).unwrap(), "./r%FF");
    }

    #[test]
    fn digits_are_grouped() {
        assert_eq!(group_digits(0), "0");
        assert_eq!(group_digits(1234), "1,234");
        assert_eq!(group_digits(1234567), "1,234,567");
    }

    /// The first value of attribute `name` in `text` after `from`.
    fn attr_after(text: &str, from: &str, name: &str) -> f64 {
        let rest = &text[text.find(from).unwrap()..];
        let rest = &rest[rest.find(&format!(" {name}=\"")).unwrap() + name.len() + 3..];
        rest[..rest.find('"').unwrap()].parse().unwrap()
    }

    #[test]
    fn the_svg_title_is_left_to_the_header_and_its_band_cut() {
        let opts = RenderOptions {
            title: "T one".into(),
            subtitle: Some("S two".into()),
            ..RenderOptions::default()
        };
        let mut svg = Vec::new();
        super::super::render_svg(&[("a;b", 3u64), ("a", 1)], &opts, &mut svg).unwrap();
        let mut page = Vec::new();
        inline_svg(&svg, &mut page).unwrap();
        let (svg, page) = (
            String::from_utf8(svg).unwrap(),
            String::from_utf8(page).unwrap(),
        );
        assert!(svg.contains(">T one<") && svg.contains(">S two<"), "{svg}");
        assert!(!page.contains("T one") && !page.contains("S two"), "{page}");
        // Cut down to 6 px under the subtitle's baseline (48): 54 px, from
        // the image's height and from every frame's y alike.
        let band = 54.0;
        let cut =
            |what: &str, name: &str| attr_after(&svg, what, name) - attr_after(&page, what, name);
        assert_eq!(cut("<svg", "height"), band);
        assert_eq!(cut("<title>b ", "y"), band);
        assert_eq!(cut("<title>a ", "y"), band);
        assert_eq!(cut("id=\"details\"", "y"), band);
        // The top frame now starts 7 px under the top of the graph (6 px
        // and the pixel inferno leaves above each frame).
        assert_eq!(attr_after(&page, "<title>b ", "y"), 7.0);
    }

    #[test]
    fn escaping_hides_urls() {
        assert_eq!(esc("a://b<c>"), "a:&#47;&#47;b&lt;c&gt;");
    }
}
