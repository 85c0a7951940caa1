//! Real shards, damaged: the demo's frame-pointer shard (committed, kernel
//! frames and all) and a shard of the `--call-graph dwarf` capture above
//! (register and stack copies through the unwinder). `check`, `time_range`
//! and `run` must answer with an error or with text, never panic or abort,
//! on whatever a truncated copy, flipped bytes or a run of garbage make of
//! the header, the attributes or the records. (`process` falls back to
//! `perf script` on an error; a panic or an abort would end it.) Each found
//! a bug of its own: linux-perf-event-reader's unchecked callchain length,
//! linux-perf-data's allocations of what a header says, wrapping map
//! offsets.

use proptest::prelude::*;
use std::path::{Path, PathBuf};

const DEMO: &str = "fixtures/result_dir_demo/profiles/perf/worker_0";

struct Shard {
    bytes: Vec<u8>,
    symfs: PathBuf,
    kallsyms: Option<PathBuf>,
}

fn fp() -> &'static Shard {
    static SHARD: std::sync::OnceLock<Shard> = std::sync::OnceLock::new();
    SHARD.get_or_init(|| Shard {
        bytes: std::fs::read(Path::new(DEMO).join("q01/perf.data.part000")).unwrap(),
        symfs: PathBuf::from(DEMO).join("symfs"),
        kallsyms: Some(PathBuf::from(DEMO).join("kallsyms")),
    })
}

/// The smallest shard of the dwarf capture (`None` without perf).
fn dwarf() -> Option<&'static Shard> {
    static SHARD: std::sync::OnceLock<Option<Shard>> = std::sync::OnceLock::new();
    SHARD
        .get_or_init(|| {
            let cap = super::dwarf()?.capture_dir();
            let data = super::data_files(&cap)
                .into_iter()
                .min_by_key(|f| std::fs::metadata(f).unwrap().len())?;
            Some(Shard {
                bytes: std::fs::read(data).unwrap(),
                symfs: super::symfs_of(&cap),
                kallsyms: None,
            })
        })
        .as_ref()
}

/// Every reader entry point on `bytes`, a damaged copy of `shard`;
/// panics are the failures.
fn read_all(shard: &Shard, bytes: &[u8]) {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("perf.data");
    std::fs::write(&path, bytes).unwrap();
    let checked = jobprof::symbolize::native::check(&path);
    let _ = jobprof::symbolize::native::time_range(&path);
    let sym = jobprof::symbolize::native::Symbolizer::new(jobprof::symbolize::native::Options {
        sources: jobprof::symbolize::sources::Search {
            symfs: Some(shard.symfs.clone()),
            ..Default::default()
        },
        kallsyms: shard.kallsyms.clone(),
        inline: true,
        jit: None,
    });
    let mut text = 0;
    let ran = sym.run(&path, None, |block| {
        text += block.text.len();
        Ok(())
    });
    if bytes == shard.bytes {
        assert!(checked.is_ok(), "the undamaged shard: {checked:?}");
        assert!(ran.is_ok() && text > 0, "the undamaged shard: {ran:?}");
    }
}

fn truncate(shard: &Shard, keep: usize) {
    read_all(shard, &shard.bytes[..keep % (shard.bytes.len() + 1)]);
}

fn flip(shard: &Shard, flips: &[(usize, u8)]) {
    let mut b = shard.bytes.clone();
    for &(at, x) in flips {
        let at = at % b.len();
        b[at] ^= x | 1;
    }
    read_all(shard, &b);
}

fn overwrite(shard: &Shard, at: usize, junk: &[u8]) {
    let mut b = shard.bytes.clone();
    let at = at % b.len();
    let end = (at + junk.len()).min(b.len());
    b[at..end].copy_from_slice(&junk[..end - at]);
    read_all(shard, &b);
}

#[test]
fn the_undamaged_shards_are_read() {
    read_all(fp(), &fp().bytes);
    if let Some(d) = dwarf() {
        read_all(d, &d.bytes);
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 300, ..ProptestConfig::default() })]

    #[test]
    fn a_truncated_shard_is_an_error_not_a_panic(keep in any::<usize>()) {
        truncate(fp(), keep);
    }

    #[test]
    fn flipped_bytes_are_an_error_not_a_panic(
        flips in proptest::collection::vec((any::<usize>(), any::<u8>()), 1..8)
    ) {
        flip(fp(), &flips);
    }

    #[test]
    fn garbage_over_the_header_or_records_is_an_error_not_a_panic(
        at in any::<usize>(),
        junk in proptest::collection::vec(any::<u8>(), 1..64)
    ) {
        overwrite(fp(), at, &junk);
    }
}

proptest! {
    // Each case reads a shard of megabytes: fewer of them.
    #![proptest_config(ProptestConfig { cases: 40, ..ProptestConfig::default() })]

    #[test]
    fn a_damaged_dwarf_shard_is_an_error_not_a_panic(
        keep in any::<usize>(),
        flips in proptest::collection::vec((any::<usize>(), any::<u8>()), 1..16),
        at in any::<usize>(),
        junk in proptest::collection::vec(any::<u8>(), 1..256)
    ) {
        let Some(d) = dwarf() else { return Ok(()) };
        // Truncated within the data section, where the records are.
        truncate(d, d.bytes.len() / 2 + keep % (d.bytes.len() / 2));
        flip(d, &flips);
        overwrite(d, at, &junk);
    }
}
