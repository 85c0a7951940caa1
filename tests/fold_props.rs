//! Property tests on generated `perf script`-like input: compat output is
//! inferno's, and no output depends on thread count or chunk size.

use proptest::prelude::*;

use jobprof::text::fold::{Compat, Options};

use crate::fold::{inferno_fold, jobprof_fold};

fn comm() -> impl Strategy<Value = &'static str> {
    prop::sample::select(vec![
        "worker",
        "java",
        "opt cgu.00",
        ":-1",
        "*3AnalysisServi",
        "V8 WorkerThread",
        "ksoftirqd/3",
        "héllo",
    ])
}

fn ids() -> impl Strategy<Value = String> {
    prop_oneof![
        (1u32..50).prop_map(|t| t.to_string()),
        (1u32..5, 1u32..50).prop_map(|(p, t)| format!("{p}/{t}")),
        Just("-1".to_string()),
    ]
}

fn event() -> impl Strategy<Value = &'static str> {
    prop::sample::select(vec![
        "cpu-clock:",
        "cpu-clock:ppp:",
        "cycles:u:",
        "page-faults:",
        "syscalls:sys_enter_openat: dfd: 0xffffff9c, filename: 0x7f",
        "sched:sched_switch: prev_comm=a ==> next_comm=b",
        "cpu-clock:  ffffffff81000000 native_safe_halt ([kernel.kallsyms])",
        "",
    ])
}

fn header() -> impl Strategy<Value = String> {
    (
        comm(),
        ids(),
        prop::option::of(0u8..4),
        prop::option::of(1u64..100_000),
        event(),
    )
        .prop_map(|(c, id, cpu, period, ev)| {
            let cpu = cpu.map(|c| format!(" [{c:03}]")).unwrap_or_default();
            let period = period.map(|p| format!(" {p:>10}")).unwrap_or_default();
            format!("{c} {id}{cpu} 123.456789:{period} {ev}")
        })
}

fn frame() -> impl Strategy<Value = String> {
    let sym = prop::sample::select(vec![
        "main",
        "do_work+0x1f",
        "(anonymous namespace)::scan(int)+0x10",
        "(/usr/bin/old)",
        "[unknown]",
        "std::function<void (int)>::operator()(int) const",
        "<alloc::vec::Vec<T> as core::ops::Drop>::drop+0x2",
        "_$LT$foo..Bar$GT$::baz::h0123456789abcdef",
        "Lorg/x/Y;::call->Lorg/x/Z;::inl",
        "go/build.(*importReader).readByte",
        "a;b",
        "",
        "native_safe_halt",
        "ünïcode_fn",
    ]);
    let dso = prop::sample::select(vec![
        "(/usr/lib/libc.so.6)",
        "([kernel.kallsyms])",
        "([unknown])",
        "(/tmp/perf-42.map)",
        "(inlined)",
        "(/opt/my app/lib.so)",
        "(/lib/modules/x.ko)",
    ]);
    let weird = prop::sample::select(vec![
        "\tnot a frame",
        "# a comment",
        "   ",
        "\r",
        "\u{a0}",
        "\u{85}x",
        "garbage",
        "  src/file.c:12",
    ]);
    prop_oneof![
        8 => (0u64..0xffff_ffff, sym, dso).prop_map(|(pc, s, d)| format!("\t{pc:>16x} {s} {d}")),
        1 => weird.prop_map(str::to_string),
    ]
}

fn sample() -> impl Strategy<Value = String> {
    sample_with_blank(0.9)
}

fn sample_with_blank(p_blank: f64) -> impl Strategy<Value = String> {
    (
        header(),
        prop::collection::vec(frame(), 0..8),
        prop::bool::weighted(p_blank),
    )
        .prop_map(|(h, frames, blank)| {
            let mut s = h;
            s.push('\n');
            for f in frames {
                s.push_str(&f);
                s.push('\n');
            }
            if blank {
                s.push('\n');
            }
            s
        })
}

fn input() -> impl Strategy<Value = Vec<u8>> {
    (
        prop::collection::vec(sample(), 0..25),
        prop::option::of(prop::collection::vec(any::<u8>(), 0..20)),
        any::<bool>(),
    )
        .prop_map(|(samples, junk, cut)| {
            let mut b = samples.concat().into_bytes();
            if let Some(j) = junk {
                b.extend_from_slice(&j);
            }
            if cut && b.len() > 3 {
                b.truncate(b.len() - 3);
            }
            b
        })
}

fn options() -> impl Strategy<Value = Options> {
    (
        any::<bool>(),
        any::<bool>(),
        any::<bool>(),
        any::<bool>(),
        any::<bool>(),
        prop::option::of(prop::sample::select(vec![
            "cpu-clock",
            "cycles",
            "syscalls",
        ])),
        any::<bool>(),
    )
        .prop_map(|(pid, tid, k, j, addrs, ev, skip)| {
            let mut o = Options::default();
            o.include_pid = pid;
            o.include_tid = tid;
            o.annotate_kernel = k;
            o.annotate_jit = j;
            o.include_addrs = addrs;
            o.event_filter = ev.map(str::to_string);
            o.skip_after = if skip { vec!["main".into()] } else { vec![] };
            o
        })
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 400, ..ProptestConfig::default() })]

    #[test]
    fn compat_output_is_inferno_output(data in input(), opts in options()) {
        // Where inferno crashes (no event in the first sample) there is no
        // output to match; see src/text/compat.rs.
        let Some(want) = crate::fold::inferno_fold_checked(&data, &opts, 1) else {
            return Ok(());
        };
        let mut compat = opts.clone();
        compat.compat = Compat::Inferno;
        prop_assert_eq!(jobprof_fold(&data, &compat, 1, 1 << 20), want.clone());
        prop_assert_eq!(jobprof_fold(&data, &compat, 3, 7), want);
    }

    #[test]
    fn output_does_not_depend_on_threads_or_chunks(data in input(), opts in options(), chunk in 1usize..400) {
        let one = jobprof_fold(&data, &opts, 1, 1 << 20);
        prop_assert_eq!(jobprof_fold(&data, &opts, 2, chunk), one.clone());
        prop_assert_eq!(jobprof_fold(&data, &opts, 4, chunk / 3 + 1), one);
    }

    #[test]
    fn default_mode_never_loses_a_sample_inferno_keeps(samples in prop::collection::vec(sample_with_blank(1.0), 0..25)) {
        // Well-formed perf output only: every sample ends with a blank line,
        // ids are positive (inferno misreads `-1` into a garbage stack), and
        // a header that carries its one frame (`-F ...,ip,sym` without
        // callchains) has no frame lines below it: inferno reads those as
        // headers of made-up samples, jobprof reports them as frames whose
        // header is missing. Blank lines only end samples (a
        // whitespace-only line inside one would cut it in two the same way).
        let data: Vec<u8> = samples
            .iter()
            .filter(|s| !s.contains(" -1 "))
            .map(|s| {
                let mut lines = s.lines().filter(|l| !l.trim().is_empty());
                let header = lines.next().unwrap_or("");
                let mut out = format!("{header}\n");
                if !header.ends_with(')') {
                    lines.for_each(|l| out.push_str(&format!("{l}\n")));
                }
                out.push('\n');
                out
            })
            .collect::<String>()
            .into_bytes();
        // Every stack inferno emits carries weight that jobprof also counts.
        let mut opts = Options::default();
        opts.event_filter = Some("cpu-clock".into());
        let inferno_total: u64 = total(&inferno_fold(&data, &opts, 1));
        let ours = total(&jobprof_fold(&data, &opts, 2, 64));
        prop_assert!(ours >= inferno_total, "jobprof {} < inferno {}", ours, inferno_total);
    }
}

/// The samples of `pool` in the order `picks` names them, as one input.
fn joined(pool: &[String], picks: &[usize]) -> Vec<u8> {
    picks
        .iter()
        .map(|&i| pool[i].as_str())
        .collect::<String>()
        .into_bytes()
}

/// Samples drawn over and over from a small pool, so that whole frame
/// blocks repeat (what the folder's block cache is for): the pool and the
/// sequence of picks.
fn repeated(p_blank: f64) -> impl Strategy<Value = (Vec<String>, Vec<usize>)> {
    (
        prop::collection::vec(sample_with_blank(p_blank), 1..4),
        prop::collection::vec(0usize..4, 0..40),
    )
        .prop_map(|(pool, picks)| {
            let picks = picks.into_iter().map(|i| i % pool.len()).collect();
            (pool, picks)
        })
}

/// `stack -> count` of folded output.
fn counts(folded: &[u8]) -> std::collections::BTreeMap<String, u64> {
    let mut m = std::collections::BTreeMap::new();
    for l in String::from_utf8_lossy(folded).lines() {
        if let Some((stack, n)) = l.rsplit_once(' ') {
            *m.entry(stack.to_string()).or_default() += n.parse::<u64>().unwrap();
        }
    }
    m
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 300, ..ProptestConfig::default() })]

    #[test]
    fn repeated_blocks_compat_is_inferno((pool, picks) in repeated(0.9), opts in options()) {
        let data = joined(&pool, &picks);
        let Some(want) = crate::fold::inferno_fold_checked(&data, &opts, 1) else {
            return Ok(());
        };
        let mut compat = opts.clone();
        compat.compat = Compat::Inferno;
        prop_assert_eq!(jobprof_fold(&data, &compat, 1, 1 << 20), want.clone());
        prop_assert_eq!(jobprof_fold(&data, &compat, 2, 97), want);
    }

    #[test]
    fn repeated_blocks_fold_as_each_sample_alone((pool, picks) in repeated(1.0), opts in options()) {
        // Every sample ends with a blank line (shrinking may have dropped
        // it) and the event is given (by default the first one seen picks
        // it): folding the sequence is the sum of folding each sample on
        // its own, where nothing repeats.
        let pool: Vec<String> = pool
            .into_iter()
            .map(|s| if s.ends_with("\n\n") { s } else { s + "\n" })
            .collect();
        let mut opts = opts;
        opts.event_filter.get_or_insert_with(|| "cpu-clock".into());
        let data = joined(&pool, &picks);
        let mut want = std::collections::BTreeMap::new();
        for &i in &picks {
            for (stack, n) in counts(&jobprof_fold(pool[i].as_bytes(), &opts, 1, 1 << 20)) {
                *want.entry(stack).or_insert(0u64) += n;
            }
        }
        prop_assert_eq!(counts(&jobprof_fold(&data, &opts, 1, 1 << 20)), want.clone());
        prop_assert_eq!(counts(&jobprof_fold(&data, &opts, 2, 211)), want);
    }
}

fn total(folded: &[u8]) -> u64 {
    String::from_utf8_lossy(folded)
        .lines()
        .filter_map(|l| l.rsplit_once(' ').and_then(|(_, c)| c.parse::<u64>().ok()))
        .sum()
}
