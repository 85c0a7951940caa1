//! Attacks of issue 23 that got through before: outputs of the job views
//! written through links another user planted, FIFOs and devices among the
//! inputs, flat stream input, shifting array shares, runs that delete each
//! other's temporaries, absurd counts. Each test plants the attack as the
//! issue's reproducer does (links by `nobody` through `setpriv` while
//! jobprof runs as root) and checks the clean behaviour:
//! docs/reliability.md lists the guarantee each one proves.

use std::fs;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};

use crate::faults::{as_nobody, have, is_root};
use crate::util::{self, copy_demo, jobprof, output_text};

/// The demo result directory copied into a 0755 temporary directory,
/// writable by everyone below (a shared results tree), with `victim`
/// (a file) and `vdir` (a directory) beside it, outside the tree.
struct Shared {
    _t: tempfile::TempDir,
    result: PathBuf,
    victim: PathBuf,
    vdir: PathBuf,
}

/// `chmod -R a+rwX`: anyone may plant there.
fn chmod_shared(dir: &Path) {
    let st = std::process::Command::new("chmod")
        .args(["-R", "a+rwX"])
        .arg(dir)
        .status()
        .unwrap();
    assert!(st.success());
}

impl Shared {
    fn new() -> Shared {
        let t = tempfile::tempdir().unwrap();
        fs::set_permissions(t.path(), fs::Permissions::from_mode(0o755)).unwrap();
        let result = t.path().join("r");
        copy_demo(&result);
        chmod_shared(&result);
        let victim = t.path().join("victim");
        fs::write(&victim, "precious\n").unwrap();
        fs::set_permissions(&victim, fs::Permissions::from_mode(0o666)).unwrap();
        let vdir = t.path().join("vdir");
        fs::create_dir(&vdir).unwrap();
        fs::set_permissions(&vdir, fs::Permissions::from_mode(0o777)).unwrap();
        Shared {
            _t: t,
            result,
            victim,
            vdir,
        }
    }

    fn perf(&self) -> PathBuf {
        self.result.join("profiles/perf")
    }

    fn untouched(&self, context: &str) {
        assert_eq!(
            fs::read_to_string(&self.victim).unwrap(),
            "precious\n",
            "{context}: the victim outside the tree was written"
        );
        let inside: Vec<_> = fs::read_dir(&self.vdir).unwrap().collect();
        assert!(inside.is_empty(), "{context}: written into the outside dir: {inside:?}");
    }
}

fn setpriv_ready() -> bool {
    util::require(is_root() && have("setpriv"), "root and setpriv")
}

#[test]
fn job_views_are_never_written_through_links_planted_by_another_user() {
    if !setpriv_ready() {
        return;
    }
    // (what to plant, relative to profiles/perf; a first run before it)
    let cases: [(&str, bool); 5] = [
        ("ln -s {victim} index.html", false),
        ("ln -s {victim} index.json", false),
        ("ln -s {vdir} queries", false),
        ("mkdir -p queries && ln -s {vdir} queries/q01", false),
        ("ln -sf {victim} queries/q01/flamegraph.html", true),
    ];
    for (plant, first) in cases {
        for cmd in ["process", "reprocess"] {
            let s = Shared::new();
            let perf = s.perf();
            if first {
                let o = jobprof().arg("process").arg(&s.result).output().unwrap();
                assert!(o.status.success(), "{}", output_text(&o));
                chmod_shared(&perf.join("queries"));
            }
            let script = plant
                .replace("{victim}", &s.victim.to_string_lossy())
                .replace("{vdir}", &s.vdir.to_string_lossy());
            as_nobody(&format!("cd {} && {script}", perf.display()));
            let mut c = jobprof();
            c.arg(cmd).arg(&s.result);
            if cmd == "reprocess" || first {
                c.arg("--force");
            }
            let o = c.output().unwrap();
            let text = output_text(&o);
            let context = format!("{cmd} after `{plant}`");
            s.untouched(&context);
            assert_eq!(o.status.code(), Some(1), "{context}: {text}");
            assert!(
                text.contains("is a symbolic link") && text.contains("not written"),
                "{context}: {text}"
            );
            assert!(
                !text.contains("panicked"),
                "{context}: {text}"
            );
        }
    }
}

/// The pid of a process that ran and is gone.
fn dead_pid() -> u32 {
    let mut c = std::process::Command::new("true").spawn().unwrap();
    let pid = c.id();
    c.wait().unwrap();
    pid
}

fn hostname() -> String {
    let o = std::process::Command::new("hostname").output().unwrap();
    String::from_utf8_lossy(&o.stdout).trim().to_string()
}

#[test]
fn leftovers_of_killed_job_view_writers_are_removed_live_ones_kept() {
    let t = tempfile::tempdir().unwrap();
    let result = t.path().join("r");
    copy_demo(&result);
    let o = jobprof().arg("process").arg(&result).output().unwrap();
    assert!(o.status.success(), "{}", output_text(&o));
    let perf = result.join("profiles/perf");
    let q = perf.join("queries/q01");
    let host = hostname();
    let dead = dead_pid();
    let mut sleeper = std::process::Command::new("sleep").arg("60").spawn().unwrap();
    let stale = [
        q.join(".flamegraph.html.a1B2c3.tmp"),
        q.join(format!(".stacks.folded.{host}-{dead}-0.tmp")),
        perf.join(format!(".index.html.{host}-{dead}-3.tmp")),
        perf.join(".index.json.Xy12zz.tmp"),
    ];
    let live = [
        q.join(format!(".sources.json.{host}-{}-0.tmp", sleeper.id())),
        perf.join(format!(".index.html.{host}-{}-1.tmp", sleeper.id())),
    ];
    for p in stale.iter().chain(&live) {
        fs::write(p, "half").unwrap();
    }
    let o = jobprof().arg("process").arg(&result).output().unwrap();
    let _ = sleeper.kill();
    let _ = sleeper.wait();
    assert!(o.status.success(), "{}", output_text(&o));
    for p in &stale {
        assert!(!p.exists(), "a killed writer's {} survived", p.display());
    }
    for p in &live {
        assert!(p.exists(), "a running writer's {} was removed", p.display());
    }
}

#[test]
fn a_run_never_removes_the_temporaries_of_another_run_on_the_same_capture() {
    let t = tempfile::tempdir().unwrap();
    let result = t.path().join("r");
    copy_demo(&result);
    let cap = result.join("profiles/perf/worker_0/q01");
    let host = hostname();
    let mut sleeper = std::process::Command::new("sleep").arg("60").spawn().unwrap();
    let theirs = cap.join(format!(".perf.script.zst.{host}-{}-0.tmp", sleeper.id()));
    let killed = cap.join(format!(".perf.script.zst.{host}-{}-0.tmp", dead_pid()));
    fs::write(&theirs, "being written").unwrap();
    fs::write(&killed, "left").unwrap();
    let o = jobprof().arg("process").arg(&result).output().unwrap();
    let _ = sleeper.kill();
    let _ = sleeper.wait();
    assert!(o.status.success(), "{}", output_text(&o));
    assert!(theirs.exists(), "the other run's temporary was removed as a leftover");
    assert!(!killed.exists(), "a killed run's temporary survived");
}

