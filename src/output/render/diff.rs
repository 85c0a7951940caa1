//! Differential flamegraphs: how a profile (AFTER) differs from another
//! (BEFORE), correct for every frame, not only for leaves.
//!
//! The graph is AFTER's flamegraph (widths are AFTER's counts); each frame is
//! coloured by the change of its *total* (the frame and everything it calls)
//! from BEFORE to AFTER: red where it grew, blue where it shrank, grey where
//! it did not change; the stronger the colour, the larger the change compared
//! with the largest change of any frame. The tooltip gives both counts and
//! the change. inferno's own differential mode takes each frame's delta from
//! the first input line that contains it (for inner frames mostly 0), so an
//! inner frame whose callees moved shows as unchanged; here the deltas are
//! summed over call paths in a tree of both profiles, and inferno's frames
//! are recoloured by position (depth and start), which is checked against
//! the tree so that a mismatch is an error rather than a wrong picture.
//!
//! Code that only BEFORE ran has no width in AFTER and is not drawn; its
//! samples still count in the deltas of its callers, and the total is
//! returned in [`DiffSummary::vanished`]. To see it, swap the inputs.
//!
//! With replicates on both sides ([`render_diff_replicates`]), the pooled
//! counts are drawn (BEFORE's scaled to AFTER's number of replicates) and
//! only the frames whose change is beyond the replicates' noise are
//! coloured ([`noise`]: the trend's permutation test and false-discovery
//! control per frame); the others are grey, and every tooltip gives the
//! frame's share before and after, p and q.

mod noise;

use noise::Verdict;
pub use noise::{smallest_p, Noise, NoiseSummary};

use std::io::{self, Write};

use quick_xml::events::{BytesStart, BytesText, Event};
use quick_xml::{Reader, Writer};
use rustc_hash::FxHashMap;

use super::{frame_ordered, html, Error, Format, RenderOptions, Result};

/// What the colours mean, for subtitles and page headers.
pub const LEGEND: &str =
    "width = AFTER; red = grew since BEFORE, blue = shrank, grey = unchanged (each frame's total)";

/// Numbers about a differential flamegraph.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct DiffSummary {
    /// Sum of BEFORE's counts (as read, before any normalisation).
    pub before_total: u64,
    /// Sum of AFTER's counts.
    pub after_total: u64,
    /// Factor BEFORE's counts were multiplied by: 1, unless normalised
    /// (AFTER's total over BEFORE's) or of replicates (AFTER's number of
    /// replicates over BEFORE's).
    pub scale: f64,
    /// BEFORE's (scaled) counts on call paths AFTER never reached: not
    /// drawn, but included in their callers' deltas.
    pub vanished: f64,
    /// With replicates: how many frames were tested and coloured.
    pub noise: Option<NoiseSummary>,
}

/// The legend of a differential flamegraph whose frames were judged over
/// replicates.
pub fn noise_legend(n: &NoiseSummary) -> String {
    format!(
        "width = AFTER ({} replicates pooled); red = grew since BEFORE, blue = shrank, \
         beyond the noise of {} and {} replicates (permutation test, false discovery rate {}); \
         grey = within the noise (each frame's total)",
        n.after_replicates, n.before_replicates, n.after_replicates, n.alpha
    )
}

struct Node<'a> {
    name: &'a str,
    before: f64,
    after: u64,
}

/// Both profiles merged into one call tree.
struct Tree<'a> {
    nodes: Vec<Node<'a>>,
    children: FxHashMap<(u32, &'a str), u32>,
    /// (depth, start in AFTER's layout) of each node AFTER reached.
    at: FxHashMap<(usize, u64), u32>,
}

impl<'a> Tree<'a> {
    fn new() -> Self {
        Tree {
            nodes: vec![Node {
                name: "all",
                before: 0.0,
                after: 0,
            }],
            children: FxHashMap::default(),
            at: FxHashMap::default(),
        }
    }

    fn child(&mut self, parent: u32, name: &'a str) -> (u32, bool) {
        if let Some(&id) = self.children.get(&(parent, name)) {
            return (id, false);
        }
        let id = self.nodes.len() as u32;
        self.nodes.push(Node {
            name,
            before: 0.0,
            after: 0,
        });
        self.children.insert((parent, name), id);
        (id, true)
    }

    /// Adds AFTER's stacks in frame order, recording where inferno will
    /// draw each frame: a call path is contiguous in this order, so its
    /// frame starts at the running total when the path is first seen.
    fn add_after(&mut self, ordered: &[(&'a str, u64)]) {
        self.at.insert((0, 0), 0);
        let mut time = 0u64;
        for (stack, count) in ordered {
            self.nodes[0].after = crate::sys::counts::add(self.nodes[0].after, *count);
            let mut id = 0;
            for (depth, name) in stack.split(';').enumerate() {
                let (child, new) = self.child(id, name);
                if new {
                    self.at.insert((depth + 1, time), child);
                }
                let node = &mut self.nodes[child as usize];
                node.after = crate::sys::counts::add(node.after, *count);
                id = child;
            }
            time = crate::sys::counts::add(time, *count);
        }
    }

    /// Adds BEFORE's stacks, scaled; returns the part on paths AFTER lacks.
    fn add_before(&mut self, stacks: &[(&'a str, u64)], scale: f64) -> f64 {
        let mut vanished = 0.0;
        for (stack, count) in stacks {
            let c = *count as f64 * scale;
            self.nodes[0].before += c;
            let mut id = 0;
            for name in stack.split(';') {
                id = self.child(id, name).0;
                self.nodes[id as usize].before += c;
            }
            if self.nodes[id as usize].after == 0 {
                vanished += c;
            }
        }
        vanished
    }
}

/// Renders the differential flamegraph of `before` → `after` as an SVG,
/// an offline HTML page, or folded `stack before after` lines (the input
/// format of FlameGraph's and inferno's differential mode, over the union
/// of stacks). With `normalize`, BEFORE's counts are scaled so that its
/// total equals AFTER's (compare shapes of runs of different length).
pub fn render_diff<S: AsRef<str>, T: AsRef<str>, W: Write>(
    before: &[(S, u64)],
    after: &[(T, u64)],
    normalize: bool,
    format: Format,
    opts: &RenderOptions,
    w: W,
) -> Result<DiffSummary> {
    let (mut held_before, mut held_after) = (Vec::new(), Vec::new());
    let before = frame_ordered(before, &mut held_before);
    let after = frame_ordered(after, &mut held_after);
    render(&before, after, normalize, 1.0, None, format, opts, w)
}

/// [`render_diff`] of replicates: each side's replicates pooled (BEFORE's
/// counts scaled by AFTER's number of replicates over BEFORE's, or with
/// `normalize` to AFTER's total), and only the frames whose change is
/// significant over the replicates coloured (`noise`); the others grey.
/// Each side needs at least two replicates for that (with fewer, use
/// [`render_diff`]).
pub fn render_diff_replicates<S: AsRef<str>, T: AsRef<str>, W: Write>(
    before: &[Vec<(S, u64)>],
    after: &[Vec<(T, u64)>],
    normalize: bool,
    noise: &Noise,
    format: Format,
    opts: &RenderOptions,
    w: W,
) -> Result<DiffSummary> {
    // Each replicate's escaped names are held in its own vector.
    let mut held_b: Vec<Vec<String>> = vec![Vec::new(); before.len()];
    let mut held_a: Vec<Vec<String>> = vec![Vec::new(); after.len()];
    let reps_b: Vec<Vec<(&str, u64)>> = before
        .iter()
        .zip(held_b.iter_mut())
        .map(|(r, h)| frame_ordered(r, h))
        .collect();
    let reps_a: Vec<Vec<(&str, u64)>> = after
        .iter()
        .zip(held_a.iter_mut())
        .map(|(r, h)| frame_ordered(r, h))
        .collect();
    let pooled_b: Vec<(&str, u64)> = reps_b.iter().flatten().copied().collect();
    let pooled_a: Vec<(&str, u64)> = reps_a.iter().flatten().copied().collect();
    // Already escaped (the escape is idempotent): nothing is held.
    let (mut held_pb, mut held_pa) = (Vec::new(), Vec::new());
    let b = frame_ordered(&pooled_b, &mut held_pb);
    let a = frame_ordered(&pooled_a, &mut held_pa);
    let per_replicate = if reps_b.is_empty() {
        1.0
    } else {
        reps_a.len() as f64 / reps_b.len() as f64
    };
    let judged = (&reps_b[..], &reps_a[..], noise);
    render(
        &b,
        a,
        normalize,
        per_replicate,
        Some(judged),
        format,
        opts,
        w,
    )
}

/// Each side's replicates and how to judge them.
type Judged<'r, 'a> = (
    &'r [Vec<(&'a str, u64)>],
    &'r [Vec<(&'a str, u64)>],
    &'r Noise,
);

/// Draws frame-ordered `before` -> `after`; BEFORE's counts times
/// `scale` (or, with `normalize`, scaled to AFTER's total); with `judged`,
/// only the frames that changed beyond the replicates' noise coloured.
#[allow(clippy::too_many_arguments)]
fn render<W: Write>(
    before: &[(&str, u64)],
    after: Vec<(&str, u64)>,
    normalize: bool,
    scale: f64,
    judged: Option<Judged<'_, '_>>,
    format: Format,
    opts: &RenderOptions,
    w: W,
) -> Result<DiffSummary> {
    let before_total = crate::sys::counts::sum(before.iter().map(|(_, c)| *c));
    let after_total = crate::sys::counts::sum(after.iter().map(|(_, c)| *c));
    let scale = if normalize && before_total > 0 {
        after_total as f64 / before_total as f64
    } else {
        scale
    };
    let mut summary = DiffSummary {
        before_total,
        after_total,
        scale,
        vanished: 0.0,
        noise: None,
    };
    match format {
        Format::Folded => {
            write_diff_folded(before, &after, scale, w)
                .map_err(|source| Error::Write { format, source })?;
            return Ok(summary);
        }
        Format::Svg | Format::Html => {}
        Format::Speedscope | Format::Pprof => {
            return Err(Error::Unsupported {
                op: "a differential flamegraph",
                format,
                supported: "svg, html or folded",
            })
        }
    }
    if after.is_empty() {
        return Err(Error::Empty {
            what: "AFTER".into(),
        });
    }
    let (after, tree, vanished) = diff_tree(after, before, scale);
    summary.vanished = vanished;
    let verdicts = judged.map(|(b, a, noise)| {
        let (v, n) = noise::judge(&tree, b, a, noise, normalize);
        summary.noise = Some(n);
        v
    });
    let mut look = opts.clone();
    if look.subtitle.is_none() {
        look.subtitle = Some(match &summary.noise {
            Some(n) => noise_legend(n),
            None => LEGEND.to_string(),
        });
    }
    let mut plain = Vec::new();
    super::svg_from_ordered(&after, &look, &mut plain, format)?;
    let mut svg = Vec::with_capacity(plain.len() + plain.len() / 4);
    recolor(&plain, &tree, verdicts.as_deref(), opts, &mut svg)?;
    write_drawing(&svg, format, &look, &summary, normalize, &after, w)?;
    Ok(summary)
}

/// AFTER's stacks as drawn (counts whose total passes u64 halved as often
/// as needed, as `svg_from_ordered` does: the tree must match the picture),
/// the tree of both runs over them, and BEFORE's (scaled) weight on paths
/// AFTER never reached.
fn diff_tree<'a>(
    after: Vec<(&'a str, u64)>,
    before: &[(&'a str, u64)],
    scale: f64,
) -> (Vec<(&'a str, u64)>, Tree<'a>, f64) {
    let shift = crate::sys::counts::shift_to_fit(after.iter().map(|(_, c)| *c));
    let after: Vec<(&str, u64)> = after
        .into_iter()
        .map(|(s, c)| (s, c >> shift))
        .filter(|(_, c)| *c > 0)
        .collect();
    let mut tree = Tree::new();
    tree.add_after(&after);
    let vanished =
        tree.add_before(before, scale / 2f64.powi(shift as i32)) * 2f64.powi(shift as i32);
    (after, tree, vanished)
}

/// Writes the recoloured `svg`: as it is, or wrapped in the offline HTML
/// page with the legend, both totals and the function table with callers
/// and callees of `after` (AFTER's stacks, as drawn: the graph's widths).
fn write_drawing<W: Write>(
    svg: &[u8],
    format: Format,
    look: &RenderOptions,
    summary: &DiffSummary,
    normalize: bool,
    after: &[(&str, u64)],
    mut w: W,
) -> Result<()> {
    if format != Format::Html {
        return w
            .write_all(svg)
            .and_then(|()| w.flush())
            .map_err(|source| Error::Write { format, source });
    }
    // The header shows the subtitle: the legend is said there, once.
    let base = summary
        .noise
        .as_ref()
        .map_or(LEGEND.to_string(), noise_legend);
    let mut legend = match &summary.noise {
        Some(n) => format!(
            "{base}. {} of {} frames tested, {} coloured. ",
            n.tested, n.frames, n.significant
        ),
        None => format!("{base}. "),
    };
    if look.subtitle.as_deref() == Some(base.as_str()) {
        legend.replace_range(..base.len() + 2, "");
    }
    let amount = |n: u64| crate::sys::units::format_amount(n as f64, &look.count_name);
    let note = format!(
        "{legend}BEFORE {}, AFTER {}{}",
        amount(summary.before_total),
        amount(summary.after_total),
        totals_note(summary, normalize)
    );
    let s = html::Summary {
        total: summary.after_total,
        stacks: after.len() as u64,
        note: Some(note),
    };
    let functions = super::functions::CallTree::from_ordered(after).to_json();
    let parts = html::Parts {
        functions: Some(&functions),
        functions_of: "of AFTER",
        ..html::Parts::default()
    };
    html::wrap_with(svg, look, &s, &parts, w)?;
    Ok(())
}

/// How the totals were compared, after "BEFORE x, AFTER y": BEFORE
/// scaled to AFTER's total (the colours compare shares); with replicates
/// judged unnormalised, BEFORE scaled by AFTER's number of replicates over
/// its own (a change of the total alone colours nothing there: a frame's
/// samples per replicate and its share must both move); or, unscaled, a
/// warning when the totals differ by more than a tenth (every frame then
/// takes the colour of that change).
pub fn totals_note(summary: &DiffSummary, normalize: bool) -> String {
    let (b, a) = (summary.before_total as f64, summary.after_total as f64);
    let scaled = (summary.scale - 1.0).abs() > 1e-9;
    if normalize {
        if scaled {
            format!(
                ": BEFORE scaled by {:.4} to AFTER's total, so the colours compare shares \
                 ({}).",
                summary.scale,
                if summary.noise.is_some() {
                    "without --normalize: the counts per replicate"
                } else {
                    "--no-normalize: the raw counts"
                }
            )
        } else {
            ".".to_string()
        }
    } else if let Some(n) = &summary.noise {
        if scaled {
            format!(
                ": BEFORE scaled by {:.4}, AFTER's {} replicates over BEFORE's {}.",
                summary.scale, n.after_replicates, n.before_replicates
            )
        } else {
            ".".to_string()
        }
    } else if b > 0.0 && (a / (b * summary.scale) - 1.0).abs() > 0.1 {
        format!(
            ": AFTER's total is {:.0}% of BEFORE's, and every frame is coloured by that too \
             (--normalize compares shares).",
            100.0 * a / (b * summary.scale)
        )
    } else {
        ".".to_string()
    }
}

fn write_diff_folded<W: Write>(
    before: &[(&str, u64)],
    after: &[(&str, u64)],
    scale: f64,
    w: W,
) -> io::Result<()> {
    let mut all: FxHashMap<&str, (f64, u64)> = FxHashMap::default();
    for (s, c) in before {
        all.entry(s).or_default().0 += *c as f64 * scale;
    }
    for (s, c) in after {
        let e = all.entry(s).or_default();
        e.1 = crate::sys::counts::add(e.1, *c);
    }
    let mut v: Vec<_> = all.into_iter().collect();
    v.sort_unstable_by(|a, b| a.0.cmp(b.0));
    let mut w = io::BufWriter::new(w);
    for (s, (b, a)) in v {
        writeln!(w, "{s} {} {a}", b.round() as u64)?;
    }
    w.flush()
}

/// inferno hides these kernel/JIT/inline/waker annotations in labels.
fn deannotate(f: &str) -> &str {
    for suffix in ["_[k]", "_[j]", "_[i]", "_[w]"] {
        if let Some(s) = f.strip_suffix(suffix) {
            return s;
        }
    }
    f
}

/// A frame's fill for its change: grey when unchanged, else red (grew)
/// or blue (shrank), stronger for a larger change, from a pale tint down
/// to `rgb(255,100,100)` and `rgb(100,100,255)`: the frames' black text
/// keeps a contrast of at least 4.5:1 (WCAG AA) on the strongest blue,
/// where full `rgb(0,0,255)` gave 2.4:1.
fn color(delta: f64, max_abs: f64) -> String {
    if delta.abs() < 0.5 || max_abs <= 0.0 {
        return "rgb(225,225,225)".to_string();
    }
    const PALE: f64 = 210.0;
    const STRONG: f64 = 100.0;
    let v = (STRONG + (PALE - STRONG) * (1.0 - (delta.abs() / max_abs).min(1.0))).round() as u8;
    if delta > 0.0 {
        format!("rgb(255,{v},{v})")
    } else {
        format!("rgb({v},{v},255)")
    }
}

fn tooltip(
    node: &Node<'_>,
    verdict: Option<Verdict>,
    after_total: u64,
    count_name: &str,
) -> String {
    let delta = node.after as f64 - node.before;
    let total = after_total.max(1) as f64;
    let judged = match verdict {
        None => String::new(),
        Some(Verdict::Rare) => "; not tested: under the floor in most replicates".to_string(),
        Some(Verdict::Constant) => "; not tested: the same share in every replicate".to_string(),
        Some(Verdict::Tested {
            before,
            after,
            p,
            q,
            significant,
        }) => format!(
            // No parentheses: the page's script labels a frame with its
            // tooltip up to the last `(`.
            "; share {before:.2}% -> {after:.2}%, {:+.2} points, p={}, q={}: {}",
            after - before,
            short(p),
            short(q),
            if significant {
                "beyond the noise"
            } else {
                "within the noise"
            }
        ),
    };
    let amount = |n: f64| crate::sys::units::format_amount(n, count_name);
    // `before 20, +10 samples`, `before 1.07 s, -539 ms`.
    let before = if count_name == "ns" {
        amount(node.before)
    } else {
        html::group_digits(node.before.round() as u64)
    };
    format!(
        "{} ({}, {:.2}%; before {before}, {}, {:+.2}%{judged})",
        deannotate(node.name),
        amount(node.after as f64),
        100.0 * node.after as f64 / total,
        crate::sys::units::format_change(delta, count_name),
        100.0 * delta / total,
    )
}

/// A p or q value in three significant digits.
fn short(p: f64) -> String {
    if p >= 0.001 {
        format!("{p:.3}")
    } else {
        format!("{p:.1e}")
    }
}

fn xml_err(e: quick_xml::Error) -> Error {
    Error::Internal(format!("re-reading inferno's SVG: {e}"))
}

fn attr(e: &BytesStart<'_>, name: &str) -> Option<String> {
    e.try_get_attribute(name)
        .ok()
        .flatten()
        .map(|a| String::from_utf8_lossy(&a.value).into_owned())
}

/// Copies inferno's SVG, replacing each frame's fill and tooltip with the
/// frame's total delta.
/// With `verdicts` (per node), only the frames beyond the noise are
/// coloured, the strongest colour their largest change.
fn recolor(
    svg: &[u8],
    tree: &Tree<'_>,
    verdicts: Option<&[Option<Verdict>]>,
    opts: &RenderOptions,
    out: &mut Vec<u8>,
) -> Result<()> {
    let depth_of = row_depths(svg, opts.inverted)?;
    let after_total = tree.nodes[0].after;
    let max_abs = largest_change(tree, verdicts);
    let drawing = Drawing {
        tree,
        verdicts,
        depth_of: &depth_of,
        max_abs,
        after_total,
        opts,
    };

    // Pass 2: copy, buffering each frame group until its rect says which
    // frame it is.
    let mut reader = Reader::from_reader(svg);
    let mut writer = Writer::new(out);
    let mut group: Option<Vec<Event<'static>>> = None;
    let mut in_frames = false;
    let mut frames_depth = 0usize;
    loop {
        let ev = reader.read_event().map_err(xml_err)?;
        if let Event::Eof = ev {
            break;
        }
        if !in_frames {
            if let Event::Start(e) = &ev {
                if e.name().as_ref() == b"svg" && attr(e, "id").as_deref() == Some("frames") {
                    in_frames = true;
                    frames_depth = 0;
                }
            }
            writer.write_event(ev).map_err(io_internal)?;
            continue;
        }
        match &ev {
            Event::Start(_) => frames_depth += 1,
            Event::End(_) if frames_depth == 0 => in_frames = false,
            Event::End(_) => frames_depth -= 1,
            _ => {}
        }
        if group.is_none() {
            if matches!(&ev, Event::Start(e) if frames_depth == 1 && (e.name().as_ref() == b"g" || e.name().as_ref() == b"a"))
            {
                group = Some(vec![ev.into_owned()]);
            } else {
                writer.write_event(ev).map_err(io_internal)?;
            }
            continue;
        }
        let g = group.as_mut().expect("checked above");
        let closes = matches!(ev, Event::End(_)) && frames_depth == 0;
        g.push(ev.into_owned());
        if closes {
            let events = group.take().expect("checked above");
            for e in rewrite_group(events, &drawing)? {
                writer.write_event(e).map_err(io_internal)?;
            }
        }
    }
    Ok(())
}

/// Pass 1: the frame rows' y positions give each row's depth (depth 0 at
/// the bottom unless the graph is inverted).
fn row_depths(svg: &[u8], inverted: bool) -> Result<FxHashMap<i64, usize>> {
    let mut ys: Vec<i64> = Vec::new();
    let mut reader = Reader::from_reader(svg);
    loop {
        match reader.read_event().map_err(xml_err)? {
            Event::Eof => break,
            Event::Empty(e) if e.name().as_ref() == b"rect" && attr(&e, "fg:x").is_some() => {
                if let Some(y) = attr(&e, "y").and_then(|y| y.parse().ok()) {
                    ys.push(y);
                }
            }
            _ => {}
        }
    }
    ys.sort_unstable();
    ys.dedup();
    if !inverted {
        ys.reverse(); // roots at the bottom: the largest y is depth 0
    }
    Ok(ys.iter().enumerate().map(|(d, y)| (*y, d)).collect())
}

/// The largest absolute change of any drawn frame (the full colour); with
/// `verdicts`, of any frame beyond the noise.
fn largest_change(tree: &Tree<'_>, verdicts: Option<&[Option<Verdict>]>) -> f64 {
    tree.at
        .values()
        .filter(|&&id| verdicts.is_none_or(|v| coloured(v[id as usize])))
        .map(|&id| {
            let n = &tree.nodes[id as usize];
            (n.after as f64 - n.before).abs()
        })
        .fold(0.0f64, f64::max)
}

fn coloured(v: Option<Verdict>) -> bool {
    matches!(
        v,
        Some(Verdict::Tested {
            significant: true,
            ..
        })
    )
}

/// What every frame's rewrite needs.
struct Drawing<'d, 'a> {
    tree: &'d Tree<'a>,
    verdicts: Option<&'d [Option<Verdict>]>,
    depth_of: &'d FxHashMap<i64, usize>,
    max_abs: f64,
    after_total: u64,
    opts: &'d RenderOptions,
}

fn io_internal(e: io::Error) -> Error {
    Error::Internal(format!("writing the recoloured SVG: {e}"))
}

fn rewrite_group(events: Vec<Event<'static>>, d: &Drawing<'_, '_>) -> Result<Vec<Event<'static>>> {
    let (tree, depth_of) = (d.tree, d.depth_of);
    let rect = events
        .iter()
        .find_map(|e| match e {
            Event::Empty(r) if r.name().as_ref() == b"rect" => Some(r.clone()),
            _ => None,
        })
        .ok_or_else(|| Error::Internal("a frame without a rect".into()))?;
    let num = |k: &str| -> Result<i64> {
        attr(&rect, k)
            .and_then(|v| v.parse().ok())
            .ok_or_else(|| Error::Internal(format!("a frame rect without a numeric {k}")))
    };
    let (y, x, w) = (num("y")?, num("fg:x")?, num("fg:w")?);
    let depth = *depth_of
        .get(&y)
        .ok_or_else(|| Error::Internal(format!("no row at y={y}")))?;
    let id = *tree
        .at
        .get(&(depth, x as u64))
        .ok_or_else(|| Error::Internal(format!("no frame at depth {depth}, x={x}")))?;
    let node = &tree.nodes[id as usize];
    if node.after != w as u64 {
        return Err(Error::Internal(format!(
            "frame `{}` at depth {depth}, x={x} is {w} wide in the SVG but {} in the tree",
            node.name, node.after
        )));
    }
    let verdict = d.verdicts.and_then(|v| v[id as usize]);
    let fill = if d.verdicts.is_some() && !coloured(verdict) {
        color(0.0, d.max_abs)
    } else {
        color(node.after as f64 - node.before, d.max_abs)
    };
    let title = tooltip(node, verdict, d.after_total, &d.opts.count_name);
    let mut out = Vec::with_capacity(events.len());
    let mut in_title = false;
    for e in events {
        match e {
            Event::Start(s) if s.name().as_ref() == b"title" => {
                in_title = true;
                out.push(Event::Start(s));
                out.push(Event::Text(BytesText::new(&title).into_owned()));
            }
            Event::End(s) if s.name().as_ref() == b"title" => {
                in_title = false;
                out.push(Event::End(s));
            }
            _ if in_title => {}
            Event::Empty(r) if r.name().as_ref() == b"rect" => {
                let mut n = BytesStart::new("rect");
                for a in r.attributes().flatten() {
                    if a.key.as_ref() == b"fill" {
                        n.push_attribute(("fill", fill.as_str()));
                    } else {
                        n.push_attribute(a);
                    }
                }
                out.push(Event::Empty(n.into_owned()));
            }
            e => out.push(e),
        }
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn inner_frame_totals_include_callees() {
        let before = [("main;a", 10u64), ("main;a;x", 10)];
        let after = [("main;a", 10u64), ("main;a;x", 20)];
        let (mut hb, mut ha) = (Vec::new(), Vec::new());
        let b = frame_ordered(&before, &mut hb);
        let a = frame_ordered(&after, &mut ha);
        let mut t = Tree::new();
        t.add_after(&a);
        t.add_before(&b, 1.0);
        let id = t.at[&(2, 0)];
        assert_eq!(t.nodes[id as usize].name, "a");
        assert_eq!(t.nodes[id as usize].after, 30);
        assert_eq!(t.nodes[id as usize].before, 20.0);
    }

    #[test]
    fn colours() {
        assert_eq!(color(0.2, 10.0), "rgb(225,225,225)");
        assert_eq!(color(10.0, 10.0), "rgb(255,100,100)");
        assert_eq!(color(-5.0, 10.0), "rgb(155,155,255)");
    }

    /// WCAG's contrast of black text on `rgb(r,g,b)`.
    fn contrast_with_black(fill: &str) -> f64 {
        let v: Vec<f64> = fill
            .trim_start_matches("rgb(")
            .trim_end_matches(')')
            .split(',')
            .map(|c| {
                let c = c.parse::<f64>().unwrap() / 255.0;
                if c <= 0.03928 {
                    c / 12.92
                } else {
                    ((c + 0.055) / 1.055).powf(2.4)
                }
            })
            .collect();
        let l = 0.2126 * v[0] + 0.7152 * v[1] + 0.0722 * v[2];
        (l + 0.05) / 0.05
    }

    /// Issue 58, item 5: the strongest blue under black text was hard to
    /// read; every colour keeps AA contrast (4.5:1) with the text.
    #[test]
    fn the_strongest_colours_keep_black_text_readable() {
        for i in 0..=20 {
            let d = f64::from(i) / 2.0;
            for fill in [color(d, 10.0), color(-d, 10.0)] {
                let c = contrast_with_black(&fill);
                assert!(c >= 4.5, "{fill}: contrast {c:.2}");
            }
        }
    }
}
