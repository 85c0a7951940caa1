//! Unit tests of `fold`, beside it so that its own file stays short.

use super::*;

const TEXT: &str = "w 10 1.000001:   5 cpu-clock: \n\
    \t    1234 leaf+0x4 (/bin/w)\n\t    5678 main+0x8 (/bin/w)\n\n\
    w 10 1.000002:   7 cpu-clock: \n\t    5678 main+0x8 (/bin/w)\n\n\
    w 11 1.000003:   2 cpu-clock: \n\t    1234 leaf+0x4 (/bin/w)\n\n";

#[test]
fn whole_blocks_fold_as_pushed_bytes() {
    let folder = Folder::new(Options::default());
    let mut pushed = folder.stream();
    for b in TEXT.as_bytes().chunks(7) {
        pushed.push(b);
    }
    let pushed = pushed.finish();
    // Whole samples, a block that does not end at a sample boundary
    // (pushed), then whole ones again.
    let (a, rest) = TEXT.split_at(TEXT.find("\n\n").unwrap() + 2);
    let (b, c) = rest.split_at(10);
    let mut whole = folder.stream();
    for block in [a, b, c] {
        whole.push_whole(block.as_bytes());
    }
    let whole = whole.finish();
    assert_eq!(whole.to_bytes(), pushed.to_bytes());
    assert!(whole.total() > 0 && !whole.stacks.is_empty());
}

/// gzip members of 1 MiB each, `members` of them, of `piece` repeated.
fn bomb(dir: &std::path::Path, name: &str, head: &[u8], piece: &[u8]) -> PathBuf {
    use std::io::Write as _;
    let member = |bytes: &[u8]| {
        let mut enc = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::fast());
        enc.write_all(bytes).unwrap();
        enc.finish().unwrap()
    };
    let body: Vec<u8> = piece.iter().copied().cycle().take(1 << 20).collect();
    let (first, rest) = (member(&[head, &body].concat()), member(&body));
    let path = dir.join(name);
    let mut f = std::fs::File::create(&path).unwrap();
    f.write_all(&first).unwrap();
    for _ in 0..input::MAX_RECORD >> 20 {
        f.write_all(&rest).unwrap();
    }
    path
}

/// A line without a newline, and one sample of frame lines without a
/// blank line, past `MAX_RECORD` in a gzip stream: the input's error,
/// naming it, instead of a carry that grows to the next cut.
#[test]
fn a_sample_past_the_cap_in_a_stream_is_the_inputs_error() {
    let t = tempfile::tempdir().unwrap();
    let line = bomb(t.path(), "line.gz", b"", b"a");
    let sample = bomb(
        t.path(),
        "sample.gz",
        b"w 1 1.0: 1 cpu-clock: \n",
        b"\t    1234 leaf+0x4 (/bin/w)\n",
    );
    for compat in [Compat::None, Compat::Inferno] {
        for p in [&line, &sample] {
            let folder = Folder::new(Options {
                compat,
                block_size: 8 << 20,
                ..Options::default()
            });
            let err = folder.fold_sources(&[Source::Path(p.clone())]).unwrap_err();
            let msg = err.to_string();
            assert!(matches!(err, Error::Oversized { .. }), "{msg}");
            assert!(msg.starts_with(&*p.to_string_lossy()), "{msg}");
            assert!(msg.contains("longer than 64 MiB"), "{msg}");
        }
    }
}

/// Flat input (one header line per sample, no blank line) and a mix of
/// it with call-chain samples: pushed in small pieces through 4 KiB
/// blocks and streamed from a gzip file, it folds as the whole text
/// does, and the stream does not spin once a block has no blank line.
#[test]
fn flat_input_is_cut_at_sample_headers_with_the_whole_texts_output() {
    use std::io::Write as _;
    let mut text = String::new();
    for i in 0..3000 {
        text.push_str(&format!(
            "prog {} {i}.000001: 1 cpu-clock: 4004 f{}+0x4 (/bin/prog)\n",
            i % 7,
            i % 13
        ));
        if i % 500 == 0 {
            text.push_str("prog 1 9.0: 3 cpu-clock: \n\t 1 leaf+0x1 (/bin/p)\n\n");
        }
    }
    let opts = Options {
        block_size: 4096,
        ..Options::default()
    };
    let folder = Folder::new(opts);
    let whole = Folder::new(Options::default()).fold_bytes(text.as_bytes());
    let mut pushed = folder.stream();
    for b in text.as_bytes().chunks(333) {
        pushed.push(b);
    }
    assert_eq!(pushed.finish().to_bytes(), whole.to_bytes());
    let dir = tempfile::tempdir().unwrap();
    let gz = dir.path().join("flat.gz");
    let mut enc = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::fast());
    enc.write_all(text.as_bytes()).unwrap();
    std::fs::write(&gz, enc.finish().unwrap()).unwrap();
    let streamed = folder.fold_sources(&[Source::Path(gz)]).unwrap();
    assert_eq!(streamed.to_bytes(), whole.to_bytes());
    assert_eq!(whole.total(), 3000 + 6 * 3);
}
