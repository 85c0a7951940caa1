//! The one walker that finds captures on disk, for `jobprof process` and
//! the job views ([`discover`]: the captures of the given result, worker or
//! capture directories) and for `jobprof reprocess` ([`find`]: every
//! capture and render-only directory at any depth below the roots).
//!
//! Both read each directory once ([`Contents`]), skip hidden directories
//! (`.Q.publishing` is a capture still being published) and `symfs/`
//! trees, and never follow a symbolic link to a directory.

use std::fs;
use std::path::{Path, PathBuf};

use jobprof_capture_format as format;

use super::layout::{
    flat_layout_dir, is_data_file, numbered_data_file, plain_output_dir, worker_index, CaptureDir,
    PlainData, FOLDED, LEGACY_METADATA, PLAIN_OUTPUT_SUFFIX, SCRIPT_GZ, SCRIPT_ZST,
};
use crate::error::{Error, Result};

/// Which narrowing the user asked for (`--worker`, `--query`); empty lists
/// mean "all".
#[derive(Debug, Clone, Default)]
pub struct Filter {
    /// Worker indices to keep.
    pub workers: Vec<u32>,
    /// Query ids to keep.
    pub queries: Vec<String>,
}

impl Filter {
    fn keeps(&self, worker: Option<u32>, query: &str) -> bool {
        (self.workers.is_empty() || worker.is_some_and(|w| self.workers.contains(&w)))
            && (self.queries.is_empty() || self.queries.iter().any(|q| q == query))
    }
}

/// What kind of work a directory found in the tree calls for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    /// A capture (raw perf data, or symbolized text): the full pipeline.
    Capture,
    /// Only `stacks.folded` is left: draw the flamegraphs from it.
    RenderOnly,
}

/// One directory to bring up to date.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Item {
    /// Where it is and what it is called.
    pub capture: CaptureDir,
    /// What it needs.
    pub kind: Kind,
}

/// What [`find`] saw in the trees.
#[derive(Debug, Clone, Default)]
pub struct Found {
    /// Result directories found.
    pub result_dirs: usize,
    /// Every capture and render-only directory, sorted by path.
    pub items: Vec<Item>,
    /// Directories below the roots that could not be read, with the
    /// error: the walk goes on without them.
    pub unreadable: Vec<(PathBuf, String)>,
}

/// How far a walk goes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Reach {
    /// [`discover`]: the roots' own captures; a directory that cannot be
    /// read holds none.
    Roots,
    /// [`find`]: at any depth; a directory that cannot be read is an error
    /// (reported, and the walk goes on).
    Deep,
}

/// The walk's findings so far, each directory with what it holds.
#[derive(Default)]
struct Walk {
    result_dirs: usize,
    found: Vec<(CaptureDir, Contents)>,
    unreadable: Vec<(PathBuf, String)>,
}

/// Names of the files that make a directory a capture (with `perf.data`,
/// `perf.data.partNNN` and the flat layout's `perf.data.<n>`).
const CAPTURE_FILES: [&str; 5] = [
    format::CAPTURE_JSON,
    LEGACY_METADATA,
    format::SHARDS_TSV,
    SCRIPT_ZST,
    SCRIPT_GZ,
];

/// What one `read_dir` of a directory says it holds (by file names; only
/// the capture files found are checked to be files).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
struct Contents {
    /// Capture metadata, a data file or symbolized text: a capture.
    raw: bool,
    /// A data file or symbolized text among them.
    data_or_text: bool,
    /// `stacks.folded`.
    folded: bool,
}

impl Contents {
    /// A capture whose raw data and texts are gone but whose folded stacks
    /// were kept can only be drawn again.
    fn kind(self) -> Option<Kind> {
        match (self.raw, self.folded) {
            (true, true) if !self.data_or_text => Some(Kind::RenderOnly),
            (true, _) => Some(Kind::Capture),
            (false, true) => Some(Kind::RenderOnly),
            (false, false) => None,
        }
    }
}

/// Reads `dir` once and says what it holds.
fn classify(dir: &Path) -> Result<Contents> {
    let mut c = Contents::default();
    for e in fs::read_dir(dir).map_err(|e| Error::io(dir, e))? {
        let e = e.map_err(|e| Error::io(dir, e))?;
        let name = e.file_name();
        let name = name.to_string_lossy();
        let data = is_data_file(&name) || numbered_data_file(&name).is_some();
        let text = name == SCRIPT_ZST || name == SCRIPT_GZ;
        if (data || CAPTURE_FILES.contains(&name.as_ref())) && e.path().is_file() {
            c.raw = true;
            c.data_or_text |= data || text;
        } else if name == FOLDED {
            c.folded = true;
        }
    }
    Ok(c)
}

/// [`classify`], where an unreadable directory holds nothing for
/// [`Reach::Roots`].
fn contents(dir: &Path, reach: Reach) -> Result<Contents> {
    match (classify(dir), reach) {
        (Err(_), Reach::Roots) => Ok(Contents::default()),
        (c, _) => c,
    }
}

/// Sorted subdirectories of `dir` that are not hidden (`.Q.publishing` is
/// a capture still being published).
fn subdirs(dir: &Path) -> Result<Vec<PathBuf>> {
    let mut out = Vec::new();
    for e in fs::read_dir(dir).map_err(|e| Error::io(dir, e))? {
        let e = e.map_err(|e| Error::io(dir, e))?;
        let name = e.file_name();
        if name.to_string_lossy().starts_with('.') {
            continue;
        }
        // Not through a symbolic link: a planted `worker_0/q9 -> /etc`
        // must not make jobprof write there.
        if e.file_type().is_ok_and(|t| t.is_dir()) {
            out.push(e.path());
        }
    }
    out.sort();
    Ok(out)
}

/// `worker_N` subdirectories of a `profiles/perf` directory, by N.
fn worker_dirs(perf_root: &Path) -> Result<Vec<(u32, PathBuf)>> {
    let mut v: Vec<(u32, PathBuf)> = subdirs(perf_root)?
        .into_iter()
        .filter_map(|d| Some((worker_index(&d.file_name()?.to_string_lossy())?, d)))
        .collect();
    v.sort();
    Ok(v)
}

fn of_worker(worker_dir: &Path, worker: Option<u32>, reach: Reach, w: &mut Walk) -> Result<()> {
    for d in subdirs(worker_dir)? {
        let name = d
            .file_name()
            .unwrap_or_default()
            .to_string_lossy()
            .into_owned();
        if name == "symfs" {
            continue;
        }
        let c = contents(&d, reach)?;
        if c.kind().is_some() {
            let dir = CaptureDir {
                dir: d,
                worker,
                query: name,
                plain: None,
            };
            w.found.push((dir, c));
        }
    }
    Ok(())
}

fn of_perf_root(perf_root: &Path, reach: Reach, w: &mut Walk) -> Result<()> {
    for (n, d) in worker_dirs(perf_root)? {
        of_worker(&d, Some(n), reach, w)?;
    }
    Ok(())
}

/// True for a result directory: named `result_dir_*` and holding
/// `profiles/perf/`, or holding `profiles/perf/worker_*` whatever its name.
/// (A `result_dir_*` without `profiles/perf/` is walked into: it may be a
/// folder of result directories.)
fn is_result_dir(dir: &Path) -> bool {
    let perf = dir.join("profiles").join("perf");
    if !perf.is_dir() {
        return false;
    }
    let named = dir
        .file_name()
        .is_some_and(|n| n.to_string_lossy().starts_with("result_dir_"));
    named || worker_dirs(&perf).is_ok_and(|w| !w.is_empty())
}

/// The original pipeline's flat layout, `result_dir_<jobid>/perf/perf.data.<n>`:
/// one capture named after the result directory.
fn flat_capture(dir: &Path, w: &mut Walk) -> bool {
    let Some(flat) = flat_layout_dir(dir).filter(|_| !is_result_dir(dir)) else {
        return false;
    };
    w.result_dirs += 1;
    let query = dir
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    let c = Contents {
        raw: true,
        data_or_text: true,
        folded: false,
    };
    let dir = CaptureDir {
        dir: flat,
        worker: None,
        query,
        plain: None,
    };
    w.found.push((dir, c));
    true
}

fn walk_tree(dir: &Path, w: &mut Walk) -> Result<()> {
    if flat_capture(dir, w) {
        return Ok(());
    }
    if is_result_dir(dir) {
        w.result_dirs += 1;
        // Never deeper: everything of a result directory is under
        // profiles/perf, and its symfs/ trees can be huge.
        return of_perf_root(&dir.join("profiles").join("perf"), Reach::Deep, w);
    }
    // Plain `perf record` outputs here (a file only named like one is
    // reported), and whatever lies below.
    if let Err(e) = plain_dir(dir, w) {
        w.unreadable.push((dir.to_path_buf(), e.to_string()));
    }
    walk_subdirs(dir, w)
}

/// [`walk_tree`] of every subdirectory of `dir` but `symfs/` and plain
/// outputs' directories.
fn walk_subdirs(dir: &Path, w: &mut Walk) -> Result<()> {
    for d in subdirs(dir)? {
        if d.file_name().is_some_and(|n| n == "symfs") || is_plain_output(&d) {
            continue;
        }
        // One unreadable directory among years of results must not stop
        // the others; it is reported as failed at the end.
        let before = w.found.len();
        if let Err(e) = walk_tree(&d, w) {
            w.found.truncate(before);
            w.unreadable.push((d, e.to_string()));
        }
    }
    Ok(())
}

/// The captures of one root: a result directory, a `profiles/perf`
/// directory, one `worker_N` directory or one capture directory; with
/// [`Reach::Deep`], also any tree of result directories.
fn of_root(root: &Path, reach: Reach, w: &mut Walk) -> Result<()> {
    let name = root
        .canonicalize()
        .map_err(|e| Error::io(root, e))?
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    let perf_root = root.join("profiles").join("perf");
    if reach == Reach::Roots && perf_root.is_dir() {
        return of_perf_root(&perf_root, reach, w);
    }
    if let Some(n) = worker_index(&name) {
        return of_worker(root, Some(n), reach, w);
    }
    let result_dir = is_result_dir(root);
    if !result_dir && !worker_dirs(root)?.is_empty() {
        return of_perf_root(root, reach, w);
    }
    if flat_capture(root, w) {
        return Ok(());
    }
    if !result_dir && plain_dir(root, w)? {
        // At any depth, the trees beside them are searched too.
        return match reach {
            Reach::Roots => Ok(()),
            Reach::Deep => walk_subdirs(root, w),
        };
    }
    let c = if result_dir {
        Contents::default()
    } else {
        contents(root, reach)?
    };
    if c.kind().is_some() {
        let canon = root.canonicalize().map_err(|e| Error::io(root, e))?;
        let worker = canon
            .parent()
            .and_then(|p| p.file_name())
            .and_then(|n| worker_index(&n.to_string_lossy()));
        let dir = CaptureDir {
            dir: root.to_path_buf(),
            worker,
            query: name,
            plain: None,
        };
        w.found.push((dir, c));
        return Ok(());
    }
    match reach {
        Reach::Roots => Ok(()),
        Reach::Deep => walk_tree(root, w),
    }
}

/// What a plain `perf.data` counts as: raw data.
const PLAIN_CONTENTS: Contents = Contents {
    raw: true,
    data_or_text: true,
    folded: false,
};

/// The name of a plain `perf record` output: `perf.data`, `X.perf.data`
/// (`perf record -o q1.perf.data`), or `perf.data.X` (`perf.data.old`,
/// `--switch-output`'s timestamped pieces), but not a shard of
/// `jobprof-record` (`perf.data.partNNN`) nor of the original pipeline's
/// flat layout (`perf.data.<n>`).
fn plain_data_name(name: &str) -> bool {
    name == "perf.data"
        || name
            .strip_suffix(".perf.data")
            .is_some_and(|x| !x.is_empty() && !x.starts_with('.'))
        || name.strip_prefix("perf.data.").is_some_and(|x| {
            !x.is_empty() && !is_data_file(name) && numbered_data_file(name).is_none()
        })
}

/// True for the output directory of a plain `perf.data` beside it
/// (`perf.data.jobprof/` next to `perf.data`): never a capture of its own.
fn is_plain_output(dir: &Path) -> bool {
    let Some(name) = dir.file_name().map(|n| n.to_string_lossy().into_owned()) else {
        return false;
    };
    name.strip_suffix(PLAIN_OUTPUT_SUFFIX)
        .is_some_and(|file| plain_data_name(file) && dir.with_file_name(file).is_file())
}

/// The plain `perf record` outputs of `dir`, each a capture of its own:
/// `None` when `dir` holds capture metadata (`capture.json`,
/// `capture-metadata.txt`, `perf-shards.tsv`) or the original pipeline's
/// numbered shards, or no file named like a plain output. Files so named
/// that are not `perf.data` (a `perf.data.log`) are left out; an error
/// (exit code 2) names them when none of them is one.
fn plain_files(dir: &Path) -> Result<Option<Vec<PathBuf>>> {
    let mut named = Vec::new();
    for e in fs::read_dir(dir).map_err(|e| Error::io(dir, e))? {
        let e = e.map_err(|e| Error::io(dir, e))?;
        let name = e.file_name().to_string_lossy().into_owned();
        let metadata = [format::CAPTURE_JSON, LEGACY_METADATA, format::SHARDS_TSV];
        if metadata.contains(&name.as_str()) || numbered_data_file(&name).is_some() {
            return Ok(None);
        }
        // A link is not followed: only a file given by name is.
        if plain_data_name(&name) && e.file_type().is_ok_and(|t| t.is_file()) {
            named.push(e.path());
        }
    }
    if named.is_empty() {
        return Ok(None);
    }
    named.sort();
    let perf_data: Vec<PathBuf> = named
        .iter()
        .filter(|p| crate::sys::input::is_perf_data(p).unwrap_or(false))
        .cloned()
        .collect();
    if perf_data.is_empty() {
        let names: Vec<String> = named.iter().map(|p| p.display().to_string()).collect();
        return Err(Error::Usage(format!(
            "{}: not perf.data files (they do not start with perf's magic PERFILE2): pass \
             files written by `perf record`, or a result directory",
            names.join(", ")
        )));
    }
    Ok(Some(perf_data))
}

/// The plain `perf record` outputs of `dir` ([`plain_files`]) added to the
/// walk, each a capture; false when it holds none.
fn plain_dir(dir: &Path, w: &mut Walk) -> Result<bool> {
    let Some(files) = plain_files(dir)? else {
        return Ok(false);
    };
    for f in files {
        w.found.push((plain_capture(&f), PLAIN_CONTENTS));
    }
    Ok(true)
}

/// One plain `perf.data` file as a capture: its outputs go to
/// `FILE.jobprof/` beside it.
fn plain_capture(file: &Path) -> CaptureDir {
    let dir = match file.parent() {
        Some(p) if !p.as_os_str().is_empty() => p.to_path_buf(),
        _ => PathBuf::from("."),
    };
    CaptureDir {
        dir,
        worker: None,
        query: file
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_default(),
        plain: Some(PlainData {
            file: file.to_path_buf(),
            out: plain_output_dir(file),
        }),
    }
}

/// A root that is a file: a plain `perf.data` (followed when it is a
/// link: the user named it), or an error (exit code 2) naming it.
fn plain_file_root(root: &Path) -> Result<CaptureDir> {
    match crate::sys::input::is_perf_data(root) {
        Ok(true) => Ok(plain_capture(root)),
        Ok(false) => Err(Error::Usage(not_perf_data(root))),
        Err(e) => Err(Error::Usage(format!(
            "{}: cannot read it: {e}",
            root.display()
        ))),
    }
}

/// Why the file `root` is not a perf.data, and what to do: an empty file
/// (perf wrote nothing), an Nsight Systems raw stream (`.qdstrm`, to
/// convert), or another file.
fn not_perf_data(root: &Path) -> String {
    let name = root.display();
    if std::fs::metadata(root).is_ok_and(|m| m.len() == 0) {
        return format!(
            "{name}: the file is empty (0 bytes), not a perf.data: `perf record` wrote nothing \
             into it (stopped before its first write, or the copy failed); record again"
        );
    }
    if root
        .extension()
        .is_some_and(|e| e.eq_ignore_ascii_case("qdstrm"))
    {
        return format!(
            "{name}: an Nsight Systems raw stream (.qdstrm), not a perf.data: convert it with \
             `QdstrmImporter -i {name}` (in nsys's host-linux-* directory), then `jobprof \
             process` the .nsys-rep it writes"
        );
    }
    format!(
        "{name}: not a perf.data file (it does not start with perf's magic PERFILE2); pass a \
         file written by `perf record`, or a result directory"
    )
}

/// Why `root` cannot be processed at all, found without walking it: it
/// does not exist, or it is a file that is not a perf.data (an Nsight
/// Systems `.nsys-rep` is for the caller to take). `None`: try it. Lets a
/// run of several roots do the others and name this one, as `cp` does.
pub fn root_problem(root: &Path) -> Option<Error> {
    match std::fs::metadata(root) {
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Some(Error::Usage(format!(
            "{}: does not exist; pass a result directory (the one holding \
             profiles/perf/worker_N/) or a perf.data file",
            root.display()
        ))),
        Ok(m) if m.is_file() => plain_file_root(root).err(),
        _ => None,
    }
}

/// The error for a root that is not a directory; `hint` says what to pass.
fn check_root(root: &Path, hint: &str) -> Result<()> {
    if root.is_dir() {
        return Ok(());
    }
    let what = if root.exists() {
        "is not a directory"
    } else {
        "does not exist"
    };
    Err(Error::Usage(format!("{}: {what}; {hint}", root.display())))
}

/// Finds the captures under each root. A root may be a result directory
/// (`RESULT_DIR/profiles/perf/worker_N/Q/`), the `profiles/perf` directory
/// itself, one `worker_N` directory, one capture directory, a plain
/// `perf.data` file, or a directory of plain `perf record` outputs (each
/// file a capture of its own: [`PlainData`]). Captures are
/// returned sorted by worker and query, narrowed by `filter`.
///
/// Errors (exit code 2) when a root does not exist or holds no capture at
/// all (before narrowing): that is a wrong path, not an empty result.
pub fn discover(roots: &[PathBuf], filter: &Filter) -> Result<Vec<CaptureDir>> {
    let mut all = Vec::new();
    for root in roots {
        if root.is_file() {
            all.push(plain_file_root(root)?);
            continue;
        }
        check_root(
            root,
            "pass a result directory (the one holding profiles/perf/worker_N/) or a perf.data file",
        )?;
        let mut w = Walk::default();
        of_root(root, Reach::Roots, &mut w)?;
        let before = all.len();
        all.extend(w.found.into_iter().filter(|(_, c)| c.raw).map(|(d, _)| d));
        if all.len() == before {
            nothing_yet(root)?;
            return Err(Error::Usage(format!(
                "{}: no captures found; expected RESULT_DIR/profiles/perf/worker_N/QUERY/ \
                 directories holding capture.json or capture-metadata.txt and perf.data files, \
                 or perf.data files written by `perf record`",
                root.display()
            )));
        }
    }
    all.retain(|c| filter.keeps(c.worker, &c.query));
    all.dedup_by(|a, b| a.subject() == b.subject());
    Ok(all)
}

/// The usage error (exit 2) for a root without captures where
/// `jobprof-record` is writing one now (its `.capturing` marker):
/// "a capture is being written (worker 0, q03; staged in ...)".
fn nothing_yet(root: &Path) -> Result<()> {
    let found = super::capturing::being_written(root);
    if found.is_empty() {
        return Ok(());
    }
    Err(Error::Usage(format!(
        "{}: no published capture yet: {}; run this again once its \
         `jobprof-record stop` has returned",
        root.display(),
        super::capturing::sentence(&found)
    )))
}

/// Finds every capture and render-only directory under `roots`, at any
/// depth. A root may also be a `profiles/perf` directory, one `worker_N`
/// directory or one capture. Errors (exit code 2) when a root does not
/// exist or holds nothing to do.
pub fn find(roots: &[PathBuf]) -> Result<Found> {
    let mut w = Walk::default();
    for root in roots {
        check_root(root, "pass directories that hold result_dir_* directories")?;
        let before = w.found.len();
        of_root(root, Reach::Deep, &mut w)?;
        if w.found.len() == before && w.unreadable.is_empty() {
            nothing_yet(root)?;
            return Err(Error::Usage(format!(
                "{}: no captures found at any depth; expected result_dir_*/profiles/perf/\
                 worker_N/QUERY/ directories (with capture.json, capture-metadata.txt, \
                 perf.data*, perf.script.gz/.zst or stacks.folded)",
                root.display()
            )));
        }
    }
    let mut items: Vec<Item> = w
        .found
        .into_iter()
        .filter_map(|(capture, c)| {
            Some(Item {
                capture,
                kind: c.kind()?,
            })
        })
        .collect();
    items.sort_by(|a, b| a.capture.subject().cmp(b.capture.subject()));
    items.dedup_by(|a, b| a.capture.subject() == b.capture.subject());
    Ok(Found {
        result_dirs: w.result_dirs,
        items,
        unreadable: w.unreadable,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn filter_narrows_by_worker_and_query() {
        let f = Filter {
            workers: vec![1],
            queries: vec!["q2".into()],
        };
        assert!(f.keeps(Some(1), "q2"));
        assert!(!f.keeps(Some(0), "q2"));
        assert!(!f.keeps(Some(1), "q1"));
        assert!(!f.keeps(None, "q2"));
        assert!(Filter::default().keeps(None, "x"));
    }

    #[test]
    fn one_read_tells_captures_from_render_only_directories() {
        let dir = tempfile::tempdir().unwrap();
        let d = dir.path();
        assert_eq!(classify(d).unwrap().kind(), None);
        fs::write(d.join(FOLDED), "a 1\n").unwrap();
        assert_eq!(classify(d).unwrap().kind(), Some(Kind::RenderOnly));
        // Metadata kept but data and texts gone: only drawing is left.
        fs::write(d.join(format::CAPTURE_JSON), "{}").unwrap();
        assert_eq!(classify(d).unwrap().kind(), Some(Kind::RenderOnly));
        fs::write(d.join("perf.data.3"), "").unwrap();
        assert_eq!(classify(d).unwrap().kind(), Some(Kind::Capture));
        // A directory with a capture file's name is no capture file.
        let e = tempfile::tempdir().unwrap();
        fs::create_dir(e.path().join("perf.data")).unwrap();
        assert_eq!(classify(e.path()).unwrap().kind(), None);
    }

    #[test]
    fn plain_perf_record_outputs_by_name() {
        for yes in [
            "perf.data",
            "perf.data.old",
            "perf.data.2026120504031234",
            "q1.perf.data",
        ] {
            assert!(plain_data_name(yes), "{yes}");
        }
        for no in [
            "perf.data.part000",
            "perf.data.3",
            "perf.data.",
            "perf.script.zst",
            "x.data",
            ".perf.data",
        ] {
            assert!(!plain_data_name(no), "{no}");
        }
        assert_eq!(
            super::super::layout::plain_output_dir(Path::new("/r/perf.data")),
            Path::new("/r/perf.data.jobprof")
        );
    }

    #[test]
    fn find_takes_plain_outputs_and_the_trees_beside_them() {
        let d = tempfile::tempdir().unwrap();
        let root = d.path();
        fs::write(root.join("perf.data"), b"PERFILE2").unwrap();
        let q = root.join("a/result_dir_1/profiles/perf/worker_0/q01");
        fs::create_dir_all(&q).unwrap();
        fs::write(q.join(format::CAPTURE_JSON), "{}").unwrap();
        fs::write(q.join(SCRIPT_ZST), b"").unwrap();
        let deeper = root.join("b");
        fs::create_dir_all(deeper.join("q1.perf.data.jobprof")).unwrap();
        fs::write(deeper.join("q1.perf.data"), b"PERFILE2").unwrap();
        fs::write(deeper.join("q1.perf.data.jobprof").join(SCRIPT_ZST), b"").unwrap();
        let found = find(&[root.to_path_buf()]).unwrap();
        let subjects: Vec<&Path> = found.items.iter().map(|i| i.capture.subject()).collect();
        assert_eq!(
            subjects,
            [
                q.as_path(),
                &deeper.join("q1.perf.data"),
                &root.join("perf.data")
            ],
            "{found:?}"
        );
        assert!(found.unreadable.is_empty(), "{found:?}");
    }

    #[test]
    fn a_directory_with_capture_metadata_holds_no_plain_perf_data() {
        let d = tempfile::tempdir().unwrap();
        fs::write(d.path().join("perf.data"), b"PERFILE2").unwrap();
        fs::write(d.path().join("perf.data.log"), b"text").unwrap();
        let found = plain_files(d.path()).unwrap().unwrap();
        assert_eq!(found, [d.path().join("perf.data")]);
        fs::write(d.path().join(format::CAPTURE_JSON), "{}").unwrap();
        assert_eq!(plain_files(d.path()).unwrap(), None);
    }

    #[test]
    fn discover_and_find_skip_symfs_and_hidden_directories() {
        let root = tempfile::tempdir().unwrap();
        let perf = root.path().join("result_dir_7/profiles/perf");
        for q in [
            "worker_0/q1",
            "worker_0/symfs",
            "worker_0/.q2.publishing",
            "worker_2/q1",
        ] {
            fs::create_dir_all(perf.join(q)).unwrap();
            fs::write(perf.join(q).join("perf.data"), "").unwrap();
        }
        let rd = root.path().join("result_dir_7");
        let found = discover(std::slice::from_ref(&rd), &Filter::default()).unwrap();
        let labels: Vec<String> = found.iter().map(CaptureDir::label).collect();
        assert_eq!(labels, ["worker_0/q1", "worker_2/q1"]);
        let deep = find(&[root.path().to_path_buf()]).unwrap();
        assert_eq!(deep.result_dirs, 1);
        let dirs: Vec<&Path> = deep.items.iter().map(|i| i.capture.dir.as_path()).collect();
        assert_eq!(dirs, [perf.join("worker_0/q1"), perf.join("worker_2/q1")]);
        // Not recursive: a folder of result directories is no root for process.
        assert!(discover(&[root.path().to_path_buf()], &Filter::default()).is_err());
    }
}
