//! Unit tests of `read`, beside it so that its own file stays short.

use super::*;

/// An off-CPU capture's text: a switch-out sample first, then the
/// sampling event's.
const OFF_CPU_TEXT: &str = "w 10 [000] 100.400000: sched:sched_switch: prev_comm=w \
    prev_pid=10 prev_prio=120 prev_state=S ==> next_comm=swapper/0 next_pid=0 \
    next_prio=120\n\t    ffff81 schedule+0x1 ([kernel.kallsyms])\n\n\
    w 10 [000] 100.500000:     250 cpu-clock: \n\t    1159 burn+0x19 (/opt/w)\n\n\
    w 10 [000] 100.600000: sched:sched_switch: prev_comm=w prev_pid=10 prev_prio=120 \
    prev_state=S ==> next_comm=swapper/0 next_pid=0 next_prio=120\n\
    \t    ffff81 schedule+0x1 ([kernel.kallsyms])\n\n";

#[test]
fn the_report_of_an_off_cpu_capture_is_of_its_sampling_event() {
    let t = tempfile::tempdir().unwrap();
    let text = t.path().join("perf.script");
    std::fs::write(&text, OFF_CPU_TEXT).unwrap();
    let p = of_event(&text, Some("cpu-clock")).unwrap();
    assert_eq!(p.event.as_deref(), Some("cpu-clock"));
    assert_eq!((p.samples, p.total()), (Some(1), 250));
    assert!(p.frames.iter().all(|f| f.symbol != "schedule"));
    // Without an event, the first one seen, as before.
    let first = path(&text).unwrap();
    assert_eq!(first.event.as_deref(), Some("sched:sched_switch"));
}

#[test]
fn a_line_past_the_cap_in_a_stream_is_an_error_naming_the_input() {
    use std::io::Write;
    let t = tempfile::tempdir().unwrap();
    let gz = t.path().join("perf.script.gz");
    // One gzip member of 1 MiB of `a`, repeated: a line of 65 MiB.
    let mut enc = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::fast());
    enc.write_all(&vec![b'a'; 1 << 20]).unwrap();
    let member = enc.finish().unwrap();
    let mut f = std::fs::File::create(&gz).unwrap();
    for _ in 0..(input::MAX_RECORD >> 20) + 1 {
        f.write_all(&member).unwrap();
    }
    drop(f);
    let err = path(&gz).unwrap_err();
    assert!(matches!(err, Error::Oversized { .. }), "{err}");
    let msg = err.to_string();
    assert!(msg.contains("perf.script.gz") && msg.contains("a line longer than 64 MiB"));
}

#[test]
fn script_and_folded_are_read_alike() {
    let script = "w 10 100.500000:     250 cpu-clock: \n\
                  \t    1159 burn+0x19 (/opt/w)\n\
                  \t    1200 busy+0x1 (/opt/w)\n\
                  \t    7f00 [unknown] (/usr/lib/libc.so.6)\n\n\
                  w 10 101.000000:     250 cpu-clock: \n\
                  \tffffffff8100 [unknown] ([kernel.kallsyms])\n\
                  \t    1159 burn+0x19 (/opt/w)\n\n";
    let mut l = Lines::default();
    for line in script.split('\n') {
        l.push(line.as_bytes());
    }
    let p = l.finish(Path::new("x")).unwrap();
    assert_eq!(p.samples, Some(2));
    assert_eq!(p.total(), 500);
    assert_eq!(p.event.as_deref(), Some("cpu-clock"));
    assert_eq!(p.window, Some((100.5, 101.0)));
    assert!(p.frames.contains(&Frame {
        symbol: "burn".into(),
        dso: "w".into()
    }));
    let mut l = Lines::default();
    for line in [
        "w;[unknown:libc.so.6];busy;burn 3",
        "w;burn;[[kernel.kallsyms]] 1",
    ] {
        l.push(line.as_bytes());
    }
    let p = l.finish(Path::new("x")).unwrap();
    assert_eq!(p.total(), 4);
    // Two stack lines are not two samples: folded text does not say.
    assert_eq!(p.samples, None);
    assert!(p.frames.contains(&Frame {
        symbol: "[unknown]".into(),
        dso: "libc.so.6".into()
    }));
    assert!(p.frames.contains(&Frame {
        symbol: "[unknown]".into(),
        dso: "[kernel.kallsyms]".into()
    }));
}

#[test]
fn a_frame_line_read_again_counts_as_read_the_first_time() {
    // The same lines in three samples (the second of an event left
    // out): the memo of frame lines gives the same frames, an inlined
    // line still counted in the function after it at its address, and
    // none for the skipped event.
    let sample = |event: &str| {
        format!(
            "w 10 1.000000:     250 {event}: \n\
             \t    1159 burn+0x19 (/opt/w)\n\
             \t    1200 inner+0x2 (inlined)\n\
             \t    1200 busy+0x1 (/opt/w)\n\n"
        )
    };
    let mut r = SampleReader::default();
    for e in ["cpu-clock", "sched:sched_switch", "cpu-clock"] {
        r.sample(sample(e).as_bytes());
    }
    let p = r.finish(Path::new("perf.script")).unwrap();
    assert_eq!(p.samples, Some(2));
    assert_eq!(p.frames.len(), 2, "{:?}", p.frames);
    let chains: Vec<(Vec<u32>, u64)> = p.chains.clone().into_iter().collect();
    assert_eq!(chains.len(), 1, "{chains:?}");
    assert_eq!((chains[0].0.len(), chains[0].1), (2, 500));
}

/// A memcpy loop's sample as perf 6.1 prints it under libc's debug
/// info: the sampled address's only line is inlined (the DWARF names
/// the function `__memcpy_...`, its ELF symbol is `__memmove_...`).
const INLINED_LEAF: &str = "m 10 1.000000:     250 cpu-clock: \n\
    \t          16db75 __memcpy_avx512_unaligned_erms+0x375 (inlined)\n\
    \t            1229 copyit+0x19 (/tmp/m)\n\
    \t            10c1 main+0x51 (/tmp/m)\n\n";

fn leaf(p: &Profile) -> &Frame {
    let (i, _) = p.self_weights()[0];
    &p.frames[i as usize]
}

#[test]
fn a_leaf_whose_lines_are_all_inlined_is_not_charged_to_its_caller() {
    let mut r = SampleReader::default();
    r.sample(INLINED_LEAF.as_bytes());
    let p = r.finish(Path::new("x")).unwrap();
    // The text holds no ELF symbol: its outermost inlined line, in a
    // DSO the text does not say.
    assert_eq!(
        leaf(&p),
        &Frame {
            symbol: "__memcpy_avx512_unaligned_erms".into(),
            dso: "-".into()
        }
    );
    let chains = sorted_chains(&p);
    assert_eq!((chains.len(), chains[0].0.len()), (1, 3), "{p:?}");
}

#[test]
fn structured_samples_name_an_all_inlined_leaf_by_its_elf_symbol() {
    use crate::symbolize::sample::{Frame as Structured, INLINED};
    let frame = |address, lines: Vec<Line>, function| Structured {
        address,
        lines: lines.into(),
        function,
    };
    let memmove = Line::new(
        "__memmove_avx512_unaligned_erms+0x375",
        "/usr/lib/x86_64-linux-gnu/libc.so.6",
    );
    let mut batch = Batch {
        new_frames: vec![
            frame(
                0x16db75,
                vec![Line::new("__memcpy_avx512_unaligned_erms+0x375", INLINED)],
                Some(memmove),
            ),
            frame(0x1229, vec![Line::new("copyit+0x19", "/tmp/m")], None),
        ],
        samples: vec![Sample {
            comm: "m".into(),
            tid: 10,
            cpu: None,
            time_ns: Some(1_000_000_000),
            period: Some(250),
            event: "cpu-clock".into(),
            frames: 0..2,
        }],
        stacks: vec![0, 1],
        ..Batch::default()
    };
    let mut frames = Frames::default();
    frames.take(&mut batch);
    let mut r = SampleReader::default();
    r.samples(&batch, &frames);
    let p = r.finish(Path::new("x")).unwrap();
    assert_eq!(
        leaf(&p),
        &Frame {
            symbol: "__memmove_avx512_unaligned_erms".into(),
            dso: "libc.so.6".into()
        }
    );
}

#[test]
fn one_frame_per_address_and_recursion_keeps_its_frames() {
    // Inlined lines then the plain one: one frame, the plain one's;
    // the same plain line twice (a recursive call at one address):
    // two frames, as before.
    let text = "w 10 1.000000:     250 cpu-clock: \n\
                \t    1434 mix+0x34 (inlined)\n\
                \t    1434 compute+0x34 (/w)\n\
                \t    1500 rec+0x10 (/w)\n\
                \t    1500 rec+0x10 (/w)\n\
                \t    1600 main+0x1 (/w)\n\n";
    let mut r = SampleReader::default();
    r.sample(text.as_bytes());
    let p = r.finish(Path::new("x")).unwrap();
    let chains = sorted_chains(&p);
    let names: Vec<&str> = chains[0]
        .0
        .iter()
        .map(|&i| p.frames[i as usize].symbol.as_str())
        .collect();
    assert_eq!(names, ["compute", "rec", "rec", "main"]);
}

#[test]
fn samples_handed_on_read_as_the_whole_text() {
    // Two events (the report keeps the first), an inline frame, a
    // sample without frames.
    let script = "w 10 100.500000:     250 cpu-clock: \n\
                  \t    1159 burn+0x19 (/opt/w)\n\
                  \t    1160 inner+0x2 (inlined)\n\
                  \t    1200 busy+0x1 (/opt/w)\n\n\
                  w 11 100.700000:       1 sched:sched_switch: \n\
                  \t    1200 busy+0x1 (/opt/w)\n\n\
                  w 10 100.800000:     250 cpu-clock: \n\n\
                  w 10 101.000000:     250 cpu-clock: \n\
                  \t    1159 burn+0x19 (/opt/w)\n";
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("perf.script");
    std::fs::write(&file, script).unwrap();
    let whole = path(&file).unwrap();
    let mut r = SampleReader::default();
    for s in script.split("\n\n") {
        r.sample(s.as_bytes());
    }
    let walked = r.finish(&file).unwrap();
    // Field by field: the chains and the index are hash maps, whose
    // Debug order differs between two maps with the same entries.
    let sorted = |p: &Profile| {
        let mut c: Vec<(Vec<u32>, u64)> = p.chains.clone().into_iter().collect();
        c.sort();
        c
    };
    assert_eq!(walked.frames, whole.frames);
    assert_eq!(sorted(&walked), sorted(&whole));
    assert_eq!(
        (walked.samples, &walked.event, walked.window, &walked.source),
        (whole.samples, &whole.event, whole.window, &whole.source)
    );
    assert_eq!(walked.shards, whole.shards);
    assert_eq!(walked.samples, Some(2));
    // Of one event, as of_event reads the file (an off-CPU capture's
    // report is of its sampling event, not the switch tracepoint).
    let mut r = SampleReader::of_event(Some("sched:sched_switch"));
    for s in script.split("\n\n") {
        r.sample(s.as_bytes());
    }
    let switch = r.finish(&file).unwrap();
    assert_eq!(switch.event.as_deref(), Some("sched:sched_switch"));
    assert_eq!(switch.samples, Some(1));
    let err = SampleReader::default().finish(&file).unwrap_err();
    assert!(err.to_string().contains("no samples"), "{err}");
}
/// Sorted chains: the maps' Debug order differs between two maps with
/// the same entries.
fn sorted_chains(p: &Profile) -> Vec<(Vec<u32>, u64)> {
    let mut c: Vec<(Vec<u32>, u64)> = p.chains.clone().into_iter().collect();
    c.sort();
    c
}

fn assert_same(a: &Profile, b: &Profile) {
    assert_eq!(a.frames, b.frames);
    assert_eq!(sorted_chains(a), sorted_chains(b));
    assert_eq!(
        (a.samples, &a.event, a.window, &a.source, a.shards),
        (b.samples, &b.event, b.window, &b.source, b.shards)
    );
}

/// Three pieces of one text, each ending at a sample boundary: frames
/// new in each, frames seen before in another order, a sample of
/// another event, an empty piece, a window wider in the middle.
const PIECES: [&str; 4] = [
    "w 10 100.500000:     250 cpu-clock: \n\t    1159 burn+0x19 (/opt/w)\n\
     \t    1200 busy+0x1 (/opt/w)\n\n\
     w 10 100.600000:     250 cpu-clock: \n\t    1200 busy+0x1 (/opt/w)\n\n",
    "w 11 99.000000:     100 cpu-clock: \n\t    7f00 memcpy+0x4 (/usr/lib/libc.so.6)\n\
     \t    1159 burn+0x19 (/opt/w)\n\n\
     w 11 99.100000:       1 sched:sched_switch: \n\t    ff81 schedule+0x1 ([kernel.kallsyms])\n\n\
     w 10 102.000000:     250 cpu-clock: \n\t    1159 burn+0x19 (/opt/w)\n\
     \t    1200 busy+0x1 (/opt/w)\n\n",
    "",
    "w 12 101.000000:     250 cpu-clock: \n\t    ffffffff8100 [unknown] ([kernel.kallsyms])\n\
     \t    7f00 memcpy+0x4 (/usr/lib/libc.so.6)\n\n",
];

#[test]
fn readers_of_pieces_merged_in_order_read_as_the_whole_text() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("perf.script");
    std::fs::write(&file, PIECES.concat()).unwrap();
    for event in [None, Some("cpu-clock"), Some("sched:sched_switch")] {
        let whole = of_event(&file, event).unwrap();
        let readers = PIECES.iter().map(|piece| {
            let mut r = SampleReader::of_event(event);
            r.sample(piece.as_bytes());
            r
        });
        let merged = merge(readers).unwrap().finish(&file).unwrap();
        assert_same(&merged, &whole);
    }
    let whole = path(&file).unwrap();
    assert_eq!((whole.samples, whole.frames.len()), (Some(5), 4));
    assert_eq!(whole.window, Some((99.0, 102.0)));
    assert!(merge(std::iter::empty()).is_none());
}

#[test]
fn pieces_whose_first_events_differ_are_not_merged_without_an_event() {
    let pieces = [
        "w 10 1.000000:     250 cpu-clock: \n\t    1159 burn+0x19 (/opt/w)\n\n",
        "w 11 2.000000:       1 sched:sched_switch: \n\t    1200 busy+0x1 (/opt/w)\n\n",
    ];
    let read = |event: Option<&str>| {
        merge(pieces.iter().map(|piece| {
            let mut r = SampleReader::of_event(event);
            r.sample(piece.as_bytes());
            r
        }))
    };
    // One reader of the whole keeps cpu-clock; the second piece's
    // reader kept sched_switch.
    assert!(read(None).is_none());
    let p = read(Some("cpu-clock")).unwrap();
    let p = p.finish(Path::new("x")).unwrap();
    assert_eq!(
        (p.samples, p.event.as_deref()),
        (Some(1), Some("cpu-clock"))
    );
}

#[test]
fn a_block_of_samples_reads_as_its_samples_one_by_one() {
    let text = PIECES.concat();
    let mut by_sample = SampleReader::default();
    for s in text.split("\n\n") {
        by_sample.sample(s.as_bytes());
    }
    let mut by_block = SampleReader::default();
    by_block.sample(text.as_bytes());
    let x = Path::new("x");
    let by_sample = by_sample.finish(x).unwrap();
    assert_same(&by_block.finish(x).unwrap(), &by_sample);
    // Frames seen before are found again, not added twice.
    assert_eq!((by_sample.samples, by_sample.frames.len()), (Some(5), 4));
    assert_eq!(by_sample.total(), 250 + 250 + 100 + 250 + 250);
}

#[test]
fn dso_names_are_the_paths_file_names() {
    for m in [
        "/usr/lib/libc.so.6",
        "w",
        "/opt/w/",
        "/opt/./w",
        "/opt/w/.",
        "/opt/w/..",
        "..",
        ".",
        "/",
        "",
        "a//b",
        "[kernel.kallsyms]",
        "[unknown]",
        "//anon",
    ] {
        let want = Path::new(m)
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_else(|| m.to_string());
        let want = if m.starts_with('[') {
            m.to_string()
        } else {
            want
        };
        assert_eq!(dso_name(m), want, "{m:?}");
    }
}
