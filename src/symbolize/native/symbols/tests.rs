//! Unit tests of `symbols`, beside it so that its own file stays short.

use super::*;

fn sym(start: u64, size: u64, binding: Binding, name: &str) -> RawSymbol {
    RawSymbol {
        start,
        size,
        binding,
        untyped: false,
        name: name.into(),
        module: None,
    }
}

#[test]
fn the_name_arena_is_allocated_once_at_its_size() {
    // _polars_runtime.abi3.so: 125,431 functions, 32 MiB of names. An
    // arena grown by doubling reached 64 MiB and held the old 32 MiB
    // beside it while it moved.
    let syms: Vec<RawSymbol> = (0..5000u64)
        .map(|i| {
            sym(
                i * 16,
                16,
                Binding::Global,
                &format!("f{i}_{}", "x".repeat(200)),
            )
        })
        .collect();
    let want: usize = syms.iter().map(|s| s.name.len()).sum();
    let t = SymbolTable::build(syms, false);
    assert_eq!(t.names.len(), want);
    assert_eq!(
        t.names.capacity(),
        want,
        "one allocation of the names' size"
    );
    assert_eq!(t.syms.capacity(), t.syms.len());
}

#[test]
fn aliases_resolved_as_perf_does() {
    let t = SymbolTable::build(
        vec![
            sym(0x100, 0x10, Binding::Weak, "write"),
            sym(0x100, 0x10, Binding::Global, "__libc_write"),
            sym(0x100, 0x10, Binding::Local, "__GI___libc_write"),
            sym(0x200, 0, Binding::Global, "unsized"),
            sym(0x200, 8, Binding::Local, "_sized"),
            sym(0x300, 4, Binding::Global, "tail"),
            sym(0x400, 4, Binding::Global, "start@@V_2.34"),
            sym(0x400, 4, Binding::Global, "start@V_2.2.5"),
            // Equal mangled lengths; the longer demangled name wins.
            sym(
                0x500,
                4,
                Binding::Global,
                "_RNvXsd_NtNtNtCs1_4core3fmt3num3impyNtB9_7Display3fmt",
            ),
            sym(
                0x500,
                4,
                Binding::Global,
                "_RNvXsi_NtNtNtCs1_4core3fmt3num3impjNtB9_7Display3fmt",
            ),
        ],
        false,
    );
    assert_eq!(t.find(0x104).unwrap().name, "__libc_write");
    assert_eq!(t.find(0x104).unwrap().offset, 4);
    assert!(t.find(0x110).is_none(), "past the end of a sized symbol");
    assert_eq!(t.find(0x207).unwrap().name, "_sized");
    assert!(t.find(0x208).is_none());
    assert!(t.find(0x50).is_none());
    assert_eq!(t.find(0x303).unwrap().name, "tail");
    assert_eq!(t.find(0x401).unwrap().name, "start@@V_2.34");
    assert_eq!(
        demangle(t.find(0x501).unwrap().name),
        "<usize as core::fmt::Display>::fmt"
    );
}

#[test]
fn names_that_tie_but_for_their_demangled_form_are_decided_on_the_first_lookup() {
    // A C++ constructor's C1 and C2 symbols (one size, both global):
    // perf keeps the longer demangled name, equal here, so the first.
    // libvelox.so has 26,000 such groups; demangling every one while
    // building its table took 8 s.
    let t = SymbolTable::build(
        vec![
            sym(0x100, 0x10, Binding::Global, "_ZN2ns3FooC2Ev"),
            sym(0x100, 0x10, Binding::Global, "_ZN2ns3FooC1Ev"),
            sym(0x200, 0x10, Binding::Weak, "_Z1wv"),
            sym(0x200, 0x10, Binding::Global, "_ZN2ns1gEv"),
            sym(0x300, 0x8, Binding::Global, "__x"),
            sym(0x300, 0x8, Binding::Global, "_x"),
        ],
        false,
    );
    // Binding decides 0x200 while building; 0x100 and 0x300 wait.
    assert_eq!(t.groups.len(), 2);
    assert!(
        t.groups.iter().all(|g| g.get().is_none()),
        "nothing decided"
    );
    assert_eq!(t.find(0x204).unwrap().name, "_ZN2ns1gEv");
    assert!(t.groups.iter().all(|g| g.get().is_none()));
    assert_eq!(t.find(0x104).unwrap().name, "_ZN2ns3FooC2Ev");
    assert!(t.groups[0].get().is_some(), "decided by the lookup");
    assert!(t.groups[1].get().is_none());
    // Fewer leading underscores.
    assert_eq!(t.find(0x307).unwrap().name, "_x");
    assert!(t.find(0x308).is_none());
    // The cache keeps them undecided, and they decide the same.
    let mut bytes = Vec::new();
    t.encode(&mut bytes);
    let back = SymbolTable::decode(&mut crate::symbolize::native::cache::Cursor::new(&bytes))
        .expect("decodes");
    assert!(back.groups.iter().all(|g| g.get().is_none()));
    assert_eq!(back.find(0x100).unwrap().name, "_ZN2ns3FooC2Ev");
    assert_eq!(back.find(0x300).unwrap().name, "_x");
}

#[test]
fn candidates_of_different_sizes_are_decided_while_building() {
    // The end depends on the pick: decided at once.
    let t = SymbolTable::build(
        vec![
            sym(0x100, 0x8, Binding::Global, "_ZN1a5shortEv"),
            sym(0x100, 0x20, Binding::Global, "_ZN1a11much_longerEv"),
        ],
        false,
    );
    assert!(t.groups.is_empty());
    assert_eq!(t.find(0x11f).unwrap().name, "_ZN1a11much_longerEv");
    assert!(t.find(0x120).is_none());
}

#[test]
fn plt_entries_are_named_on_their_first_lookup() {
    // libvelox.so has 65,000 PLT entries; demangling every target's
    // name while building the table took most of its time.
    let mut raw = RawSymbols::default();
    raw.push(0x1000, 0x40, Binding::Global, false, "main");
    raw.push_plt(0x200, 0x10, "_ZN5arrow6Status8ToStringB5cxx11Ev");
    raw.push_plt(0x210, 0x10, "memcpy");
    // One at another symbol's address is named at once, to compare.
    raw.push_plt(0x220, 0x10, "_ZN1a1fEv");
    raw.push(0x220, 0x10, Binding::Weak, false, "f_alias");
    let t = SymbolTable::build_from(raw);
    assert_eq!(t.plts.len(), 2);
    assert!(
        t.plts.iter().all(|p| p.name.get().is_none()),
        "none named yet"
    );
    assert_eq!(t.find(0x214).unwrap().name, "memcpy@plt");
    assert!(t.plts[0].name.get().is_none());
    let h = t.find(0x20f).unwrap();
    assert_eq!(
        (h.name, h.offset),
        ("arrow::Status::ToString[abi:cxx11]@plt", 0xf)
    );
    assert_eq!(t.find(0x221).unwrap().name, "a::f@plt");
    assert_eq!(t.find(0x1001).unwrap().name, "main");
    let mut bytes = Vec::new();
    t.encode(&mut bytes);
    let back = SymbolTable::decode(&mut crate::symbolize::native::cache::Cursor::new(&bytes))
        .expect("decodes");
    assert!(back.plts.iter().all(|p| p.name.get().is_none()));
    assert_eq!(back.find(0x214).unwrap().name, "memcpy@plt");
    // A damaged PLT name is refused.
    let at = bytes.len() - 4;
    bytes[at..].copy_from_slice(&u32::MAX.to_le_bytes());
    assert!(
        SymbolTable::decode(&mut crate::symbolize::native::cache::Cursor::new(&bytes)).is_none()
    );
}

#[test]
fn a_plt_name_is_cut_where_perf_cuts_it() {
    // perf 6.1 prints `name@plt` into 1024 bytes: libvelox.so's PLT entry
    // for folly's `UnboundedQueue<...>::Segment::push_links<...>` (1,100
    // bytes demangled) is 1,023 bytes in perf script, no `@plt`.
    let long = format!("f{}", "x".repeat(1100));
    let mut raw = RawSymbols::default();
    raw.push_plt(0x200, 0x10, &long);
    raw.push_plt(0x210, 0x10, &long[..1019]);
    let t = SymbolTable::build_from(raw);
    assert_eq!(t.find(0x200).unwrap().name, &long[..1023]);
    // One that fits keeps its `@plt`.
    assert_eq!(
        t.find(0x210).unwrap().name,
        format!("{}@plt", &long[..1019])
    );
}

#[test]
fn binutils_names_an_address_of_folded_code_by_its_first_symbol() {
    let mut label = sym(0x300, 0, Binding::Global, "a_label");
    label.untyped = true;
    let t = SymbolTable::build(
        vec![
            // pyarrow's libarrow.so.2600: four local aliases, one size.
            sym(0x100, 0x80, Binding::Local, "b_float_layout"),
            sym(0x100, 0x80, Binding::Local, "c_uint32_layout_longest"),
            sym(0x100, 0x80, Binding::Local, "d_list_layout"),
            sym(0x200, 0x10, Binding::Global, "alone"),
            label,
            sym(0x300, 0x10, Binding::Local, "the_function"),
            sym(0x400, 0x4, Binding::Local, "s"),
            sym(0x400, 0x10, Binding::Local, "a_long_one"),
            sym(0x500, 0x8, Binding::Local, "the_longest_first"),
            sym(0x500, 0x8, Binding::Local, "short"),
        ],
        false,
    );
    // A group binutils names as perf does: nothing to say.
    assert_eq!(t.bfd_name(0x504), None);
    // perf keeps the longest name; binutils the first listed.
    assert_eq!(t.find(0x140).unwrap().name, "c_uint32_layout_longest");
    assert_eq!(t.bfd_name(0x140), Some("b_float_layout"));
    // One symbol at its address, or binutils agrees: nothing to say.
    assert_eq!(t.bfd_name(0x208), None);
    assert_eq!(t.bfd_name(0x50), None);
    // A function over a label.
    assert_eq!(t.find(0x304).unwrap().name, "the_function");
    assert_eq!(t.bfd_name(0x304), None);
    // One that reaches the address over one that does not; else the
    // smaller.
    assert_eq!(t.find(0x40c).unwrap().name, "a_long_one");
    assert_eq!(t.bfd_name(0x40c), None);
    assert_eq!(t.bfd_name(0x402), Some("s"));
    // The persistent cache keeps them.
    let mut bytes = Vec::new();
    t.encode(&mut bytes);
    let back = SymbolTable::decode(&mut crate::symbolize::native::cache::Cursor::new(&bytes))
        .expect("decodes");
    assert_eq!(back.bfd_name(0x140), Some("b_float_layout"));
    assert_eq!(back.bfd_name(0x402), Some("s"));
    // A damaged alias name is refused (the last alias, before the
    // PLT entries' count).
    let at = bytes.len() - 8 - 5;
    bytes[at - 4..at].copy_from_slice(&u32::MAX.to_le_bytes());
    assert!(
        SymbolTable::decode(&mut crate::symbolize::native::cache::Cursor::new(&bytes)).is_none()
    );
}

#[test]
fn kallsyms_types_modules_and_ends() {
    let t = parse_kallsyms(
        "ffffffff81000000 T _text\nffffffff81000100 t do_one\n\
         ffffffff81000100 T __do_one\nffffffff81000200 r ro_data\n\
         ffffffffc0000000 t nvme_irq\t[nvme]\n0000000000000000 A fixed_percpu_data\n",
    );
    assert_eq!(t.find(0xffffffff81000180).unwrap().name, "__do_one");
    assert_eq!(t.find(0xffffffff81000010).unwrap().name, "_text");
    // `r` is not kept: do_one's range runs on to the next kept symbol.
    assert_eq!(t.find(0xffffffff81000250).unwrap().name, "__do_one");
    let m = t.find(0xffffffffc0000004).unwrap();
    assert_eq!((m.name, m.module), ("nvme_irq", Some("[nvme]")));
    assert!(parse_kallsyms("0000000000000000 T _text\n").is_empty());
}

#[test]
fn kallsyms_streams_skips_bad_lines_and_stores_each_module_once() {
    let mut text = b"ffffffff81000000 T _text\n\xff\xfe not utf-8\n".to_vec();
    text.extend_from_slice(b"garbage\nffffffffc0000000 t a\t[nvme]\n");
    text.extend_from_slice(b"ffffffffc0000100 t b\t[nvme]\nffffffffc0000200 T last");
    let t = read_kallsyms(std::io::BufReader::with_capacity(7, &text[..])).unwrap();
    assert_eq!(t.len(), 4);
    assert_eq!(t.modules.len(), 1, "one copy of [nvme]");
    assert_eq!(t.find(0xffffffffc0000104).unwrap().module, Some("[nvme]"));
    assert_eq!(t.find(0xffffffffc0000204).unwrap().name, "last");
    assert_eq!(t.find(0xffffffff81000004).unwrap().module, None);
    // The same answers as the table built from one symbol per line.
    let text = "ffffffff81000010 T b\nffffffff81000000 T a\nffffffff81000010 t c\n\
                ffffffff81000020 W w\nffffffff81000030 d data\n";
    let raw: Vec<RawSymbol> = text
        .lines()
        .map(|l| {
            let f: Vec<&str> = l.split(' ').collect();
            RawSymbol {
                start: u64::from_str_radix(f[0], 16).unwrap(),
                size: 0,
                binding: Binding::Global,
                untyped: false,
                name: f[2].into(),
                module: None,
            }
        })
        .collect();
    let (streamed, built) = (parse_kallsyms(text), SymbolTable::build(raw, true));
    for addr in 0xffffffff80fffff0..0xffffffff81003000u64 {
        let (a, b) = (streamed.find(addr), built.find(addr));
        assert_eq!(a.map(|h| (h.name, h.offset)), b.map(|h| (h.name, h.offset)));
    }
}

#[test]
fn kallsyms_aliases_name_the_last_one_listed() {
    // As perf 6.1 prints them: `__x64_sys_getppid`, though the other
    // name is longer; a local symbol listed last beats a global one.
    let t = parse_kallsyms(
        "ffffffff81377d40 T __ia32_sys_getppid\nffffffff81377d40 T __x64_sys_getppid\n\
         ffffffff81377d80 T glob\nffffffff81377d80 t loc\nffffffff81377dc0 T next\n",
    );
    assert_eq!(
        t.find(0xffffffff81377d44).unwrap().name,
        "__x64_sys_getppid"
    );
    assert_eq!(t.find(0xffffffff81377d84).unwrap().name, "loc");
}
