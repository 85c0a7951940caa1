//! A native unit's structured samples fold and read for the report as
//! their `perf script` text does: the consumers never need the text.

use std::path::{Path, PathBuf};

use crate::output::report::read::SampleReader;
use crate::output::report::Profile;
use crate::symbolize::native::{self, Symbolizer};
use crate::symbolize::sample::{Batch, Frames};
use crate::text::fold::{Folded, Folder, Options};

/// The repository's perf.data fixtures: the demo capture's two shards (4
/// threads, frame pointers) and a small capture of its own.
fn shards() -> Vec<PathBuf> {
    let f = Path::new(env!("CARGO_MANIFEST_DIR")).join("fixtures");
    let demo = f.join("result_dir_demo/profiles/perf/worker_0/q01");
    vec![
        demo.join("perf.data.part000"),
        demo.join("perf.data.part001"),
        f.join("tiny.perf.data"),
    ]
}

/// Each shard's batches, read natively (`inline`: with inline frames).
fn runs(inline: bool) -> Vec<Vec<Batch>> {
    let sym = Symbolizer::new(native::Options {
        inline,
        ..native::Options::default()
    });
    shards()
        .iter()
        .map(|data| {
            let mut v = Vec::new();
            sym.run(data, None, |b| {
                v.push(b);
                Ok(())
            })
            .unwrap_or_else(|e| panic!("{}: {e}", data.display()));
            v
        })
        .collect()
}

/// The fold of the runs' text, and of their structured samples.
fn fold_both(opts: &Options, runs: &[Vec<Batch>]) -> (Folded, Folded) {
    let folder = Folder::new(opts.clone());
    let (mut text, mut structured) = (folder.stream(), folder.stream());
    for (unit, run) in runs.iter().enumerate() {
        let mut frames = Frames::default();
        for b in run {
            text.push_whole_of(unit, &b.text);
            let mut b = b.clone();
            b.text = Vec::new();
            frames.take(&mut b);
            structured.push_samples(unit, &b, &frames);
        }
    }
    (text.finish(), structured.finish())
}

fn assert_same_fold(label: &str, a: &Folded, b: &Folded) {
    assert!(
        a.total() > 0 || a.stats.filtered_samples > 0,
        "{label}: nothing folded"
    );
    assert_eq!(a.to_bytes(), b.to_bytes(), "{label}: stacks");
    let (s, t) = (&a.stats, &b.stats);
    assert_eq!(
        (
            s.bytes,
            s.samples,
            s.filtered_samples,
            s.unique_stacks,
            &s.event
        ),
        (
            t.bytes,
            t.samples,
            t.filtered_samples,
            t.unique_stacks,
            &t.event
        ),
        "{label}: counts"
    );
    assert_eq!(s.chains, t.chains, "{label}: chain ends");
    assert_eq!(a.cells, b.cells, "{label}: timeline cells");
}

#[test]
fn structured_samples_fold_as_their_text_with_every_option() {
    for inline in [false, true] {
        let runs = runs(inline);
        assert!(
            runs.iter().flatten().any(|b| b.reset),
            "the frame table starts over in the test's runs"
        );
        let base = fold_both(&Options::default(), &runs).0;
        // A function in the middle of a stack, for --skip-after.
        let mid = base
            .stacks
            .iter()
            .find_map(|(s, _)| s.split(';').nth(2))
            .expect("a stack of three frames")
            .to_string();
        let sets = [
            ("default", Options::default()),
            (
                "tid, annotations, timeline",
                Options {
                    include_tid: true,
                    annotate_kernel: true,
                    annotate_jit: true,
                    time_cells: Some(1_000_000),
                    ..Options::default()
                },
            ),
            (
                "pid, addresses",
                Options {
                    include_pid: true,
                    include_addrs: true,
                    ..Options::default()
                },
            ),
            (
                "skip-after",
                Options {
                    skip_after: vec![mid.clone()],
                    ..Options::default()
                },
            ),
            (
                "another event",
                Options {
                    event_filter: Some("sched:sched_switch".into()),
                    ..Options::default()
                },
            ),
        ];
        for (label, opts) in &sets {
            let (a, b) = fold_both(opts, &runs);
            assert_same_fold(&format!("{label} (inline {inline})"), &a, &b);
        }
    }
}

/// The report's profile of the runs' text, and of their structured
/// samples (one reader per run, merged).
fn read_both(runs: &[Vec<Batch>]) -> (Profile, Profile) {
    let (mut text, mut structured) = (Vec::new(), Vec::new());
    for run in runs {
        let (mut a, mut b) = (SampleReader::of_event(None), SampleReader::of_event(None));
        let mut frames = Frames::default();
        for batch in run {
            a.sample(&batch.text);
            let mut batch = batch.clone();
            frames.take(&mut batch);
            b.samples(&batch, &frames);
        }
        text.push(a);
        structured.push(b);
    }
    let finish = |r: Vec<SampleReader>| {
        let merged = crate::output::report::read::merge(r).expect("readers merge");
        merged.finish(Path::new("x")).expect("a profile")
    };
    (finish(text), finish(structured))
}

#[test]
fn structured_samples_read_for_the_report_as_their_text() {
    for inline in [false, true] {
        let (a, b) = read_both(&runs(inline));
        assert!(a.samples.unwrap_or(0) > 0);
        assert_eq!(a.frames, b.frames, "inline {inline}");
        let chains = |p: &Profile| {
            let mut v: Vec<_> = p.chains.iter().map(|(c, w)| (c.clone(), *w)).collect();
            v.sort();
            v
        };
        assert_eq!(chains(&a), chains(&b), "inline {inline}");
        assert_eq!(
            (a.samples, a.flat_samples, &a.event, a.window),
            (b.samples, b.flat_samples, &b.event, b.window),
            "inline {inline}"
        );
    }
}
