//! Inline frames against `perf script --inline`: native `--inline` output on
//! the frame-pointer and the dwarf captures agrees with perf's, and on dwarf
//! chains each sample perf expands is what native prints for the same DSO
//! and address, naming the same inlined functions.

use std::collections::{BTreeSet, HashMap};
use std::path::Path;
use std::process::{Command, Stdio};

use super::Capture;
use super::{
    assert_agreement, copy, data_files, dwarf, fp, perf_reference_with, process, symfs_of,
};
use crate::util::output_text as text;
use crate::util::{folded, summary};

/// Processes a copy of `c` with `--inline` (auto picks native) and checks
/// that at least 99.5% of the weight lies on the stacks `perf script
/// --inline` gives; returns the frame names of (native, perf).
fn inline_agrees_with_perf(c: &Capture) -> (BTreeSet<String>, BTreeSet<String>) {
    let (_t, result) = copy(c);
    let cap = result.join("profiles/perf/worker_0/q1");
    let o = process(&result, &["--inline"]);
    assert!(o.status.success(), "{}", text(&o));
    assert_eq!(summary(&cap)["symbolized_from"], "native");
    let native = folded(&cap.join("stacks.folded"));
    let perf = perf_reference_with(&cap, "--inline");
    assert_agreement("native --inline vs perf script --inline", &native, &perf);
    let names = |m: &HashMap<String, u64>| -> BTreeSet<String> {
        m.keys()
            .flat_map(|s| s.split(';').map(str::to_string).collect::<Vec<_>>())
            .collect()
    };
    (names(&native), names(&perf))
}

#[test]
fn fp_capture_with_inline_matches_perf_script_inline() {
    let Some(c) = fp() else { return };
    let (native, perf) = inline_agrees_with_perf(c);
    // The worker's `mix` is inlined into compute_stage (-O2), and perf 6.1
    // names no inline frame on frame-pointer call chains: neither does
    // native.
    assert_eq!(
        native.contains("mix"),
        perf.contains("mix"),
        "native and perf disagree on naming the inlined `mix`"
    );
    assert!(native.contains("compute_stage"));
}

#[test]
fn dwarf_capture_with_inline_matches_perf_script_inline() {
    let Some(c) = dwarf() else { return };
    let (native, perf) = inline_agrees_with_perf(c);
    // On chains unwound from stack copies perf 6.1 expands inline frames:
    // the worker's inlined `mix` is named on both sides.
    assert!(
        perf.contains("mix"),
        "perf named no inlined `mix`: {perf:?}"
    );
    assert!(
        native.contains("mix"),
        "native named no inlined `mix`: {native:?}"
    );
}

/// One sample of `perf script` text: its frame lines (ip, whole line).
fn script_samples(text: &str) -> Vec<Vec<(String, String)>> {
    let mut out: Vec<Vec<(String, String)>> = Vec::new();
    for l in text.lines() {
        if let Some(frame) = l.strip_prefix('\t') {
            let ip = frame.split_whitespace().next().unwrap_or("").to_string();
            if let Some(s) = out.last_mut() {
                s.push((ip, l.to_string()));
            }
        } else if !l.is_empty() {
            out.push(Vec::new());
        }
    }
    out
}

fn perf_script(data: &Path, symfs: &Path, flag: &str) -> String {
    let kallsyms = symfs.parent().unwrap().join("kallsyms");
    let out = Command::new("perf")
        .args(["script", "-f", "-i"])
        .arg(data)
        .arg("--symfs")
        .arg(symfs)
        .arg("--kallsyms")
        .arg(&kallsyms)
        .arg(flag)
        .stderr(Stdio::null())
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "perf script {flag} -i {}",
        data.display()
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// Build ids by DSO path, as `perf buildid-list` reads them from `data`.
fn build_ids(data: &Path) -> HashMap<String, Vec<u8>> {
    let out = Command::new("perf")
        .args(["buildid-list", "-i"])
        .arg(data)
        .stderr(Stdio::null())
        .output()
        .unwrap();
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .filter_map(|l| {
            let (hex, path) = l.split_once(' ')?;
            let id = (0..hex.len() / 2)
                .map(|i| u8::from_str_radix(&hex[2 * i..2 * i + 2], 16))
                .collect::<Result<Vec<u8>, _>>()
                .ok()?;
            Some((path.to_string(), id))
        })
        .collect()
}

/// The DSO path of a frame line printed with a real symbol file.
fn frame_dso(line: &str) -> Option<&str> {
    let open = line.rfind(" (")?;
    let dso = line[open + 2..].strip_suffix(')')?;
    dso.starts_with('/').then_some(dso)
}

/// On a dwarf capture, where perf 6.1 does expand inline frames: each
/// sample perf prints with `--inline` is what the native symbolizer prints
/// for the frames perf prints without it (same DSO and address), inline
/// frames on; and both name the same inlined functions.
#[test]
fn inline_frames_named_as_perf_names_them_on_dwarf_chains() {
    let Some(c) = dwarf() else { return };
    let cap = c.capture_dir();
    let symfs = symfs_of(&cap);
    let sym = jobprof::symbolize::native::Symbolizer::new(jobprof::symbolize::native::Options {
        sources: jobprof::symbolize::sources::Search {
            symfs: Some(symfs.clone()),
            ..Default::default()
        },
        kallsyms: None,
        inline: true,
        jit: None,
    });
    let (mut same, mut total) = (0u64, 0u64);
    let mut diffs: HashMap<(String, String), u64> = HashMap::new();
    let mut perf_inlined = std::collections::BTreeSet::new();
    let mut native_inlined = std::collections::BTreeSet::new();
    for f in data_files(&cap) {
        let ids = build_ids(&f);
        let plain = script_samples(&perf_script(&f, &symfs, "--no-inline"));
        let inlined = script_samples(&perf_script(&f, &symfs, "--inline"));
        assert_eq!(plain.len(), inlined.len(), "{}: sample counts", f.display());
        for (p, i) in plain.iter().zip(&inlined) {
            // perf's sample with inline frames, and native's: every frame
            // of a real file expanded, the others (kernel, unknown) as
            // printed without --inline (perf expands none of them).
            let perf: String = i.iter().map(|(_, l)| format!("{l}\n")).collect();
            let mut native = String::new();
            for (ip, line) in p {
                let addr = u64::from_str_radix(ip, 16).ok();
                match (frame_dso(line), addr) {
                    (Some(dso), Some(addr)) => {
                        let id = ids.get(dso).map_or(&[][..], Vec::as_slice);
                        native.push_str(
                            &String::from_utf8(sym.user_frame(dso, id, addr, true)).unwrap(),
                        );
                    }
                    _ => {
                        native.push_str(line);
                        native.push('\n');
                    }
                }
            }
            for (text, names) in [(&perf, &mut perf_inlined), (&native, &mut native_inlined)] {
                for l in text.lines() {
                    if let Some(n) = l.strip_suffix(" (inlined)") {
                        let name = n.split_whitespace().nth(1).unwrap_or("");
                        let name = name.rsplit_once('+').map_or(name, |(a, _)| a);
                        names.insert(name.to_string());
                    }
                }
            }
            total += 1;
            if native == perf {
                same += 1;
            } else {
                *diffs.entry((perf, native)).or_default() += 1;
            }
        }
    }
    let share = same as f64 / total.max(1) as f64;
    eprintln!(
        "inline frames: {same} of {total} samples printed as perf prints them; \
         perf names {} inlined functions",
        perf_inlined.len()
    );
    let mut top: Vec<_> = diffs.into_iter().collect();
    top.sort_by_key(|t| std::cmp::Reverse(t.1));
    let shown: Vec<String> = top
        .iter()
        .take(10)
        .map(|((p, n), k)| format!("{k} samples\n--- perf\n{p}--- native\n{n}"))
        .collect();
    assert!(
        share >= 0.995,
        "only {:.3}% of the samples agree; top differences:\n{}",
        100.0 * share,
        shown.join("\n")
    );
    assert_eq!(perf_inlined, native_inlined, "inlined functions named");
    // The worker's own inlined helper is among them: the test is about
    // something.
    assert!(perf_inlined.contains("mix"), "{perf_inlined:?}");
}
