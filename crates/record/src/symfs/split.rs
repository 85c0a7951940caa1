//! The split DWARF of a mapped binary (`-gsplit-dwarf`): its `.dwp`
//! package (`<binary>.dwp` beside it, as gdb and addr2line look for it)
//! and the `.dwo` file each of its skeleton units names
//! ([`crate::dwarf::skeletons`]: `DW_AT_dwo_name` under `DW_AT_comp_dir`),
//! copied to the same absolute path under `symfs/`, where the native
//! symbolizer looks for them. Opened exactly as separate debug files are:
//! below the worker's root, links resolved inside it, as the worker, a
//! regular file nothing is mounted over; a `.dwo` is copied only when the
//! unit it holds has the skeleton's dwo id, a package only when it is an
//! ELF file with a unit index. Every byte counts against `--symfs-limit`.
//! Manifest rows: `dwp` and `dwo`, each status saying which binary it is
//! for.

use std::fs::File;

use super::Snap;
use crate::dwarf::{self, Skeleton};
use crate::elf;

impl Snap<'_> {
    /// The `.dwp` package and `.dwo` files of the binary at `path`, open
    /// as `f`, when it has skeleton units.
    pub(super) fn split_dwarf(&mut self, path: &str, f: &mut File) {
        let units = match dwarf::skeletons(f) {
            Ok(u) if u.is_empty() => return,
            Ok(u) => u,
            Err(e) => {
                let status = format!("error: {e} (for {path}; its .dwo files are not looked for)");
                return self.row("dwo", path, None, "-", &status);
            }
        };
        self.package(path);
        for unit in &units {
            self.dwo(path, unit);
        }
    }

    /// `<path>.dwp`, when there.
    fn package(&mut self, path: &str) {
        let dwp = format!("{path}.dwp");
        let Some(root) = self.root.as_ref().ok() else {
            return;
        };
        let (mut f, meta) = match self.worker.open_path(root, &dwp, true) {
            Ok(o) => o,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                return self.row("dwp", &dwp, None, "-", &format!("absent (for {path})"));
            }
            Err(e) => {
                self.summary.skipped += 1;
                let status = format!("not copied: {e} (for {path})");
                return self.row("dwp", &dwp, None, "-", &status);
            }
        };
        let indexed =
            elf::sections(&mut f).is_ok_and(|s| s.iter().any(|s| s.name == b".debug_cu_index"));
        let status = if indexed {
            self.copy_split(&mut f, &meta, &dwp)
        } else {
            "not copied: not a DWARF package (no .debug_cu_index)".into()
        };
        self.row(
            "dwp",
            &dwp,
            Some(meta.len()),
            "-",
            &format!("{status} (for {path})"),
        );
    }

    /// The `.dwo` file `unit` names, when it holds that unit.
    fn dwo(&mut self, path: &str, unit: &Skeleton) {
        let id = unit
            .dwo_id
            .map_or_else(|| "-".into(), |i| format!("{i:016x}"));
        let Some(dwo) = unit.path() else {
            let status = format!("absent (for {path}; relative name, no compilation directory)");
            return self.row("dwo", &unit.name, None, &id, &status);
        };
        let Some(root) = self.root.as_ref().ok() else {
            return;
        };
        let (mut f, meta) = match self.worker.open_path(root, &dwo, true) {
            Ok(o) => o,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                return self.row("dwo", &dwo, None, &id, &format!("absent (for {path})"));
            }
            Err(e) => {
                self.summary.skipped += 1;
                let status = format!("not copied: {e} (for {path})");
                return self.row("dwo", &dwo, None, &id, &status);
            }
        };
        let status = match dwarf::split_unit_id(&mut f) {
            Ok(got) if got == unit.dwo_id => self.copy_split(&mut f, &meta, &dwo),
            Ok(got) => {
                let got = got.map_or_else(|| "none".into(), |i| format!("{i:016x}"));
                format!("not copied: its unit's dwo id is {got}")
            }
            Err(e) => format!("not copied: {e}"),
        };
        self.row(
            "dwo",
            &dwo,
            Some(meta.len()),
            &id,
            &format!("{status} (for {path})"),
        );
    }

    /// Copies a split DWARF file to its path under `symfs/`.
    fn copy_split(&mut self, f: &mut File, meta: &std::fs::Metadata, path: &str) -> String {
        let dst = self.symfs.join(path.trim_start_matches('/'));
        let status = self.copy_open(f, meta, &dst);
        if status == "copied" {
            self.summary.debug_files += 1;
        }
        status
    }
}
