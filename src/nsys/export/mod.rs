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
//! The files: `find` finds the reports; `tool` finds and runs `nsys export`; `schema` reads the
//! metadata and checks columns; `samples` folds the CPU samples; `tables`
//! the OS runtime calls, NVTX ranges and CUDA activity.

mod find;
mod samples;
mod schema;
mod tables;
mod tool;

use std::path::{Path, PathBuf};

pub use find::{find, is_report, Found, NSYS_PROFILES, OUTPUT_DIR};
pub use schema::Meta;
pub use tool::{sqlite_for, NsysCli, Sqlite};

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
}

/// Reads one found report: its export (beside it, or made now by `nsys`
/// in a temporary directory under its output directory, removed after),
/// and how it was read (`the .sqlite beside it`, or the export command).
pub fn read_report(
    found: &Found,
    nsys: &std::result::Result<NsysCli, String>,
) -> Result<(Profile, String)> {
    std::fs::create_dir_all(&found.out).map_err(|source| Error::Io {
        path: found.out.clone(),
        source,
    })?;
    let sqlite = sqlite_for(&found.report, nsys, &found.out)?;
    let how = match (&sqlite, nsys) {
        (Sqlite::Beside(p), _) => format!("{} (the export beside the report)", p.display()),
        (Sqlite::Exported(..), Ok(cli)) => {
            format!("nsys export --type sqlite ({})", cli.version)
        }
        (Sqlite::Exported(..), Err(_)) => "nsys export --type sqlite".into(),
    };
    Ok((read(sqlite.path())?, how))
}

/// Reads the export `sqlite` into a [`Profile`].
pub fn read(sqlite: &Path) -> Result<Profile> {
    let db = schema::Db::open(sqlite)?;
    let meta = db.meta()?;
    let names = samples::Names::read(&db)?;
    let (cpu, samples) = samples::fold(&db, &names)?;
    let (waits, osrt) = match tables::osrt(&db, &names)? {
        Some((w, s)) => (w, Some(s)),
        None => (Vec::new(), None),
    };
    Ok(Profile {
        meta,
        cpu,
        samples,
        waits,
        osrt,
        nvtx: tables::nvtx(&db, &names)?,
        kernels: tables::kernels(&db, &names)?,
        memcpy: tables::memcpy(&db)?,
    })
}

/// Sorted `(key, value)` pairs of a map, zero values dropped.
fn sorted(map: std::collections::HashMap<String, u64>) -> Vec<(String, u64)> {
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
