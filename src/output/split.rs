//! A split profile on disk: each group of [`crate::text::fold::split`]
//! written in the chosen formats into one directory as `STEM.EXT`, each file
//! atomically, then `index.tsv` (group, samples, percent, stacks, files;
//! largest first).

use std::io::Write;
use std::path::{Path, PathBuf};

use super::render::{self, Format, RenderOptions};
use crate::error::{Error, Result};
use crate::sys::atomic::{write_atomic, AtomicFile};
use crate::text::fold::split::Group;

/// What [`write_split`] wrote.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Written {
    /// The group's name.
    pub key: String,
    /// Files written for it, in `formats` order.
    pub files: Vec<PathBuf>,
    /// Its total count.
    pub total: u64,
    /// Its distinct stacks.
    pub stacks: usize,
}

/// Writes each group into `dir` (created if missing) as `STEM.EXT` for
/// every format, each file atomically, then `index.tsv` (group, samples,
/// percent, stacks, files; largest first). Flamegraphs are titled with the
/// group's name after `opts.title`.
pub fn write_split(
    dir: &Path,
    groups: &[Group],
    formats: &[Format],
    opts: &RenderOptions,
) -> Result<Vec<Written>> {
    std::fs::create_dir_all(dir).map_err(|e| Error::io(dir, e))?;
    let grand = crate::sys::counts::sum(groups.iter().map(|g| g.total));
    let mut written = Vec::with_capacity(groups.len());
    for g in groups {
        let mut look = opts.clone();
        look.title = if opts.title.is_empty() {
            g.key.clone()
        } else {
            format!("{} · {}", opts.title, g.key)
        };
        let mut files = Vec::new();
        for &f in formats {
            let path = dir.join(format!("{}.{}", g.stem, f.extension()));
            let mut out = AtomicFile::create(&path)?;
            render::render(f, &g.stacks, &look, &mut out)?;
            out.commit()?;
            files.push(path);
        }
        written.push(Written {
            key: g.key.clone(),
            files,
            total: g.total,
            stacks: g.stacks.len(),
        });
    }
    let mut index = Vec::new();
    writeln!(index, "group\t{}\tpercent\tstacks\tfiles", opts.count_name).expect("Vec write");
    for w in &written {
        let names: Vec<String> = w
            .files
            .iter()
            .filter_map(|p| p.file_name().map(|n| n.to_string_lossy().into_owned()))
            .collect();
        writeln!(
            index,
            "{}\t{}\t{:.2}\t{}\t{}",
            crate::sys::printable::printable_text(&w.key),
            w.total,
            100.0 * w.total as f64 / grand.max(1) as f64,
            w.stacks,
            names.join(",")
        )
        .expect("Vec write");
    }
    write_atomic(dir.join("index.tsv"), &index)?;
    Ok(written)
}
