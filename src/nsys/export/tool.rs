//! Where a report's SQLite export comes from: the `.sqlite` already beside
//! it (a regular file opened relative to the query directory, never
//! through a link; read as hostile input by `schema`), else `nsys export
//! --type sqlite` run now by the `nsys` of this host, into a private
//! temporary directory outside the tree (`TMPDIR`), removed after
//! reading. That `nsys` is resolved once to an absolute path (the first
//! executable `nsys` on `PATH`), and as root it runs only when root alone
//! can change it (the rule of the nsys sidecar, docs/nsys.md), with the
//! rights of the query directory's owner when that is another user (the
//! temporary directory is then theirs, and what they leave in it is read
//! as hostile too). It runs without a shell, stdin closed, in its own
//! process group, killed at its time limit ([`crate::sys::exec`]).

use std::ffi::{OsStr, OsString};
use std::os::unix::fs::{MetadataExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::time::Duration;

use super::{Error, Opened, Result};
use crate::sys::confined::Dir;
use crate::sys::exec::ExternalCommand;

/// How long one `nsys export` may take (a report of a few GB takes
/// minutes on one core).
pub const EXPORT_LIMIT: Duration = Duration::from_secs(1800);

/// The host's `nsys`, resolved.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NsysCli {
    /// Its absolute path.
    pub program: PathBuf,
    /// What `nsys --version` said (`NVIDIA Nsight Systems version ...`).
    pub version: String,
}

impl NsysCli {
    /// The first executable `nsys` on `PATH`, checked and asked its
    /// version; the error says why none can be used.
    pub fn find() -> std::result::Result<NsysCli, String> {
        let path = std::env::var_os("PATH").unwrap_or_default();
        let found = std::env::split_paths(&path)
            .filter(|d| d.is_absolute())
            .map(|d| d.join("nsys"))
            .find(|p| {
                std::fs::metadata(p)
                    .is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
            })
            .ok_or_else(|| "no `nsys` on PATH".to_string())?;
        let program =
            std::fs::canonicalize(&found).map_err(|e| format!("{}: {e}", found.display()))?;
        // SAFETY: geteuid has no preconditions and cannot fail.
        if unsafe { libc::geteuid() } == 0 {
            root_alone_can_change(&program)?;
        }
        let out = ExternalCommand::new(
            vec![program.clone().into(), "--version".into()],
            Duration::from_secs(60),
        )
        .run()
        .map_err(|e| format!("`{} --version`: {e}", program.display()))?;
        let version = out.stdout.trim().to_string();
        if !out.success() || !version.contains("Nsight Systems") {
            return Err(format!(
                "`{} --version` did not say it is Nsight Systems: {}",
                program.display(),
                last_line(&out.stdout, &out.stderr)
            ));
        }
        Ok(NsysCli { program, version })
    }
}

/// As root, a program runs only when it and every directory above it are
/// root's and writable by no one else.
fn root_alone_can_change(program: &Path) -> std::result::Result<(), String> {
    for p in program.ancestors() {
        let m = std::fs::metadata(p).map_err(|e| format!("{}: {e}", p.display()))?;
        if m.uid() != 0 || m.mode() & 0o022 != 0 {
            return Err(format!(
                "not running {} as root: {} is owned by uid {} with mode {:o}: others can \
                 change it; only an nsys that root alone can change runs as root",
                program.display(),
                p.display(),
                m.uid(),
                m.mode() & 0o7777
            ));
        }
    }
    Ok(())
}

fn last_line(stdout: &str, stderr: &str) -> String {
    let all = format!("{stdout}\n{stderr}");
    all.lines()
        .rev()
        .map(str::trim)
        .find(|l| !l.is_empty())
        .unwrap_or("no output")
        .chars()
        .take(300)
        .collect()
}

/// A report's export, open.
#[derive(Debug)]
pub struct Export {
    /// The export, open for reading.
    pub file: std::fs::File,
    /// Its path, for messages.
    pub path: PathBuf,
    /// How it was had: `DIR/r.sqlite (the export beside the report)`, or
    /// the export command.
    pub how: String,
    /// The temporary directory of an export made now, removed when
    /// dropped.
    _tmp: Option<tempfile::TempDir>,
}

/// The name of the export beside the report `name` (`r.nsys-rep` ->
/// `r.sqlite`).
fn beside(name: &OsStr) -> OsString {
    Path::new(name).with_extension("sqlite").into_os_string()
}

/// The export of the report of `q`: the `.sqlite` beside it when that is
/// a regular file, else `nsys export` (by `nsys`, or the reason there is
/// none).
pub fn export_of(q: &Opened, nsys: &std::result::Result<NsysCli, String>) -> Result<Export> {
    let near = beside(&q.report_name);
    if q.dir.entry(&near)?.is_some_and(|e| e.is_file()) {
        let path = q.dir.join(&near);
        return Ok(Export {
            file: q.dir.open_read(&near)?,
            how: format!("{} (the export beside the report)", path.display()),
            path,
            _tmp: None,
        });
    }
    let cli = nsys.as_ref().map_err(|why| Error::NoExporter {
        report: q.report(),
        sqlite: q.dir.join(&near),
        why: why.clone(),
    })?;
    export_now(q, cli)
}

/// `nsys export` of the report of `q` into a private temporary directory,
/// with the rights of the query directory's owner when root and that is
/// another user.
fn export_now(q: &Opened, cli: &NsysCli) -> Result<Export> {
    let report = q.report();
    let io = |path: &Path| {
        let path = path.to_path_buf();
        move |source| Error::Io { path, source }
    };
    let tmp = tempfile::Builder::new()
        .prefix("jobprof-nsys-export-")
        .tempdir()
        .map_err(io(&std::env::temp_dir()))?;
    let as_user = q.owner.clone().filter(|_| crate::sys::creds::euid() == 0);
    if let Some(owner) = &as_user {
        std::os::unix::fs::chown(tmp.path(), Some(owner.uid), Some(owner.gid))
            .map_err(io(tmp.path()))?;
    }
    let out = tmp.path().join("report.sqlite");
    // nsys runs in the temporary directory: the report by its full path.
    let input = std::path::absolute(&report).map_err(io(&report))?;
    let argv: Vec<OsString> = vec![
        cli.program.clone().into(),
        "export".into(),
        "--type".into(),
        "sqlite".into(),
        "--force-overwrite".into(),
        "true".into(),
        "-o".into(),
        out.clone().into(),
        input.into(),
    ];
    let cmd = ExternalCommand::new(argv, EXPORT_LIMIT)
        .with_env(&[("HOME".into(), tmp.path().into())], Some(tmp.path()))
        .as_user(as_user);
    let failed = |why: String| Error::Export {
        report: report.clone(),
        command: cmd.display(),
        why,
    };
    let o = cmd.run().map_err(|e| failed(e.to_string()))?;
    let dir = Dir::open(tmp.path())?;
    let exported = dir.entry("report.sqlite")?.is_some_and(|e| e.is_file());
    if !o.success() || !exported {
        return Err(failed(format!(
            "{}: {}",
            o.status,
            last_line(&o.stdout, &o.stderr)
        )));
    }
    Ok(Export {
        file: dir.open_read("report.sqlite")?,
        path: out,
        how: format!("nsys export --type sqlite ({})", cli.version),
        _tmp: Some(tmp),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn as_root_only_an_nsys_that_root_alone_can_change_runs() {
        // Under /tmp (mode 1777): others can change what is in it.
        let t = tempfile::tempdir_in("/tmp").unwrap();
        let fake = t.path().join("nsys");
        std::fs::write(&fake, "#!/bin/sh\n").unwrap();
        let e = root_alone_can_change(&fake).unwrap_err();
        assert!(
            e.contains("others can change it") && e.contains("/tmp"),
            "{e}"
        );
        // Debian's own tools are root's, in directories only root writes.
        let sh = std::fs::canonicalize("/bin/sh").unwrap();
        assert_eq!(root_alone_can_change(&sh), Ok(()));
    }

    #[test]
    fn an_export_beside_the_report_is_used_and_a_linked_one_is_not() {
        let t = tempfile::tempdir().unwrap();
        let report = t.path().join("r.nsys-rep");
        std::fs::write(&report, "x").unwrap();
        let none = Err("no `nsys` on PATH".to_string());
        std::os::unix::fs::symlink("/etc/hostname", t.path().join("r.sqlite")).unwrap();
        let found = super::super::find(std::slice::from_ref(&report), &[], &[]);
        let q = super::super::open_query(&found[0]).unwrap();
        let e = export_of(&q, &none).unwrap_err().to_string();
        assert!(e.contains("no `nsys` on PATH"), "{e}");
        std::fs::remove_file(t.path().join("r.sqlite")).unwrap();
        std::fs::write(t.path().join("r.sqlite"), "").unwrap();
        let s = export_of(&q, &none).unwrap();
        assert_eq!(s.path, t.path().join("r.sqlite"));
    }
}
