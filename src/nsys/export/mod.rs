//! Reading an Nsight Systems report: `nsys export --type sqlite` (or the
//! `.sqlite` already beside the report), then its tables, into what the
//! perf-derived captures are made of: folded CPU stacks (the CPU samples'
//! call chains), folded waits (the OS runtime calls with their call chains,
//! weighted by their ns), and the per-name statistics of the OS runtime
//! calls, NVTX ranges, CUDA kernels and memory copies.
//!
//! The export's schema differs between nsys versions: every column is read
//! by name, checked against `PRAGMA table_info` first (a missing one is an
//! error naming the table, the column and the version read), and the
//! version comes from `EXPORT_META_DATA`. Rows are stepped one at a time:
//! nothing holds the report whole, only the folded stacks (one entry per
//! distinct stack) and one duration per range or call for the medians.
//!
//! An export is input a worker may have written: it is read as hostile.
//! Only the export's real tables are read (a view, trigger or virtual
//! table under a name jobprof reads refuses the report), with SQLite's
//! defensive settings and its own limits on, and a deadline per report
//! ([`Limits::deadline`]). Chains are cut at [`Limits::max_depth`] frames
//! and names at [`Limits::max_name`] bytes, each cut counted ([`Cuts`]);
//! names are made printable (control characters escaped) as they are read,
//! so no name can split or forge a line of any output. Each distinct frame
//! and chain is built once: the work grows with the export's size and the
//! memory with its distinct stacks.
//!
//! The report and its `.sqlite` are opened relative to the query
//! directory's descriptor, never by a path a worker could swap
//! ([`open_query`]); `nsys export` runs with the rights of the directory's
//! owner, into a private temporary directory outside the tree.
//!
//! The files: `find` finds the reports and opens their directories;
//! `tool` finds and runs `nsys export`; `schema` opens the export and
//! checks objects and columns; `samples` folds the CPU samples; `tables`
//! the OS runtime calls, NVTX ranges and CUDA activity; `slice` finds the
//! NVTX ranges that cut a report into per-query windows.

mod find;
mod samples;
mod schema;
mod slice;
mod tables;
mod tool;

use std::path::PathBuf;
use std::time::Duration;

use serde::Serialize;

pub use find::{find, is_report, open_query, Found, Opened, NSYS_PROFILES, OUTPUT_DIR};
pub use schema::Meta;
pub use slice::{SliceBy, Window};
pub use tool::NsysCli;

/// What reading a report's export can fail with.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// Neither a `.sqlite` beside the report nor an `nsys` to export it.
    #[error(
        "{}: no {} beside it and no usable `nsys` to export it ({why}); install Nsight \
         Systems (its `nsys` on PATH) on this host, or export it where nsys is: \
         `nsys export --type sqlite -o {} {}`",
        report.display(), sqlite.display(), sqlite.display(), report.display()
    )]
    NoExporter {
        /// The report.
        report: PathBuf,
        /// The `.sqlite` looked for.
        sqlite: PathBuf,
        /// Why no nsys could be used.
        why: String,
    },
    /// `nsys export` failed or timed out.
    #[error("{}: `{command}` failed: {why}", report.display())]
    Export {
        /// The report.
        report: PathBuf,
        /// The command line.
        command: String,
        /// Its exit status and last line of output, or why it did not end.
        why: String,
    },
    /// SQLite could not open or read the export.
    #[error("{}: {what}: {source}", path.display())]
    Sqlite {
        /// The export.
        path: PathBuf,
        /// What was being read.
        what: String,
        /// What SQLite said.
        #[source]
        source: rusqlite::Error,
    },
    /// The export lacks a column this reader needs.
    #[error(
        "{}: table {table} has no column `{column}` (export of {version}); this nsys \
         version's schema is not one jobprof reads",
        path.display()
    )]
    Schema {
        /// The export.
        path: PathBuf,
        /// The table.
        table: String,
        /// The missing column.
        column: String,
        /// `EXPORT_PRODUCT_VERSION` (schema version), as read.
        version: String,
    },
    /// A file next to the report could not be examined.
    #[error("{}: {source}", path.display())]
    Io {
        /// The file.
        path: PathBuf,
        /// What the operating system said.
        #[source]
        source: std::io::Error,
    },
    /// A directory or file of the tree could not be reached without
    /// following a link (or is not what it should be).
    #[error(transparent)]
    Tree(#[from] crate::error::Error),
    /// A name jobprof reads is a view, trigger or virtual table.
    #[error(
        "{}: `{name}` is {kind}, not a plain table: jobprof reads only an export's tables \
         (a view or trigger can run any query), so this report is refused; export it again \
         with `nsys export --type sqlite`",
        path.display()
    )]
    NotATable {
        /// The export.
        path: PathBuf,
        /// The object's name.
        name: String,
        /// `a view`, `a trigger`, `a virtual table`.
        kind: &'static str,
    },
    /// `--slice-by` matched more ranges than a report is cut into.
    #[error(
        "{}: {by} matches {count} NVTX ranges, more than the {max} windows one report is \
         cut into; give a narrower pattern (a domain: nvtx:DOMAIN:PATTERN)",
        path.display()
    )]
    TooManyWindows {
        /// The export.
        path: PathBuf,
        /// The spec.
        by: String,
        /// The ranges it matched.
        count: usize,
        /// [`slice::MAX_WINDOWS`].
        max: usize,
    },
    /// Reading the export took longer than the limit.
    #[error(
        "{}: reading the export took longer than {} (--nsys-read-limit), and was stopped; \
         a report this slow to read is huge or hostile: raise the limit to read it",
        path.display(), crate::sys::units::format_duration(*limit)
    )]
    Deadline {
        /// The export.
        path: PathBuf,
        /// The limit.
        limit: Duration,
    },
}

/// A `Result` of this module.
pub type Result<T> = std::result::Result<T, Error>;

/// Durations of one name (an OS runtime function, an NVTX range, a
/// kernel): how many, their sum and their median, in ns.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Stat {
    /// The name as `nsys stats` prints it.
    pub name: String,
    /// How many.
    pub count: u64,
    /// Their total, ns.
    pub total_ns: u64,
    /// Their median, ns (the mean of the middle two for an even count,
    /// rounded down).
    pub median_ns: u64,
}

/// How much work and memory one report may cost (the report's owner may
/// be anyone: `jobprof process` as root reads every worker's reports).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Limits {
    /// Wall time to read one export (SQLite interrupts the query past it).
    pub deadline: Duration,
    /// Frames kept of a call chain, from the leaf (perf's own default
    /// `kernel.perf_event_max_stack`).
    pub max_depth: usize,
    /// Bytes kept of a name (cut at a character boundary, `...` added).
    pub max_name: usize,
}

/// The default time to read one export.
pub const DEFAULT_DEADLINE: Duration = Duration::from_secs(600);

/// The frames kept of a chain: perf's `kernel.perf_event_max_stack` default.
pub const MAX_DEPTH: usize = 127;

/// The bytes kept of a name: C++ names of real engines stay well below.
pub const MAX_NAME: usize = 4096;

impl Default for Limits {
    fn default() -> Self {
        Limits {
            deadline: DEFAULT_DEADLINE,
            max_depth: MAX_DEPTH,
            max_name: MAX_NAME,
        }
    }
}

/// What the limits cut, counted (in `summary.json` and the run's line).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
pub struct Cuts {
    /// Call chains deeper than [`Limits::max_depth`], their root-most
    /// frames dropped.
    pub deep_chains: u64,
    /// Distinct names longer than [`Limits::max_name`], shortened.
    pub long_names: u64,
    /// Call-chain rows skipped: a `stackDepth` repeated within a chain.
    pub repeated_depths: u64,
}

impl Cuts {
    /// Nothing was cut.
    pub fn is_empty(&self) -> bool {
        *self == Cuts::default()
    }

    /// `1 chain cut at 127 frames, ...` for the run's line; empty when
    /// nothing was cut.
    pub fn describe(&self, limits: &Limits) -> String {
        let mut parts = Vec::new();
        let n = |v: u64, one: &str, many: &str| format!("{v} {}", if v == 1 { one } else { many });
        if self.deep_chains > 0 {
            parts.push(format!(
                "{} cut at {} frames",
                n(self.deep_chains, "chain", "chains"),
                limits.max_depth
            ));
        }
        if self.long_names > 0 {
            parts.push(format!(
                "{} cut at {} bytes",
                n(self.long_names, "name", "names"),
                limits.max_name
            ));
        }
        if self.repeated_depths > 0 {
            parts.push(format!(
                "{} with a repeated stackDepth skipped",
                n(self.repeated_depths, "chain row", "chain rows")
            ));
        }
        parts.join(", ")
    }
}

/// A time window of the report, ns on the export's clock: `[start, end)`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Span {
    /// First ns in it.
    pub start: i64,
    /// First ns past it.
    pub end: i64,
}

impl Span {
    /// The SQL condition of an event that starts in it (`start` column).
    fn sql(span: Option<Span>) -> String {
        match span {
            Some(s) => format!("(start >= {} AND start < {})", s.start, s.end),
            None => "1".into(),
        }
    }
}

/// Everything jobprof takes from one report.
#[derive(Debug, Clone, Default)]
pub struct Profile {
    /// Which nsys wrote the export, and its schema.
    pub meta: Meta,
    /// CPU samples per folded stack (`thread;root;...;leaf`), sorted.
    pub cpu: Vec<(String, u64)>,
    /// CPU samples read (the sum of `cpu`).
    pub samples: u64,
    /// OS runtime ns per folded stack (`thread;root;...;call`), sorted;
    /// empty without OS runtime tracing.
    pub waits: Vec<(String, u64)>,
    /// Per OS runtime function (`nsys stats -r osrtsum`); `None`: the
    /// report has no OS runtime trace.
    pub osrt: Option<Vec<Stat>>,
    /// Per NVTX range (`nvtxsum`); `None`: no NVTX trace.
    pub nvtx: Option<Vec<Stat>>,
    /// Per CUDA kernel (`gpukernsum`, by name); `None`: no kernel ran.
    pub kernels: Option<Vec<Stat>>,
    /// Per memory copy kind (`gpumemtimesum`'s copies); `None`: none.
    pub memcpy: Option<Vec<Stat>>,
    /// What the limits cut.
    pub cuts: Cuts,
}

/// One window of a sliced report and its profile.
#[derive(Debug, Clone)]
pub struct Slice {
    /// The window: its name as a query, its range and time.
    pub window: Window,
    /// What happened in it ([`Profile::cuts`]: the whole report's).
    pub profile: Profile,
}

/// Reads the report of the query directory `opened` (its `.sqlite`
/// beside it, or one made now by `nsys` in a private temporary directory
/// outside the tree, removed after), and how it was read (`the .sqlite
/// beside it`, or the export command); with `by`, also the profile of
/// each window it cuts ([`read_sliced`]).
pub fn read_report(
    opened: &Opened,
    nsys: &std::result::Result<NsysCli, String>,
    limits: &Limits,
    by: Option<&SliceBy>,
) -> Result<(Profile, Vec<Slice>, String)> {
    let export = tool::export_of(opened, nsys)?;
    let (profile, slices) = read_sliced(export.file, &export.path, limits, by)?;
    Ok((profile, slices, export.how))
}

/// Reads the export open as `file` (shown as `path`) into a [`Profile`].
pub fn read(file: std::fs::File, path: &std::path::Path, limits: &Limits) -> Result<Profile> {
    read_sliced(file, path, limits, None).map(|(p, _)| p)
}

/// Reads the export open as `file` (shown as `path`): the whole report,
/// and with `by` each window it cuts, in the order they started (one more
/// pass over the events per window; the names are read once).
pub fn read_sliced(
    file: std::fs::File,
    path: &std::path::Path,
    limits: &Limits,
    by: Option<&SliceBy>,
) -> Result<(Profile, Vec<Slice>)> {
    let db = schema::Db::open(file, path, limits)?;
    let meta = db.meta()?;
    let mut names = samples::Names::read(&db, limits)?;
    let whole = profile(&db, &mut names, &meta, None)?;
    let windows = match by {
        Some(by) => slice::windows(&db, &names, by)?,
        None => Vec::new(),
    };
    let mut slices = Vec::with_capacity(windows.len());
    for window in windows {
        let profile = profile(&db, &mut names, &meta, Some(window.span))?;
        slices.push(Slice { window, profile });
    }
    // The report's cuts, counted by its own pass: each window's pass reads
    // the chains and names again, and [`samples::Names`] counts every read.
    for s in &mut slices {
        s.profile.cuts = whole.cuts;
    }
    Ok((whole, slices))
}

/// The profile of the events that start in `span` (all without one).
fn profile(
    db: &schema::Db,
    names: &mut samples::Names,
    meta: &Meta,
    span: Option<Span>,
) -> Result<Profile> {
    let (cpu, samples) = samples::fold(db, names, span)?;
    let (waits, osrt) = match tables::osrt(db, names, span)? {
        Some((w, s)) => (w, Some(s)),
        None => (Vec::new(), None),
    };
    Ok(Profile {
        meta: meta.clone(),
        cpu,
        samples,
        waits,
        osrt,
        nvtx: tables::nvtx(db, names, span)?,
        kernels: tables::kernels(db, names, span)?,
        memcpy: tables::memcpy(db, names, span)?,
        cuts: names.cuts(),
    })
}

/// Sorted `(key, value)` pairs of a map, zero values dropped.
fn sorted(map: impl IntoIterator<Item = (String, u64)>) -> Vec<(String, u64)> {
    let mut v: Vec<(String, u64)> = map.into_iter().filter(|(_, n)| *n > 0).collect();
    v.sort_unstable();
    v
}

/// Per-name statistics of durations, biggest total first (then by name).
fn stats(groups: std::collections::HashMap<String, Vec<u64>>) -> Vec<Stat> {
    let mut out: Vec<Stat> = groups
        .into_iter()
        .map(|(name, mut d)| {
            d.sort_unstable();
            let n = d.len();
            let median_ns = match n {
                0 => 0,
                _ if n % 2 == 1 => d[n / 2],
                _ => ((d[n / 2 - 1] as u128 + d[n / 2] as u128) / 2) as u64,
            };
            Stat {
                name,
                count: n as u64,
                total_ns: d.iter().fold(0u64, |a, &x| a.saturating_add(x)),
                median_ns,
            }
        })
        .collect();
    out.sort_by(|a, b| b.total_ns.cmp(&a.total_ns).then(a.name.cmp(&b.name)));
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn medians_and_order_follow_nsys_stats() {
        let mut g = std::collections::HashMap::new();
        g.insert("a".to_string(), vec![5, 1, 3]);
        g.insert("b".to_string(), vec![10, 20]);
        let s = stats(g);
        assert_eq!(s[0].name, "b");
        assert_eq!((s[0].count, s[0].total_ns, s[0].median_ns), (2, 30, 15));
        assert_eq!((s[1].count, s[1].total_ns, s[1].median_ns), (3, 9, 3));
    }
}
