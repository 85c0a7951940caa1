//! Which reports `jobprof process` reads: a lone `.nsys-rep` named on the
//! command line (its outputs in `REPORT.jobprof/` beside it), and every
//! query the nsys sidecar published under a result directory
//! (`profiles/nsys/worker_N/Q/`, read from its `nsys-capture.json`; the
//! outputs in `Q/jobprof/`). Directories are entered and files read only
//! when they are what they claim (no symbolic links followed).
//!
//! Finding is by path; reading and writing are not: [`open_query`] opens
//! the tree's root once and walks to the query directory one name at a
//! time with `O_NOFOLLOW | O_DIRECTORY`, so a query directory swapped for
//! a link after it was found redirects neither the report read nor the
//! outputs written ([`Opened`]). The walk also says whose the directory
//! is ([`Opened::owner`]): the deepest directory on the way owned by
//! another user, or anyone where one is writable by others.

use std::ffi::{OsStr, OsString};
use std::fs;
use std::io::Read;
use std::path::{Path, PathBuf};

use crate::sys::confined::Dir;
use crate::sys::creds::{self, Creds};

use jobprof_capture_format::nsys::{NsysCapture, ReportKind, NSYS_CAPTURE_JSON};

/// The per-query nsys root of a result directory.
pub const NSYS_PROFILES: &str = "profiles/nsys";

/// The output directory inside a query directory.
pub const OUTPUT_DIR: &str = jobprof_capture_format::nsys::NSYS_PROFILE_DIR;

/// The most bytes of `nsys-capture.json` read (it holds a few hundred).
const MAX_MANIFEST: u64 = 64 * 1024;

/// One report to read.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Found {
    /// The report.
    pub report: PathBuf,
    /// Where its outputs go.
    pub out: PathBuf,
    /// Worker index (`None` for a lone report).
    pub worker: Option<u32>,
    /// The query id (a lone report's file name).
    pub query: String,
    /// `SLURM_JOB_ID` of the capture.
    pub job_id: Option<String>,
    /// Why it cannot be read (a `.qdstrm` fallback, an unreadable
    /// manifest), when it cannot.
    pub unreadable: Option<String>,
    /// The root of the tree it was found in (opened by path, its
    /// ancestors' links followed: the user named it).
    pub root: PathBuf,
    /// The query directory below `root`, walked one name at a time
    /// (empty: `root` itself, a lone report's directory).
    pub rel: PathBuf,
    /// The report's file name in the query directory.
    pub report_name: OsString,
    /// The output directory's name in the query directory.
    pub out_name: OsString,
}

/// A found report's query directory, open.
#[derive(Debug)]
pub struct Opened {
    /// The query directory, reached without following a link.
    pub dir: Dir,
    /// Whose rights what it names is read with, when not only the
    /// processing user's (`None`: nobody else could have written there).
    pub owner: Option<Creds>,
    /// The report's file name in `dir`.
    pub report_name: OsString,
    /// The output directory's name in `dir`.
    pub out_name: OsString,
}

impl Opened {
    /// Whether the output directory holds `marker` (its `summary.json`,
    /// written last) already.
    pub fn done(&self, marker: &str) -> bool {
        self.dir
            .sub(&self.out_name)
            .and_then(|d| d.entry(marker))
            .is_ok_and(|e| e.is_some_and(|e| e.is_file()))
    }

    /// The output directory, made (mode `0777 & ~umask`) when absent,
    /// never through a link.
    pub fn out_dir(&self) -> crate::error::Result<Dir> {
        self.dir.sub_create(&self.out_name)
    }

    /// The report's path, for messages and `nsys export`.
    pub fn report(&self) -> PathBuf {
        self.dir.join(&self.report_name)
    }
}

/// Opens the query directory of `found` ([`Opened`]): the root by path,
/// then each name below it with `O_NOFOLLOW | O_DIRECTORY`; the report
/// must be a regular file there.
pub fn open_query(found: &Found) -> crate::error::Result<Opened> {
    let mut owner = Creds::owner_of(&found.root);
    let mut dir = Dir::open(&found.root)?;
    note_owner(&dir, &mut owner)?;
    for name in found.rel.iter() {
        dir = dir.sub(name)?;
        note_owner(&dir, &mut owner)?;
    }
    match dir.entry(&found.report_name)? {
        Some(e) => {
            if let Some(what) = e.non_regular() {
                return Err(crate::sys::file_kind::not_plain(
                    &dir.join(&found.report_name),
                    what,
                ));
            }
        }
        None => {
            return Err(crate::error::Error::io(
                dir.join(&found.report_name),
                std::io::Error::from(std::io::ErrorKind::NotFound),
            ))
        }
    }
    Ok(Opened {
        dir,
        owner,
        report_name: found.report_name.clone(),
        out_name: found.out_name.clone(),
    })
}

/// `owner` after stepping into `dir`: its owner when another user, anyone
/// when others may write there (no sticky bit), else as it was.
fn note_owner(dir: &Dir, owner: &mut Option<Creds>) -> crate::error::Result<()> {
    let (uid, mode) = dir.owner_and_mode()?;
    if uid != creds::euid() {
        *owner = Some(Creds::of_user(uid));
    } else if mode & 0o022 != 0 && mode & 0o1000 == 0 {
        *owner = Some(Creds::anyone());
    }
    Ok(())
}

fn is_dir(p: &Path) -> bool {
    fs::symlink_metadata(p).is_ok_and(|m| m.is_dir())
}

fn is_file(p: &Path) -> bool {
    fs::symlink_metadata(p).is_ok_and(|m| m.is_file())
}

/// Whether `p` names a report file (`*.nsys-rep`).
pub fn is_report(p: &Path) -> bool {
    p.to_str()
        .is_some_and(|s| s.ends_with(crate::nsys::REPORT_SUFFIX))
        && is_file(p)
}

/// The reports under `roots` (lone reports, result directories, their
/// `profiles/nsys`), only those of `workers` and `queries` when given.
pub fn find(roots: &[PathBuf], workers: &[u32], queries: &[String]) -> Vec<Found> {
    let mut out = Vec::new();
    for root in roots {
        if is_report(root) {
            out.push(lone(root));
            continue;
        }
        let (tree, rel) = match is_dir(&root.join(NSYS_PROFILES)) {
            true => (root.join(NSYS_PROFILES), Path::new(NSYS_PROFILES)),
            false => (root.clone(), Path::new("")),
        };
        out.extend(per_query(root, rel, &tree).into_iter().filter(|f| {
            (workers.is_empty() || f.worker.is_some_and(|w| workers.contains(&w)))
                && (queries.is_empty() || queries.contains(&f.query))
        }));
    }
    out
}

/// A report named on the command line: its outputs in `REPORT.jobprof/`
/// beside it.
fn lone(report: &Path) -> Found {
    let name = report.file_name().unwrap_or(OsStr::new("")).to_os_string();
    let mut out_name = name.clone();
    out_name.push(".jobprof");
    let parent = match report.parent() {
        Some(p) if !p.as_os_str().is_empty() => p.to_path_buf(),
        _ => PathBuf::from("."),
    };
    Found {
        report: report.to_path_buf(),
        out: parent.join(&out_name),
        worker: None,
        query: name
            .to_string_lossy()
            .trim_end_matches(".nsys-rep")
            .to_string(),
        job_id: None,
        unreadable: None,
        root: parent,
        rel: PathBuf::new(),
        report_name: name,
        out_name,
    }
}

/// Sorted plain directory entries of `dir` with their names.
fn entries(dir: &Path) -> Vec<(String, PathBuf)> {
    let mut v: Vec<(String, PathBuf)> = fs::read_dir(dir)
        .into_iter()
        .flatten()
        .flatten()
        .filter_map(|e| Some((e.file_name().into_string().ok()?, e.path())))
        .filter(|(n, p)| !n.starts_with('.') && is_dir(p))
        .collect();
    v.sort();
    v
}

/// `worker_N/Q/` directories with an `nsys-capture.json` under `tree`,
/// which is `root/rel`.
fn per_query(root: &Path, rel: &Path, tree: &Path) -> Vec<Found> {
    let mut out = Vec::new();
    for (name, wdir) in entries(tree) {
        let Some(worker) = name.strip_prefix("worker_").and_then(|n| n.parse().ok()) else {
            continue;
        };
        for (query, qdir) in entries(&wdir) {
            let manifest = qdir.join(NSYS_CAPTURE_JSON);
            if !is_file(&manifest) {
                continue;
            }
            let mut f = Found {
                report: PathBuf::new(),
                out: qdir.join(OUTPUT_DIR),
                worker: Some(worker),
                query: query.clone(),
                job_id: None,
                unreadable: None,
                root: root.to_path_buf(),
                rel: rel.join(&name).join(&query),
                report_name: OsString::new(),
                out_name: OUTPUT_DIR.into(),
            };
            match read_manifest(&manifest) {
                Ok(m) => {
                    f.report = qdir.join(&m.file);
                    f.report_name = OsString::from(&m.file);
                    f.job_id = m.slurm_job_id.clone();
                    if m.kind != ReportKind::NsysRep {
                        f.unreadable = Some(format!(
                            "{} is a .qdstrm (not converted: {}); convert it with \
                             `QdstrmImporter -i {}` and process again",
                            f.report.display(),
                            m.reason.as_deref().unwrap_or("no reason given"),
                            f.report.display()
                        ));
                    } else if m.file.contains('/') || !is_file(&f.report) {
                        f.unreadable = Some(format!(
                            "{}: the report it names is not a plain file beside it",
                            manifest.display()
                        ));
                    }
                }
                Err(why) => f.unreadable = Some(why),
            }
            out.push(f);
        }
    }
    out
}

fn read_manifest(path: &Path) -> Result<NsysCapture, String> {
    let mut text = String::new();
    fs::File::open(path)
        .and_then(|f| f.take(MAX_MANIFEST).read_to_string(&mut text))
        .map_err(|e| format!("{}: {e}", path.display()))?;
    serde_json::from_str(&text)
        .map_err(|e| format!("{}: not an nsys-capture.json: {e}", path.display()))
}
