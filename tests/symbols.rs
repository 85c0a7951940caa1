//! Symbols you can trust: the reference test. A real worker
//! (tests/programs/symbols.c: its own code, libc calls, system calls) is
//! captured by the real sidecar, once with frame pointers and once with
//! DWARF; `jobprof process` on the published capture must give the same
//! stacks as `perf script` run directly on the raw shards without `--symfs`
//! on this machine (the ground truth: what perf names on the node), for at
//! least 99% of the sample weight, with user, libc (from its separate debug
//! file) and kernel frames named. Then the kernel-symbol rules for captures
//! without a kallsyms snapshot: the live table on the same host and boot,
//! unnamed kernel frames and a warning otherwise.

use std::fs;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::OnceLock;
use std::time::Duration;

use crate::util::jobprof;
use crate::util::{self, output_text};
use crate::util::{agreement, folded, stack_share, summary};

/// One published capture of the worker: `<keep>/result/worker_0/q1`.
struct Captured {
    _keep: tempfile::TempDir,
    perf_root: PathBuf,
}

impl Captured {
    fn worker_dir(&self) -> PathBuf {
        self.perf_root.join("worker_0")
    }
    fn capture_dir(&self) -> PathBuf {
        self.worker_dir().join("q1")
    }
}

/// Runs the worker under the real sidecar with `call_graph` and publishes
/// one 3-second capture in 2 shards.
fn capture(call_graph: &str) -> Captured {
    capture_of(
        "tests/programs/symbols.c",
        &["-O2", "-g"],
        &["120", "4"],
        call_graph,
    )
}

/// Runs the C program `src` (built with `flags`) with `args` under the real
/// sidecar with `call_graph`, and publishes one 3-second capture.
fn capture_of(src: &str, flags: &[&str], args: &[&str], call_graph: &str) -> Captured {
    let keep = tempfile::tempdir().unwrap();
    let exe = keep.path().join("symbols_worker");
    util::gcc(src, &exe, flags).unwrap();
    let mut worker = Command::new(&exe)
        .args(args)
        .stdout(Stdio::null())
        .spawn()
        .unwrap();
    let perf_root = keep.path().join("result");
    util::capture_q1(
        keep.path(),
        &perf_root,
        &mut worker,
        &format!(
            "--call-graph {call_graph} --frequency 999 --threads-per-shard 3 \
             --start-timeout 60 --stop-timeout 60"
        ),
        &[],
        3,
        Duration::from_secs(120),
    );
    Captured {
        _keep: keep,
        perf_root,
    }
}

fn fp_capture() -> Option<&'static Captured> {
    static C: OnceLock<Option<Captured>> = OnceLock::new();
    C.get_or_init(|| ready().then(|| capture("fp"))).as_ref()
}

fn ready() -> bool {
    let gcc = Command::new("gcc").arg("--version").output().is_ok();
    util::require(gcc, "gcc (to build tests/programs/symbols.c)")
        && util::require(util::perf_can_record(), "perf that can record")
        && util::require(
            Path::new("/usr/lib/debug/.build-id").is_dir(),
            "separate debug info for libc (Debian: apt-get install libc6-dbg)",
        )
}

/// A private copy of the capture's PERF_ROOT under `tmp`, edited by
/// `edit` (given its worker directory).
fn copy_capture(c: &Captured, tmp: &Path, edit: impl Fn(&Path)) -> PathBuf {
    let dst = tmp.join("result");
    let st = Command::new("cp")
        .arg("-a")
        .arg(&c.perf_root)
        .arg(&dst)
        .status()
        .unwrap();
    assert!(st.success());
    edit(&dst.join("worker_0"));
    dst
}

/// Processes a private copy of the capture; returns its directory.
fn process_copy(
    c: &Captured,
    tmp: &Path,
    args: &[&str],
    edit: impl Fn(&Path),
) -> (PathBuf, String) {
    let dst = copy_capture(c, tmp, edit);
    let out = jobprof()
        .arg("process")
        .arg(&dst)
        // Compared with `perf script --no-inline` below.
        .args([
            "--formats",
            "folded,summary",
            "--min-symbolized",
            "0",
            "--no-inline",
        ])
        .args(args)
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(0), "{}", output_text(&out));
    // The log (stderr) and the result line (stdout), together.
    (dst.join("worker_0/q1"), output_text(&out))
}

/// What perf names on this node: `perf script` on each raw shard, no
/// `--symfs`, folded by `jobprof fold` (the same folder as `process`).
fn reference_folded(c: &Captured, tmp: &Path) -> PathBuf {
    let text = tmp.join("reference.perf.txt");
    let mut all = Vec::new();
    let mut shards = 0;
    for e in fs::read_dir(c.capture_dir()).unwrap() {
        let p = e.unwrap().path();
        let name = p.file_name().unwrap().to_string_lossy().into_owned();
        if !name.starts_with("perf.data") {
            continue;
        }
        shards += 1;
        let out = Command::new("perf")
            .args(["script", "-f", "--no-inline", "-i"])
            .arg(&p)
            .output()
            .unwrap();
        assert!(out.status.success(), "perf script: {}", output_text(&out));
        all.extend_from_slice(&out.stdout);
    }
    assert!(shards >= 2, "the capture has {shards} shard(s)");
    fs::write(&text, all).unwrap();
    let folded = tmp.join("reference.folded");
    let out = jobprof()
        .arg("fold")
        .arg(&text)
        .arg("-o")
        .arg(&folded)
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", output_text(&out));
    folded
}

fn check_reference(c: &Captured, mode: &str) {
    let tmp = tempfile::tempdir().unwrap();
    let (dir, log) = process_copy(c, tmp.path(), &[], |_| {});
    let ours = folded(&dir.join("stacks.folded"));
    let theirs = folded(&reference_folded(c, tmp.path()));
    let total: u64 = ours.values().sum();
    assert_eq!(
        total,
        theirs.values().sum::<u64>(),
        "same samples, same weight"
    );
    let a = agreement(&ours, &theirs);
    eprintln!(
        "symbols reference ({mode}): {:.2}% of the sample weight on identical stacks \
         ({} stacks, weight {total})",
        100.0 * a,
        ours.len()
    );
    let mut diff: Vec<(&String, &u64)> = ours
        .iter()
        .filter(|(s, n)| theirs.get(*s) != Some(n))
        .collect();
    diff.sort_by(|x, y| y.1.cmp(x.1));
    assert!(
        a >= 0.99,
        "{mode}: agreement {a:.4}; differing: {diff:#?}\n{log}"
    );

    // The frames that matter are there, named.
    let kernel = stack_share(&ours, |f| {
        [
            "ksys_read",
            "ksys_write",
            "do_syscall_64",
            "read_zero",
            "vfs_read",
        ]
        .contains(&f)
    });
    let libc = stack_share(&ours, |f| {
        f.starts_with("msort_with_tmp")
            || f == "qsort_r"
            || f.starts_with("__memmove")
            || f.starts_with("__vfprintf")
            || f.starts_with("__printf_fp")
    });
    let own = stack_share(&ours, |f| {
        ["spin_own", "use_libc", "cmp_ulong"].contains(&f)
    });
    assert!(kernel > 0.01, "{mode}: kernel frames named in {kernel:.3}");
    assert!(libc > 0.05, "{mode}: libc frames named in {libc:.3}");
    assert!(own > 0.05, "{mode}: own frames named in {own:.3}");
    assert_eq!(
        stack_share(&ours, |f| f == "[[kernel.kallsyms]]"),
        0.0,
        "{mode}: no unnamed kernel frame"
    );
    let s = summary(&dir);
    let kernel_from = s["kernel_symbols"].as_str().unwrap();
    assert!(kernel_from.starts_with("snapshot "), "{kernel_from}");
    assert!(s["symbolized_ratio"].as_f64().unwrap() > 0.95, "{s:#}");
    assert!(log.contains("% named at the leaf"), "{log}");
    if mode == "fp" {
        // libc is built without frame pointers: a sample inside qsort or
        // snprintf has no caller in its chain. The record says so, and the
        // advice is the frame pointers'.
        let truncated = s["truncated_ratio"].as_f64().unwrap();
        eprintln!(
            "symbols reference (fp): truncated {truncated:.3} {}",
            s["truncated_roots"]
        );
        assert!(truncated > 0.1, "{s:#}");
        assert_eq!(
            s["truncated_roots"][0]["name"], "no caller recorded",
            "{s:#}"
        );
        assert!(
            s["warnings"]
                .to_string()
                .contains("-fno-omit-frame-pointer"),
            "{s:#}"
        );
    }

    // The snapshot took libc's separate debug file, at perf's path.
    let manifest = fs::read_to_string(c.worker_dir().join("symbol-manifest.tsv")).unwrap();
    let libc_debug = manifest
        .lines()
        .find(|l| l.starts_with("debuginfo\t") && l.contains("(for /") && l.contains("libc.so.6"))
        .unwrap_or_else(|| panic!("no libc debuginfo row:\n{manifest}"));
    let cols: Vec<&str> = libc_debug.split('\t').collect();
    assert!(cols[4].starts_with("copied"), "{libc_debug}");
    assert!(cols[1].starts_with("/usr/lib/debug/"), "{libc_debug}");
    assert!(c
        .worker_dir()
        .join("symfs")
        .join(cols[1].trim_start_matches('/'))
        .is_file());
    assert!(manifest
        .lines()
        .any(|l| l.starts_with("kallsyms\t") && l.ends_with("\tcopied")));
}

#[test]
fn fp_capture_names_what_perf_names_on_the_node() {
    let Some(c) = fp_capture() else { return };
    check_reference(c, "fp");
}

#[test]
fn dwarf_capture_names_what_perf_names_on_the_node() {
    if !ready() {
        return;
    }
    let c = capture("dwarf,16384");
    check_reference(&c, "dwarf");
    // DWARF unwinds through libc: the stacks reach the thread entry.
    let tmp = tempfile::tempdir().unwrap();
    let (dir, _) = process_copy(&c, tmp.path(), &[], |_| {});
    let s = summary(&dir);
    assert!(s["truncated_ratio"].as_f64().unwrap() < 0.05, "{s:#}");
}

#[test]
fn fp_truncation_is_judged_from_where_the_call_chains_end() {
    if !ready() {
        return;
    }
    let tmp = tempfile::tempdir().unwrap();
    // 20 calls deep, frame pointers all the way: every chain reaches
    // __libc_start_call_main, which stays unnamed without libc's debug
    // file (taken out of the snapshot, and this host's hidden): complete
    // stacks, no warning, whatever the root is called.
    let c = capture_of(
        "tests/programs/deep.c",
        &["-O0", "-g"],
        &["120", "20"],
        "fp",
    );
    let hide = util::is_root() && util::have("unshare");
    for symbolizer in ["native", "perf"] {
        let at = tmp.path().join(format!("complete-{symbolizer}"));
        fs::create_dir(&at).unwrap();
        let dst = copy_capture(&c, &at, |w| {
            let _ = fs::remove_dir_all(w.join("symfs/usr/lib/debug"));
        });
        // This host's debug files hidden too, when it can be (a private,
        // empty /usr/lib/debug, no build-id cache).
        let mut cmd = if hide {
            let mut u = Command::new("unshare");
            u.args(["-m", "--propagation", "private", "sh", "-c"])
                .arg("mount -t tmpfs jobprof-test /usr/lib/debug && exec \"$@\"")
                .arg("sh")
                .arg(env!("CARGO_BIN_EXE_jobprof"));
            u.env("HOME", &at).env_remove("DEBUGINFOD_CACHE_PATH");
            u
        } else {
            jobprof()
        };
        let out = cmd
            .arg("process")
            .arg(&dst)
            .args(["--symbolizer", symbolizer, "--formats", "folded,summary"])
            .output()
            .unwrap();
        let log = output_text(&out);
        assert_eq!(out.status.code(), Some(0), "{log}");
        let dir = dst.join("worker_0/q1");
        if hide {
            let ours = folded(&dir.join("stacks.folded"));
            let unnamed_root = stack_share(&ours, |f| f == "[libc.so.6]");
            assert!(unnamed_root > 0.5, "{symbolizer}: {ours:#?}");
        }
        let s = summary(&dir);
        assert_eq!(
            s["truncated_ratio"].as_f64(),
            Some(0.0),
            "{symbolizer}: {s:#}"
        );
        assert!(
            !s["warnings"].to_string().contains("truncated"),
            "{symbolizer}: {s:#}\n{log}"
        );
    }
    // 200 calls deep: every chain stops at perf's 127 frames, whatever its
    // frames are called; and the advice is the depth limit's.
    let c = capture_of(
        "tests/programs/deep.c",
        &["-O0", "-g"],
        &["120", "200"],
        "fp",
    );
    for symbolizer in ["native", "perf"] {
        let at = tmp.path().join(format!("deep-{symbolizer}"));
        fs::create_dir(&at).unwrap();
        let (dir, log) = process_copy(&c, &at, &["--symbolizer", symbolizer], |_| {});
        let s = summary(&dir);
        let truncated = s["truncated_ratio"].as_f64().unwrap();
        assert!(truncated > 0.9, "{symbolizer}: {s:#}");
        assert_eq!(
            s["truncated_roots"][0]["name"], "call chain at the depth limit",
            "{symbolizer}: {s:#}"
        );
        let warnings = s["warnings"].to_string();
        assert!(
            warnings.contains("truncated stacks: their call chains end before")
                && warnings.contains("kernel.perf_event_max_stack")
                && !warnings.contains("--call-graph dwarf"),
            "{symbolizer}: {warnings}\n{log}"
        );
    }
}

fn set_boot_id(worker: &Path, boot: &str) {
    let p = worker.join("q1/capture.json");
    let mut cap: serde_json::Value = serde_json::from_slice(&fs::read(&p).unwrap()).unwrap();
    cap["boot_id"] = boot.into();
    fs::write(&p, serde_json::to_vec_pretty(&cap).unwrap()).unwrap();
}

/// Makes the shards of capture `q` say they sampled another kernel: the
/// running kernel's build id `kernel` (hex) in their headers, changed.
fn another_kernel(q: &Path, kernel: &str) {
    let id: Vec<u8> = (0..kernel.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(&kernel[i..i + 2], 16).unwrap())
        .collect();
    for e in fs::read_dir(q).unwrap().flatten() {
        if !e.file_name().to_string_lossy().starts_with("perf.data") {
            continue;
        }
        let mut data = fs::read(e.path()).unwrap();
        let at = data.windows(id.len()).rposition(|w| w == id).unwrap();
        data[at] ^= 0xff;
        fs::write(e.path(), data).unwrap();
    }
}

#[test]
fn without_a_snapshot_the_live_table_only_on_the_same_boot_or_kernel() {
    let Some(c) = fp_capture() else { return };
    let named = |dir: &Path| {
        let s = folded(&dir.join("stacks.folded"));
        (
            stack_share(&s, |f| f == "do_syscall_64"),
            stack_share(&s, |f| f == "[[kernel.kallsyms]]"),
        )
    };
    // Same host and boot: /proc/kallsyms here is the sampled kernel's.
    let tmp = tempfile::tempdir().unwrap();
    let (dir, _) = process_copy(c, tmp.path(), &[], |w| {
        fs::remove_file(w.join("kallsyms")).unwrap()
    });
    let s = summary(&dir);
    assert!(
        s["kernel_symbols"]
            .as_str()
            .unwrap()
            .starts_with("/proc/kallsyms (capture made on this host during this boot)"),
        "{s:#}"
    );
    let (ok, unnamed) = named(&dir);
    assert!(ok > 0.01 && unnamed == 0.0, "{ok} {unnamed}");

    // Another boot of the same kernel (the same node after a reboot,
    // another node of one image): the core kernel's table, KASLR's offset
    // taken off.
    let kernel = jobprof::symbolize::kernel::running_kernel_build_id();
    if !util::require(kernel.is_some(), "a kernel build id in /sys/kernel/notes") {
        return;
    }
    let kernel = kernel.unwrap();
    let tmp = tempfile::tempdir().unwrap();
    let (dir, _) = process_copy(c, tmp.path(), &[], |w| {
        fs::remove_file(w.join("kallsyms")).unwrap();
        set_boot_id(w, "00000000-0000-0000-0000-000000000000");
    });
    let from = summary(&dir)["kernel_symbols"]
        .as_str()
        .unwrap()
        .to_string();
    assert!(
        from.starts_with("/proc/kallsyms, core kernel only"),
        "{from}"
    );
    assert!(from.contains(&kernel), "{from}");
    let (ok, unnamed) = named(&dir);
    assert!(ok > 0.01 && unnamed == 0.0, "{ok} {unnamed}");

    // Another boot of another kernel: kernel frames stay unnamed, and the
    // summary says why.
    let tmp = tempfile::tempdir().unwrap();
    let (dir, log) = process_copy(c, tmp.path(), &[], |w| {
        fs::remove_file(w.join("kallsyms")).unwrap();
        set_boot_id(w, "00000000-0000-0000-0000-000000000000");
        another_kernel(&w.join("q1"), &kernel);
    });
    let s = summary(&dir);
    let why = s["kernel_symbols"].as_str().unwrap();
    assert!(
        why.starts_with("none: ")
            && why.contains("another boot")
            && why.contains("is not this machine's"),
        "{why}"
    );
    let (ok, unnamed) = named(&dir);
    assert!(ok == 0.0 && unnamed > 0.01, "{ok} {unnamed}");
    let warnings = s["warnings"].to_string();
    assert!(warnings.contains("kernel frames unnamed"), "{warnings}");
    assert!(log.contains("warning: "), "{log}");
    let by_dso = &s["unnamed_by_dso"];
    assert!(
        by_dso
            .as_array()
            .unwrap()
            .iter()
            .any(|d| d["dso"] == "[kernel.kallsyms]"),
        "{by_dso:#}"
    );

    // The snapshot wins over a boot id that does not match.
    let tmp = tempfile::tempdir().unwrap();
    let (dir, _) = process_copy(c, tmp.path(), &[], |w| set_boot_id(w, "other"));
    assert_eq!(named(&dir).1, 0.0);
}

/// Rewrites, in the ELF file `path`, the section index of every `STT_FUNC`
/// symbol of `.symtab` and `.dynsym` that points at `.text` to point at
/// `.rodata`, as manylinux repair tools leave a library's symbols; returns
/// how many it changed.
fn point_functions_at_rodata(path: &Path) -> usize {
    let mut b = fs::read(path).unwrap();
    let u16_at = |b: &[u8], at: usize| u16::from_le_bytes(b[at..at + 2].try_into().unwrap());
    let u32_at = |b: &[u8], at: usize| u32::from_le_bytes(b[at..at + 4].try_into().unwrap());
    let u64_at =
        |b: &[u8], at: usize| u64::from_le_bytes(b[at..at + 8].try_into().unwrap()) as usize;
    let (shoff, shentsize) = (u64_at(&b, 0x28), usize::from(u16_at(&b, 0x3a)));
    let (shnum, shstrndx) = (usize::from(u16_at(&b, 0x3c)), usize::from(u16_at(&b, 0x3e)));
    let sh = |i: usize| shoff + i * shentsize;
    let names = u64_at(&b, sh(shstrndx) + 0x18);
    let name_of = |b: &[u8], i: usize| {
        let at = names + u32_at(b, sh(i)) as usize;
        let end = at + b[at..].iter().position(|&c| c == 0).unwrap();
        String::from_utf8_lossy(&b[at..end]).into_owned()
    };
    let index = |name: &str| (0..shnum).find(|&i| name_of(&b, i) == name).unwrap() as u16;
    let (text, rodata) = (index(".text"), index(".rodata"));
    let mut changed = 0;
    for i in 0..shnum {
        let kind = u32_at(&b, sh(i) + 4);
        if kind != 2 && kind != 11 {
            continue; // SHT_SYMTAB, SHT_DYNSYM
        }
        let (off, size) = (u64_at(&b, sh(i) + 0x18), u64_at(&b, sh(i) + 0x20));
        for s in (off..off + size).step_by(24) {
            if b[s + 4] & 0xf == 2 && u16_at(&b, s + 6) == text {
                b[s + 6..s + 8].copy_from_slice(&rodata.to_le_bytes());
                changed += 1;
            }
        }
    }
    fs::write(path, b).unwrap();
    changed
}

/// `perf script` (no `--symfs`: the library is where the worker loaded
/// it) on the capture's shards, folded.
fn perf_folded(q: &Path, tmp: &Path, inline: bool) -> std::collections::HashMap<String, u64> {
    let mut text = Vec::new();
    for p in util::data_files(q) {
        let out = Command::new("perf")
            .args([
                "script",
                "-f",
                if inline { "--inline" } else { "--no-inline" },
                "-i",
            ])
            .arg(&p)
            .output()
            .unwrap();
        assert!(out.status.success(), "perf script: {}", output_text(&out));
        text.extend_from_slice(&out.stdout);
    }
    let path = tmp.join("perf.txt");
    fs::write(&path, text).unwrap();
    util::fold_file(&path, &tmp.join("perf.folded"))
}

#[test]
fn library_with_stale_symbol_sections_is_named_by_address() {
    if !ready() {
        return;
    }
    let keep = tempfile::tempdir().unwrap();
    let lib = keep.path().join("libhot.so");
    // Segments 4 KiB away from their file offsets (text at offset 0x1000,
    // address 0x2000), as in the rewritten wheel libraries.
    let out = Command::new("gcc")
        .args(["-O2", "-g", "-fPIC", "-shared", "-fno-omit-frame-pointer"])
        .arg("-Wl,-Ttext-segment=0x1000")
        .arg("-o")
        .arg(&lib)
        .arg(util::repo_root().join("tests/programs/hot_lib.c"))
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", output_text(&out));
    // 3 exported functions in both tables, and the local ones of .symtab.
    assert!(point_functions_at_rodata(&lib) >= 6);
    let exe = keep.path().join("hot_main");
    let out = Command::new("gcc")
        .args(["-O2", "-fno-omit-frame-pointer", "-o"])
        .arg(&exe)
        .arg(util::repo_root().join("tests/programs/hot_main.c"))
        .arg(format!("-L{}", keep.path().display()))
        .arg(format!("-Wl,-rpath,{}", keep.path().display()))
        .arg("-lhot")
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", output_text(&out));
    for call_graph in ["fp", "dwarf"] {
        let dir = tempfile::tempdir().unwrap();
        let mut worker = Command::new(&exe).stdout(Stdio::null()).spawn().unwrap();
        let perf_root = dir.path().join("result");
        util::capture_q1(
            dir.path(),
            &perf_root,
            &mut worker,
            &format!("--call-graph {call_graph} --frequency 499"),
            &[],
            2,
            Duration::from_secs(60),
        );
        let q = perf_root.join("worker_0/q1");
        let theirs = perf_folded(&q, dir.path(), false);
        let hot = |s: &std::collections::HashMap<String, u64>| {
            stack_share(s, |f| f == "hot_a") + stack_share(s, |f| f == "hot_b")
        };
        assert!(hot(&theirs) > 0.5, "perf names them: {theirs:#?}");
        for symbolizer in ["native", "perf"] {
            let copy = dir.path().join(format!("copy-{symbolizer}"));
            util::copy_tree(&perf_root, &copy);
            let out = jobprof()
                .arg("process")
                .arg(&copy)
                .args(["--formats", "folded,summary", "--min-symbolized", "0"])
                .args(["--no-inline", "--symbolizer", symbolizer])
                .output()
                .unwrap();
            assert_eq!(out.status.code(), Some(0), "{}", output_text(&out));
            let ours = folded(&copy.join("worker_0/q1/stacks.folded"));
            let a = agreement(&ours, &theirs);
            eprintln!(
                "rewritten library, {call_graph}, {symbolizer}: {:.2}% of the weight agrees \
                 with perf script, hot_a/hot_b in {:.1}%",
                100.0 * a,
                100.0 * hot(&ours)
            );
            assert!(a >= 0.99, "{call_graph} {symbolizer}: {a}: {ours:#?}");
            assert!(hot(&ours) > 0.5, "{call_graph} {symbolizer}: {ours:#?}");
        }
    }
}
