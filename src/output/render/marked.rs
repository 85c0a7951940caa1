//! Flamegraphs in which some frames have a fixed colour: the off-CPU state
//! frames of `offcpu.*` and `wallclock.*` (blue for sleeping and blocked,
//! purple for runnable) stand out from the palette's on-CPU colours. The
//! rest is [`super::render`]'s; only SVG and HTML have colours, the other
//! formats render as usual.

use std::io::Write;

use inferno::flamegraph::color::{Color, PaletteMap};
use inferno::flamegraph::{self};

use super::{frame_ordered, html, inferno_lines, Error, Format, RenderOptions, Result};

/// A frame name and its colour (`0xRRGGBB`).
pub type Marked<'a> = (&'a str, u32);

/// Renders `stacks` in `format`, frames named in `marked` in their colour.
pub fn render_marked<S: AsRef<str>, W: Write>(
    format: Format,
    stacks: &[(S, u64)],
    opts: &RenderOptions,
    marked: &[Marked<'_>],
    w: W,
) -> Result<()> {
    match format {
        Format::Svg => svg(stacks, opts, marked, w, Format::Svg),
        Format::Html => {
            let mut page = Vec::new();
            svg(stacks, opts, marked, &mut page, Format::Html)?;
            let summary = html::Summary {
                total: crate::sys::counts::sum(stacks.iter().map(|(_, c)| *c)),
                stacks: stacks.len() as u64,
                note: Some(
                    "blue: off the CPU (sleeping S, uninterruptible D, unknown); \
                     purple: runnable, waiting for a CPU (R); other colours: on the CPU"
                        .into(),
                ),
            };
            html::wrap(&page, opts, &summary, w)
        }
        _ => super::render(format, stacks, opts, w),
    }
}

fn svg<S: AsRef<str>, W: Write>(
    stacks: &[(S, u64)],
    opts: &RenderOptions,
    marked: &[Marked<'_>],
    w: W,
    format: Format,
) -> Result<()> {
    let ordered = frame_ordered(stacks);
    if ordered.is_empty() {
        return Err(Error::Empty {
            what: "the input".into(),
        });
    }
    let mut map = PaletteMap::default();
    for (name, rgb) in marked {
        let c = Color {
            r: (rgb >> 16) as u8,
            g: (rgb >> 8) as u8,
            b: *rgb as u8,
        };
        map.insert(*name, c);
    }
    let mut io: flamegraph::Options<'_> = opts.inferno()?;
    io.palette_map = Some(&mut map);
    let lines = inferno_lines(&ordered);
    flamegraph::from_lines(&mut io, lines.iter().map(String::as_str), w)
        .map_err(|source| Error::Write { format, source })
}
