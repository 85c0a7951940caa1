//! Go's outermost functions: where a Go stack starts, so that dwarf
//! unwinding stops there instead of stepping on into the words above.

use std::ops::Range;

use object::read::elf::ElfFile64;
use object::{Endianness, Object};

/// The functions a Go stack starts in, as Go's own traceback
/// (`topofstack`) stops at them: `runtime.goexit` under every goroutine,
/// `runtime.mstart` under each thread's scheduler stack, `runtime.rt0_go`
/// under the first, and where a call switched to the scheduler stack
/// (`runtime.systemstack`, `runtime.mcall`, `runtime.morestack`: the
/// caller's frames are on another stack, not in the sample's copy), by
/// address, when `file` is a Go binary (a `.go.buildinfo` or `.gopclntab`
/// section) with a symbol table. Their CFI describes a frame like any
/// other, so an unwinder steps past them into whatever the words above
/// hold (an `[unknown]` root, or stale frames of a reused stack). `perf
/// script` has no say here: its libunwind prints a Go dwarf stack as its
/// leaf alone (Go has `.debug_frame`, no `.eh_frame`).
pub(super) fn go_roots(file: &ElfFile64<'_, Endianness>) -> Vec<Range<u64>> {
    use object::ObjectSymbol;
    let go = file.section_by_name(".go.buildinfo").is_some()
        || file.section_by_name(".gopclntab").is_some();
    if !go {
        return Vec::new();
    }
    file.symbols()
        .filter(|s| s.size() > 0)
        .filter(|s| s.name().is_ok_and(is_go_root))
        .map(|s| s.address()..s.address().saturating_add(s.size()))
        .collect()
}

/// Whether `name` is one of Go's outermost functions ([`go_roots`]), with
/// or without the `.abi0` suffix of assembly functions.
fn is_go_root(name: &str) -> bool {
    let name = name.strip_suffix(".abi0").unwrap_or(name);
    matches!(
        name,
        "runtime.goexit"
            | "runtime.mstart"
            | "runtime.rt0_go"
            | "runtime.systemstack"
            | "runtime.mcall"
            | "runtime.morestack"
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn go_stacks_start_in_the_runtime_s_outermost_functions() {
        assert!(is_go_root("runtime.goexit.abi0"));
        assert!(is_go_root("runtime.goexit"));
        assert!(is_go_root("runtime.systemstack.abi0"));
        assert!(is_go_root("runtime.mstart.abi0"));
        // Called by them, not under them.
        assert!(!is_go_root("runtime.goexit1"));
        assert!(!is_go_root("runtime.mstart0"));
        assert!(!is_go_root("runtime.systemstack_switch"));
        assert!(!is_go_root("main.main"));
    }
}
