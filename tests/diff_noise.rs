//! `jobprof diff` with replicates (issue 59, part 2): a frame is coloured
//! only where its change is beyond the replicates' noise. The replicates
//! are synthetic folded files with realistic noise: multinomial samples of
//! a base profile (a fixed seed, 5 replicates a side, about 300 samples
//! each), the injected run's replicates drawn from the base profile plus a
//! new leaf (`memcmp` under `main;run;join;probe;hash`) that lengthens the
//! run, as added work does when the sampling rate is fixed.

use std::path::{Path, PathBuf};
use std::process::Output;

use jobprof::sys::stats::Rng;

use crate::render::{frames_named, is_blue, is_grey, is_red, parse_svg, SvgFrame};
use crate::util::{self, jobprof, stderr};

/// The base profile: stacks and their weights.
const BASE: &[(&str, u32)] = &[
    ("w;main;load;read", 30),
    ("w;main;load;parse;lex", 40),
    ("w;main;load;parse;tree", 25),
    ("w;main;run;scan;filter", 60),
    ("w;main;run;scan;decode", 45),
    ("w;main;run;scan", 10),
    ("w;main;run;join;build", 50),
    ("w;main;run;join;probe;hash", 55),
    ("w;main;run;join;probe;cmp", 20),
    ("w;main;run;agg;update", 40),
    ("w;main;run;agg;finalize", 8),
    ("w;main;run;sort", 25),
    ("w;main;out;format", 15),
    ("w;main;out;write", 12),
    ("w;main;out;write;syscall_[k]", 9),
    ("w;main;gc", 6),
    ("w;main;log", 3),
    ("w;main", 4),
];

/// The injected work: a new leaf under `hash`, as heavy as 90 of the base's
/// 457 weight (about 16% of the injected run).
const INJECTED: (&str, u32) = ("w;main;run;join;probe;hash;memcmp", 90);

/// `n` samples of `profile` drawn with replacement (multinomial), as
/// folded lines.
fn multinomial(profile: &[(&str, u32)], n: u32, rng: &mut Rng) -> String {
    let total: u32 = profile.iter().map(|p| p.1).sum();
    let mut counts = vec![0u64; profile.len()];
    for _ in 0..n {
        let mut x = rng.below(total as usize) as u32;
        let i = profile
            .iter()
            .position(|(_, w)| {
                let hit = x < *w;
                x = x.saturating_sub(*w);
                hit
            })
            .expect("x < total");
        counts[i] += 1;
    }
    profile
        .iter()
        .zip(counts)
        .filter(|(_, c)| *c > 0)
        .map(|((s, _), c)| format!("{s} {c}\n"))
        .collect()
}

/// 5 replicates of `profile` (300 samples each for the base's weight; the
/// injected profile's heavier in proportion) into `dir/<side>N.folded`.
fn replicates(dir: &Path, side: &str, profile: &[(&str, u32)], rng: &mut Rng) -> Vec<PathBuf> {
    let base: u32 = BASE.iter().map(|p| p.1).sum();
    let weight: u32 = profile.iter().map(|p| p.1).sum();
    let n = 300 * weight / base;
    (1..=5)
        .map(|k| {
            let p = dir.join(format!("{side}{k}.folded"));
            std::fs::write(&p, multinomial(profile, n, rng)).unwrap();
            p
        })
        .collect()
}

fn diff_replicates(before: &[PathBuf], after: &[PathBuf], out: &Path, extra: &[&str]) -> Output {
    let mut cmd = jobprof();
    cmd.arg("diff").args(before).arg("--vs").args(after);
    cmd.arg("-o").arg(out).args(extra);
    cmd.output().unwrap()
}

/// What inferno's script draws in a frame: its tooltip without the last
/// parenthesized group at its end (`update_text`'s
/// `replace(/\([^(]*\)$/, "")`).
fn inferno_label(title: &str) -> &str {
    match title.rfind('(') {
        Some(i) if title.ends_with(')') => &title[..i],
        _ => title,
    }
}

/// Frames not grey.
fn coloured(frames: &[SvgFrame]) -> Vec<&SvgFrame> {
    frames.iter().filter(|f| !is_grey(&f.fill)).collect()
}

fn injected_profile() -> Vec<(&'static str, u32)> {
    let mut p = BASE.to_vec();
    p.push(INJECTED);
    p
}

/// Two unchanged replicated runs: nearly nothing is coloured (before the
/// change, and still with --every-change, most frames were red or blue).
#[test]
fn diff_of_unchanged_replicates_colours_nearly_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let mut rng = Rng::new(59);
    let a = replicates(dir.path(), "a", BASE, &mut rng);
    let b = replicates(dir.path(), "b", BASE, &mut rng);
    let out = dir.path().join("same.svg");
    let o = diff_replicates(&a, &b, &out, &[]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let (frames, _) = parse_svg(&util::read(&out));
    let judged = coloured(&frames);
    assert!(judged.len() <= 1, "coloured: {judged:?}");
    let err = stderr(&o);
    assert!(
        err.contains(&format!(
            "{} of {} frames changed beyond the noise",
            judged.len(),
            frames.len() - 1
        )),
        "{err}"
    );
    // Every frame is labelled with its name: the page's script (inferno's)
    // labels a frame with its tooltip up to the last `(` (the noise's
    // `(+0.12 points)` made it print the tooltip in the frame).
    for f in &frames {
        let name = f.title.split(" (").next().unwrap();
        assert_eq!(inferno_label(&f.title).trim_end(), name, "{}", f.title);
    }
    // Every tested tooltip says p and q; the legend says what grey means.
    let main = frames_named(&frames, "main")[0];
    assert!(
        main.title.contains("p=") && main.title.contains("q="),
        "{}",
        main.title
    );
    let svg = String::from_utf8(util::read(&out)).unwrap();
    assert!(svg.contains("grey = within the noise"), "no legend");

    let every = dir.path().join("every.svg");
    let o = diff_replicates(&a, &b, &every, &["--every-change"]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let (frames, _) = parse_svg(&util::read(&every));
    let noisy = coloured(&frames).len();
    assert!(
        noisy >= frames.len() / 2,
        "only {noisy} of {} coloured",
        frames.len()
    );
    eprintln!(
        "unchanged replicates: {} frames coloured beyond the noise, {noisy} of {} by every change",
        judged.len(),
        frames.len()
    );
}

/// An injected leaf: it and its callers are red; the frames whose share
/// fell only because the run got longer (dilution) stay grey.
#[test]
fn diff_of_replicates_colours_the_injected_frames_and_their_callers() {
    let dir = tempfile::tempdir().unwrap();
    let mut rng = Rng::new(60);
    let a = replicates(dir.path(), "a", BASE, &mut rng);
    let b = replicates(dir.path(), "b", &injected_profile(), &mut rng);
    let out = dir.path().join("injected.html");
    let o = diff_replicates(&a, &b, &out, &[]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let html = String::from_utf8(util::read(&out)).unwrap();
    let svg = &html[html.find("<svg").unwrap()..html.rfind("</svg>").unwrap() + 6];
    let (frames, _) = parse_svg(svg.as_bytes());
    for name in ["memcmp", "hash", "probe", "join", "main", "w"] {
        let f = frames_named(&frames, name)[0];
        assert!(is_red(&f.fill), "{name} not red: {f:?}");
        assert!(f.title.contains("beyond the noise"), "{}", f.title);
    }
    let others: Vec<&SvgFrame> = coloured(&frames)
        .into_iter()
        .filter(|f| {
            ![
                "memcmp (", "hash (", "probe (", "join (", "main (", "w (", "run (",
            ]
            .iter()
            .any(|n| f.title.starts_with(n))
        })
        .collect();
    assert!(
        others.is_empty(),
        "coloured beside the injected path: {others:?}"
    );
    assert!(!frames.iter().any(|f| is_blue(&f.fill)));
    eprintln!(
        "injected: {} of {} frames coloured",
        coloured(&frames).len(),
        frames.len() - 1
    );
}

/// Two result directories whose query ran 5 times each: the query's
/// replicates are judged the same way, with --query.
#[test]
fn diff_of_runs_judges_a_query_over_its_replicates() {
    let dir = tempfile::tempdir().unwrap();
    let mut rng = Rng::new(61);
    let runs: Vec<PathBuf> = ["base", "new"]
        .iter()
        .map(|run| {
            let root = dir.path().join(run);
            let profile = if *run == "new" {
                injected_profile()
            } else {
                BASE.to_vec()
            };
            for k in 1..=5 {
                let c = root.join(format!("profiles/perf/worker_0/q1_iter{k}"));
                std::fs::create_dir_all(&c).unwrap();
                std::fs::write(c.join("capture.json"), "{}\n").unwrap();
                let weight: u32 = profile.iter().map(|p| p.1).sum();
                let n = 300 * weight / BASE.iter().map(|p| p.1).sum::<u32>();
                std::fs::write(c.join("stacks.folded"), multinomial(&profile, n, &mut rng))
                    .unwrap();
            }
            root
        })
        .collect();
    let out = dir.path().join("q1.svg");
    let o = jobprof()
        .arg("diff")
        .args(&runs)
        .args(["--query", "q1", "-o"])
        .arg(&out)
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    assert!(stderr(&o).contains("5 and 5 replicates"), "{}", stderr(&o));
    let (frames, _) = parse_svg(&util::read(&out));
    assert!(is_red(&frames_named(&frames, "memcmp")[0].fill));
    assert!(is_grey(&frames_named(&frames, "filter")[0].fill));
}

/// Usage: three inputs without --vs, a rate outside (0, 1), stdin as a
/// replicate are refused (2); 3 against 3 replicates warns that nothing
/// can reach --alpha.
#[test]
fn diff_replicates_usage() {
    let dir = tempfile::tempdir().unwrap();
    let mut rng = Rng::new(62);
    let a = replicates(dir.path(), "a", BASE, &mut rng);
    let b = replicates(dir.path(), "b", BASE, &mut rng);
    let out = dir.path().join("d.svg");
    let o = jobprof()
        .arg("diff")
        .args(&a[..3])
        .arg("-o")
        .arg(&out)
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
    assert!(stderr(&o).contains("--vs"), "{}", stderr(&o));
    let o = diff_replicates(&a, &b, &out, &["--alpha", "1.5"]);
    assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
    let o = diff_replicates(&a[..2], &[PathBuf::from("-")], &out, &[]);
    assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
    let o = diff_replicates(&a[..3], &b[..3], &out, &[]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    assert!(
        stderr(&o).contains("no frame can be coloured"),
        "{}",
        stderr(&o)
    );
}
