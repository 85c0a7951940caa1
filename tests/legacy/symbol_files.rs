//! Which files name the frames of an old capture: a different binary at
//! the recorded path changes no output, libc frames are named from this
//! host's debug files by build id, truncation is judged by the unwinder and
//! not by unnamed roots, and a stripped binary is named from its debug file
//! found by `.gnu_debuglink` (under the linked name only with the link's
//! CRC).

use std::fs;
use std::path::{Path, PathBuf};
use std::process::Output;

use super::{capture, process, summary};
use crate::util::{self, output_text};
use crate::util::{comparable_outputs, copy_seed, parse_folded, seeds};

/// A C program with 400 functions and symbols, unlike the seed's worker.
fn decoy(dir: &Path) -> PathBuf {
    let mut src = String::new();
    for i in 0..400 {
        src.push_str(&format!(
            "__attribute__((noinline)) int decoy_f{i}(int x) {{ return x * {i} + 1; }}\n"
        ));
    }
    src.push_str("int main(void) { return decoy_f7(1) == 0; }\n");
    let c = dir.join("decoy.c");
    fs::write(&c, src).unwrap();
    let exe = dir.join("decoy");
    let out = std::process::Command::new("gcc")
        .args(["-g", "-O0", "-o"])
        .arg(&exe)
        .arg(&c)
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", output_text(&out));
    exe
}

/// `jobprof process ARGS DIR` in a private mount namespace whose `/opt` is
/// an empty tmpfs, with `put` (when given) copied to
/// `/opt/presto/bin/presto_server` there: the host's `/opt` is never
/// written, and what it holds does not matter.
fn process_with_private_opt(dir: &Path, put: Option<&Path>, args: &[&str]) -> Output {
    let mut script = String::from("mount -t tmpfs jobprof-test /opt && ");
    if put.is_some() {
        script.push_str("mkdir -p /opt/presto/bin && cp \"$1\" /opt/presto/bin/presto_server && ");
    }
    script.push_str("shift && exec \"$@\"");
    let out = std::process::Command::new("unshare")
        .args(["-m", "--propagation", "private", "sh", "-c", &script, "sh"])
        .arg(put.unwrap_or(Path::new("-")))
        .arg(env!("CARGO_BIN_EXE_jobprof"))
        .arg("process")
        .arg(dir)
        .args(args)
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(0), "{}", output_text(&out));
    out
}

#[test]
fn a_different_binary_at_the_recorded_path_changes_no_output() {
    let Some(seeds) = seeds() else { return };
    let can = util::is_root() && util::have("unshare") && util::have("gcc");
    if !util::require(can, "root, unshare and gcc (a private /opt for the decoy)") {
        return;
    }
    let tmp = tempfile::tempdir().unwrap();
    let exe = decoy(tmp.path());
    for symbolizer in ["native", "perf"] {
        // Every output: the folded stacks, report.txt, profile.pb.gz and
        // the pages are all named by the resolver's answer.
        let args = [
            "-v",
            "--symbolizer",
            symbolizer,
            "--formats",
            "all",
            "--min-symbolized",
            "0",
        ];
        let mut folded = Vec::new();
        let mut outputs = Vec::new();
        for put in [None, Some(exe.as_path())] {
            let at = tmp.path().join(format!("{symbolizer}-{}", put.is_some()));
            fs::create_dir(&at).unwrap();
            let rd = copy_seed(&seeds, "result_dir_4242", &at);
            // Without the snapshot: the case, where the host's file
            // at the recorded path is the only candidate left.
            fs::remove_dir_all(rd.join("profiles/perf/worker_0/symfs")).unwrap();
            let out = process_with_private_opt(&rd, put, &args);
            let q = capture(&rd, "Q1_iter1");
            let text = fs::read_to_string(q.join("jobprof/stacks.folded")).unwrap();
            assert!(
                !text.contains("decoy_"),
                "{symbolizer}: named from the decoy:\n{text}"
            );
            let s = summary(&q);
            let sources = s["symbol_sources"].as_array().unwrap();
            let worker = sources
                .iter()
                .find(|d| d["dso"] == "/opt/presto/bin/presto_server")
                .unwrap_or_else(|| panic!("{s:#}"));
            let why = worker["source"].as_str().unwrap();
            let recorded = worker["build_id"].as_str().unwrap();
            if put.is_some() {
                assert!(
                    why.starts_with("none: host file /opt/presto/bin/presto_server has build id ")
                        && why.ends_with(&format!("the capture recorded {recorded}")),
                    "{why}"
                );
                let log = output_text(&out);
                assert!(log.contains("symbol sources of "), "{log}");
                assert!(log.contains(why), "the log names the mismatch: {log}");
            } else {
                assert!(why.starts_with("none: "), "{why}");
            }
            folded.push(text);
            outputs.push(comparable_outputs(&q.join("jobprof"), &rd));
        }
        assert_eq!(
            folded[0], folded[1],
            "{symbolizer}: the decoy changed the stacks"
        );
        let names: Vec<&String> = outputs[0].keys().collect();
        for name in [
            "report.txt",
            "profile.pb.gz",
            "flamegraph.html",
            "flamegraph.svg",
        ] {
            assert!(
                outputs[0].contains_key(name),
                "{symbolizer}: no {name}: {names:?}"
            );
        }
        for (name, clean) in &outputs[0] {
            assert!(
                outputs[1].get(name) == Some(clean),
                "{symbolizer}: the decoy changed {name}"
            );
        }
        assert_eq!(
            outputs[0].len(),
            outputs[1].len(),
            "{symbolizer}: {names:?}"
        );
    }
}

#[test]
fn libc_frames_of_old_captures_are_named_from_this_hosts_debug_files_by_build_id() {
    let Some(seeds) = seeds() else { return };
    // The seeds' libc is Debian 12's; its debug file (libc6-dbg) by build id.
    let debug =
        Path::new("/usr/lib/debug/.build-id/93/ac61ec5a8eb1396f9fbd350e3169a558528a40.debug");
    if !util::require(
        debug.is_file(),
        "libc6-dbg for the seeds' libc (build id 93ac61ec…)",
    ) {
        return;
    }
    let tmp = tempfile::tempdir().unwrap();
    for symbolizer in ["native", "perf"] {
        let at = tmp.path().join(symbolizer);
        fs::create_dir(&at).unwrap();
        let rd = copy_seed(&seeds, "result_dir_4243", &at);
        let out = process(
            &["--symbolizer", symbolizer, "--formats", "folded,summary"],
            &[&rd],
        );
        assert_eq!(out.status.code(), Some(0), "{}", output_text(&out));
        let q = capture(&rd, "Q5_iter1");
        let s = summary(&q);
        let libc = s["symbol_sources"]
            .as_array()
            .unwrap()
            .iter()
            .find(|d| d["dso"] == "/usr/lib/x86_64-linux-gnu/libc.so.6")
            .unwrap_or_else(|| panic!("{s:#}"))["source"]
            .as_str()
            .unwrap()
            .to_string();
        assert!(
            libc.starts_with("snapshot ")
                && libc.contains(&format!("host debug file {}", debug.display())),
            "{libc}"
        );
        let stacks = parse_folded(&fs::read_to_string(q.join("jobprof/stacks.folded")).unwrap());
        let total: u64 = stacks.values().sum();
        let rooted: u64 = stacks
            .iter()
            .filter(|(k, _)| k.starts_with("presto_server;clone3;start_thread;"))
            .map(|(_, v)| v)
            .sum();
        assert!(
            rooted * 100 >= total * 99,
            "{symbolizer}: {rooted} of {total}: {stacks:#?}"
        );
        assert!(
            !stacks.keys().any(|k| k.contains("[libc.so.6]")),
            "{symbolizer}: unnamed libc frames"
        );
        // libc's own name for the function, as perf script (--inline or
        // not) prints it from the debug file: not the exported `fstatat64`.
        assert!(
            stacks.keys().any(|k| k.contains(";__GI___fstatat64"))
                && !stacks.keys().any(|k| k.contains(";fstatat64")),
            "{symbolizer}: {stacks:#?}"
        );
        assert!(
            s["truncated_ratio"].as_f64().unwrap() < 0.01,
            "{symbolizer}: complete stacks are not truncated: {s:#}"
        );
    }
}

/// `jobprof process DIR ARGS` with this host's debug files hidden (a
/// private, empty `/usr/lib/debug`, no build-id or debuginfod cache):
/// libc's frames stay unnamed, as on a node without libc6-dbg.
fn process_without_host_debug(rd: &Path, home: &Path, args: &[&str]) -> Output {
    std::process::Command::new("unshare")
        .args(["-m", "--propagation", "private", "sh", "-c"])
        .arg("mount -t tmpfs jobprof-test /usr/lib/debug && exec \"$@\"")
        .arg("sh")
        .arg(env!("CARGO_BIN_EXE_jobprof"))
        .arg("process")
        .arg(rd)
        .args(args)
        .env("HOME", home)
        .env_remove("DEBUGINFOD_CACHE_PATH")
        .output()
        .unwrap()
}

#[test]
fn truncation_is_judged_by_the_unwinder_not_by_unnamed_roots() {
    let Some(seeds) = seeds() else { return };
    let can = util::is_root() && util::have("unshare");
    if !util::require(can, "root and unshare (a private, empty /usr/lib/debug)") {
        return;
    }
    // Every stack of the seeds reaches its thread's first frame (dwarf:
    // clone3; fp: start_thread, the last frame the kernel's walk could
    // follow), unnamed or not: judged by the native unwinder (dwarf,
    // native) or by where the call chains end (fp, and whatever perf
    // script unwound), never by the root's name.
    let tmp = tempfile::tempdir().unwrap();
    let cases = [
        ("result_dir_4243", "Q5_iter1", "native"),
        ("result_dir_4243", "Q5_iter1", "perf"),
        ("result_dir_4242", "Q1_iter1", "native"),
        ("result_dir_4242", "Q1_iter1", "perf"),
    ];
    for (i, (seed, query, symbolizer)) in cases.into_iter().enumerate() {
        let at = tmp.path().join(i.to_string());
        fs::create_dir(&at).unwrap();
        let rd = copy_seed(&seeds, seed, &at);
        let args = ["--symbolizer", symbolizer, "--formats", "folded,summary"];
        let out = process_without_host_debug(&rd, tmp.path(), &args);
        assert_eq!(out.status.code(), Some(0), "{}", output_text(&out));
        let q = capture(&rd, query);
        let text = fs::read_to_string(q.join("jobprof/stacks.folded")).unwrap();
        let stacks = parse_folded(&text);
        let total: u64 = stacks.values().sum();
        let unnamed_root: u64 = stacks
            .iter()
            .filter(|(k, _)| k.starts_with("presto_server;[libc.so.6];"))
            .map(|(_, v)| v)
            .sum();
        assert!(
            unnamed_root * 2 > total,
            "{seed} {symbolizer}: libc unnamed at the root: {stacks:#?}"
        );
        let s = summary(&q);
        assert_eq!(
            s["truncated_ratio"].as_f64(),
            Some(0.0),
            "{seed} {symbolizer}: {s:#}"
        );
        let warnings = s["warnings"].to_string();
        assert!(
            !warnings.contains("truncated"),
            "{seed} {symbolizer}: {warnings}"
        );
        // The advice that fits: libc's debug file.
        assert!(
            warnings.contains("libc.so.6: its symbols are missing"),
            "{seed} {symbolizer}: {warnings}"
        );
    }
    let rd = tmp.path().join("0/result_dir_4243");
    let q = capture(&rd, "Q5_iter1");

    // The same host given libc's debug file with --debug-dir: taken by its
    // build id, and named.
    let debug =
        Path::new("/usr/lib/debug/.build-id/93/ac61ec5a8eb1396f9fbd350e3169a558528a40.debug");
    if !util::require(
        debug.is_file(),
        "libc6-dbg's debug file for the seeds' libc",
    ) {
        return;
    }
    let dir = tmp.path().join("debug");
    fs::create_dir_all(dir.join(".build-id/93")).unwrap();
    fs::copy(
        debug,
        dir.join(".build-id/93").join(debug.file_name().unwrap()),
    )
    .unwrap();
    let args = [
        "--symbolizer",
        "native",
        "--formats",
        "folded,summary",
        "--force",
        "--debug-dir",
        dir.to_str().unwrap(),
    ];
    let out = process_without_host_debug(&rd, tmp.path(), &args);
    assert_eq!(out.status.code(), Some(0), "{}", output_text(&out));
    let libc = summary(&q)["symbol_sources"]
        .as_array()
        .unwrap()
        .iter()
        .find(|d| d["dso"] == "/usr/lib/x86_64-linux-gnu/libc.so.6")
        .unwrap()["source"]
        .as_str()
        .unwrap()
        .to_string();
    assert!(libc.contains("+ --debug-dir "), "{libc}");
    let text = fs::read_to_string(q.join("jobprof/stacks.folded")).unwrap();
    assert!(
        text.contains("presto_server;clone3;start_thread;"),
        "{text}"
    );
}

/// Runs `objcopy ARGS`; false (said loudly) where objcopy is missing.
fn objcopy(args: &[&std::ffi::OsStr]) -> bool {
    let out = std::process::Command::new("objcopy").args(args).output();
    match out {
        Ok(o) => {
            assert!(o.status.success(), "objcopy {args:?}: {}", output_text(&o));
            true
        }
        Err(e) => util::require(false, &format!("objcopy (binutils): {e}")),
    }
}

/// Splits the ELF file `exe` as distributions do: its debug sections into
/// `debug`, `exe` stripped of all symbols with a `.gnu_debuglink` naming
/// `debug`'s file name (and its CRC-32). False where objcopy is missing.
fn split_debug(exe: &Path, debug: &Path) -> bool {
    fs::create_dir_all(debug.parent().unwrap()).unwrap();
    let link = format!("--add-gnu-debuglink={}", debug.display());
    objcopy(&[
        "--only-keep-debug".as_ref(),
        exe.as_os_str(),
        debug.as_os_str(),
    ]) && objcopy(&["--strip-all".as_ref(), link.as_ref(), exe.as_os_str()])
}

#[test]
fn a_stripped_binary_is_named_from_its_debug_file_found_by_gnu_debuglink() {
    let Some(seeds) = seeds() else { return };
    let tmp = tempfile::tempdir().unwrap();
    for symbolizer in ["native", "perf"] {
        let at = tmp.path().join(symbolizer);
        fs::create_dir(&at).unwrap();
        let rd = copy_seed(&seeds, "result_dir_4242", &at);
        // The worker's snapshot stripped, its symbols in a debug file that
        // only its .gnu_debuglink finds (DIR/.debug/NAME, not by build id).
        let bin = rd.join("profiles/perf/worker_0/symfs/opt/presto/bin");
        let debug = bin.join(".debug/presto_server.debug");
        if !split_debug(&bin.join("presto_server"), &debug) {
            return;
        }
        let args = ["--symbolizer", symbolizer, "--formats", "folded,summary"];
        let out = process(&args, &[&rd]);
        assert_eq!(out.status.code(), Some(0), "{}", output_text(&out));
        let q = capture(&rd, "Q1_iter1");
        let s = summary(&q);
        let worker = s["symbol_sources"]
            .as_array()
            .unwrap()
            .iter()
            .find(|d| d["dso"] == "/opt/presto/bin/presto_server")
            .unwrap_or_else(|| panic!("{s:#}"));
        let source = worker["source"].as_str().unwrap();
        assert!(
            source.starts_with("snapshot ")
                && source.ends_with(&format!("+ snapshot debug file {}", debug.display())),
            "{symbolizer}: {source}"
        );
        let text = fs::read_to_string(q.join("jobprof/stacks.folded")).unwrap();
        assert!(
            text.contains(";busy;burn ") && !text.contains("[presto_server]"),
            "{symbolizer}: {text}"
        );
    }
}

#[test]
fn a_debug_file_under_the_linked_name_is_taken_only_with_the_links_crc() {
    use jobprof::symbolize::sources::{resolve, Kind, Search};
    if !util::require(util::have("gcc"), "gcc") {
        return;
    }
    // Files without build ids: the CRC-32 in the .gnu_debuglink is all that
    // ties the debug file to its binary (a capture that recorded no id).
    let tmp = tempfile::tempdir().unwrap();
    let symfs = tmp.path().join("symfs");
    let bin = symfs.join("opt/app");
    fs::create_dir_all(&bin).unwrap();
    let build = |name: &str, body: &str| {
        let c = tmp.path().join(format!("{name}.c"));
        fs::write(&c, body).unwrap();
        let exe = bin.join(name);
        let out = std::process::Command::new("gcc")
            .args(["-g", "-O0", "-Wl,--build-id=none", "-o"])
            .arg(&exe)
            .arg(&c)
            .output()
            .unwrap();
        assert!(out.status.success(), "{}", output_text(&out));
        exe
    };
    let exe = build(
        "server",
        "int work(int x) { return x + 1; }\nint main(void) { return work(0); }\n",
    );
    let other = build(
        "other",
        "int other(int x) { return x * 3; }\nint main(void) { return other(1); }\n",
    );
    let debug = bin.join(".debug/server.debug");
    if !split_debug(&exe, &debug) {
        return;
    }
    let search = Search {
        symfs: Some(symfs.clone()),
        ..Search::default()
    };
    let r = resolve("/opt/app/server", &[], &search);
    assert_eq!(
        r.binary.as_ref().map(|b| b.kind),
        Some(Kind::Snapshot),
        "{r:?}"
    );
    assert_eq!(r.debug.len(), 1, "{r:?}");
    assert_eq!(
        (r.debug[0].kind, &r.debug[0].path),
        (Kind::SnapshotDebug, &debug)
    );
    // Another program's debug file under the linked name: refused, its CRC
    // said.
    let foreign = tmp.path().join("other.debug");
    assert!(objcopy(&[
        "--only-keep-debug".as_ref(),
        other.as_os_str(),
        foreign.as_os_str()
    ]));
    fs::copy(&foreign, &debug).unwrap();
    let r = resolve("/opt/app/server", &[], &search);
    assert!(r.debug.is_empty(), "{r:?}");
    assert!(
        r.rejected
            .iter()
            .any(|x| x.path == debug && x.crc.is_some()),
        "{r:?}"
    );
}
