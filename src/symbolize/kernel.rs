//! Where kernel frames get their names, and why: the capture's own
//! `kallsyms` snapshot; else this machine's `/proc/kallsyms` when it
//! describes the kernel that was sampled. That is so when the capture was
//! made on this host during this boot, and also when the capture's kernel
//! build id (from its shards' headers, as `perf buildid-list` prints it) is
//! the running kernel's (`/sys/kernel/notes`): the same node after a
//! reboot, or another node of a cluster that runs one kernel image, and
//! the old pipeline's captures, which record no boot id and take no
//! snapshot. After a reboot only the core kernel's symbols still hold, moved
//! by KASLR's offset (perf and the native symbolizer take it off: the kernel
//! map perf recorded starts at the sampled boot's `_text`); modules load
//! where they like, so that table is a copy of `/proc/kallsyms` without
//! the modules' symbols, and module frames stay unnamed rather than wrong.

use std::io::{BufRead, BufReader, Write};
use std::path::{Path, PathBuf};
use std::sync::Arc;

use jobprof_capture_format::build_id::{gnu_build_id, ByteOrder};
use tempfile::TempPath;

/// The live kernel symbol table.
pub const LIVE_KALLSYMS: &str = "/proc/kallsyms";

/// The running kernel's ELF notes (its build id among them).
pub const KERNEL_NOTES: &str = "/sys/kernel/notes";

/// Where kernel frames get their names from, and why.
#[derive(Debug, Clone)]
pub enum KernelSymbols {
    /// The capture's own snapshot (`worker_N/kallsyms`).
    Snapshot(PathBuf),
    /// This machine's `/proc/kallsyms`: the capture was made on this host
    /// during this boot, so the table is the one that was sampled.
    Live(PathBuf),
    /// The core kernel's symbols of this machine's `/proc/kallsyms`, copied
    /// to a temporary file (removed when the last clone is dropped): the
    /// capture's kernel build id is the running kernel's.
    SameKernel {
        /// The kernel's build id (hex).
        build_id: String,
        /// The copy.
        table: Arc<TempPath>,
    },
    /// perf's own choice: no `--symfs`, so perf reads `/proc/kallsyms`
    /// itself (after checking the kernel's build id).
    PerfDefault,
    /// None: kernel frames stay unnamed, for the reason given.
    Unavailable(String),
}

/// What is known of the sampled machine and of this one.
#[derive(Debug, Clone, Copy, Default)]
pub struct Machines<'a> {
    /// (host, boot id) of the capture, when recorded.
    pub recorded: (Option<&'a str>, Option<&'a str>),
    /// (host, boot id) of this machine.
    pub here: (Option<&'a str>, Option<&'a str>),
    /// The sampled kernel's build id (hex), from the shards' headers.
    pub recorded_kernel: Option<&'a str>,
    /// The running kernel's build id (hex).
    pub running_kernel: Option<&'a str>,
    /// A plain `perf.data` (no capture metadata, no snapshot), for the
    /// reason given when its kernel is not this machine's.
    pub plain: bool,
}

/// This machine's host name and boot id, as `jobprof-record` records them.
pub fn this_host_and_boot() -> (Option<String>, Option<String>) {
    let read = |p: &str| {
        std::fs::read_to_string(p)
            .ok()
            .map(|s| s.trim().to_string())
            .filter(|s| !s.is_empty())
    };
    (
        read("/proc/sys/kernel/hostname"),
        read("/proc/sys/kernel/random/boot_id"),
    )
}

/// The running kernel's build id (hex), from [`KERNEL_NOTES`].
pub fn running_kernel_build_id() -> Option<String> {
    std::fs::read(KERNEL_NOTES)
        .ok()
        .and_then(|n| gnu_build_id(&n, ByteOrder::NATIVE))
}

/// Decides where kernel symbols come from. `snapshot` is the capture's
/// `kallsyms`. The live table is used whole only on the host and boot that
/// were sampled; its core kernel part ([`core_table`]) also when the kernel
/// build ids match: after a reboot or on another node, with another kernel,
/// its addresses describe another kernel.
pub fn kernel_symbols(
    snapshot: Option<&Path>,
    uses_symfs: bool,
    m: Machines<'_>,
    core: impl FnOnce() -> std::io::Result<TempPath>,
) -> KernelSymbols {
    if let Some(s) = snapshot {
        return KernelSymbols::Snapshot(s.to_path_buf());
    }
    if !uses_symfs {
        return KernelSymbols::PerfDefault;
    }
    if let ((Some(h), Some(b)), (Some(h2), Some(b2))) = (m.recorded, m.here) {
        if h == h2 && b == b2 {
            return KernelSymbols::Live(PathBuf::from(LIVE_KALLSYMS));
        }
    }
    match (m.recorded_kernel, m.running_kernel) {
        (Some(a), Some(b)) if a == b => match core() {
            Ok(table) => KernelSymbols::SameKernel {
                build_id: a.to_string(),
                table: Arc::new(table),
            },
            Err(e) => KernelSymbols::Unavailable(format!(
                "the capture's kernel (build id {a}) is this machine's, but its symbols could \
                 not be copied from {LIVE_KALLSYMS}: {e}; kernel frames stay unnamed"
            )),
        },
        (recorded, running) => KernelSymbols::Unavailable(unavailable(m, recorded, running)),
    }
}

/// Why neither a snapshot nor this machine's table names the kernel frames.
fn unavailable(m: Machines<'_>, recorded: Option<&str>, running: Option<&str>) -> String {
    let kernel = match (recorded, running) {
        (Some(a), Some(b)) => format!("its kernel (build id {a}) is not this machine's ({b})"),
        (Some(a), None) => format!(
            "its kernel has build id {a} and this machine's cannot be read ({KERNEL_NOTES})"
        ),
        (None, _) => "its shards record no kernel build id".to_string(),
    };
    if m.plain {
        return format!(
            "a plain perf.data carries no kernel symbol table, and {kernel}, so this \
             machine's /proc/kallsyms cannot be trusted for it; kernel frames stay unnamed \
             (process it on a machine that runs the kernel it recorded)"
        );
    }
    match m.recorded {
        (_, None) => format!(
            "the capture has no kallsyms snapshot and does not record its boot id \
             (the old pipeline's, or an older jobprof-record's), and {kernel}, so this \
             machine's /proc/kallsyms cannot be trusted for it; kernel frames stay unnamed \
             (process it on a node that runs that kernel, or re-record with this jobprof-record)"
        ),
        (h, Some(_)) => format!(
            "the capture has no kallsyms snapshot and was made on {} during another boot \
             than this machine's, and {kernel}, so /proc/kallsyms here describes another \
             kernel; kernel frames stay unnamed (process it on a node that runs that kernel, or \
             re-record with kernel.kptr_restrict=0 or as root so the snapshot is taken)",
            h.unwrap_or("an unknown host")
        ),
    }
}

/// A temporary copy of the core kernel's symbols of [`LIVE_KALLSYMS`]
/// (lines without a `[module]`); an error when the table hides its
/// addresses (`kptr_restrict`) or cannot be read.
pub fn core_table() -> std::io::Result<TempPath> {
    let live = std::fs::File::open(LIVE_KALLSYMS)?;
    let mut out = tempfile::Builder::new()
        .prefix("jobprof-kallsyms-")
        .tempfile()?;
    let named = copy_core(BufReader::new(live), out.as_file_mut())?;
    if named == 0 {
        return Err(std::io::Error::other(
            "it shows no addresses (kernel.kptr_restrict; run as root or set it to 0)",
        ));
    }
    Ok(out.into_temp_path())
}

/// Copies the lines of `kallsyms` that belong to no module; returns how
/// many have a non-zero address.
fn copy_core(kallsyms: impl BufRead, out: &mut impl Write) -> std::io::Result<usize> {
    let mut out = std::io::BufWriter::new(out);
    let mut named = 0;
    for line in kallsyms.split(b'\n') {
        let line = line?;
        if line.is_empty() || (line.ends_with(b"]") && line.contains(&b'[')) {
            continue;
        }
        if line
            .iter()
            .take_while(|b| b.is_ascii_hexdigit())
            .any(|&b| b != b'0')
        {
            named += 1;
        }
        out.write_all(&line)?;
        out.write_all(b"\n")?;
    }
    out.flush()?;
    Ok(named)
}

impl KernelSymbols {
    /// The `--kallsyms` file to pass, when any.
    pub fn file(&self) -> Option<&Path> {
        match self {
            KernelSymbols::Snapshot(p) | KernelSymbols::Live(p) => Some(p),
            KernelSymbols::SameKernel { table, .. } => Some(table),
            _ => None,
        }
    }

    /// One phrase for the log and `summary.json`.
    pub fn describe(&self) -> String {
        match self {
            KernelSymbols::Snapshot(p) => format!("snapshot {}", p.display()),
            KernelSymbols::Live(p) => {
                format!(
                    "{} (capture made on this host during this boot)",
                    p.display()
                )
            }
            KernelSymbols::SameKernel { build_id, .. } => format!(
                "{LIVE_KALLSYMS}, core kernel only (the capture's kernel, build id {build_id}, \
                 is this machine's; module frames stay unnamed)"
            ),
            KernelSymbols::PerfDefault => {
                "perf's default (/proc/kallsyms, build id checked)".into()
            }
            KernelSymbols::Unavailable(why) => format!("none: {why}"),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn fake_core() -> std::io::Result<TempPath> {
        Ok(tempfile::NamedTempFile::new()?.into_temp_path())
    }

    fn decide(snapshot: Option<&Path>, m: Machines<'_>) -> KernelSymbols {
        kernel_symbols(snapshot, true, m, fake_core)
    }

    #[test]
    fn live_kallsyms_only_on_the_same_host_and_boot_or_kernel() {
        let here = (Some("n1"), Some("b1"));
        let on = |recorded| Machines {
            recorded,
            here,
            ..Default::default()
        };
        let snap = Path::new("w/kallsyms");
        assert!(
            matches!(decide(Some(snap), on((None, None))), KernelSymbols::Snapshot(p) if p == snap)
        );
        let live = decide(None, on((Some("n1"), Some("b1"))));
        assert_eq!(live.file(), Some(Path::new(LIVE_KALLSYMS)));
        for recorded in [
            (Some("n1"), Some("b0")),
            (Some("n2"), Some("b1")),
            (Some("n1"), None),
            (None, None),
        ] {
            let k = decide(None, on(recorded));
            assert!(k.describe().starts_with("none: "), "{recorded:?}");
            let same = Machines {
                recorded_kernel: Some("ab"),
                running_kernel: Some("ab"),
                ..on(recorded)
            };
            assert!(
                matches!(decide(None, same), KernelSymbols::SameKernel { .. }),
                "{recorded:?}"
            );
            let other = Machines {
                recorded_kernel: Some("ab"),
                running_kernel: Some("cd"),
                ..on(recorded)
            };
            let why = decide(None, other).describe();
            assert!(
                why.contains("build id ab) is not this machine's (cd)"),
                "{why}"
            );
        }
        let no_boot_here = Machines {
            here: (Some("n1"), None),
            ..on((Some("n1"), Some("b1")))
        };
        assert!(decide(None, no_boot_here).describe().starts_with("none: "));
        let m = on((None, None));
        assert!(matches!(
            kernel_symbols(None, false, m, fake_core),
            KernelSymbols::PerfDefault
        ));
        let same = Machines {
            recorded_kernel: Some("ab"),
            running_kernel: Some("ab"),
            ..m
        };
        let failed = kernel_symbols(None, true, same, || Err(std::io::Error::other("hidden")));
        assert!(failed
            .describe()
            .contains("could not be copied from /proc/kallsyms: hidden"));
    }

    #[test]
    fn core_copy_leaves_the_modules_out() {
        let kallsyms = "ffffffff81000000 T _text\nffffffff81000100 t f\n\
                        ffffffffc0000000 t nvme_irq\t[nvme]\n";
        let mut out = Vec::new();
        assert_eq!(copy_core(kallsyms.as_bytes(), &mut out).unwrap(), 2);
        assert_eq!(out, b"ffffffff81000000 T _text\nffffffff81000100 t f\n");
        let hidden = "0000000000000000 T _text\n";
        assert_eq!(copy_core(hidden.as_bytes(), &mut Vec::new()).unwrap(), 0);
    }
}
