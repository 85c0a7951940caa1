//! The timeline's part of the flamegraph page: the markup above the
//! flamegraph, its style, the embedded data ([`super::timeline`]) and the
//! script that draws the heat map (columns of seconds, rows of 20 ms cells,
//! darker = more samples), selects a range by drag or click, and draws the
//! range's flamegraph in place of the whole capture's. The selection (and
//! a chosen thread) live in the URL fragment: `#t=START-END` in
//! milliseconds from the window's start, `&thread=COMM%20TID`. Offline: no
//! request, no library.

use std::io::{self, Write};

const STYLE: &str = concat!("\n", include_str!("../../../assets/timeline.css"));

const SCRIPT: &str = concat!("\n", include_str!("../../../assets/timeline.js"));

/// The style rules of the timeline.
pub(crate) fn style() -> &'static str {
    STYLE
}

/// Writes the timeline section (markup and data) for `json`
/// ([`super::timeline::Timeline::to_json`]).
pub(crate) fn write_section<W: Write>(json: &str, w: &mut W) -> io::Result<()> {
    w.write_all(
        b"<section id=\"jp-timeline\" aria-label=\"Timeline\">\n<div class=\"jp-tl-bar\">\
          <strong>Timeline</strong><span>columns are seconds, cells 20 ms, darker is more \
          samples; drag or click to see that range's flamegraph</span>\
          <label>Thread <select id=\"jp-tl-thread\"><option value=\"-1\">all threads</option>\
          </select></label>\
          <button type=\"button\" id=\"jp-tl-clear\" disabled>Whole capture</button>\
          <span id=\"jp-tl-info\" aria-live=\"polite\"></span></div>\n\
          <canvas id=\"jp-tl-heat\" role=\"img\" aria-label=\"Samples over time\"></canvas>\n\
          <div id=\"jp-tl-flame\" hidden></div>\n</section>\n\
          <script type=\"application/json\" id=\"jp-tl-data\">",
    )?;
    w.write_all(json.as_bytes())?;
    w.write_all(b"</script>\n")
}

/// Writes the timeline's script (after the page's own).
pub(crate) fn write_script<W: Write>(w: &mut W) -> io::Result<()> {
    writeln!(w, "<script>{SCRIPT}</script>")
}
