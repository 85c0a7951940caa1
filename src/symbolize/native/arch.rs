//! What a shard's header says about where and how it was recorded, and
//! whether `perf script` on this host can symbolize it correctly.
//!
//! perf symbolizes the user stacks of another architecture wrongly, and
//! silently: on an x86-64 host, perf 6.1 has no unwinder for aarch64
//! (`unwind: target platform=arm64 is not supported`), so the frame it puts
//! back from the link register in aarch64 frame-pointer chains is missing
//! and aarch64 `--call-graph dwarf` stacks are cut to their leaf. Both need
//! the sampled user registers (`PERF_SAMPLE_REGS_USER`): a shard with them,
//! of another architecture than this host, must not go to `perf script`
//! here ([`perf_mismatch`]); the native symbolizer unwinds x86-64 and
//! aarch64 on any host.

use std::path::Path;

use linux_perf_data::linux_perf_event_reader::SampleFormat;
use linux_perf_data::PerfFileReader;

/// What the header of a shard says.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Facts {
    /// `uname -m` of the recording machine (`x86_64`, `aarch64`), as perf
    /// wrote it (`None`: not in the header).
    pub arch: Option<String>,
    /// Some event samples user registers and stack copies (`--call-graph
    /// dwarf`).
    pub dwarf: bool,
    /// Some event samples user registers (dwarf, or aarch64 `-g`, where
    /// perf records the link register).
    pub regs_user: bool,
    /// Some event samples call chains (`PERF_SAMPLE_CALLCHAIN`: `perf
    /// record -g` or `--call-graph`); without, each sample is its leaf.
    pub call_chains: bool,
}

impl Facts {
    /// `fp` or `dwarf`: the call-graph mode the shard was recorded with;
    /// `none` without call chains (no `-g`).
    pub fn call_graph(&self) -> &'static str {
        if self.dwarf {
            "dwarf"
        } else if self.call_chains {
            "fp"
        } else {
            "none"
        }
    }
}

/// The architecture this jobprof runs on, as `uname -m` names it.
pub fn host() -> &'static str {
    std::env::consts::ARCH
}

/// The same machine name for perf's and Rust's spellings.
pub fn normalized(arch: &str) -> &str {
    match arch {
        "arm64" | "aarch64" => "aarch64",
        "amd64" | "x86_64" => "x86_64",
        a => a,
    }
}

/// Reads the facts of the perf.data file `data` (`None`: not readable as
/// one, or a damaged header; the caller's own checks say why). The header
/// is checked ([`super::open_checked`]) before linux-perf-data reads it: a
/// size in it that the file cannot hold would be a request for that much
/// memory.
pub fn facts(data: &Path) -> Option<Facts> {
    let (_file, map) = super::open_checked(data).ok()?;
    let PerfFileReader { perf_file, .. } =
        PerfFileReader::parse_file(crate::sys::input::MappedReader::new(&map)).ok()?;
    let mut f = Facts {
        arch: perf_file.arch().ok().flatten().map(str::to_string),
        ..Facts::default()
    };
    for a in perf_file.event_attributes() {
        let s = a.attributes().sample_format;
        f.regs_user |= s.contains(SampleFormat::REGS_USER);
        f.dwarf |= s.contains(SampleFormat::REGS_USER | SampleFormat::STACK_USER);
        f.call_chains |= s.contains(SampleFormat::CALLCHAIN);
    }
    Some(f)
}

/// Why `perf script` on a host of architecture `host` would symbolize a
/// shard with these facts wrongly (`None`: it would not).
pub fn mismatch(f: &Facts, host: &str) -> Option<String> {
    let arch = normalized(f.arch.as_deref()?);
    if arch == normalized(host) || !f.regs_user {
        return None;
    }
    let what = if f.dwarf {
        "its --call-graph dwarf stacks would be cut to their leaf"
    } else {
        "its frame-pointer stacks would lose the caller perf puts back from the link register"
    };
    Some(format!(
        "it was recorded on {arch} with user registers, and perf script on this {} host \
         cannot unwind {arch}: {what}",
        normalized(host)
    ))
}

/// [`mismatch`] for the file `data` on this host.
pub fn perf_mismatch(data: &Path) -> Option<String> {
    mismatch(&facts(data)?, host())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn f(arch: &str, regs_user: bool, dwarf: bool) -> Facts {
        Facts {
            arch: Some(arch.into()),
            dwarf,
            regs_user,
            call_chains: true,
        }
    }

    #[test]
    fn perf_is_wrong_across_architectures_only_with_user_registers() {
        assert!(mismatch(&f("aarch64", true, true), "x86_64")
            .unwrap()
            .contains("cut to their leaf"));
        assert!(mismatch(&f("aarch64", true, false), "x86_64")
            .unwrap()
            .contains("link register"));
        // A plain fp chain (perf before 5.17 recorded no LR) reads the same.
        assert_eq!(mismatch(&f("aarch64", false, false), "x86_64"), None);
        assert_eq!(mismatch(&f("aarch64", true, true), "aarch64"), None);
        assert_eq!(mismatch(&f("arm64", true, true), "aarch64"), None);
        assert!(mismatch(&f("x86_64", true, true), "aarch64").is_some());
        let none = Facts::default();
        assert_eq!(mismatch(&none, "x86_64"), None);
        assert_eq!(f("x86_64", true, true).call_graph(), "dwarf");
        assert_eq!(f("x86_64", false, false).call_graph(), "fp");
        let flat = Facts {
            call_chains: false,
            ..f("x86_64", false, false)
        };
        assert_eq!(flat.call_graph(), "none");
    }
}
