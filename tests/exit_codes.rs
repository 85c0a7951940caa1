//! Exit codes as docs/exit-codes.md gives them, where a run as a whole
//! decides: a `process` or `reprocess` run where nothing could be done.

use std::fs;
use std::os::unix::fs::PermissionsExt;
use std::path::Path;
use std::process::Command;

use crate::util::{self, copy_tree, data_files, edit_json, have, is_root, jobprof, output_text};

/// A run where nothing could be done exits 2 (docs/exit-codes.md): every
/// capture refused (`process` and `reprocess`), or every shard unreadable
/// (as `nobody`); one capture processed beside them makes it 1.
#[test]
fn a_run_where_nothing_could_be_done_exits_2() {
    let t = tempfile::tempdir().unwrap();
    let r = t.path().join("r");
    util::copy_demo(&r);
    let q01 = r.join("profiles/perf/worker_0/q01");
    let q02 = r.join("profiles/perf/worker_0/q02");
    copy_tree(&q01, &q02);
    for q in [&q01, &q02] {
        edit_json(&q.join("capture.json"), |v| {
            v["valid"] = false.into();
            v["reason"] = "the worker exited during the capture".into();
        });
    }
    let run = |cmd: &str, args: &[&Path]| jobprof().arg(cmd).args(args).output().unwrap();
    for cmd in ["process", "reprocess"] {
        let o = run(cmd, &[&r]);
        assert_eq!(o.status.code(), Some(2), "{cmd}: {}", output_text(&o));
        assert!(
            output_text(&o).contains("the worker exited during the capture"),
            "{cmd}: {}",
            output_text(&o)
        );
    }
    // One capture done beside a refused one: 1.
    util::copy_demo(&t.path().join("good"));
    let good = t.path().join("good");
    let o = run("process", &[&r, &good]);
    assert_eq!(o.status.code(), Some(1), "{}", output_text(&o));
    // Already complete counts as done: 1 again beside the refused ones.
    let o = run("reprocess", &[&r, &good]);
    assert_eq!(o.status.code(), Some(1), "{}", output_text(&o));

    if !util::require(is_root() && have("setpriv"), "root and setpriv") {
        return;
    }
    // Every shard unreadable: refused naming them, 2; with the symbolized
    // text beside them, the text is folded instead (0).
    let u = tempfile::tempdir().unwrap();
    fs::set_permissions(u.path(), fs::Permissions::from_mode(0o755)).unwrap();
    for text in [false, true] {
        let r = u.path().join(format!("r{text}"));
        util::copy_demo(&r);
        let q = r.join("profiles/perf/worker_0/q01");
        if !text {
            fs::remove_file(q.join("perf.script.zst")).unwrap();
        }
        Command::new("chown")
            .args(["-R", "nobody"])
            .arg(&r)
            .status()
            .unwrap();
        let shards = data_files(&q);
        for shard in &shards {
            fs::set_permissions(shard, fs::Permissions::from_mode(0o000)).unwrap();
        }
        let o = util::jobprof_as_nobody(&["process".as_ref(), r.as_os_str()]);
        let all = output_text(&o);
        if text {
            assert_eq!(o.status.code(), Some(0), "{all}");
            assert!(all.contains("q01: processed"), "{all}");
        } else {
            assert_eq!(o.status.code(), Some(2), "{all}");
            assert!(all.contains("q01: refused"), "{all}");
        }
        let named = format!("cannot read {}: Permission denied", shards[0].display());
        assert!(all.contains(&named), "{all}");
    }
}
