//! `perf script` text parsed into the sample model: what the model prints
//! back is taken, and folds and reads for the report as the text does;
//! anything else is left as text.

use super::*;
use crate::output::report::read::SampleReader;
use crate::symbolize::sample::Frames;
use crate::text::fold::{Folder, Options};

/// A header line as `perf script` prints it by default.
fn header(comm: &str, tid: i32, cpu: u32, us: u64, event: &str) -> String {
    format!(
        "{comm} {tid:5} [{cpu:03}] {:5}.{:06}: {:10} {event}: \n",
        us / 1_000_000,
        us % 1_000_000,
        250_000
    )
}

/// A frame line.
fn line(address: u64, symbol: &str, module: &str) -> String {
    format!("\t{address:16x} {symbol} ({module})\n")
}

/// Samples of two threads, an inlined function, a kernel frame, an
/// unknown one, a frame seen again, a sample without frames.
fn text() -> String {
    let mut t = header("demo_worker", 11362, 1, 1_491_631_381, "cpu-clock");
    t += &line(0x1a5b, "demo_compare+0xb", "/opt/w");
    t += &line(0x1434, "mix+0x34", "inlined");
    t += &line(0x1434, "stage+0x34", "/opt/w");
    t += &line(
        0xffff_ffff_8100_1000,
        "do_syscall+0x10",
        "[kernel.kallsyms]",
    );
    t += "\n";
    t += &header("pool worker", 11363, 2, 1_491_631_400, "cpu-clock");
    t += &line(0x1a5b, "demo_compare+0xb", "/opt/w");
    t += &line(0x99, "[unknown]", "[unknown]");
    t += "\n";
    t += &header("demo_worker", 11362, 1, 1_491_631_500, "cpu-clock");
    t += "\n";
    t
}

#[test]
fn a_block_parses_into_samples_and_interned_frames() {
    let mut p = ScriptSamples::default();
    let b = p.parse(text().as_bytes()).expect("parsed");
    assert_eq!(b.samples.len(), 3);
    assert_eq!(b.new_frames.len(), 4);
    assert_eq!(b.stacks, [0, 1, 2, 0, 3]);
    let s = &b.samples[1];
    assert_eq!((&*s.comm, s.tid, s.cpu), ("pool worker", 11363, Some(2)));
    assert_eq!(
        (s.time_ns, s.period),
        (Some(1_491_631_400_000), Some(250_000))
    );
    assert_eq!(&*s.event, "cpu-clock");
    assert_eq!(b.new_frames[1].lines.len(), 2);
    assert!(b.frames_of(&b.samples[2]).is_empty());
    assert_eq!(b.text_bytes, text().len() as u64);
    // The next block's frames seen before are not new.
    let again = p.parse(text().as_bytes()).expect("parsed");
    assert!(again.new_frames.is_empty() && !again.reset);
    assert_eq!(again.stacks, b.stacks);
}

#[test]
fn the_last_sample_may_miss_its_blank_line() {
    let t = text();
    let b = ScriptSamples::default().parse(t.trim_end_matches('\n').as_bytes());
    assert!(b.is_none(), "a frame line without its newline is not taken");
    let cut = &t[..t.len() - 1];
    let b = ScriptSamples::default()
        .parse(cut.as_bytes())
        .expect("parsed");
    assert_eq!(b.samples.len(), 3);
}

/// The fold and the report of the parsed samples are those of the text.
#[test]
fn the_samples_fold_and_read_as_their_text() {
    let t = text();
    let folder = Folder::new(Options::default());
    let mut by_text = folder.stream();
    by_text.push_whole(t.as_bytes());
    let mut b = ScriptSamples::default()
        .parse(t.as_bytes())
        .expect("parsed");
    let mut frames = Frames::default();
    frames.take(&mut b);
    let mut by_samples = folder.stream();
    by_samples.push_samples(0, &b, &frames);
    let folded = by_text.finish().to_bytes();
    assert_eq!(folded, by_samples.finish().to_bytes());
    assert!(String::from_utf8_lossy(&folded).contains("pool_worker;"));
    let report = |r: SampleReader| {
        let p = r.finish(std::path::Path::new("perf.script")).unwrap();
        let mut out = Vec::new();
        let opts = crate::output::report::Options::default();
        crate::output::report::write(&p, &opts, &mut out).unwrap();
        out
    };
    let mut r = SampleReader::default();
    r.sample(t.as_bytes());
    let mut s = SampleReader::default();
    s.samples(&b, &frames);
    assert_eq!(report(r), report(s));
}

/// What the model does not print back stays text, and the frames added
/// before are dropped: the next batch starts the table over.
#[test]
fn text_the_model_does_not_print_back_is_left_as_text() {
    let ok = text();
    let frame = line(0x1a5b, "demo_compare+0xb", "/opt/w");
    let cases = [
        // A process id.
        ok.replacen("demo_worker 11362 ", "demo_worker 11360/11362 ", 1),
        // A thread name that reads as two ids.
        format!("{}{frame}\n", header("pool 2 worker", 8, 1, 5, "cpu-clock")),
        // A tracepoint's fields.
        ok.replacen("cpu-clock: \n", "sched:sched_switch: prev_comm=w\n", 1),
        // Nanosecond times.
        ok.replacen(".631381:", ".631381000:", 1),
        // A frame line out of shape, an address that is not the frame's.
        ok.replacen(" (/opt/w)", " /opt/w", 1),
        ok.replacen("\t            1434 stage", "\t            1435 stage", 1),
        // Two blank lines.
        ok.replacen("\n\n", "\n\n\n", 1),
    ];
    for bad in &cases {
        let mut p = ScriptSamples::default();
        assert!(p.parse(bad.as_bytes()).is_none(), "{bad}");
        let next = p.parse(ok.as_bytes()).expect("parsed");
        assert!(next.reset && next.new_frames.len() == 4);
    }
}
