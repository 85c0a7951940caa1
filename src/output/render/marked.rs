//! Flamegraphs in which some frames have a fixed colour: the off-CPU state
//! frames of `offcpu.*` and `wallclock.*` (blue for sleeping and blocked,
//! purple for runnable; [`offcpu_frames`]) stand out from the palette's
//! on-CPU colours. The rest is [`super::render`]'s; only SVG and HTML have
//! colours, the other formats render as usual.

use std::io::Write;

use inferno::flamegraph::color::{Color, PaletteMap};
use inferno::flamegraph::{self};

use super::{frame_ordered, html, inferno_lines, Error, Format, RenderOptions, Result};
use crate::text::offcpu;

/// A frame name and its colour (`0xRRGGBB`).
pub type Marked<'a> = (&'a str, u32);

/// The frames drawn in a fixed colour (blue off the CPU, purple runnable).
pub fn offcpu_frames() -> Vec<Marked<'static>> {
    const BLUE: u32 = 0x4f7fd0;
    const PURPLE: u32 = 0xa070d0;
    vec![
        (offcpu::State::Runnable.frame(), PURPLE),
        (offcpu::State::Sleeping.frame(), BLUE),
        (offcpu::State::Disk.frame(), 0x2f5fa0),
        (offcpu::State::Other.frame(), BLUE),
        (offcpu::State::Unknown.frame(), 0x8fa8d0),
        (offcpu::account::BEFORE_WINDOW, 0x8fa8d0),
        (offcpu::account::NOT_YET_RUN, PURPLE),
        (offcpu::account::UNKNOWN_STACK, 0x8fa8d0),
    ]
}

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
    let mut held = Vec::new();
    let ordered = frame_ordered(stacks, &mut held);
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
