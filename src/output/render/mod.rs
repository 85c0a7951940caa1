//! Rendering collapsed stacks (`a;b;c count`) into what people look at: an
//! interactive SVG flamegraph (inferno's, with hover details, click to zoom
//! and search with match percentage), one self-contained offline HTML page
//! around it, speedscope's JSON file format, and plain folded text; plus
//! differential flamegraphs of two profiles (see [`diff`]).
//!
//! Every renderer takes stacks as `(stack, count)` pairs and writes to any
//! [`io::Write`]; reading folded files from disk lives in [`folded`]. The
//! frame tree is laid out in frame order (a stack's frames compared one by
//! one), so one call path is always drawn as one frame; inferno's own line
//! sort can split a frame when a sibling's name extends it (`main`,
//! `main.cold`). This module does not decide file names or where output goes.

pub mod diff;
pub mod folded;
pub mod functions;
pub(crate) mod html;
pub mod marked;
pub mod redraw;
pub mod speedscope;
pub mod timeline;
pub(crate) mod timeline_page;

use std::fmt;
use std::io::{self, Write};
use std::path::Path;
use std::str::FromStr;

use inferno::flamegraph::{self, Direction};

pub use inferno::flamegraph::color::Palette;

/// Errors of the rendering stage.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// There is nothing to draw.
    #[error("nothing to render: {what} has no stacks with a non-zero count")]
    Empty {
        /// What was empty (an input name, or "the input").
        what: String,
    },

    /// A folded input had no usable line at all.
    #[error(
        "{path}:{line}: {reason}: `{text}`; folded stacks are lines of `frame;frame;... COUNT`"
    )]
    BadLine {
        /// The input file.
        path: String,
        /// 1-based line number.
        line: u64,
        /// What is wrong with it.
        reason: &'static str,
        /// The line (at most 200 characters).
        text: String,
    },

    /// A `render` input is `perf script` text, not folded stacks.
    #[error("{path} is `perf script` text, not folded stacks; fold it first: `{fold}`")]
    PerfScriptText {
        /// The input file.
        path: String,
        /// The command line that folds and renders it.
        fold: String,
    },

    /// `--format` (or an output name) asked for a format that does not exist.
    #[error("unknown output format `{0}`; use one of svg, html, speedscope, folded, pprof")]
    UnknownFormat(String),

    /// The output's extension does not say which format to write.
    #[error(
        "{0}: cannot tell the output format from the name; \
         end it in .svg, .html, .json (speedscope), .folded or .pb.gz (pprof), or pass --format"
    )]
    FormatFromPath(String),

    /// A colour palette or search colour that inferno does not know.
    #[error("{0}")]
    BadOption(String),

    /// The format cannot be produced by this operation (e.g. a differential
    /// flamegraph as speedscope JSON).
    #[error("{op} cannot write {format} output; use {supported}")]
    Unsupported {
        /// The operation.
        op: &'static str,
        /// The format asked for.
        format: Format,
        /// What it can write.
        supported: &'static str,
    },

    /// Writing the output failed.
    #[error("writing the {format} output: {source}")]
    Write {
        /// The format being written.
        format: Format,
        /// What the writer said.
        #[source]
        source: io::Error,
    },

    /// A consistency check inside the renderer failed (a bug in jobprof).
    #[error("internal error while rendering (please report): {0}")]
    Internal(String),
}

impl Error {
    /// Whether the error is the user's input or options (exit code 2) rather
    /// than failed work (exit code 1).
    pub fn is_usage(&self) -> bool {
        matches!(
            self,
            Error::Empty { .. }
                | Error::BadLine { .. }
                | Error::PerfScriptText { .. }
                | Error::UnknownFormat(_)
                | Error::FormatFromPath(_)
                | Error::BadOption(_)
                | Error::Unsupported { .. }
        )
    }
}

/// A rendering error in the library's [`crate::Error`]: a layer's own,
/// which the binary maps to an exit code (`is_usage`: 2, else 1).
impl From<Error> for crate::Error {
    fn from(e: Error) -> Self {
        crate::Error::Layer(Box::new(e))
    }
}

/// Result type of this module.
pub type Result<T, E = Error> = std::result::Result<T, E>;

/// An output format.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Format {
    /// Interactive SVG flamegraph (`.svg`).
    Svg,
    /// One self-contained HTML page around the SVG, offline (`.html`).
    Html,
    /// speedscope's JSON file format (`.json`, `.speedscope.json`).
    Speedscope,
    /// Collapsed stacks, `stack count` lines (`.folded`).
    Folded,
    /// Google's pprof format, gzipped `profile.proto` (`.pb.gz`).
    Pprof,
}

impl Format {
    /// Every format, in the order `--formats all` writes them.
    pub const ALL: [Format; 5] = [
        Format::Folded,
        Format::Svg,
        Format::Html,
        Format::Speedscope,
        Format::Pprof,
    ];

    /// The name used on the command line.
    pub fn name(self) -> &'static str {
        match self {
            Format::Svg => "svg",
            Format::Html => "html",
            Format::Speedscope => "speedscope",
            Format::Folded => "folded",
            Format::Pprof => "pprof",
        }
    }

    /// The conventional file extension (without the dot).
    pub fn extension(self) -> &'static str {
        match self {
            Format::Svg => "svg",
            Format::Html => "html",
            Format::Speedscope => "speedscope.json",
            Format::Folded => "folded",
            Format::Pprof => "pb.gz",
        }
    }

    /// The format a file name asks for, by its extension.
    pub fn from_path(path: &Path) -> Result<Format> {
        let name = path
            .file_name()
            .map(|n| n.to_string_lossy().to_ascii_lowercase())
            .unwrap_or_default();
        if name.ends_with(".pb.gz") || name.ends_with(".pprof") {
            return Ok(Format::Pprof);
        }
        let ext = name.rsplit_once('.').map(|(_, e)| e).unwrap_or("");
        match ext {
            "svg" => Ok(Format::Svg),
            "html" | "htm" => Ok(Format::Html),
            "json" => Ok(Format::Speedscope),
            "folded" | "collapsed" => Ok(Format::Folded),
            _ => Err(Error::FormatFromPath(path.display().to_string())),
        }
    }

    /// Parses a comma-separated list (`svg,html`); `all` means every format.
    /// Duplicates are dropped, order is kept.
    pub fn parse_list(s: &str) -> Result<Vec<Format>> {
        let mut out = Vec::new();
        for part in s.split(',').map(str::trim).filter(|p| !p.is_empty()) {
            let add: Vec<Format> = if part.eq_ignore_ascii_case("all") {
                Format::ALL.to_vec()
            } else {
                vec![part.parse()?]
            };
            for f in add {
                if !out.contains(&f) {
                    out.push(f);
                }
            }
        }
        if out.is_empty() {
            return Err(Error::UnknownFormat(s.to_string()));
        }
        Ok(out)
    }
}

impl FromStr for Format {
    type Err = Error;

    fn from_str(s: &str) -> Result<Format> {
        match s.trim().to_ascii_lowercase().as_str() {
            "svg" => Ok(Format::Svg),
            "html" | "htm" => Ok(Format::Html),
            "speedscope" | "json" => Ok(Format::Speedscope),
            "folded" | "collapsed" => Ok(Format::Folded),
            "pprof" => Ok(Format::Pprof),
            _ => Err(Error::UnknownFormat(s.to_string())),
        }
    }
}

impl fmt::Display for Format {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// How to draw a flamegraph. `Default` gives inferno's look with
/// deterministic colours (the same input renders to the same bytes).
#[derive(Debug, Clone)]
#[non_exhaustive]
pub struct RenderOptions {
    /// Title at the top of the image (and the HTML page's title).
    pub title: String,
    /// Second line under the title (e.g. event and capture details).
    pub subtitle: Option<String>,
    /// Image width in pixels; `None` = fluid, the image fills the window.
    pub width: Option<usize>,
    /// Omit frames narrower than this percentage of the total (inferno's
    /// default 0.1); they are summed in their parents anyway.
    pub min_width_pct: f64,
    /// Colour palette (`hot`, `mem`, `io`, `java`, `rust`, `python`, ...).
    pub colors: Palette,
    /// Icicle graph: roots at the top, stacks grow downwards.
    pub inverted: bool,
    /// What the counts are (`samples`, `ns`, ...), shown in tooltips.
    pub count_name: String,
    /// Label before the hovered frame's details (`Function:`).
    pub name_type: String,
    /// Colour of frames matching a search, `#rrggbb`.
    pub search_color: String,
    /// Same colour for the same function name in every render (instead of
    /// inferno's random jitter), so reruns produce identical files.
    pub deterministic: bool,
    /// Folded output: say what the counts are in a first line when they
    /// are not samples (`# counts: ns`, [`folded::counts_line`]), for the
    /// jobprof stage that reads it next.
    pub counts_line: bool,
}

impl Default for RenderOptions {
    fn default() -> Self {
        RenderOptions {
            title: "Flame Graph".to_string(),
            subtitle: None,
            width: None,
            min_width_pct: 0.1,
            colors: Palette::from_str("hot").expect("inferno knows `hot`"),
            inverted: false,
            count_name: "samples".to_string(),
            name_type: "Function:".to_string(),
            search_color: "#e600e6".to_string(),
            deterministic: true,
            counts_line: false,
        }
    }
}

impl RenderOptions {
    /// Parses a palette name as `--colors` takes it.
    pub fn parse_palette(name: &str) -> Result<Palette> {
        Palette::from_str(name).map_err(|_| {
            Error::BadOption(format!(
                "unknown colour palette `{name}`; use one of hot, mem, io, wakeup, java, js, \
                 perl, python, rust, red, green, blue, aqua, yellow, purple, orange"
            ))
        })
    }

    fn inferno(&self) -> Result<flamegraph::Options<'static>> {
        let mut o = flamegraph::Options::default();
        o.title = self.title.clone();
        o.subtitle = self.subtitle.clone();
        o.image_width = self.width;
        if !(self.min_width_pct >= 0.0 && self.min_width_pct <= 100.0) {
            return Err(Error::BadOption(format!(
                "--minwidth {} is not a percentage between 0 and 100",
                self.min_width_pct
            )));
        }
        o.min_width = self.min_width_pct;
        o.colors = self.colors;
        o.direction = if self.inverted {
            Direction::Inverted
        } else {
            Direction::Straight
        };
        o.count_name = self.count_name.clone();
        o.name_type = self.name_type.clone();
        o.search_color = self.search_color.parse().map_err(|_| {
            Error::BadOption(format!(
                "search colour `{}` is not a #rrggbb colour",
                self.search_color
            ))
        })?;
        o.deterministic = self.deterministic;
        // Lines are handed over in frame order (see `inferno_lines`);
        // flame-chart mode keeps that order instead of re-sorting by text.
        o.flame_chart = true;
        Ok(o)
    }
}

/// A title naming the job, worker and query a capture belongs to, e.g.
/// `job 4242 · worker 3 · query q17`; parts that are `None` are left out.
pub fn capture_title(job: Option<&str>, worker: Option<&str>, query: Option<&str>) -> String {
    let parts: Vec<String> = [("job", job), ("worker", worker), ("query", query)]
        .iter()
        .filter_map(|(k, v)| v.map(|v| format!("{k} {v}")))
        .collect();
    if parts.is_empty() {
        "Flame Graph".to_string()
    } else {
        parts.join(" · ")
    }
}

/// Stacks with a non-zero count, trimmed, their control characters
/// escaped ([`printable_stacks`]: the stacks that have some are escaped
/// into `held`), in frame order: compared frame by frame, so that every
/// call path is contiguous and becomes one frame.
pub(crate) fn frame_ordered<'a, S: AsRef<str>>(
    stacks: &'a [(S, u64)],
    held: &'a mut Vec<String>,
) -> Vec<(&'a str, u64)> {
    let mut v: Vec<(&str, u64)> =
        printable_stacks(stacks.iter().map(|(s, c)| (s.as_ref().trim(), *c)), held)
            .into_iter()
            .filter(|(s, c)| *c > 0 && !s.is_empty())
            .collect();
    v.sort_unstable_by(|a, b| frame_cmp(a.0, b.0));
    // Equal stacks (possible when the caller did not merge) become one.
    v.dedup_by(|later, earlier| {
        if later.0 == earlier.0 {
            earlier.1 = crate::sys::counts::add(earlier.1, later.1);
            true
        } else {
            false
        }
    });
    v
}

/// `stacks` with their control characters escaped
/// ([`crate::sys::printable`]), the escaped ones kept in `held`: what
/// every renderer draws and every folded writer writes, so that no name
/// splits a line or reaches a page raw.
pub(crate) fn printable_stacks<'a>(
    stacks: impl Iterator<Item = (&'a str, u64)> + Clone,
    held: &'a mut Vec<String>,
) -> Vec<(&'a str, u64)> {
    use std::borrow::Cow;
    // One scan a stack: the positions of those escaped, then the stacks.
    let mut dirty = Vec::new();
    for (i, (s, _)) in stacks.clone().enumerate() {
        if let Cow::Owned(e) = crate::sys::printable::printable_text(s) {
            dirty.push(i);
            held.push(e);
        }
    }
    let held: &'a Vec<String> = held;
    let mut escaped = dirty
        .iter()
        .zip(&held[held.len() - dirty.len()..])
        .peekable();
    stacks
        .enumerate()
        .map(|(i, (s, c))| match escaped.next_if(|(d, _)| **d == i) {
            Some((_, e)) => (e.as_str(), c),
            None => (s, c),
        })
        .collect()
}

/// Two stacks compared frame by frame (as `a.split(';').cmp(b.split(';'))`),
/// in one pass over their bytes: where they first differ, the one whose
/// frame ends there comes first; else the shorter.
fn frame_cmp(a: &str, b: &str) -> std::cmp::Ordering {
    use std::cmp::Ordering;
    let (a, b) = (a.as_bytes(), b.as_bytes());
    match a.iter().zip(b).position(|(x, y)| x != y) {
        Some(i) => match (a[i], b[i]) {
            (b';', _) => Ordering::Less,
            (_, b';') => Ordering::Greater,
            (x, y) => x.cmp(&y),
        },
        None => a.len().cmp(&b.len()),
    }
}

/// inferno's input lines for stacks in frame order, reversed because
/// flame-chart mode reverses them back. Two details of inferno's line parser
/// are neutralised here: a stack whose last word is a number would be read
/// as a second count (a differential line), and a line starting with `# ` is
/// a comment; in both cases the space becomes a no-break space.
pub(crate) fn inferno_lines(ordered: &[(&str, u64)]) -> Vec<String> {
    let mut num = itoa::Buffer::new();
    // inferno adds counts without overflow checks: scale down to fit.
    let shift = crate::sys::counts::shift_to_fit(ordered.iter().map(|(_, c)| *c));
    ordered
        .iter()
        .rev()
        .filter(|(_, count)| count >> shift > 0)
        .map(|(stack, count)| {
            let mut line = String::with_capacity(stack.len() + 21);
            line.push_str(&protect_stack(stack));
            line.push(' ');
            line.push_str(num.format(*count >> shift));
            line
        })
        .collect()
}

fn protect_stack(stack: &str) -> std::borrow::Cow<'_, str> {
    let mut s = std::borrow::Cow::Borrowed(stack);
    if let Some(i) = s.rfind(' ') {
        let word = &s[i + 1..];
        if !word.is_empty() && word.bytes().all(|b| b.is_ascii_digit() || b == b'.') {
            s.to_mut().replace_range(i..i + 1, "\u{a0}");
        }
    }
    if s.starts_with("# ") {
        s.to_mut().replace_range(1..2, "\u{a0}");
    }
    s
}

/// Sum of counts.
pub fn total<S: AsRef<str>>(stacks: &[(S, u64)]) -> u64 {
    crate::sys::counts::sum(stacks.iter().map(|(_, c)| *c))
}

/// Renders stacks as an interactive SVG flamegraph.
pub fn render_svg<S: AsRef<str>, W: Write>(
    stacks: &[(S, u64)],
    opts: &RenderOptions,
    w: W,
) -> Result<()> {
    let mut held = Vec::new();
    let ordered = frame_ordered(stacks, &mut held);
    svg_from_ordered(&ordered, opts, w, Format::Svg)
}

fn svg_from_ordered<W: Write>(
    ordered: &[(&str, u64)],
    opts: &RenderOptions,
    w: W,
    format: Format,
) -> Result<()> {
    if ordered.is_empty() {
        return Err(Error::Empty {
            what: "the input".into(),
        });
    }
    let mut io = opts.inferno()?;
    let lines = inferno_lines(ordered);
    if opts.count_name != "ns" {
        return flamegraph::from_lines(&mut io, lines.iter().map(String::as_str), w)
            .map_err(|source| Error::Write { format, source });
    }
    let mut svg = Vec::new();
    flamegraph::from_lines(&mut io, lines.iter().map(String::as_str), &mut svg)
        .map_err(|source| Error::Write { format, source })?;
    let mut w = w;
    w.write_all(&ns_titles_as_time(&svg))
        .and_then(|()| w.flush())
        .map_err(|source| Error::Write { format, source })
}

/// inferno's tooltips (`name (5,314,629,216 ns, 12.34%)`) with the ns
/// written as time (`name (5.31 s, 12.34%)`,
/// [`crate::sys::units::format_amount`]); the rest of the SVG as it is.
fn ns_titles_as_time(svg: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(svg.len());
    let mut rest = svg;
    while let Some(at) = find(rest, b"<title>") {
        let start = at + b"<title>".len();
        let Some(len) = find(&rest[start..], b"</title>") else {
            break;
        };
        out.extend_from_slice(&rest[..start]);
        let title = &rest[start..start + len];
        out.extend_from_slice(&title_as_time(title).unwrap_or_else(|| title.to_vec()));
        rest = &rest[start + len..];
    }
    out.extend_from_slice(rest);
    out
}

/// One tooltip's `(N ns, ` (its last parenthesis) as time.
fn title_as_time(title: &[u8]) -> Option<Vec<u8>> {
    let open = title.windows(2).rposition(|w| w == b" (")? + 2;
    let tail = &title[open..];
    let digits = tail
        .iter()
        .take_while(|b| b.is_ascii_digit() || **b == b',')
        .count();
    let rest = tail[digits..].strip_prefix(b" ns, ")?;
    let n: u64 = std::str::from_utf8(&tail[..digits])
        .ok()?
        .replace(',', "")
        .parse()
        .ok()?;
    let mut v = title[..open].to_vec();
    v.extend_from_slice(crate::sys::units::format_amount(n as f64, "ns").as_bytes());
    v.extend_from_slice(b", ");
    v.extend_from_slice(rest);
    Some(v)
}

fn find(hay: &[u8], needle: &[u8]) -> Option<usize> {
    hay.windows(needle.len()).position(|w| w == needle)
}

/// Renders stacks as one self-contained HTML page: a header with title and
/// totals, a search box (case-insensitive) and a reset-zoom button wired to
/// the inline SVG's own functions, and Enter on a focused frame zooms;
/// beside the graph, a table of functions and the callers and callees of
/// the one picked, drawn from the stacks embedded as [`functions`] writes
/// them. The page references nothing outside itself.
pub fn render_html<S: AsRef<str>, W: Write>(
    stacks: &[(S, u64)],
    opts: &RenderOptions,
    w: W,
) -> Result<()> {
    render_html_with(stacks, opts, &PageExtras::default(), w)
}

/// What a flamegraph page can show besides the flamegraph.
#[derive(Debug, Default)]
pub struct PageExtras<'a> {
    /// A FlameScope-style timeline above the flamegraph (see [`timeline`]),
    /// drawn when it has timed samples.
    pub timeline: Option<&'a timeline::Timeline>,
    /// Links in the header, `(text, href)` (e.g. each worker's page with
    /// its timeline, from a merged query's page).
    pub links: Vec<(String, String)>,
}

/// [`render_html`] with `extras`.
pub fn render_html_with<S: AsRef<str>, W: Write>(
    stacks: &[(S, u64)],
    opts: &RenderOptions,
    extras: &PageExtras<'_>,
    w: W,
) -> Result<()> {
    drawing(stacks, opts)?.page(opts, extras, w)
}

/// A flamegraph drawn once for both its SVG file and its page (the page
/// embeds the same SVG): what [`drawing`] makes.
#[derive(Debug)]
pub struct Drawing {
    /// The SVG, as [`render_svg`] writes it.
    pub svg: Vec<u8>,
    summary: html::Summary,
    /// The page's function table and callers/callees data
    /// ([`functions::CallTree::to_json`]).
    functions: String,
}

/// Draws `stacks` as [`render_svg`] does, keeping the SVG for
/// [`Drawing::page`] too.
pub fn drawing<S: AsRef<str>>(stacks: &[(S, u64)], opts: &RenderOptions) -> Result<Drawing> {
    let mut held = Vec::new();
    let ordered = frame_ordered(stacks, &mut held);
    let mut svg = Vec::new();
    svg_from_ordered(&ordered, opts, &mut svg, Format::Html)?;
    let summary = html::Summary {
        total: crate::sys::counts::sum(ordered.iter().map(|(_, c)| *c)),
        stacks: ordered.len() as u64,
        note: None,
    };
    let functions = functions::CallTree::from_ordered(&ordered).to_json();
    Ok(Drawing {
        svg,
        summary,
        functions,
    })
}

impl Drawing {
    /// The page around this drawing, as [`render_html_with`] writes it for
    /// the same stacks and `opts`.
    pub fn page<W: Write>(
        &self,
        opts: &RenderOptions,
        extras: &PageExtras<'_>,
        w: W,
    ) -> Result<()> {
        let json = extras
            .timeline
            .filter(|t| !t.is_empty())
            .map(timeline::Timeline::to_json);
        let parts = html::Parts {
            timeline: json.as_deref(),
            functions: Some(&self.functions),
            functions_of: "",
            links: &extras.links,
        };
        html::wrap_with(&self.svg, opts, &self.summary, &parts, w)
    }
}

/// Renders stacks in speedscope's JSON file format: one "sampled" profile,
/// one sample per distinct stack (frame indexes root first) weighted by its
/// count.
pub fn render_speedscope<S: AsRef<str>, W: Write>(
    stacks: &[(S, u64)],
    opts: &RenderOptions,
    w: W,
) -> Result<()> {
    let mut held = Vec::new();
    let ordered = frame_ordered(stacks, &mut held);
    if ordered.is_empty() {
        return Err(Error::Empty {
            what: "the input".into(),
        });
    }
    let file = speedscope::File::from_stacks(&ordered, &opts.title, &opts.count_name);
    let mut w = io::BufWriter::new(w);
    serde_json::to_writer(&mut w, &file)
        .map_err(io::Error::from)
        .and_then(|()| w.write_all(b"\n"))
        .and_then(|()| w.flush())
        .map_err(|source| Error::Write {
            format: Format::Speedscope,
            source,
        })
}

/// The `stack count` lines of the file [`render_folded`] writes for
/// `stacks`, as a reader of folded stacks takes them
/// ([`folded::read_folded`]): control characters escaped ([`printable_stacks`],
/// the escaped stacks kept in `held`), sorted bytewise, equal stacks
/// merged, counts of 0 left out.
pub fn folded_lines<'a, S: AsRef<str>>(
    stacks: &'a [(S, u64)],
    held: &'a mut Vec<String>,
) -> Vec<(&'a str, u64)> {
    merged(printable_stacks(
        stacks.iter().map(|(s, c)| (s.as_ref(), *c)),
        held,
    ))
}

/// `stacks` sorted bytewise, equal stacks merged, counts of 0 left out.
fn merged(mut v: Vec<(&str, u64)>) -> Vec<(&str, u64)> {
    v.retain(|(_, c)| *c > 0);
    v.sort_unstable_by(|a, b| a.0.cmp(b.0));
    v.dedup_by(|later, kept| {
        let same = later.0 == kept.0;
        if same {
            kept.1 = crate::sys::counts::add(kept.1, later.1);
        }
        same
    });
    v
}

/// Writes stacks as folded text (`stack count` lines), sorted bytewise and
/// with equal stacks merged, each line's control characters escaped
/// ([`crate::sys::printable`]) as it is written: scanned where it was just
/// copied, in cache (a pass of its own over stacks scattered in memory
/// cost twice as much). A stack escaped there (none of jobprof's own: names
/// are escaped as they are read) keeps the place of its raw text; readers
/// sort and merge ([`folded_lines`] is what they read).
pub fn render_folded<S: AsRef<str>, W: Write>(stacks: &[(S, u64)], w: W) -> Result<()> {
    let mut w = io::BufWriter::new(w);
    let mut num = itoa::Buffer::new();
    let mut line = Vec::with_capacity(256);
    let res = (|| {
        let raw: Vec<(&str, u64)> = stacks.iter().map(|(s, c)| (s.as_ref(), *c)).collect();
        for (stack, count) in merged(raw) {
            crate::text::fold::folded_line(&mut line, stack, count, &mut num);
            w.write_all(&line)?;
        }
        w.flush()
    })();
    res.map_err(|source| Error::Write {
        format: Format::Folded,
        source,
    })
}

/// Writes stacks as a gzipped pprof profile: one sample per stack, one
/// location per frame, the counts in a column named after
/// `opts.count_name` (`ns`: `cpu/nanoseconds`).
pub fn render_pprof<S: AsRef<str>, W: Write>(
    stacks: &[(S, u64)],
    opts: &RenderOptions,
    w: W,
) -> Result<()> {
    if total(stacks) == 0 {
        return Err(Error::Empty {
            what: "the input".into(),
        });
    }
    let columns = crate::output::pprof::columns::Columns::for_count_name(&opts.count_name);
    let rows = stacks
        .iter()
        .map(|(s, c)| (s.as_ref(), columns.on_cpu(*c, true), Vec::new()));
    crate::output::pprof::columns::from_stacks(rows, &columns, w)
        .map(drop)
        .map_err(|source| Error::Write {
            format: Format::Pprof,
            source,
        })
}

/// Renders stacks in `format`.
pub fn render<S: AsRef<str>, W: Write>(
    format: Format,
    stacks: &[(S, u64)],
    opts: &RenderOptions,
    w: W,
) -> Result<()> {
    match format {
        Format::Svg => render_svg(stacks, opts, w),
        Format::Html => render_html(stacks, opts, w),
        Format::Speedscope => render_speedscope(stacks, opts, w),
        Format::Folded => {
            match folded::counts_line(&opts.count_name).filter(|_| opts.counts_line) {
                Some(line) => {
                    let mut w = w;
                    w.write_all(line.as_bytes())
                        .map_err(|source| Error::Write {
                            format: Format::Folded,
                            source,
                        })?;
                    render_folded(stacks, w)
                }
                None => render_folded(stacks, w),
            }
        }
        Format::Pprof => render_pprof(stacks, opts, w),
    }
}

/// What a capture (or a query's merge) with no sample says, on its empty
/// graph and as a warning: it is valid, with nothing in it.
pub const NO_SAMPLES: &str = "no sample in this capture: the query ran for less than one \
     sampling period (or no thread of the worker ran); the flamegraph is empty. Raise \
     --frequency, or repeat the query inside one capture";

/// Draws a profile with no sample: `format` as [`render`] would, with the
/// title and `why` where the frames would be. Folded stacks are an empty
/// file, speedscope a profile without samples; SVG and HTML show the note.
/// Used for a valid capture with nothing in it (a query shorter than one
/// sampling period), so that its page exists and says what to do.
pub fn render_empty<W: Write>(format: Format, opts: &RenderOptions, why: &str, w: W) -> Result<()> {
    let svg = || {
        let title = html::esc(&opts.title);
        let why = html::esc(why);
        format!(
            "<svg version=\"1.1\" width=\"1200\" height=\"90\" viewBox=\"0 0 1200 90\" \
             xmlns=\"http://www.w3.org/2000/svg\">\
             <rect x=\"0\" y=\"0\" width=\"100%\" height=\"100%\" fill=\"#eeeeee\"/>\
             <text id=\"title\" x=\"600\" y=\"28\" text-anchor=\"middle\" font-family=\"Verdana\" \
             font-size=\"17\">{title}</text>\
             <text id=\"jp-empty\" x=\"600\" y=\"60\" text-anchor=\"middle\" \
             font-family=\"Verdana\" font-size=\"12\">{why}</text></svg>\n"
        )
    };
    let io_err = |source| Error::Write { format, source };
    match format {
        Format::Folded => Ok(()),
        Format::Svg => {
            let mut w = w;
            w.write_all(svg().as_bytes()).map_err(io_err)
        }
        Format::Html => {
            let summary = html::Summary {
                total: 0,
                stacks: 0,
                note: Some(why.to_string()),
            };
            html::wrap(svg().as_bytes(), opts, &summary, w)
        }
        Format::Speedscope => {
            let file = speedscope::File::from_stacks(&[], &opts.title, &opts.count_name);
            let mut w = io::BufWriter::new(w);
            serde_json::to_writer(&mut w, &file)
                .map_err(io::Error::from)
                .and_then(|()| w.write_all(b"\n"))
                .and_then(|()| w.flush())
                .map_err(io_err)
        }
        // A pprof profile without samples says nothing a reader can use.
        Format::Pprof => Err(Error::Empty {
            what: "the input".into(),
        }),
    }
}

#[cfg(test)]
mod tests;
