//! pprof output read back by the real `go tool pprof` (Debian's golang-go):
//! `process --formats pprof` on the demo capture and `render --format pprof`
//! on folded stacks. Every stack's weight and sample count, the top
//! functions, the labels and the mappings are compared with jobprof's own
//! folded figures and summary.

use std::collections::BTreeMap;
use std::path::Path;
use std::process::{Command, Stdio};

use crate::util::{self, jobprof, stderr};

fn go_available() -> bool {
    Command::new("go")
        .arg("version")
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .is_ok_and(|s| s.success())
}

pub(crate) fn require_go() -> bool {
    util::require(go_available(), "go tool pprof (apt-get install golang-go)")
}

/// `go tool pprof ARGS FILE`'s stdout; insists it succeeds.
fn pprof(args: &[&str], file: &Path) -> String {
    let out = Command::new("go")
        .args(["tool", "pprof"])
        .args(args)
        .arg(file)
        .env("PPROF_TMPDIR", std::env::temp_dir())
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "go tool pprof {args:?} {}: {}",
        file.display(),
        stderr(&out)
    );
    String::from_utf8(out.stdout).unwrap()
}

/// What `-raw` prints, parsed: per stack (root first, `;`-joined) the sum
/// of each value column; the label lines; the mapping lines; and the
/// location lines.
struct Raw {
    stacks: BTreeMap<String, Vec<u64>>,
    labels: Vec<String>,
    mappings: Vec<String>,
    locations: BTreeMap<u64, Vec<String>>,
    addressed: usize,
}

fn raw(file: &Path) -> Raw {
    let text = pprof(&["-raw"], file);
    let mut samples = Vec::new();
    let mut labels = Vec::new();
    let mut locations: BTreeMap<u64, Vec<String>> = BTreeMap::new();
    let mut mappings = Vec::new();
    let mut addressed = 0;
    let mut section = "";
    let mut last_loc = 0;
    for line in text.lines() {
        match line.trim_end() {
            "Samples:" | "Locations" | "Mappings" => {
                section = line.trim_end();
                continue;
            }
            _ => {}
        }
        match section {
            "Samples:" => {
                if let Some((vals, ids)) = line
                    .split_once(':')
                    .filter(|(v, _)| v.split_whitespace().all(|x| x.parse::<u64>().is_ok()))
                {
                    let vals: Vec<u64> = vals
                        .split_whitespace()
                        .map(|x| x.parse().unwrap())
                        .collect();
                    let ids: Vec<u64> =
                        ids.split_whitespace().map(|x| x.parse().unwrap()).collect();
                    samples.push((vals, ids));
                } else if line.contains(":[") {
                    labels.push(line.trim().to_string());
                }
            }
            "Locations" => {
                let t = line.trim();
                if let Some((id, rest)) =
                    t.split_once(": ").filter(|(i, _)| i.parse::<u64>().is_ok())
                {
                    last_loc = id.parse().unwrap();
                    let mut w = rest.split_whitespace();
                    let addr = w.next().unwrap();
                    if addr != "0x0" {
                        addressed += 1;
                    }
                    let rest: Vec<&str> = w.collect();
                    let name_at = usize::from(rest.first().is_some_and(|x| x.starts_with("M=")));
                    locations.insert(last_loc, vec![rest[name_at].to_string()]);
                } else if !t.is_empty() {
                    // An inlined function's line of the location above.
                    let name = t.split_whitespace().next().unwrap().to_string();
                    locations.get_mut(&last_loc).unwrap().push(name);
                }
            }
            "Mappings" => mappings.push(line.trim().to_string()),
            _ => {}
        }
    }
    let mut stacks: BTreeMap<String, Vec<u64>> = BTreeMap::new();
    for (vals, ids) in samples {
        // Leaf first, and within a location innermost (inlined) first.
        let mut frames: Vec<&str> = ids
            .iter()
            .flat_map(|id| locations[id].iter().map(String::as_str))
            .collect();
        frames.reverse();
        let e = stacks
            .entry(frames.join(";"))
            .or_insert_with(|| vec![0; vals.len()]);
        for (a, v) in e.iter_mut().zip(&vals) {
            *a += v;
        }
    }
    Raw {
        stacks,
        labels,
        mappings,
        locations,
        addressed,
    }
}

fn folded(path: &Path) -> BTreeMap<String, u64> {
    let mut m = BTreeMap::new();
    for line in std::fs::read_to_string(path).unwrap().lines() {
        let (s, c) = line.rsplit_once(' ').unwrap();
        *m.entry(s.to_string()).or_insert(0) += c.parse::<u64>().unwrap();
    }
    m
}

/// Self weight per leaf function, largest first (ties by name).
fn top_leaves(stacks: &BTreeMap<String, u64>, n: usize) -> Vec<String> {
    let mut flat: BTreeMap<&str, u64> = BTreeMap::new();
    for (s, c) in stacks {
        *flat.entry(s.rsplit(';').next().unwrap()).or_insert(0) += c;
    }
    let mut v: Vec<(&str, u64)> = flat.into_iter().collect();
    v.sort_by(|a, b| b.1.cmp(&a.1).then(a.0.cmp(b.0)));
    v.into_iter().take(n).map(|(s, _)| s.to_string()).collect()
}

/// The function names of `-top`'s table, in order.
fn top_names(text: &str, n: usize) -> Vec<String> {
    text.lines()
        .skip_while(|l| !l.trim_start().starts_with("flat"))
        .skip(1)
        .take(n)
        .map(|l| l.split_whitespace().last().unwrap().to_string())
        .collect()
}

#[test]
fn process_writes_a_profile_go_pprof_reads_with_the_folded_figures() {
    if !require_go() {
        return;
    }
    let t = tempfile::tempdir().unwrap();
    util::copy_demo(t.path());
    let cap = t.path().join("profiles/perf/worker_0/q01");
    let o = jobprof()
        .arg("process")
        .arg(&cap)
        .args(["--formats", "folded,html,pprof,summary"])
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", stderr(&o));
    let file = cap.join("profile.pb.gz");
    let r = raw(&file);
    let want = folded(&cap.join("stacks.folded"));
    // Every stack, with its weight (cpu/nanoseconds, the second column).
    let got: BTreeMap<String, u64> = r.stacks.iter().map(|(s, v)| (s.clone(), v[1])).collect();
    assert_eq!(got, want);
    // Sample counts add up to the summary's.
    let summary: serde_json::Value =
        serde_json::from_slice(&std::fs::read(cap.join("summary.json")).unwrap()).unwrap();
    let samples: u64 = r.stacks.values().map(|v| v[0]).sum();
    assert_eq!(Some(samples), summary["samples"].as_u64(), "{summary}");
    // -top names the same functions, in the same order, as the folded
    // leaves' self weights.
    let top = pprof(&["-top", "-nodecount=4", "-sample_index=cpu"], &file);
    assert!(top.contains("Type: cpu"), "{top}");
    assert_eq!(top_names(&top, 4), top_leaves(&want, 4), "{top}");
    // Labels: the capture's on every sample, and each thread's.
    assert!(!r.labels.is_empty());
    for l in &r.labels {
        for k in ["worker:[0]", "query:[q01]", "comm:[demo_worker]", "tid:["] {
            assert!(l.contains(k), "{k} missing in {l}");
        }
    }
    let tags = pprof(&["-tags"], &file);
    let tids: Vec<&str> = tags
        .split(" tid: ")
        .nth(1)
        .unwrap()
        .lines()
        .skip(1)
        .take_while(|l| !l.trim().is_empty())
        .collect();
    assert!(tids.len() >= 2, "one tid per worker thread: {tags}");
    // Mappings with build ids, locations with addresses.
    assert!(
        r.mappings
            .iter()
            .any(|m| m.contains("demo_worker") && m.split_whitespace().any(|w| w.len() == 40)),
        "{:?}",
        r.mappings
    );
    assert!(
        r.addressed * 2 > r.locations.len(),
        "most locations have an address"
    );
    // The merged query's profile: the query's folded stacks, labelled.
    let q = t.path().join("profiles/perf/queries/q01");
    let r = raw(&q.join("profile.pb.gz"));
    let got: BTreeMap<String, u64> = r.stacks.iter().map(|(s, v)| (s.clone(), v[0])).collect();
    assert_eq!(got, folded(&q.join("stacks.folded")));
    assert!(r
        .labels
        .iter()
        .all(|l| l.contains("query:[q01]") && l.contains("worker:[0]")));
    // Its page links to the worker's page, which has the timeline.
    let own = std::fs::read_to_string(cap.join("flamegraph.html")).unwrap();
    assert!(
        own.contains("id=\"jp-tl-data\""),
        "the worker's page has a timeline"
    );
    let page = std::fs::read_to_string(q.join("flamegraph.html")).unwrap();
    assert!(page.contains("href=\"..&#47;..&#47;worker_0&#47;q01&#47;flamegraph.html\""));
}

#[test]
fn render_writes_a_profile_of_folded_stacks() {
    if !require_go() {
        return;
    }
    let t = tempfile::tempdir().unwrap();
    let input = t.path().join("in.folded");
    std::fs::write(
        &input,
        "main;parse;lex 30\nmain;parse 10\nmain;plan 60\nmain;plan 5\n",
    )
    .unwrap();
    let out = t.path().join("out.pb.gz");
    let o = jobprof()
        .arg("render")
        .arg(&input)
        .arg("-o")
        .arg(&out)
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", stderr(&o));
    let r = raw(&out);
    let got: BTreeMap<String, u64> = r.stacks.iter().map(|(s, v)| (s.clone(), v[0])).collect();
    assert_eq!(got, folded(&input));
    let top = pprof(&["-top"], &out);
    assert_eq!(top_names(&top, 3), ["plan", "lex", "parse"], "{top}");
    // --format says so whatever the name.
    let out2 = t.path().join("out.bin");
    let o = jobprof()
        .arg("render")
        .arg(&input)
        .args(["--format", "pprof", "-o"])
        .arg(&out2)
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", stderr(&o));
    assert_eq!(std::fs::read(&out).unwrap(), std::fs::read(&out2).unwrap());
}

/// A copy of the demo capture whose only data is `copies` repetitions of
/// its perf script text (no perf.data: `process` folds that text).
fn demo_text_capture(root: &Path, copies: usize) -> std::path::PathBuf {
    use std::io::{Read, Write};
    util::copy_demo(root);
    let cap = root.join("profiles/perf/worker_0/q01");
    let mut text = Vec::new();
    zstd::Decoder::new(std::fs::File::open(cap.join("perf.script.zst")).unwrap())
        .unwrap()
        .read_to_end(&mut text)
        .unwrap();
    for e in std::fs::read_dir(&cap).unwrap() {
        let p = e.unwrap().path();
        if p.file_name()
            .unwrap()
            .to_string_lossy()
            .starts_with("perf.data.")
        {
            std::fs::remove_file(p).unwrap();
        }
    }
    let f = std::fs::File::create(cap.join("perf.script.zst")).unwrap();
    let mut z = zstd::Encoder::new(f, 1).unwrap();
    for _ in 0..copies {
        z.write_all(&text).unwrap();
    }
    z.finish().unwrap();
    cap
}

/// Runs `cmd` to its end; whether it succeeded and its peak resident set
/// (KiB), from wait4's rusage of that child alone.
// wait4 reaps the child (std's wait cannot say its rusage).
#[allow(clippy::zombie_processes)]
fn peak_rss_kib(cmd: &mut Command) -> (bool, i64) {
    let child = cmd
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let pid = child.id() as libc::pid_t;
    let mut status = 0;
    // SAFETY: an all-zero rusage is a valid value of that plain C struct.
    let mut ru: libc::rusage = unsafe { std::mem::zeroed() };
    // SAFETY: waits for our own child (not yet reaped: `child` is never
    // waited on), with pointers to live locals.
    let r = unsafe { libc::wait4(pid, &mut status, 0, &mut ru) };
    assert_eq!(r, pid, "wait4: {}", std::io::Error::last_os_error());
    let ok = libc::WIFEXITED(status) && libc::WEXITSTATUS(status) == 0;
    (ok, ru.ru_maxrss)
}

/// The profile is streamed: on 24 MB of perf script text (~38,000
/// samples) `process --formats folded,pprof` peaks at most a few MB above
/// `--formats folded` alone (the fold's own peak), so neither the text nor
/// the samples are held for the profile.
#[test]
fn pprof_is_written_in_bounded_memory() {
    if !require_go() {
        return;
    }
    let t = tempfile::tempdir().unwrap();
    let cap = demo_text_capture(t.path(), 64);
    let run = |formats: &str| {
        let (ok, rss) = peak_rss_kib(jobprof().arg("process").arg(&cap).args([
            "--force",
            "--jobs",
            "1",
            "--formats",
            formats,
        ]));
        assert!(ok, "process --formats {formats} failed");
        rss
    };
    let folded_only = run("folded");
    let with_pprof = run("folded,pprof");
    let r = raw(&cap.join("profile.pb.gz"));
    let samples: u64 = r.stacks.values().map(|v| v[0]).sum();
    assert_eq!(samples, 64 * 601);
    assert!(
        with_pprof - folded_only < 8 * 1024,
        "peak RSS {folded_only} KiB folding, {with_pprof} KiB also writing {samples} samples' pprof"
    );
}

/// The function names of `-top`'s table, in order, whole (off-CPU state
/// frames have spaces in their names).
fn top_full_names(text: &str, n: usize) -> Vec<String> {
    text.lines()
        .skip_while(|l| !l.trim_start().starts_with("flat"))
        .skip(1)
        .take(n)
        .map(|l| l.split_whitespace().skip(5).collect::<Vec<_>>().join(" "))
        .collect()
}

/// [`folded`], each frame cut at its first space as [`raw`] reads names.
fn folded_first_words(path: &Path) -> BTreeMap<String, u64> {
    let mut m = BTreeMap::new();
    for (s, c) in folded(path) {
        let s: Vec<&str> = s
            .split(';')
            .map(|f| f.split_whitespace().next().unwrap_or(""))
            .collect();
        *m.entry(s.join(";")).or_insert(0) += c;
    }
    m
}

/// Column `i`'s total over every stack of `r`.
fn column_total(r: &Raw, i: usize) -> u64 {
    r.stacks.values().map(|v| v[i]).sum()
}

/// A capture recorded with `--off-cpu` (tests/offcpu.rs's worker): its
/// profile.pb.gz has `off_cpu/nanoseconds` and `wall/nanoseconds` after
/// the on-CPU columns, which stay as without switch data; `go tool pprof`
/// totals them to `offcpu.folded`'s and `wallclock.folded`'s and names the
/// same top functions, and still shows `cpu` by default. The merged
/// query's profile likewise.
#[test]
fn pprof_off_cpu_and_wall_columns_match_the_folded_profiles() {
    if !require_go() {
        return;
    }
    let Some((s, mut worker)) = crate::offcpu::offcpu_worker() else {
        return;
    };
    let formats = ["--formats", "folded,pprof,summary"];
    let cap = crate::offcpu::capture_and_process_with(
        s.dir.path(),
        &mut worker,
        "--off-cpu",
        2,
        &formats,
    );
    let file = cap.join("profile.pb.gz");
    let text = pprof(&["-raw"], &file);
    assert!(
        text.contains("samples/count cpu/nanoseconds[dflt] off_cpu/nanoseconds wall/nanoseconds"),
        "{}",
        &text[..text.len().min(2000)]
    );
    let r = raw(&file);
    let on_cpu: BTreeMap<String, u64> = r
        .stacks
        .iter()
        .filter(|(_, v)| v[1] > 0)
        .map(|(s, v)| (s.clone(), v[1]))
        .collect();
    assert_eq!(on_cpu, folded_first_words(&cap.join("stacks.folded")));
    let summary = util::summary(&cap);
    assert_eq!(Some(column_total(&r, 0)), summary["samples"].as_u64());
    let off = folded(&cap.join("offcpu.folded"));
    assert!(column_total(&r, 2) > 0);
    assert_eq!(column_total(&r, 2), off.values().sum::<u64>());
    let wall = util::folded_total(&cap.join("wallclock.folded"));
    assert_eq!(column_total(&r, 3), wall);
    let args = [
        "-top",
        "-nodecount=3",
        "-nodefraction=0",
        "-sample_index=off_cpu",
    ];
    let top = pprof(&args, &file);
    assert!(top.contains("Type: off_cpu"), "{top}");
    assert_eq!(top_full_names(&top, 3), top_leaves(&off, 3), "{top}");
    let top = pprof(&["-top", "-nodecount=3", "-sample_index=wall"], &file);
    assert!(top.contains("Type: wall"), "{top}");
    // Without -sample_index: cpu, as before the off-CPU columns.
    let top = pprof(&["-top", "-nodecount=3"], &file);
    assert!(top.contains("Type: cpu"), "{top}");
    // Off-CPU samples keep the capture's labels and the comm.
    assert!(r.labels.iter().all(|l| l.contains("query:[q1]")));
    // The merged query: cpu, off_cpu, wall.
    let q = cap.parent().unwrap().parent().unwrap().join("queries/q1");
    let r = raw(&q.join("profile.pb.gz"));
    let on_cpu: BTreeMap<String, u64> = r
        .stacks
        .iter()
        .filter(|(_, v)| v[0] > 0)
        .map(|(s, v)| (s.clone(), v[0]))
        .collect();
    assert_eq!(on_cpu, folded_first_words(&q.join("stacks.folded")));
    let off_total = util::folded_total(&q.join("offcpu.folded"));
    assert_eq!(column_total(&r, 1), off_total);
    assert_eq!(
        column_total(&r, 2),
        util::folded_total(&q.join("wallclock.folded"))
    );
}

/// A cpu-clock capture's `stacks.folded` (counts: ns of CPU) rendered as
/// pprof has the type `cpu/nanoseconds`, not `samples/count`.
#[test]
fn render_of_a_cpu_clock_captures_folded_stacks_writes_cpu_nanoseconds() {
    if !require_go() {
        return;
    }
    let t = tempfile::tempdir().unwrap();
    util::copy_demo(t.path());
    util::ok(&jobprof().arg("process").arg(t.path()).output().unwrap());
    let folded = t.path().join("profiles/perf/worker_0/q01/stacks.folded");
    let out = t.path().join("out.pb.gz");
    let o = jobprof()
        .arg("render")
        .arg(&folded)
        .arg("-o")
        .arg(&out)
        .output()
        .unwrap();
    util::ok(&o);
    let text = pprof(&["-raw"], &out);
    assert!(text.contains("PeriodType: cpu nanoseconds"), "{text}");
    assert!(
        text.lines().any(|l| l.trim() == "cpu/nanoseconds"),
        "{text}"
    );
}
