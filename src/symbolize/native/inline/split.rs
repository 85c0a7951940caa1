//! Split DWARF (`-gsplit-dwarf`): a binary whose units are skeletons
//! (`DW_TAG_skeleton_unit` in DWARF 5, `DW_AT_GNU_dwo_name` in DWARF 4)
//! keeps its functions and inlined subroutines in `.dwo` files, or in one
//! `.dwp` package beside it. addr2line asks for each skeleton's split unit
//! when a lookup reaches it ([`addr2line::LookupResult::Load`]); [`Split`]
//! answers from `<file>.dwp` (the unit with the skeleton's dwo id), else
//! from the `.dwo` the skeleton names (its `DW_AT_dwo_name`, relative to
//! its `DW_AT_comp_dir`) when that file's unit has the same dwo id. Both
//! are looked up under the root the file itself came from: a capture's
//! `symfs/` (where `jobprof-record` copies them, one name at a time, never
//! through a link) or this host's `/`, opened with the same credentials.
//! A split unit that cannot be found leaves the lookup to the skeleton
//! (lines without inline frames), as perf 6.1 does for every split unit.

use std::ffi::OsStr;
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, OnceLock};

use addr2line::{LookupContinuation, LookupResult, SplitDwarfLoad};
use gimli::Reader as _;
use object::read::elf::ElfFile64;
use object::Endianness;
use rustc_hash::FxHashMap;

use super::{read_sections, Bytes, Reader, Sections};
use crate::sys::creds::Creds;
use crate::sys::input::Mapping;

type Dwarf = gimli::Dwarf<Reader>;

/// The split units of one file, found and read once each.
pub(super) struct Split {
    root: PathBuf,
    /// The file with the skeleton units.
    file: PathBuf,
    owner: Option<Creds>,
    /// The package beside the file ([`Split::package_paths`]), read on
    /// the first split unit asked.
    package: OnceLock<Option<gimli::DwarfPackage<Reader>>>,
    /// The split units read (or not found), by dwo id.
    units: Mutex<FxHashMap<u64, Option<Arc<Dwarf>>>>,
    /// The files read, with their paths (one that shrank names nothing).
    pub(super) maps: Mutex<Vec<(Arc<Mapping>, PathBuf)>>,
}

impl Split {
    /// The split units of `file` (found under `root`), to be read with
    /// `owner`'s rights when given.
    pub(super) fn new(root: &Path, file: &Path, owner: Option<&Creds>) -> Split {
        Split {
            root: root.to_path_buf(),
            file: file.to_path_buf(),
            owner: owner.cloned(),
            package: OnceLock::new(),
            units: Mutex::default(),
            maps: Mutex::default(),
        }
    }

    /// Runs a lookup to its end, giving it every split unit it asks for
    /// that can be found.
    pub(super) fn resolve<L>(&self, mut r: LookupResult<L>) -> L::Output
    where
        L: LookupContinuation<Buf = Reader>,
    {
        loop {
            r = match r {
                LookupResult::Output(out) => return out,
                LookupResult::Load { load, continuation } => continuation.resume(self.unit(load)),
            };
        }
    }

    /// The split unit a skeleton asks for (`None`: not found).
    fn unit(&self, load: SplitDwarfLoad<Reader>) -> Option<Arc<Dwarf>> {
        let id = load.dwo_id.0;
        if let Some(found) = self.lock_units().get(&id) {
            return found.clone();
        }
        let found = self
            .in_package(&load)
            .or_else(|| self.in_dwo(&load))
            .map(Arc::new);
        self.lock_units().insert(id, found.clone());
        found
    }

    fn lock_units(&self) -> std::sync::MutexGuard<'_, FxHashMap<u64, Option<Arc<Dwarf>>>> {
        self.units.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// The unit in `<file>.dwp` with the skeleton's dwo id.
    fn in_package(&self, load: &SplitDwarfLoad<Reader>) -> Option<Dwarf> {
        let package = self.package.get_or_init(|| {
            let paths = self.package_paths();
            let sections = paths.iter().find_map(|p| self.sections(p))?;
            let empty = gimli::EndianReader::new(Bytes::Owned(Arc::default()), sections.endian);
            let load = |id| Ok::<_, gimli::Error>(sections.reader(id));
            gimli::DwarfPackage::load(load, empty).ok()
        });
        package
            .as_ref()?
            .find_cu(load.dwo_id, &load.parent)
            .ok()
            .flatten()
    }

    /// The `.dwo` file the skeleton names, when its unit has the
    /// skeleton's dwo id.
    fn in_dwo(&self, load: &SplitDwarfLoad<Reader>) -> Option<Dwarf> {
        let path = dwo_path(load.comp_dir.as_ref(), load.path.as_ref()?)?;
        // Under a snapshot, where `jobprof-record` put it: `.` and `..`
        // taken lexically (the snapshot is walked without either).
        let under = if self.root == Path::new("/") {
            path
        } else {
            self.root.join(lexical(&path))
        };
        let sections = self.sections(&under)?;
        let mut dwarf = sections.dwarf(None)?;
        let header = dwarf.units().next().ok()??;
        let unit = dwarf.unit(header).ok()?;
        if unit.dwo_id != Some(load.dwo_id) {
            return None;
        }
        dwarf.make_dwo(&load.parent);
        Some(dwarf)
    }

    /// Where a `.dwp` package of the file may be: `<file>.dwp`; for a
    /// file of this host that perf's build-id cache holds
    /// (`~/.debug/<path>/<build id>/elf`, what a plain `perf.data` is
    /// named from), `<path>.dwp` too.
    fn package_paths(&self) -> Vec<PathBuf> {
        let with_dwp = |p: &Path| {
            let mut name = p.as_os_str().to_os_string();
            name.push(".dwp");
            PathBuf::from(name)
        };
        let mut out = vec![with_dwp(&self.file)];
        let cached = (self.root == Path::new("/") && self.file.ends_with("elf"))
            .then(|| std::fs::canonicalize(&self.file).ok())
            .flatten();
        if let Some(cached) = cached {
            let parts: Vec<_> = cached.components().collect();
            let below = parts.iter().position(|c| c.as_os_str() == ".debug");
            if let Some(i) = below.filter(|&i| i + 3 < parts.len()) {
                let original: PathBuf = parts[i + 1..parts.len() - 2].iter().collect();
                out.push(with_dwp(&Path::new("/").join(original)));
            }
        }
        out
    }

    /// The split DWARF sections (`.debug_*.dwo`, the package's indexes)
    /// of the file at `path` under the root.
    fn sections(&self, path: &Path) -> Option<Sections> {
        let map = crate::symbolize::sources::map_as(&self.root, path, self.owner.as_ref()).ok()?;
        let map = Arc::new(map);
        let elf = ElfFile64::<Endianness>::parse(&map[..]).ok()?;
        let (sections, _) = read_sections(&map, &elf, None, true)?;
        let mut maps = self.maps.lock().unwrap_or_else(|e| e.into_inner());
        maps.push((map.clone(), path.to_path_buf()));
        Some(sections)
    }
}

/// Where a skeleton's `.dwo` is: its name, relative to its compilation
/// directory unless absolute (`None`: relative with no absolute directory
/// to put it under).
fn dwo_path(comp_dir: Option<&Reader>, name: &Reader) -> Option<PathBuf> {
    let os = |r: &Reader| -> Option<PathBuf> {
        let bytes = r.to_slice().ok()?;
        Some(PathBuf::from(OsStr::from_bytes(&bytes)))
    };
    let name = os(name)?;
    if name.is_absolute() {
        return Some(name);
    }
    let dir = os(comp_dir?)?;
    dir.is_absolute().then(|| dir.join(name))
}

/// An absolute path's components below `/`, `.` and `..` taken lexically
/// (never above `/`).
fn lexical(path: &Path) -> PathBuf {
    use std::path::Component;
    let mut out = PathBuf::new();
    for c in path.components() {
        match c {
            Component::Normal(n) => out.push(n),
            Component::ParentDir => {
                out.pop();
            }
            Component::RootDir | Component::CurDir | Component::Prefix(_) => {}
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_dwo_path_under_a_snapshot_is_taken_lexically() {
        assert_eq!(
            lexical(Path::new("/b/c/../x/./a.dwo")),
            Path::new("b/x/a.dwo")
        );
        assert_eq!(lexical(Path::new("/b/../../a.dwo")), Path::new("a.dwo"));
    }
}
