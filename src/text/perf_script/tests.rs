//! The line parsers' tests: what each reading of a line gives, and the
//! nom grammar held to the hand-written parsers it replaced
//! ([`super::reference`]) on generated lines and on every line of the
//! fixtures and the compatibility suites.

use super::*;
use crate::text::perf_script::reference;

#[test]
fn header_per_process() {
    let h = parse_header_compat("java 25607 4794564.109216: 1 cycles:").unwrap();
    assert_eq!((h.comm, h.pid, h.tid), ("java", "?", "25607"));
    assert_eq!(
        (h.period, h.event, h.trailing),
        (Some(1), Some("cycles"), None)
    );
}

#[test]
fn header_pid_tid_cpu_and_spaces_in_comm() {
    let line = "V8 WorkerThread 24636/25607 [000] 94564.109216:     257597 cycles:uppp:";
    let h = parse_header_compat(line).unwrap();
    assert_eq!(
        (h.comm, h.pid, h.tid),
        ("V8 WorkerThread", "24636", "25607")
    );
    assert_eq!((h.period, h.event), (Some(257597), Some("cycles")));
    assert_eq!(h.trailing, None);
    let f = parse_header_fixed(line).unwrap();
    assert_eq!(f.event, Some("cycles:uppp"));
    assert_eq!(event_base(f.event.unwrap()), "cycles");
}

#[test]
fn header_with_single_frame() {
    let line =
        "false 64414 20110.539270:      34467 cycles:u:  ffffffff9aa3c8de [unknown] ([unknown])";
    let c = parse_header_compat(line).unwrap();
    assert_eq!(c.trailing, Some("ffffffff9aa3c8de [unknown] ([unknown])"));
    let f = parse_header_fixed(line).unwrap();
    assert_eq!(f.trailing, c.trailing);
}

#[test]
fn tracepoint_event_names() {
    let line = "cat 1234 [001] 10.5: 1 syscalls:sys_enter_openat: dfd: 0xffffff9c, filename: 0x7f";
    let c = parse_header_compat(line).unwrap();
    assert_eq!(c.event, Some("syscalls"), "inferno's known mistake");
    assert!(c.trailing.is_some());
    let f = parse_header_fixed(line).unwrap();
    assert_eq!(f.event, Some("syscalls:sys_enter_openat"));
    assert_eq!(
        event_base("syscalls:sys_enter_openat"),
        "syscalls:sys_enter_openat"
    );
    assert_eq!(f.trailing, Some("dfd: 0xffffff9c, filename: 0x7f"));
}

#[test]
fn exiting_task_ids() {
    let line = ":-1    -1 [001] 12.5:     1001 cpu-clock:";
    // inferno takes the period for the id and the rest for the comm.
    let c = parse_header_compat(line).unwrap();
    assert_eq!((c.comm, c.tid), (":-1    -1 [001] 12.5:", "1001"));
    let f = parse_header_fixed(line).unwrap();
    assert_eq!((f.comm, f.pid, f.tid), (":-1", "?", "-1"));
    assert_eq!(f.event, Some("cpu-clock"));
}

#[test]
fn frame_lines() {
    let f = parse_frame_compat("\t7f533952bc77 _dl_check_map_versions+0x597 (/usr/lib/ld-2.28.so)")
        .unwrap();
    assert_eq!(f.pc, "7f533952bc77");
    assert_eq!(strip_offset(f.rawfunc), "_dl_check_map_versions");
    assert_eq!(f.module, "/usr/lib/ld-2.28.so");
    let e = parse_frame_compat("  7f1e2215d058  (/lib/libc-2.15.so)").unwrap();
    assert_eq!(e.rawfunc, " ");
    assert_eq!(parse_frame_compat("garbage"), None);
}

#[test]
fn non_sample_text_is_described() {
    assert!(describe_non_samples(&["a;b;c 10", "a;b 2"])
        .1
        .contains("jobprof render"));
    assert!(describe_non_samples(&["main 7"])
        .0
        .starts_with("folded stacks"));
    assert_eq!(
        describe_non_samples(&["    45.10%  worker  libc.so.6  [.] memcpy"]).0,
        "`perf report` output"
    );
    assert!(describe_non_samples(&["{\"shared\": {}}"])
        .0
        .starts_with("JSON"));
    assert!(describe_non_samples(&["hello world"])
        .0
        .starts_with("text that"));
}

#[test]
fn simpleperf_lines() {
    let line = "RenderThread\t8012 [003] 3125.047371:\t\t250000 cpu-clock:";
    let h = parse_header_fixed(line).unwrap();
    assert_eq!((h.comm, h.pid, h.tid), ("RenderThread", "?", "8012"));
    assert_eq!((h.period, h.event), (Some(250000), Some("cpu-clock")));
    let spaced = "Binder thread #2\t77 [000] 1.000001:\t\t1 cpu-cycles:";
    assert_eq!(parse_header_fixed(spaced).unwrap().comm, "Binder thread #2");
    let frame = "    7f8a2b4c10\tandroid::Looper::pollOnce(int, int*) (/system/lib64/libutils.so)";
    let f = parse_frame_fixed(frame).unwrap();
    assert_eq!(f.pc, "7f8a2b4c10");
    assert_eq!(f.rawfunc, "android::Looper::pollOnce(int, int*)");
    assert_eq!(f.module, "/system/lib64/libutils.so");
    assert_eq!(&frame[after_address(frame).unwrap()..], &frame[15..]);
    let kernel = "ffffffc0100a1b2c\tel0_svc_handler ([kernel.kallsyms])";
    assert_eq!(
        parse_frame_fixed(kernel).unwrap().rawfunc,
        "el0_svc_handler"
    );
    // Frame lines never pass for simpleperf headers.
    assert_eq!(parse_header_simpleperf(kernel), None);
    assert_eq!(parse_header_simpleperf(frame), None);
    assert_eq!(parse_header_simpleperf("a\t12 [x] 1.0:\t\t1 e:"), None);
    // perf's own frame lines are parsed as before.
    let perf = "\t55d0 do_work+0x10 (/opt/bin/worker)";
    assert_eq!(parse_frame_fixed(perf).unwrap().pc, "55d0");
}

#[test]
fn frame_dso_with_spaces() {
    let line = "\t55d0 do_work+0x10 (/opt/my app/bin/worker)";
    assert_eq!(parse_frame_compat(line), None);
    let f = parse_frame_fixed(line).unwrap();
    assert_eq!(
        (f.rawfunc, f.module),
        ("do_work+0x10", "/opt/my app/bin/worker")
    );
    let g = parse_frame_fixed("\t55d0 f(int) (/lib/x.so)").unwrap();
    assert_eq!((g.rawfunc, g.module), ("f(int)", "/lib/x.so"));
}

#[test]
fn offsets() {
    assert_eq!(strip_offset("foo+0x1f"), "foo");
    assert_eq!(strip_offset("foo+0x"), "foo");
    assert_eq!(strip_offset("foo+0xzz"), "foo+0xzz");
    assert_eq!(strip_offset("foo"), "foo");
}

/// Header-shaped text: the pieces the fast path gives meaning to
/// (spaces, colons, digits, slashes, dashes), the ones that make it
/// decline (tabs, non-ASCII), at every length around its 16..=64 window.
fn header_like() -> impl proptest::strategy::Strategy<Value = String> {
    use proptest::prelude::*;
    let piece = prop::sample::select(vec![
        " ",
        " ",
        "  ",
        "    ",
        ":",
        ": ",
        "/",
        "-",
        "-1",
        "1",
        "42",
        "12345678",
        "123456789",
        "99999999999999999999",
        "7/8",
        "[000]",
        "123.456:",
        "cpu-clock",
        "cycles:u",
        "sys:enter",
        "x",
        "V8 Worker",
        "\t",
        "é",
        "+",
        ".",
        "0x7f",
    ]);
    prop::collection::vec(piece, 0..24).prop_map(|v| v.concat())
}

proptest::proptest! {
    #[test]
    fn trims_agree_with_std(
        pieces in proptest::collection::vec(
            proptest::sample::select(vec![" ", "        ", "\t", "\u{a0}", "\u{2003}", "x", "é", "7f00"]),
            0..30,
        )
    ) {
        let s = pieces.concat();
        proptest::prop_assert_eq!(trim_start(&s), s.trim_start());
        proptest::prop_assert_eq!(trim_end(&s), s.trim_end());
    }

}

#[test]
fn id_words_end_the_comm() {
    // The id word is `-?\d+` or `-?\d+/-?\d+` (negative only in the
    // fixed parser); a word with anything else in it belongs to the comm.
    for (line, ids) in [
        ("a 123 1.0: 1 e:", ("?", "123")),
        ("a 12/34 1.0: 1 e:", ("12", "34")),
        ("a 1a 7 1.0: 1 e:", ("?", "7")),
    ] {
        for h in [parse_header_compat(line), parse_header_fixed(line)] {
            assert_eq!(h.map(|h| (h.pid, h.tid)), Some(ids), "{line}");
        }
    }
    let h = parse_header_fixed("a -1/-1 1.0: 1 e:").unwrap();
    assert_eq!((h.comm, h.pid, h.tid), ("a", "-1", "-1"));
    assert_eq!(
        parse_header_fixed("a -1 1.0: 1 e:").map(|h| h.tid),
        Some("-1")
    );
    assert_eq!(parse_header_fixed("a b 1x.0: e:"), None);
}

/// A header the reference parsers would return: they give no stamp.
fn without_cpu_and_time(h: Option<Header<'_>>) -> Option<Header<'_>> {
    h.map(|h| Header { stamp: "", ..h })
}

/// Every reading of `line` by the nom grammar and by the hand-written
/// parsers it replaced, side by side: `Err` names the first that differs.
fn agree(line: &str) -> Result<(), String> {
    let t = trim_end(line);
    let differ = |what: &str| Err(format!("{what} differs on {line:?}"));
    if without_cpu_and_time(parse_header_fixed(line)) != reference::parse_header_fixed(line) {
        return differ("parse_header_fixed");
    }
    if without_cpu_and_time(parse_header_compat(line)) != reference::parse_header_compat(line) {
        return differ("parse_header_compat");
    }
    if without_cpu_and_time(parse_header_simpleperf(line))
        != reference::parse_header_simpleperf(line)
    {
        return differ("parse_header_simpleperf");
    }
    if parse_frame_fixed(t) != reference::parse_frame_fixed(t) {
        return differ("parse_frame_fixed");
    }
    if parse_frame_compat(t) != reference::parse_frame_compat(t) {
        return differ("parse_frame_compat");
    }
    if after_address(line) != reference::after_address(line) {
        return differ("after_address");
    }
    if time_ns(line) != reference::time_ns(line) {
        return differ("time_ns");
    }
    if strip_offset(t) != reference::strip_offset(t) {
        return differ("strip_offset");
    }
    Ok(())
}

/// Frame-shaped text: addresses, symbols with and without offsets, DSO
/// groups (with spaces, nested parentheses, `inlined`), tabs, non-ASCII.
fn frame_like() -> impl proptest::strategy::Strategy<Value = String> {
    use proptest::prelude::*;
    let piece = prop::sample::select(vec![
        "\t",
        " ",
        "    ",
        "7f533952bc77",
        "ffffffff81000000",
        "0x1f",
        "+0x",
        "+0x1f",
        "+0xzz",
        "+",
        "f",
        "a::b",
        "(",
        ")",
        " (",
        "(inlined)",
        "([kernel.kallsyms])",
        "(/opt/my app/x.so)",
        "[unknown]",
        "->",
        "é",
        "\u{a0}",
        ":",
    ]);
    prop::collection::vec(piece, 0..16).prop_map(|v| v.concat())
}

proptest::proptest! {
    #![proptest_config(proptest::prelude::ProptestConfig {
        cases: 20_000, ..proptest::prelude::ProptestConfig::default()
    })]

    #[test]
    fn nom_grammar_reads_headers_as_the_old_parsers(line in header_like()) {
        proptest::prop_assert_eq!(agree(&line), Ok(()));
    }

    #[test]
    fn nom_grammar_reads_frames_as_the_old_parsers(line in frame_like()) {
        proptest::prop_assert_eq!(agree(&line), Ok(()));
    }
}

/// The committed captures and the compatibility suites' inputs: every
/// text that holds perf script lines.
fn fixture_texts() -> Vec<(std::path::PathBuf, String)> {
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR"));
    let mut paths = Vec::new();
    for dir in ["fixtures", "fixtures/arm64"] {
        for e in std::fs::read_dir(root.join(dir)).unwrap() {
            paths.push(e.unwrap().path());
        }
    }
    for suite in ["inferno-0.12.8", "flamegraph-57207af"] {
        // The shared suites are not in every checkout; the fixtures are.
        if let Ok(dir) = std::fs::read_dir(root.join("../shared/compat").join(suite)) {
            paths.extend(dir.map(|e| e.unwrap().path()));
        }
    }
    paths.sort();
    let mut texts = Vec::new();
    for p in paths {
        let name = p.to_string_lossy().into_owned();
        let bytes = if name.ends_with(".txt.zst") {
            zstd::decode_all(std::fs::File::open(&p).unwrap()).unwrap()
        } else if name.ends_with(".txt") && p.is_file() {
            std::fs::read(&p).unwrap()
        } else {
            continue;
        };
        texts.push((p, String::from_utf8_lossy(&bytes).into_owned()));
    }
    texts
}

#[test]
fn nom_grammar_reads_every_fixture_line_as_the_old_parsers() {
    let (mut lines, mut headers, mut frames) = (0, 0, 0);
    for (path, text) in fixture_texts() {
        for line in text.lines() {
            if let Err(e) = agree(line) {
                panic!("{}: {e}", path.display());
            }
            lines += 1;
            let header = parse_header_fixed(line).filter(|_| !line.starts_with(['\t', ' ']));
            if let Some(h) = header {
                // The typed time is the word-search time of every header.
                assert_eq!(h.time_ns(), time_ns(line), "{}: {line:?}", path.display());
            }
            headers += usize::from(header.is_some());
            frames += usize::from(parse_frame_fixed(trim_end(line)).is_some());
        }
    }
    // The fixtures alone hold this many; a test that read nothing fails.
    assert!(lines > 100_000, "{lines} lines");
    assert!(headers > 10_000 && frames > 50_000, "{headers} {frames}");
}

#[test]
fn typed_header_and_frame_values() {
    let h =
        parse_header_fixed("V8 Worker 24636/25607 [003] 94564.109216:  257597 cycles:u:").unwrap();
    assert_eq!((h.cpu(), h.time_ns()), (Some(3), Some(94_564_109_216_000)));
    let h = parse_header_fixed("xz 14733   503.949704:    1001001 cpu-clock:").unwrap();
    assert_eq!((h.cpu(), h.time_ns()), (None, Some(503_949_704_000)));
    let s =
        parse_header_fixed("RenderThread\t8012 [003] 3125.047371:\t\t250000 cpu-clock:").unwrap();
    assert_eq!((s.cpu(), s.time_ns()), (Some(3), Some(3_125_047_371_000)));
    // No time stamp where the first colon is: no time, the rest as before.
    let h = parse_header_fixed("a 1 x: 5 e:").unwrap();
    assert_eq!((h.cpu(), h.time_ns(), h.period), (None, None, Some(5)));

    let f = parse_frame_fixed("\t7f533952bc77 _dl_check+0x597 (/usr/lib/ld-2.28.so)").unwrap();
    assert_eq!(f.address(), Some(0x7f53_3952_bc77));
    assert_eq!((f.symbol(), f.offset()), ("_dl_check", Some(0x597)));
    assert_eq!(f.kind(), FrameKind::User);
    let k = parse_frame_fixed("\tffffffff81b50d8f f+0x16f ([kernel.kallsyms])").unwrap();
    assert_eq!(
        (k.kind(), k.address()),
        (FrameKind::Kernel, Some(0xffff_ffff_81b5_0d8f))
    );
    let i = parse_frame_fixed("\t401136 inner (inlined)").unwrap();
    assert!(i.is_inlined());
    assert_eq!((i.kind(), i.offset()), (FrameKind::Inlined, None));
    let u = parse_frame_fixed("\t7ffe6eedba65 [unknown] ([unknown])").unwrap();
    assert_eq!(u.kind(), FrameKind::Unknown);
    let bare = parse_frame_fixed("\tzz f+0x (/x)").unwrap();
    assert_eq!(
        (bare.address(), bare.symbol(), bare.offset()),
        (None, "f", None)
    );
}

proptest::proptest! {
    #![proptest_config(proptest::prelude::ProptestConfig {
        cases: 20_000, ..proptest::prelude::ProptestConfig::default()
    })]

    #[test]
    fn fast_header_parse_agrees_with_the_grammar(line in header_like()) {
        proptest::prop_assert_eq!(
            parse_header_fixed(&line),
            grammar::header_fixed(&line),
            "line {:?}", line
        );
    }

    #[test]
    fn after_address_fast_path_agrees_with_the_grammar(
        columns in proptest::collection::vec(
            proptest::sample::select(vec![' ', ' ', ' ', 'f', '7', 'x', '\t', '\u{7f}', '\u{a0}']),
            15..=17,
        ),
        tail in frame_like(),
    ) {
        let line = format!("\t{} {tail}", columns.iter().collect::<String>());
        proptest::prop_assert_eq!(after_address(&line), grammar::after_address(&line));
    }

    #[test]
    fn the_cache_keys_offset_cut_is_the_grammars(sym in frame_like(), pad in 0usize..20) {
        // hex_run_back + `+0x`, as the frame-line cache cuts its key.
        let line = format!("{}{sym}", " ".repeat(pad));
        let b = line.as_bytes();
        let hex = hex_run_back(b, b.len()).min(sym.len());
        let head = b.len() - hex;
        let cut = (head >= pad + 3 && &b[head - 3..head] == b"+0x").then(|| head - 3 - pad);
        proptest::prop_assert_eq!(cut, grammar::offset_at(sym.as_bytes()));
    }
}

#[test]
fn fast_header_parse_takes_usual_headers() {
    for line in [
        "xz 14733   503.949704:    1001001 cpu-clock:",
        "rustc 23637 [000]   687.980491:    1001001 cpu-clock:",
        "V8 WorkerThread 24636/25607 [000] 94564.10:  257597 cycles:u:",
        ":-1    -1 [001] 12.5:     1001 cpu-clock:",
        "cat 1234 [001] 10.5: 1 syscalls:sys_enter_openat: dfd: 0x9c",
    ] {
        let fast = header_fast::parse(line);
        assert_eq!(fast, Some(grammar::header_fixed(line)), "{line}");
    }
    let h = parse_header_fixed("a 1 2: 12345678 e:").unwrap();
    assert_eq!(h.period, Some(12_345_678));
    let h = parse_header_fixed("a 1 2:         09 e:").unwrap();
    assert_eq!(h.period, Some(9));
}
