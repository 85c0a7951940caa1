//! The look of a flamegraph, as `render` and `diff` take it from the
//! command line ([`LookArgs`]: title, width, palette-independent options,
//! count name, output format), turned into the library's render options.

use std::path::{Path, PathBuf};

use clap::Args;

use jobprof::output::render::folded::{count_name_of, FoldedInput};
use jobprof::output::render::{Format, RenderOptions};

/// Options shared by `render` and `diff`: how the flamegraph looks.
#[derive(Debug, Args)]
pub struct LookArgs {
    /// Title at the top (default: "Flame Graph", or "Differential Flame Graph").
    #[arg(long, value_name = "TEXT")]
    pub title: Option<String>,

    /// A second line under the title.
    #[arg(long, value_name = "TEXT")]
    pub subtitle: Option<String>,

    /// Image width in pixels [default: fit the window].
    #[arg(long, value_name = "PIXELS", value_parser = clap::value_parser!(u32).range(100..))]
    pub width: Option<u32>,

    /// Leave out frames narrower than this percentage of the total.
    #[arg(long, value_name = "PERCENT", default_value_t = 0.1)]
    pub minwidth: f64,

    /// Icicle graph: roots at the top, stacks growing downwards.
    #[arg(long)]
    pub inverted: bool,

    /// What the counts are, for the totals and tooltips (e.g. samples, ns,
    /// bytes; ns are shown as time) [default: what the inputs' first line
    /// says (`# counts: ns`, written by `jobprof fold`), else what their
    /// capture directory says (its summary.json's event: `ns` for
    /// cpu-clock, whose periods the counts are), else samples].
    /// `--countname` (inferno's spelling) also works.
    #[arg(long, value_name = "NAME", alias = "countname")]
    pub count_name: Option<String>,

    /// Output format: svg, html, speedscope, folded, pprof [default: from
    /// the output's extension (.svg, .html, .json, .folded, .pb.gz); svg on
    /// stdout].
    #[arg(long, value_name = "FORMAT")]
    pub format: Option<String>,
}

impl LookArgs {
    /// Library options from the flags, drawn with `palette`.
    pub fn options(&self, default_title: &str, palette: &str) -> anyhow::Result<RenderOptions> {
        let mut o = RenderOptions::default();
        o.title = self
            .title
            .clone()
            .unwrap_or_else(|| default_title.to_string());
        o.subtitle = self.subtitle.clone();
        o.width = self.width.map(|w| w as usize);
        o.min_width_pct = self.minwidth;
        o.colors = RenderOptions::parse_palette(palette).map_err(jobprof::Error::from)?;
        o.inverted = self.inverted;
        if let Some(n) = &self.count_name {
            o.count_name = n.clone();
        }
        Ok(o)
    }

    /// [`LookArgs::options`] for stacks read from `inputs`: without
    /// `--count-name`, the counts are named as their capture directories
    /// say ([`count_name_of`]).
    pub fn options_for(
        &self,
        default_title: &str,
        palette: &str,
        inputs: &[PathBuf],
    ) -> anyhow::Result<RenderOptions> {
        let mut o = self.options(default_title, palette)?;
        if self.count_name.is_none() {
            let paths: Vec<&Path> = inputs.iter().map(PathBuf::as_path).collect();
            o.count_name = count_name_of(&paths);
        }
        Ok(o)
    }

    /// Without `--count-name`, the count name the folded inputs declare
    /// (`# counts: ns`, as `fold` writes it), when one does and none says
    /// otherwise.
    pub fn take_declared<'a>(
        &self,
        opts: &mut RenderOptions,
        inputs: impl IntoIterator<Item = &'a FoldedInput>,
    ) {
        if self.count_name.is_some() {
            return;
        }
        let mut said = inputs.into_iter().filter_map(|i| i.count_name.as_deref());
        if let Some(first) = said.next() {
            if said.all(|n| n == first) {
                first.clone_into(&mut opts.count_name);
            }
        }
    }

    /// The format to write `output` in (`None` or `-`: stdout, SVG unless
    /// --format says otherwise).
    pub fn format_for(&self, output: Option<&Path>) -> anyhow::Result<Format> {
        let f = match (&self.format, output) {
            (Some(f), _) => f.parse(),
            (None, None) => Ok(Format::Svg),
            (None, Some(p)) if p == Path::new("-") => Ok(Format::Svg),
            (None, Some(p)) => Format::from_path(p),
        };
        Ok(f.map_err(jobprof::Error::from)?)
    }
}
