//! What binutils' `addr2line` calls a DWARF function that has no linkage
//! name (a C++ template instance's `DW_AT_name` only, a lambda's
//! `operator()`), which depends on what it was asked before: perf 6.1
//! keeps one `addr2line` process per DSO for a whole `perf script` run
//! and prints its answers.
//!
//! binutils (`_bfd_dwarf2_find_nearest_line`) names the innermost
//! function at an address from the ELF symbol table when that function
//! has no linkage name, and then marks the function's record as named
//! (`is_linkage`): when the symbol starts at the function's first address
//! (the function that holds the code, as opposed to one inlined into it)
//! the record takes the symbol's name for good; otherwise (an inlined
//! instance) it keeps its DWARF name, which every later lookup prints. The
//! callers of an inlined chain print their records' names as they stand.
//! So perf names `std::__introsort_loop<..., long, ...{lambda(long,
//! long)#1}>` by its symbol once a sample landed in its own code (its
//! recursive calls), where DWARF says `__introsort_loop<..., long int,
//! ...<lambda(long int, long int)>>`; and an inlined lambda by the
//! function's symbol at its first address asked, by `operator()` after.
//! [`Named`] keeps that state; the native symbolizer keeps one per shard
//! and DSO and asks in the shard's sample order, callee first, each
//! address once, as perf does (`super::super::order`).

use std::sync::Mutex;

use rustc_hash::FxHashSet;

/// One addr2line record: its raw name (`None`: no function), whether
/// binutils takes that for a linkage name, and the function's DIE
/// (its unit offset with the name, as the record's identity).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Record {
    pub(in crate::symbolize::native) name: Option<String>,
    pub(in crate::symbolize::native) linkage: bool,
    pub(in crate::symbolize::native) die: Option<usize>,
}

/// binutils' naming state of one DWARF file's functions without linkage
/// names: those already named (`is_linkage` set) and, of those, the ones
/// renamed after their symbol.
#[derive(Debug, Default)]
pub struct Named(Mutex<State>);

#[derive(Debug, Default)]
struct State {
    asked: FxHashSet<(usize, String)>,
    renamed: FxHashSet<(usize, String)>,
}

impl Named {
    /// The names `records` (innermost first, the function holding the code
    /// last) print as, for an address in ELF symbol `symbol` (raw), and
    /// the state after that lookup.
    pub fn names(&self, records: Vec<Record>, symbol: &str) -> Vec<String> {
        let mut st = self.0.lock().unwrap_or_else(|e| e.into_inner());
        let last = records.len().saturating_sub(1);
        let mut out = Vec::with_capacity(records.len());
        for (i, r) in records.into_iter().enumerate() {
            let Some(name) = r.name else {
                // No function (hand-written assembly, some LTO
                // partitions): the innermost is named from the symbols.
                out.push(if i == 0 { symbol } else { "??" }.to_string());
                continue;
            };
            if r.linkage {
                out.push(name);
                continue;
            }
            let key = (r.die.unwrap_or(usize::MAX), name);
            if st.renamed.contains(&key) {
                out.push(symbol.to_string());
            } else if i == 0 && st.asked.insert(key.clone()) {
                if i == last {
                    st.renamed.insert(key);
                }
                out.push(symbol.to_string());
            } else {
                out.push(key.1);
            }
        }
        out
    }
}

/// Whether naming `records` depends on what was asked before: some record
/// names a function by a name binutils does not take for a linkage name.
pub(super) fn ordered(records: &[Record]) -> bool {
    records.iter().any(|r| r.name.is_some() && !r.linkage)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rec(name: &str, linkage: bool, die: usize) -> Record {
        Record {
            name: Some(name.into()),
            linkage,
            die: Some(die),
        }
    }

    #[test]
    fn the_function_holding_the_code_takes_its_symbol_once_met() {
        let n = Named::default();
        let inlined = vec![rec("operator()", false, 2), rec("loop<long int>", false, 1)];
        // Before the function's own code was asked: DWARF's name, and the
        // inlined lambda named by the symbol on its first lookup only.
        assert_eq!(
            n.names(inlined.clone(), "_ZSt4loop"),
            ["_ZSt4loop", "loop<long int>"]
        );
        assert_eq!(
            n.names(inlined.clone(), "_ZSt4loop"),
            ["operator()", "loop<long int>"]
        );
        // An address in the function's own code renames it for good.
        assert_eq!(
            n.names(vec![rec("loop<long int>", false, 1)], "_ZSt4loop"),
            ["_ZSt4loop"]
        );
        assert_eq!(n.names(inlined, "_ZSt4loop"), ["operator()", "_ZSt4loop"]);
        assert_eq!(
            n.names(vec![rec("loop<long int>", false, 1)], "_ZSt4loop"),
            ["_ZSt4loop"]
        );
    }

    #[test]
    fn linkage_names_and_missing_functions() {
        let n = Named::default();
        let none = Record {
            name: None,
            linkage: false,
            die: None,
        };
        let r = vec![none.clone(), none, rec("_ZN1a1fEv", true, 1)];
        assert_eq!(n.names(r, "sym"), ["sym", "??", "_ZN1a1fEv"]);
    }
}
