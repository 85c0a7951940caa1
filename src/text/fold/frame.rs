//! Turning one parsed frame line into the frame names that appear in a
//! collapsed stack: offset stripping, Rust symbol repair, Java `->` inline
//! splitting, `[dso]` fallbacks for unknown symbols, generic tidying and the
//! `_[k]`/`_[j]`/`_[i]` annotations. Runs only on a frame-cache miss, so it
//! may allocate. Knows nothing about samples or files.

use std::borrow::Cow;

use crate::text::perf_script::{is_kernel, strip_offset, FrameLine};

/// What a frame line contributes to its stack.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub(crate) struct FrameNames {
    /// Frame names in the line's textual order (more than one only for Java
    /// inline chains `a->b->c`). Empty when the frame is skipped.
    pub names: Vec<String>,
    /// The symbol matched a `--skip-after` name: drop the callers.
    pub skip_after: bool,
}

/// Settings that change how frame names are made.
#[derive(Debug, Clone, Copy)]
pub(crate) struct FrameSettings {
    pub include_addrs: bool,
    pub annotate_kernel: bool,
    pub annotate_jit: bool,
    /// Keep frames whose symbol starts with `(` (inferno drops them, which
    /// deletes `(anonymous namespace)::f`); only `(/path...)` is dropped.
    pub keep_paren_frames: bool,
    /// Count `//anon` (the native symbolizer's name for anonymous executable
    /// memory with no JIT snapshot) as JIT code for `_[j]`. inferno does not,
    /// so `--compat inferno` turns it off.
    pub anon_is_jit: bool,
}

/// Builds the frame names for one frame line. `java` is whether the sample's
/// process name starts with `java`.
pub(crate) fn frame_names(
    f: &FrameLine<'_>,
    java: bool,
    s: &FrameSettings,
    skip_after: &[String],
) -> FrameNames {
    let rawfunc = strip_offset(f.rawfunc);
    if rawfunc.starts_with('(') && (!s.keep_paren_frames || rawfunc.starts_with("(/")) {
        return FrameNames::default();
    }
    let rawfunc = repair_rust_symbol(rawfunc);
    let mut names = Vec::with_capacity(1);
    for (i, part) in rawfunc.split("->").enumerate() {
        let mut name = tidy_generic(&unknown_fallback(f.module, part, f.pc, s.include_addrs));
        if java {
            tidy_java(&mut name);
        }
        if i > 0 {
            if !name.contains("_[i]") {
                name.push_str("_[i]");
            }
        } else if s.annotate_kernel && is_kernel(f.module) {
            name.push_str("_[k]");
        } else if s.annotate_jit && is_jit(f.module, s.anon_is_jit) && !name.contains("_[j]") {
            name.push_str("_[j]");
        }
        names.push(name);
    }
    let skip_after = skip_after.iter().any(|s| s.as_str() == rawfunc.as_ref());
    FrameNames { names, skip_after }
}

/// The frame names of line `line` of a structured frame at `pc` (its
/// address in hex), as [`frame_names`] makes them from the line the
/// frame prints (`crate::symbolize::sample::Frame::write_text`): what the
/// text's frame parser reads of it.
pub(crate) fn line_names(
    pc: &str,
    line: &crate::symbolize::sample::Line,
    java: bool,
    s: &FrameSettings,
    skip_after: &[String],
) -> FrameNames {
    let rawfunc = match line.symbol.trim() {
        "" => " ",
        sym => sym,
    };
    let f = FrameLine {
        pc,
        rawfunc,
        module: &line.module,
    };
    frame_names(&f, java, s, skip_after)
}

/// `[unknown]` symbols become `[dso-basename]` (or `[unknown <addr>]` /
/// `[dso <addr>]` with `--addrs`).
fn unknown_fallback<'a>(
    module: &str,
    func: &'a str,
    pc: &str,
    include_addrs: bool,
) -> Cow<'a, str> {
    if func != "[unknown]" {
        return Cow::Borrowed(func);
    }
    let base = match (module, include_addrs) {
        ("[unknown]", true) => "unknown",
        ("[unknown]", false) => return Cow::Borrowed(func),
        (m, _) => &m[m.rfind('/').map_or(0, |i| i + 1)..],
    };
    Cow::Owned(if include_addrs {
        format!("[{base} <{pc}>]")
    } else {
        format!("[{base}]")
    })
}

/// `;` becomes `:` (it separates frames) and a top-level argument list is
/// cut, except Go's `.(*T)` receivers and C++ `(anonymous namespace)`;
/// parentheses inside `<>`, `{}` and `[]` are kept.
pub(crate) fn tidy_generic(func: &str) -> String {
    let func = func.replace(';', ":");
    let mut depth: i64 = 0;
    let mut after_dot: Option<usize> = None;
    let mut cut = func.len();
    for (i, c) in func.char_indices() {
        match c {
            '<' | '{' | '[' => depth += 1,
            '>' | '}' | ']' | ')' => depth -= 1,
            '(' => {
                if depth == 0 {
                    let go_receiver = after_dot == Some(i);
                    let anon = func[i..].starts_with("(anonymous namespace)");
                    if !go_receiver && !anon {
                        cut = i;
                        break;
                    }
                }
                depth += 1;
            }
            '.' => after_dot = Some(i + 1),
            _ => {}
        }
    }
    let mut func = func;
    func.truncate(cut);
    func
}

/// Java class descriptors `Lorg/foo/Bar;` lose their leading `L`.
fn tidy_java(name: &mut String) {
    if name.starts_with('L') && name.contains('/') {
        name.remove(0);
    }
}

fn is_jit(module: &str, anon_is_jit: bool) -> bool {
    (module.starts_with("/tmp/perf-") && module.ends_with(".map"))
        // The native symbolizer's name for it without a JIT snapshot.
        || (anon_is_jit && module == "//anon")
        || (module.contains("/jitted-") && module.ends_with(".so"))
}

/// Finishes demangling legacy Rust symbols that a profiler left half-mangled
/// (`_$LT$foo..Bar$GT$::baz::h0123456789abcdef` -> `<foo::Bar>::baz`).
/// Anything without a trailing `::h` + 16 hex digits hash is returned as is.
pub(crate) fn repair_rust_symbol(sym: &str) -> Cow<'_, str> {
    const HASH_LEN: usize = 17;
    if sym.len() < HASH_LEN || !sym.is_char_boundary(sym.len() - HASH_LEN) {
        return Cow::Borrowed(sym);
    }
    let hash = &sym[sym.len() - HASH_LEN..];
    if !(hash.starts_with('h') && hash[1..].bytes().all(|b| b.is_ascii_hexdigit())) {
        return Cow::Borrowed(sym);
    }
    let mut rest = &sym[..sym.len() - HASH_LEN];
    if let Some(r) = rest.strip_suffix("::") {
        rest = r;
    }
    if rest.starts_with("_$") {
        rest = &rest[1..];
    }
    const ESCAPES: [(&str, &str); 20] = [
        ("$SP$", "@"),
        ("$BP$", "*"),
        ("$RF$", "&"),
        ("$LT$", "<"),
        ("$GT$", ">"),
        ("$LP$", "("),
        ("$RP$", ")"),
        ("$C$", ","),
        ("$u7e$", "~"),
        ("$u20$", " "),
        ("$u27$", "'"),
        ("$u3d$", "="),
        ("$u5b$", "["),
        ("$u5d$", "]"),
        ("$u7b$", "{"),
        ("$u7d$", "}"),
        ("$u3b$", ";"),
        ("$u2b$", "+"),
        ("$u21$", "!"),
        ("$u22$", "\""),
    ];
    let mut out = String::with_capacity(rest.len());
    while !rest.is_empty() {
        if let Some(r) = rest.strip_prefix('.') {
            if let Some(r2) = r.strip_prefix('.') {
                out.push_str("::");
                rest = r2;
            } else {
                out.push('.');
                rest = r;
            }
        } else if rest.starts_with('$') {
            match ESCAPES.iter().find(|(pat, _)| rest.starts_with(pat)) {
                Some((pat, rep)) => {
                    out.push_str(rep);
                    rest = &rest[pat.len()..];
                }
                None => {
                    out.push_str(rest);
                    break;
                }
            }
        } else {
            let end = rest.find(['$', '.']).unwrap_or(rest.len());
            out.push_str(&rest[..end]);
            rest = &rest[end..];
        }
    }
    Cow::Owned(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tidy_generic_cases() {
        for (input, want) in [
            (
                "go/build.(*importReader).readByte",
                "go/build.(*importReader).readByte",
            ),
            ("foo<Vec::<usize>>(Vec<usize>)", "foo<Vec::<usize>>"),
            (".run()V", ".run"),
            ("base(BasicType) const", "base"),
            (
                "std::function<void (int, int)>::operator(int, int)",
                "std::function<void (int, int)>::operator",
            ),
            (
                "{lambda(int, int)#2}::operator()",
                "{lambda(int, int)#2}::operator",
            ),
            (
                "(anonymous namespace)::myBar()",
                "(anonymous namespace)::myBar",
            ),
            ("[(foo)]::bar()", "[(foo)]::bar"),
            ("a;b", "a:b"),
        ] {
            assert_eq!(tidy_generic(input), want, "{input}");
        }
    }

    #[test]
    fn rust_repair() {
        assert_eq!(
            repair_rust_symbol("_$LT$grep_searcher..searcher..glue..ReadByLine$LT$$u27$s$C$$u20$M$C$$u20$R$C$$u20$S$GT$$GT$::run::h30ecedc997ad7e32"),
            "<grep_searcher::searcher::glue::ReadByLine<'s, M, R, S>>::run"
        );
        assert_eq!(repair_rust_symbol("main"), "main");
        // A multi-byte character where the hash would start must not panic.
        let s = format!("{}{}", "é".repeat(9), "x");
        assert_eq!(repair_rust_symbol(&s), s.as_str());
    }

    #[test]
    fn paren_frames() {
        let line = FrameLine {
            pc: "1",
            rawfunc: "(anonymous namespace)::f()",
            module: "/bin/x",
        };
        let mut s = FrameSettings {
            include_addrs: false,
            annotate_kernel: false,
            annotate_jit: false,
            keep_paren_frames: false,
            anon_is_jit: true,
        };
        assert!(frame_names(&line, false, &s, &[]).names.is_empty());
        s.keep_paren_frames = true;
        assert_eq!(
            frame_names(&line, false, &s, &[]).names,
            vec!["(anonymous namespace)::f"]
        );
        let path = FrameLine {
            pc: "1",
            rawfunc: "(/usr/bin/x)",
            module: "/bin/x",
        };
        assert!(frame_names(&path, false, &s, &[]).names.is_empty());
    }

    #[test]
    fn unknown_and_annotations() {
        let s = FrameSettings {
            include_addrs: true,
            annotate_kernel: true,
            annotate_jit: true,
            keep_paren_frames: true,
            anon_is_jit: true,
        };
        let f = FrameLine {
            pc: "ff12",
            rawfunc: "[unknown]",
            module: "/usr/lib/libc.so.6",
        };
        assert_eq!(
            frame_names(&f, false, &s, &[]).names,
            vec!["[libc.so.6 <ff12>]"]
        );
        let k = FrameLine {
            pc: "1",
            rawfunc: "schedule+0x10",
            module: "[kernel.kallsyms]",
        };
        assert_eq!(frame_names(&k, false, &s, &[]).names, vec!["schedule_[k]"]);
        let j = FrameLine {
            pc: "1",
            rawfunc: "Lfoo/Bar;::baz->Lfoo/Qux;::quux",
            module: "/tmp/perf-1.map",
        };
        assert_eq!(
            frame_names(&j, true, &s, &[]).names,
            vec!["foo/Bar:::baz_[j]", "foo/Qux:::quux_[i]"]
        );
    }
}
