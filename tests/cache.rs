//! The persistent symbol cache (`--cache-dir`, docs/symbols.md): a second
//! run over the same builds maps what the first built, and writes the
//! same outputs as a run without the cache; a damaged cache costs time,
//! never a wrong name.

use std::fs;
use std::path::Path;

use crate::util::{self, comparable_outputs, copy_seed, jobprof, output_text, seeds};

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
fn seed(at: &Path) -> Option<(std::path::PathBuf, std::path::PathBuf)> {
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
    let tmp = tempfile::tempdir().unwrap();
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
    let tmp = tempfile::tempdir().unwrap();
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
    let tmp = tempfile::tempdir().unwrap();
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
