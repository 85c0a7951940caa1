//! Names demangled as perf 6.1 prints them: a corpus of real mangled names
//! from polars, pyarrow, DataFusion, Velox (pyvelox) and rustup
//! (tests/expected/demangle-corpus.tsv, made by
//! scripts/demangle-corpus.sh) with what `c++filt -p -i` printed for each,
//! which is libiberty's `cplus_demangle(name, DMGL_NO_OPTS)`, perf's call.
//! jobprof must print exactly that, except on the lines that carry a third
//! column: the known differences, with jobprof's current text (rewritten
//! by `JOBPROF_BLESS=1`). The live test asks this machine's `c++filt`.

use std::path::PathBuf;
use std::process::Command;

use jobprof::symbolize::native::demangle::demangle;

use crate::util;

fn corpus_path() -> PathBuf {
    util::repo_root().join("tests/expected/demangle-corpus.tsv")
}

/// One corpus line: the mangled name, c++filt's text and, for a known
/// difference, jobprof's text.
struct Line {
    mangled: String,
    expected: String,
    known: Option<String>,
}

fn read_corpus() -> (Vec<String>, Vec<Line>) {
    let text = String::from_utf8(util::read(&corpus_path())).expect("corpus is UTF-8");
    let mut comments = Vec::new();
    let mut lines = Vec::new();
    for (i, l) in text.lines().enumerate() {
        if l.starts_with('#') {
            comments.push(l.to_string());
            continue;
        }
        let mut cols = l.split('\t');
        let (Some(mangled), Some(expected)) = (cols.next(), cols.next()) else {
            panic!(
                "{}:{}: not MANGLED<TAB>EXPECTED",
                corpus_path().display(),
                i + 1
            );
        };
        lines.push(Line {
            mangled: mangled.into(),
            expected: expected.into(),
            known: cols.next().map(String::from),
        });
    }
    (comments, lines)
}

#[test]
fn corpus_matches_cxxfilt_exactly() {
    let (comments, lines) = read_corpus();
    assert!(
        lines.len() >= 300,
        "corpus too small: {} names",
        lines.len()
    );
    if std::env::var_os("JOBPROF_BLESS").is_some() {
        let mut out = comments.join("\n") + "\n";
        for l in &lines {
            let ours = demangle(&l.mangled);
            out += &format!("{}\t{}", l.mangled, l.expected);
            if ours != l.expected {
                out += &format!("\t{ours}");
            }
            out.push('\n');
        }
        std::fs::write(corpus_path(), out).expect("write corpus");
        return;
    }
    let mut problems = Vec::new();
    for l in &lines {
        let ours = demangle(&l.mangled);
        match &l.known {
            None if ours != l.expected => problems.push(format!(
                "{}\n  c++filt: {}\n  jobprof: {ours}",
                l.mangled, l.expected
            )),
            Some(_) if ours == l.expected => problems.push(format!(
                "{}: now matches c++filt; JOBPROF_BLESS=1 drops its known difference",
                l.mangled
            )),
            Some(known) if ours != *known => problems.push(format!(
                "{}\n  known difference changed\n  c++filt: {}\n  was:     {known}\n  jobprof: {ours}",
                l.mangled, l.expected
            )),
            _ => {}
        }
    }
    assert!(
        problems.is_empty(),
        "{} of {} corpus names demangled unlike c++filt ({}):\n{}",
        problems.len(),
        lines.len(),
        corpus_path().display(),
        problems.join("\n")
    );
    let known = lines.iter().filter(|l| l.known.is_some()).count();
    assert!(
        known * 20 <= lines.len(),
        "{known} known differences in {} names: more than 5%",
        lines.len()
    );
    eprintln!(
        "demangle corpus: {} names checked against c++filt, {} equal, {known} known differences",
        lines.len(),
        lines.len() - known
    );
}

/// The corpus's expected column is what this machine's `c++filt -p -i`
/// prints (binutils' libiberty, as perf links it).
#[test]
fn corpus_expected_column_is_this_machines_cxxfilt() {
    if !util::require(util::have("c++filt"), "c++filt (binutils)") {
        return;
    }
    let (_, lines) = read_corpus();
    for chunk in lines.chunks(200) {
        let out = Command::new("c++filt")
            .args(["-p", "-i"])
            .args(chunk.iter().map(|l| &l.mangled))
            .output()
            .expect("run c++filt");
        assert!(
            out.status.success(),
            "c++filt failed: {}",
            util::stderr(&out)
        );
        let text = String::from_utf8(out.stdout).expect("c++filt output is UTF-8");
        for (l, theirs) in chunk.iter().zip(text.lines()) {
            assert_eq!(
                theirs,
                l.expected,
                "{}: c++filt -p -i now prints another name than the corpus ({})",
                l.mangled,
                corpus_path().display()
            );
            if l.known.is_none() {
                assert_eq!(demangle(&l.mangled), theirs, "{}", l.mangled);
            }
        }
    }
}
