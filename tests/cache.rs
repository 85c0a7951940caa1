//! The persistent symbol cache (`--cache-dir`, docs/symbols.md): a second
//! run over the same builds maps what the first built, and writes the
//! same outputs as a run without the cache; a damaged cache costs time,
//! never a wrong name.

use std::fs;
use std::path::{Path, PathBuf};

use crate::util::{self, comparable_outputs, copy_seed, jobprof, output_text, seeds};

/// A temporary directory whose ancestors are the builder's own (a cache
/// directory as root needs every ancestor root's and writable by no one
/// else: /tmp, writable by all, would refuse it).
fn tempdir() -> tempfile::TempDir {
    tempfile::tempdir_in(env!("CARGO_TARGET_TMPDIR")).unwrap()
}

/// `path`'s owner set to `uid` (the link itself when it is one).
fn lchown(path: &Path, uid: u32) {
    std::os::unix::fs::lchown(path, Some(uid), Some(uid)).unwrap();
}

/// A file at `path` last modified two hours ago.
fn old_file(path: &Path, text: &str) {
    fs::write(path, text).unwrap();
    let two_hours = std::time::Duration::from_secs(7200);
    let f = fs::File::options().write(true).open(path).unwrap();
    f.set_modified(std::time::SystemTime::now() - two_hours)
        .unwrap();
}

/// The seeds' libc debug file (libc6-dbg): compressed DWARF, what the
/// cache keeps inflated.
const LIBC_DEBUG: &str = "/usr/lib/debug/.build-id/93/ac61ec5a8eb1396f9fbd350e3169a558528a40.debug";

/// `jobprof process --force RD ARGS`, its log.
fn process(rd: &Path, args: &[&str]) -> String {
    let out = jobprof()
        .args(["process", "--force", "-v"])
        .arg(rd)
        .args(args)
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(0), "{}", output_text(&out));
    util::stderr(&out)
}

/// The log's symbol cache figures: (hits, misses, written).
fn figures(log: &str) -> (u64, u64, u64) {
    let line = log
        .lines()
        .find(|l| l.contains("symbol cache "))
        .unwrap_or_else(|| panic!("no symbol cache line: {log}"));
    let n = |what: &str| -> u64 {
        let end = line.find(what).unwrap_or_else(|| panic!("{line}"));
        let start = line[..end]
            .trim_end()
            .rfind([' ', ','])
            .map_or(0, |i| i + 1);
        line[start..end]
            .trim()
            .parse()
            .unwrap_or_else(|_| panic!("{line}"))
    };
    (n(" hit(s)"), n(" miss(es)"), n(" written"))
}

/// A copy of the seed capture 4243 (libc named from this host's libc6-dbg)
/// under `at`, and its capture's output directory.
fn seed(at: &Path) -> Option<(PathBuf, PathBuf)> {
    let seeds = seeds()?;
    if !util::require(
        Path::new(LIBC_DEBUG).is_file(),
        "libc6-dbg for the seeds' libc (build id 93ac61ec…)",
    ) {
        return None;
    }
    fs::create_dir_all(at).unwrap();
    let rd = copy_seed(&seeds, "result_dir_4243", at);
    let out = rd.join("profiles/perf/worker_0/Q5_iter1/jobprof");
    Some((rd, out))
}

#[test]
fn the_second_run_maps_what_the_first_built_and_writes_the_same_outputs() {
    let tmp = tempdir();
    let Some((plain, plain_out)) = seed(&tmp.path().join("plain")) else {
        return;
    };
    let (rd, out) = seed(&tmp.path().join("cached")).unwrap();
    let cache = tmp.path().join("cache");
    let dir = cache.to_str().unwrap();
    let log = process(&plain, &["--no-cache"]);
    assert!(!log.contains("symbol cache "), "{log}");
    let want = comparable_outputs(&plain_out, &plain);

    let (hits, misses, written) = figures(&process(&rd, &["--cache-dir", dir]));
    assert!(
        hits == 0 && misses >= 2 && written == misses,
        "{hits} {misses} {written}"
    );
    let names: Vec<String> = fs::read_dir(&cache)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    assert!(names.iter().any(|n| n.starts_with("dwarf-")), "{names:?}");
    assert!(names.iter().any(|n| n.starts_with("sym-")), "{names:?}");
    assert_eq!(comparable_outputs(&out, &rd), want, "cold cache");

    // The same by the environment variable: every entry found.
    let again = jobprof()
        .args(["process", "--force", "-v"])
        .arg(&rd)
        .env("JOBPROF_CACHE_DIR", &cache)
        .output()
        .unwrap();
    assert_eq!(again.status.code(), Some(0), "{}", output_text(&again));
    assert_eq!(figures(&util::stderr(&again)), (misses, 0, 0));
    assert_eq!(comparable_outputs(&out, &rd), want, "warm cache");
}

#[test]
fn damaged_entries_are_rebuilt_and_name_as_before() {
    let tmp = tempdir();
    let Some((rd, out)) = seed(&tmp.path().join("rd")) else {
        return;
    };
    let cache = tmp.path().join("cache");
    let dir = cache.to_str().unwrap();
    let (_, misses, _) = figures(&process(&rd, &["--cache-dir", dir]));
    let want = comparable_outputs(&out, &rd);
    // One byte flipped in the middle of each entry, one entry cut short.
    let mut entries: Vec<_> = fs::read_dir(&cache)
        .unwrap()
        .map(|e| e.unwrap().path())
        .collect();
    entries.sort();
    for (i, p) in entries.iter().enumerate() {
        let mut b = fs::read(p).unwrap();
        if i == 0 {
            b.truncate(b.len() / 2);
        } else {
            let mid = b.len() / 2;
            b[mid] ^= 0x55;
        }
        fs::write(p, b).unwrap();
    }
    let log = process(&rd, &["--cache-dir", dir]);
    assert_eq!(figures(&log), (0, misses, misses), "{log}");
    assert_eq!(comparable_outputs(&out, &rd), want);
    assert_eq!(
        figures(&process(&rd, &["--cache-dir", dir])),
        (misses, 0, 0)
    );
}

#[test]
fn a_cache_directory_others_may_write_is_not_used_and_the_run_goes_on() {
    use std::os::unix::fs::PermissionsExt;
    let tmp = tempdir();
    let Some((rd, _)) = seed(&tmp.path().join("rd")) else {
        return;
    };
    let cache = tmp.path().join("shared-cache");
    fs::create_dir(&cache).unwrap();
    fs::set_permissions(&cache, fs::Permissions::from_mode(0o777)).unwrap();
    let log = process(&rd, &["--cache-dir", cache.to_str().unwrap()]);
    assert!(log.contains("writable by you alone"), "{log}");
    assert_eq!(
        fs::read_dir(&cache).unwrap().count(),
        0,
        "nothing written there"
    );
}

/// The libc function (of the seed's stacks, named by its ELF symbol) the
/// forged debug file renames (issue 45), and the forged name, of the same
/// length.
const HONEST: &[u8] = b"\0__strlen_evex\0";
const FORGED: &[u8] = b"\0PWNEDbyHOSTIL\0";

/// Every output of `out` as one text (names searched for in tests).
fn all_outputs(out: &Path, rd: &Path) -> String {
    let all = comparable_outputs(out, rd);
    all.values()
        .map(|b| String::from_utf8_lossy(b).into_owned())
        .collect()
}

/// Asserts that `out` (of `rd`) holds the outputs `want`, the folded
/// stacks compared as text first (a wrong name shows in the diff).
fn same_outputs(out: &Path, rd: &Path, want: &std::collections::BTreeMap<String, Vec<u8>>) {
    let got = comparable_outputs(out, rd);
    let text = |m: &std::collections::BTreeMap<String, Vec<u8>>| {
        String::from_utf8_lossy(&m["stacks.folded"]).into_owned()
    };
    assert_eq!(text(&got), text(want), "{}", rd.display());
    assert_eq!(&got, want, "{}", rd.display());
}

/// `bytes` with the one `from` replaced by `to` (of the same length).
fn patch(bytes: &mut [u8], from: &[u8], to: &[u8]) {
    let at = bytes
        .windows(from.len())
        .position(|w| w == from)
        .unwrap_or_else(|| panic!("{from:?} in libc's debug file"));
    bytes[at..at + to.len()].copy_from_slice(to);
}

/// `rd`'s symfs path of the host's libc debug file, `bytes` written there
/// (owned by nobody as root: the capture's owner's).
fn put_libc_debug(rd: &Path, bytes: &[u8]) {
    let rel = LIBC_DEBUG.trim_start_matches('/');
    let to = rd.join("profiles/perf/worker_0/symfs").join(rel);
    fs::create_dir_all(to.parent().unwrap()).unwrap();
    fs::write(&to, bytes).unwrap();
    if util::is_root() {
        lchown(&to, 65534);
    }
}

/// Puts in `rd`'s symfs a copy of the host's libc debug file with one
/// symbol renamed and its `.debug_info` renamed away (so that its ELF
/// symbols name the frames), same build id, same size: what a hostile
/// capture's owner can write there.
fn forge_libc_debug(rd: &Path) {
    let mut bytes = fs::read(LIBC_DEBUG).unwrap();
    patch(&mut bytes, HONEST, FORGED);
    patch(&mut bytes, b".debug_info\0", b".debug_xnfo\0");
    put_libc_debug(rd, &bytes);
}

#[test]
fn a_forged_debug_file_with_an_honest_build_id_never_names_another_capture() {
    let tmp = tempdir();
    let Some((plain, plain_out)) = seed(&tmp.path().join("plain")) else {
        return;
    };
    let (hostile, hostile_out) = seed(&tmp.path().join("hostile")).unwrap();
    let (honest, honest_out) = seed(&tmp.path().join("honest")).unwrap();
    forge_libc_debug(&hostile);
    // The honest captures carry the honest debug file in their snapshots.
    let honest_debug = fs::read(LIBC_DEBUG).unwrap();
    put_libc_debug(&plain, &honest_debug);
    put_libc_debug(&honest, &honest_debug);
    process(&plain, &["--no-cache"]);
    let want = comparable_outputs(&plain_out, &plain);
    let forged = String::from_utf8_lossy(&FORGED[1..FORGED.len() - 1]).into_owned();
    assert!(!all_outputs(&plain_out, &plain).contains(&forged));
    let cache = tmp.path().join("cache");
    let dir = cache.to_str().unwrap();
    // The hostile capture first: its own outputs carry its forged name...
    process(&hostile, &["--cache-dir", dir]);
    assert!(
        all_outputs(&hostile_out, &hostile).contains(&forged),
        "the forged debug file is what names the hostile capture's libc"
    );
    // ...and the honest capture after it, with the same cache, names as
    // it does without one.
    process(&honest, &["--cache-dir", dir]);
    same_outputs(&honest_out, &honest, &want);
    // Both in one run share nothing either.
    let both = tmp.path().join("both");
    fs::create_dir(&both).unwrap();
    fs::rename(&hostile, both.join("a-hostile")).unwrap();
    fs::rename(&honest, both.join("b-honest")).unwrap();
    let honest = both.join("b-honest");
    let honest_out = honest.join("profiles/perf/worker_0/Q5_iter1/jobprof");
    fs::remove_dir_all(&honest_out).unwrap();
    let out = jobprof()
        .args(["reprocess", "--force", "-j", "1", "--cache-dir", dir])
        .arg(&both)
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(0), "{}", output_text(&out));
    same_outputs(&honest_out, &honest, &want);
}

#[test]
fn files_the_cache_did_not_write_are_never_removed() {
    let tmp = tempdir();
    let Some((rd, _)) = seed(&tmp.path().join("rd")) else {
        return;
    };
    // A directory of the user's, with files of theirs an hour old.
    let mine = tmp.path().join("mine");
    fs::create_dir(&mine).unwrap();
    old_file(&mine.join("notes.txt"), "mine");
    old_file(&mine.join(".hidden.tmp"), "mine too");
    let log = process(&rd, &["--cache-dir", mine.to_str().unwrap()]);
    assert_eq!(fs::read_to_string(mine.join("notes.txt")).unwrap(), "mine");
    assert_eq!(
        fs::read_to_string(mine.join(".hidden.tmp")).unwrap(),
        "mine too"
    );
    assert!(log.contains("CACHEDIR.TAG"), "{log}");
    // jobprof's own directory: a file planted there later stays too.
    let cache = tmp.path().join("cache");
    let dir = cache.to_str().unwrap();
    process(&rd, &["--cache-dir", dir]);
    assert!(cache.join("CACHEDIR.TAG").is_file());
    old_file(&cache.join("planted"), "not jobprof's");
    old_file(&cache.join(".planted.tmp"), "not jobprof's");
    // A write, then a trim: the entries are rewritten after a wipe.
    for e in fs::read_dir(&cache).unwrap() {
        let n = e.unwrap().file_name();
        if n.to_string_lossy().starts_with("sym-") {
            fs::remove_file(cache.join(n)).unwrap();
        }
    }
    let (_, _, written) = figures(&process(&rd, &["--cache-dir", dir]));
    assert!(written > 0);
    assert!(cache.join("planted").is_file());
    assert!(cache.join(".planted.tmp").is_file());
}

/// A home directory `home` whose `.cache` is a link to `target` (both
/// under `tmp`), `target` holding an old file of its owner's.
fn home_with_linked_cache(tmp: &Path) -> (PathBuf, PathBuf) {
    let home = tmp.join("home");
    let target = tmp.join("root-owned");
    fs::create_dir_all(&home).unwrap();
    fs::create_dir_all(target.join("jobprof")).unwrap();
    old_file(&target.join("jobprof/precious"), "root's");
    std::os::unix::fs::symlink(&target, home.join(".cache")).unwrap();
    if util::is_root() {
        // The link is the user's (nobody's), as in the attack.
        lchown(&home.join(".cache"), 65534);
    }
    (home, target)
}

#[test]
fn a_link_among_the_cache_directory_s_ancestors_is_not_followed() {
    let tmp = tempdir();
    let Some((rd, _)) = seed(&tmp.path().join("rd")) else {
        return;
    };
    let (home, target) = home_with_linked_cache(tmp.path());
    let run = |home: &Path| {
        let out = jobprof()
            .args(["process", "--force"])
            .arg(&rd)
            .env("HOME", home)
            .env_remove("XDG_CACHE_HOME")
            .env_remove("JOBPROF_CACHE_DIR")
            .output()
            .unwrap();
        assert_eq!(out.status.code(), Some(0), "{}", output_text(&out));
        util::stderr(&out)
    };
    let log = run(&home);
    assert!(log.contains("symbolic link"), "{log}");
    let names: Vec<_> = fs::read_dir(target.join("jobprof"))
        .unwrap()
        .map(|e| e.unwrap().file_name())
        .collect();
    assert_eq!(names, ["precious"], "nothing written or removed there");
    if !util::is_root() {
        return;
    }
    // As root, a home directory of another user's is no place for root's
    // cache, even without a link.
    let user = tmp.path().join("user");
    fs::create_dir(&user).unwrap();
    lchown(&user, 65534);
    let log = run(&user);
    assert!(log.contains("uid 65534"), "{log}");
    assert!(!user.join(".cache").exists(), "nothing made there");
}
