//! The per-query nsys sidecar, running as root, against another user:
//! links planted in its token directory are never written through, a
//! directory planted as a start token is refused once and spins nothing,
//! and an nsys that others can change is never run.

use std::fs;
use std::os::unix::fs::PermissionsExt;
use std::time::Duration;

use super::{check_published, Session};
use crate::util::{self, as_nobody, have, is_root, output_text, recorder, wait_for};

#[test]
fn links_planted_in_the_token_dir_by_another_user_are_never_written_through() {
    if !util::require(is_root() && have("setpriv"), "root and setpriv") {
        return;
    }
    let mut s = Session::new();
    // A token directory every container may write (as /var/log/nsys is).
    fs::set_permissions(&s.tokens, fs::Permissions::from_mode(0o777)).unwrap();
    let victim = s.t.path().join("victim");
    fs::write(&victim, "precious\n").unwrap();
    fs::set_permissions(&victim, fs::Permissions::from_mode(0o666)).unwrap();
    let tokens = s.tokens.clone();
    let plant = |names: &[&str]| {
        let links: Vec<String> = names
            .iter()
            .map(|n| format!("ln -sf {} {n}", victim.display()))
            .collect();
        as_nobody(&format!(
            "cd {} && {}",
            tokens.display(),
            links.join(" && ")
        ));
    };
    // Before the sidecar starts: its own tokens, and the lock of worker 1.
    plant(&[
        ".nsys_sidecar_ready_w0",
        ".nsys_sidecar_done_w0",
        ".nsys_sidecar_error_w0",
        ".nsys_started_token_w0_q1",
        ".nsys_sidecar_lock_w1",
    ]);
    let n = s.sidecar(&[]);
    // While it serves: the answers of the next queries.
    plant(&[
        ".nsys_started_token_w0_q2",
        ".nsys_finished_token_w0_q2",
        ".nsys_error_token_w0_q3",
    ]);
    let o =
        s.driver("start_profiler q1 && stop_profiler q1 && start_profiler q2 && stop_profiler q2");
    assert!(o.status.success(), "{}\n{}", output_text(&o), s.log(n));
    // q2's `started` was a planted link: the driver saw it at once, the
    // sidecar replaced it by its own answer, never wrote the victim.
    let o = s.driver("stop_profiler q3");
    assert!(o.status.success());
    for q in ["q1", "q2"] {
        let f = s.token("finished", q);
        wait_for(&format!("finished {q}"), Duration::from_secs(60), || {
            f.symlink_metadata().is_ok_and(|m| m.is_file())
        });
    }
    let (o, code) = s.shutdown(n);
    assert_eq!(code, Some(0), "{}\n{}", output_text(&o), s.log(n));
    assert_eq!(fs::read_to_string(&victim).unwrap(), "precious\n");
    // The planted lock of worker 1: refused, named, nothing written.
    let o = s
        .cmd(recorder())
        .args(["sidecar", "--tool", "nsys", "--worker", "1", "--token-dir"])
        .arg(&s.tokens)
        .arg("--out")
        .arg(&s.out)
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(1), "{}", output_text(&o));
    assert!(
        util::stderr(&o).contains(".nsys_sidecar_lock_w1"),
        "{}",
        output_text(&o)
    );
    assert_eq!(fs::read_to_string(&victim).unwrap(), "precious\n");
}

/// Issue 45, item 6: `nobody` makes a directory named
/// `.nsys_start_token_w0_qdir` in the shared token directory. Before, the
/// sidecar started a collection for it, then answered it on every pass
/// (the unlink failed, unnoticed), each answer (its `started`, rewritten
/// and fsynced) waking its own watch into the next: thousands of writes a
/// second. It is refused once, the error token naming it, nsys is never
/// started for it, the sidecar then waits as quietly as it does idle, and
/// serves the next query.
#[test]
fn a_directory_planted_as_a_start_token_is_refused_once_and_spins_nothing() {
    if !util::require(is_root() && have("setpriv"), "root and setpriv") {
        return;
    }
    let mut s = Session::new();
    fs::set_permissions(&s.tokens, fs::Permissions::from_mode(0o1777)).unwrap();
    let n = s.sidecar(&[]);
    let planted = s.token("start", "qdir");
    as_nobody(&format!("mkdir {}", planted.display()));
    std::thread::sleep(Duration::from_millis(500));
    let writes = util::writes_during(s.sidecars[n].id(), Duration::from_secs(2));
    assert!(
        writes < 5,
        "the sidecar made {writes} write calls in 2 s beside a planted directory token \
         (0 when it waits idle)\n{}",
        s.log(n)
    );
    let refusal = fs::read_to_string(s.token("error", "qdir")).unwrap_or_default();
    assert!(
        refusal.contains(&format!("{} is a directory", planted.display())),
        "the error token does not name the planted directory: {refusal:?}\n{}",
        s.log(n)
    );
    let o = s.driver("start_profiler q1 && stop_profiler q1");
    assert!(o.status.success(), "{}\n{}", output_text(&o), s.log(n));
    let (o, code) = s.shutdown(n);
    assert_eq!(code, Some(0), "{}\n{}", output_text(&o), s.log(n));
    check_published(&s, "q1", "nsys-rep");
    assert!(!s.calls().contains("qdir"), "{}", s.calls());
    assert_eq!(
        s.log(n).matches("is a directory").count(),
        1,
        "{}",
        s.log(n)
    );
}

/// Issue 45, item 7: an `nsys` that `nobody` owns first on root's `PATH`,
/// or one (given by `--nsys-bin`) in a directory anyone may write. Before,
/// the root sidecar ran it as uid 0. Each is refused at start (exit 1),
/// the error naming the path and why, and never runs.
#[test]
fn an_nsys_others_can_change_is_never_run_as_root() {
    use std::os::unix::fs::chown;
    if !util::require(is_root(), "root") {
        return;
    }
    let s = Session::new();
    let Some(trusted) = util::root_only_dir() else {
        util::require(false, "a root-only directory");
        return;
    };
    let (theirs, open) = (trusted.path().join("theirs"), trusted.path().join("open"));
    let ran = s.t.path().join("ran");
    for (dir, mode) in [(&theirs, 0o755), (&open, 0o777)] {
        fs::create_dir(dir).unwrap();
        fs::set_permissions(dir, fs::Permissions::from_mode(mode)).unwrap();
        let nsys = dir.join("nsys");
        fs::write(&nsys, format!("#!/bin/sh\nid -u >> {}\n", ran.display())).unwrap();
        fs::set_permissions(&nsys, fs::Permissions::from_mode(0o755)).unwrap();
    }
    chown(theirs.join("nsys"), Some(65534), Some(65534)).unwrap();
    let path = format!("{}:{}", theirs.display(), std::env::var("PATH").unwrap());
    let open_nsys = open.join("nsys");
    for (how, args, why) in [
        (
            "first on PATH",
            vec![],
            format!("{}/nsys is owned by uid 65534", theirs.display()),
        ),
        (
            "--nsys-bin",
            vec!["--nsys-bin", open_nsys.to_str().unwrap()],
            format!("{} is owned by uid 0 with mode 777", open.display()),
        ),
    ] {
        // A time limit: before, the planted nsys answered `--version` and
        // the sidecar served.
        let o = s
            .cmd("timeout")
            .env("PATH", &path)
            .arg("60")
            .arg(recorder())
            .args(["sidecar", "--tool", "nsys", "--worker", "0", "--token-dir"])
            .arg(&s.tokens)
            .arg("--out")
            .arg(&s.out)
            .arg("--staging")
            .arg(&s.staging)
            .args(&args)
            .output()
            .unwrap();
        let text = output_text(&o);
        assert_eq!(o.status.code(), Some(1), "{how}: {text}");
        assert!(
            text.contains(&why) && text.contains("others can change it"),
            "{how}: {text}"
        );
        let token = fs::read_to_string(s.tokens.join(".nsys_sidecar_error_w0")).unwrap();
        assert!(token.contains(&why), "{how}: {token}");
        assert!(!ran.exists(), "{how}: the nsys others can change ran");
    }
}
