//! aarch64 captures processed on this (usually x86-64) host. The fixtures
//! (fixtures/arm64/, made by scripts/arm64-vm.sh: real perf 6.1 on an arm64
//! Debian 12 kernel in a qemu-system-aarch64 guest, the worker of
//! fixtures/src/arm64: a C++ executable with a shared library, libc with
//! separate debug info, kernel frames) carry the guest's perf.data, symfs/
//! and kallsyms and the guest's own `perf script` text. `jobprof process
//! --symbolizer native` must put at least 99.5% of the weight on the
//! stacks the guest's perf script gives, and `perf script` on a host of
//! another architecture, which cannot unwind aarch64, must be refused
//! rather than drawn. No VM runs here.

use std::collections::HashMap;
use std::fs;
use std::path::{Path, PathBuf};
use std::process::Output;

use crate::native::assert_agreement;
use crate::util::folded;
use crate::util::{self, jobprof, output_text as text};

/// The fixture capture `name` (`fp` or `dwarf`) as a result directory of
/// the original pipeline's flat layout: `perf/perf.data.0`, and the shared
/// `perf/symfs/` and `perf/kallsyms` of the guest.
fn unpack(name: &str) -> (tempfile::TempDir, PathBuf) {
    let t = tempfile::tempdir().unwrap();
    let rd = t.path().join("result_dir_arm64");
    let perf = rd.join("perf");
    fs::create_dir_all(&perf).unwrap();
    let f = fs::File::open(arm64(&format!("{name}.perf.data.zst"))).unwrap();
    fs::write(perf.join("perf.data.0"), zstd::decode_all(f).unwrap()).unwrap();
    let k = fs::File::open(arm64("kallsyms.zst")).unwrap();
    fs::write(perf.join("kallsyms"), zstd::decode_all(k).unwrap()).unwrap();
    let f = fs::File::open(arm64("symfs.tar.zst")).unwrap();
    tar::Archive::new(zstd::Decoder::new(f).unwrap())
        .unpack(&perf)
        .unwrap();
    (t, rd)
}

/// A file of fixtures/arm64.
fn arm64(name: &str) -> PathBuf {
    util::fixtures().join("arm64").join(name)
}

/// The guest's own `perf script` text (`noinline` or `inline`) folded by
/// `jobprof fold`.
fn truth(name: &str, kind: &str, dir: &Path) -> HashMap<String, u64> {
    let zst = arm64(&format!("{name}.perf-script.{kind}.txt.zst"));
    let txt = dir.join(format!("truth.{name}.{kind}.txt"));
    fs::write(
        &txt,
        zstd::decode_all(fs::File::open(&zst).unwrap()).unwrap(),
    )
    .unwrap();
    let folded = dir.join(format!("truth.{name}.{kind}.folded"));
    util::fold_file(&txt, &folded)
}

fn process(rd: &Path, args: &[&str]) -> Output {
    jobprof()
        .arg("process")
        .arg(rd)
        .args(args)
        .output()
        .unwrap()
}

/// Processes fixture `name` natively (with `extra` options) and checks it
/// against the guest's `kind` text; returns the native stacks.
fn native_agrees(name: &str, kind: &str, extra: &[&str]) -> HashMap<String, u64> {
    let (t, rd) = unpack(name);
    let mut args = vec!["--symbolizer", "native"];
    if kind == "noinline" {
        // Native runs expand inline frames unless told not to.
        args.push("--no-inline");
    }
    args.extend_from_slice(extra);
    let o = process(&rd, &args);
    assert!(o.status.success(), "{}", text(&o));
    let s = util::summary(&rd.join("perf"));
    assert_eq!(s["symbolized_from"], "native", "{s}");
    assert!(s["perf_version"].is_null(), "perf did not run: {s}");
    assert_eq!(s["capture_arch"], "aarch64", "{s}");
    assert_eq!(s["host_arch"], std::env::consts::ARCH, "{s}");
    assert_eq!(
        s["call_graph"],
        if name == "dwarf" { "dwarf" } else { "fp" },
        "{s}"
    );
    let got = folded(&rd.join("perf/stacks.folded"));
    let want = truth(name, kind, t.path());
    assert_agreement(&format!("aarch64 {name} ({kind})"), &got, &want);
    got
}

/// Weight of the stacks holding `frames` consecutively (caller first).
fn weight_through(stacks: &HashMap<String, u64>, frames: &[&str]) -> u64 {
    let needle = frames.join(";");
    stacks
        .iter()
        .filter(|(s, _)| format!("{s};").contains(&format!("{needle};")))
        .map(|(_, w)| w)
        .sum()
}

#[test]
fn fp_chains_agree_with_the_guests_perf_script() {
    let got = native_agrees("fp", "noinline", &[]);
    // The frame perf's arm64 rule puts back from LR: the frameless leaf
    // lib_leaf (libwork.so) under its caller busy_c (without the rule:
    // busy_c is missing).
    let leaf = weight_through(&got, &["work::busy_c", "lib_leaf"]);
    assert!(
        leaf > 0,
        "no weight on busy_c;lib_leaf: the LR rule did not apply"
    );
}

#[test]
fn dwarf_stacks_agree_with_the_guests_perf_script() {
    let got = native_agrees("dwarf", "noinline", &[]);
    assert!(weight_through(&got, &["work::busy_c", "lib_leaf"]) > 0);
}

#[test]
fn dwarf_inline_frames_agree_with_the_guests_perf_script() {
    native_agrees("dwarf", "inline", &["--inline"]);
}

#[test]
fn perf_script_of_another_architecture_is_refused_not_drawn() {
    if std::env::consts::ARCH == "aarch64" {
        eprintln!("on aarch64, perf script here unwinds these captures itself");
        return;
    }
    if !util::require(util::perf_available(), "perf") {
        return;
    }
    for name in ["fp", "dwarf"] {
        let (_t, rd) = unpack(name);
        let o = process(&rd, &["--symbolizer", "perf"]);
        assert!(!o.status.success(), "{name}: {}", text(&o));
        let all = text(&o);
        assert!(all.contains("cannot unwind aarch64"), "{name}: {all}");
        assert!(
            !rd.join("perf/stacks.folded").exists(),
            "{name}: drawn anyway"
        );
    }
}

/// perf's arm64 LR rule (libunwind 1.6.2's step from PC, LR and SP = 0)
/// on the guest-built files' real CFI: LR holds the return address in a
/// frameless leaf and in a prologue before the frame record is stored, not
/// after it; libunwind falls back to LR wherever its DWARF step fails
/// before it reads the return address: anywhere in the PLT (no FDE) and in
/// C++ code whose CIE names the personality routine through
/// `DW.ref.__gxx_personality_v0` in `.data`, which perf does not map.
#[test]
fn the_lr_rule_follows_the_cfi_of_the_guests_files() {
    use object::{Object, ObjectSection, ObjectSymbol};
    let (t, rd) = unpack("fp");
    let root = rd.join("perf/symfs");
    let read = |path: &str| fs::read(root.join(path.trim_start_matches('/'))).unwrap();
    let sym = |file: &object::File, name: &str| {
        file.symbols()
            .find(|s| s.name() == Ok(name))
            .unwrap_or_else(|| panic!("{name}"))
            .address()
    };
    let load = |path: &str| {
        let search = jobprof::symbolize::sources::Search {
            symfs: Some(root.clone()),
            ..Default::default()
        };
        let files = jobprof::symbolize::sources::resolve(path, &[], &search);
        jobprof::symbolize::native::unwind::load(&files)
            .expect("no file shrank")
            .expect("unwind tables")
    };
    let lib = "/root/work/bin/libwork.so";
    let bytes = read(lib);
    let file = object::File::parse(&*bytes).unwrap();
    let t64 = load(lib);
    let (leaf, sort) = (sym(&file, "lib_leaf"), sym(&file, "lib_sort"));
    assert!(
        t64.return_address_in_lr(leaf),
        "frameless leaf, first instruction"
    );
    assert!(t64.return_address_in_lr(leaf + 8), "frameless leaf, body");
    assert!(
        t64.return_address_in_lr(sort),
        "prologue, before the frame record"
    );
    // gcc 12.2 -O1: sub sp; stp x29, x30, [sp]; mov x29, sp; ... (LR saved)
    assert!(
        !t64.return_address_in_lr(sort + 12),
        "after the frame record"
    );
    let plt = file.section_by_name(".plt").expect(".plt").address();
    for at in [plt, plt + 32, plt + 36] {
        assert!(t64.return_address_in_lr(at), "PLT + {}: no FDE", at - plt);
    }
    // The guest's perf: `work::busy_c+0x70;work::busy_c+0x6f` (LR after a
    // call returned), the frame record stored long before.
    let exe = "/root/work/bin/worker";
    let bytes = read(exe);
    let file = object::File::parse(&*bytes).unwrap();
    let w = load(exe);
    let busy_c = sym(&file, "_ZN4work6busy_cEv");
    assert!(w.return_address_in_lr(busy_c + 0x70), "C++ FDE (zPLR)");
    drop(t);
}
