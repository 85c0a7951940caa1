//! Running `nsys` (`--version`, `start`, `stop`) with a time limit, its
//! output kept in a log file in staging (a pipe could be held open by a
//! daemon nsys leaves behind) and its argv, exit code and end time
//! recorded for `nsys-capture.json`. The nsys to run is resolved once, at
//! start ([`resolve`]).

use std::ffi::OsStr;
use std::fs;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::thread::sleep;
use std::time::{Duration, Instant};

use jobprof_capture_format::nsys::NsysCall;

use crate::confine;
use crate::sys;

/// The nsys to run, resolved once at start: `bin` (`--nsys-bin`) when it
/// holds a `/`, else the first executable `bin` in `path` (`PATH`), made
/// absolute. As root (`root`) only an nsys that root alone can change is
/// run ([`confine::root_only`], the check `jcmd` gets: the file and every
/// directory above it owned by root and writable by no one else, links
/// resolved, the resolved path returned); `Err` names the path and why.
pub fn resolve(bin: &Path, path: Option<&OsStr>, root: bool) -> Result<PathBuf, String> {
    resolve_tool("nsys", "--nsys-bin", bin, path, root)
}

/// [`resolve`] for any tool (`what`, its option `flag`).
fn resolve_tool(
    what: &str,
    flag: &str,
    bin: &Path,
    path: Option<&OsStr>,
    root: bool,
) -> Result<PathBuf, String> {
    let found = if bin.as_os_str().as_encoded_bytes().contains(&b'/') {
        bin.to_path_buf()
    } else {
        std::env::split_paths(path.unwrap_or_default())
            .map(|dir| dir.join(bin))
            .find(|p| {
                fs::metadata(p).is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
            })
            .ok_or_else(|| {
                format!(
                    "no executable {} on PATH ({}); pass {flag} PATH",
                    bin.display(),
                    path.unwrap_or_default().to_string_lossy()
                )
            })?
    };
    let found = std::path::absolute(&found)
        .map_err(|e| format!("cannot make {} absolute: {e}", found.display()))?;
    if !root {
        return Ok(found);
    }
    let shown = found.display();
    let text = found
        .to_str()
        .ok_or_else(|| format!("{shown}: not UTF-8; pass {flag} PATH"))?;
    let slash = fs::File::open("/").map_err(|e| format!("cannot open /: {e}"))?;
    confine::root_only(&slash, text)
        .map(PathBuf::from)
        .map_err(|e| {
            format!(
                "not running {shown} as root: {e}; only an {what} that root alone can change runs \
             as root (it and every directory above it owned by root, writable by no one else): \
             install it so, or pass {flag} PATH to one that is"
            )
        })
}

/// `QdstrmImporter`, for a `.qdstrm` that `nsys stop` left unconverted:
/// `given` (`--importer`, an error when it cannot run), else the first on
/// `path`, else one in nsys's install tree: beside each directory the
/// `nsys` path passes through, link by link (Debian's `/usr/bin/nsys` ->
/// `/usr/lib/nsight-systems/bin/nsys` -> `../target-linux-x64/nsys`, its
/// importer in `/usr/lib/nsight-systems/host-linux-x64/`), in that
/// directory or in `../host-linux-x64/`. As root, as nsys: only one that
/// root alone can change (one found that is not is skipped, with why).
pub fn importer(
    given: Option<&Path>,
    nsys: &Path,
    path: Option<&OsStr>,
    root: bool,
) -> Result<Option<PathBuf>, String> {
    const NAME: &str = "QdstrmImporter";
    if let Some(given) = given {
        return resolve_tool(NAME, "--importer", given, path, root).map(Some);
    }
    let mut skipped = Vec::new();
    let mut candidates: Vec<PathBuf> = vec![PathBuf::from(NAME)];
    let mut at = nsys.to_path_buf();
    for _ in 0..16 {
        if let Some(dir) = at.parent() {
            candidates.push(dir.join(NAME));
            candidates.push(dir.join("../host-linux-x64").join(NAME));
        }
        match fs::read_link(&at) {
            Ok(next) => at = at.parent().unwrap_or(Path::new("/")).join(next),
            Err(_) => break,
        }
    }
    for c in candidates {
        let on_path = c.as_os_str() == NAME;
        if !on_path && !fs::metadata(&c).is_ok_and(|m| m.is_file()) {
            continue;
        }
        match resolve_tool(NAME, "--importer", &c, path, root) {
            Ok(p) => return Ok(Some(p)),
            Err(e) if !on_path => skipped.push(e),
            Err(_) => {}
        }
    }
    for e in skipped {
        super::log(&format!("QdstrmImporter skipped: {e}"));
    }
    Ok(None)
}

/// One finished call: what `nsys-capture.json` records, and its output.
pub struct Ran {
    /// argv, exit code, end time.
    pub call: NsysCall,
    /// The last lines of its output (` | `-joined), or why it did not run.
    pub output: String,
}

impl Ran {
    /// It ran and exited 0.
    pub fn ok(&self) -> bool {
        self.call.exit_code == Some(0)
    }

    /// `exit N: output`, for messages.
    pub fn describe(&self) -> String {
        let status = match self.call.exit_code {
            Some(c) => sys::describe_status(c),
            None => "no exit status".into(),
        };
        if self.output.is_empty() {
            status
        } else {
            format!("{status}: {}", self.output)
        }
    }
}

/// Runs `bin args...`, its output into `log` (replaced), killing it after
/// `timeout`.
pub fn run(bin: &Path, args: &[&str], log: &Path, timeout: Duration) -> Ran {
    run_env(bin, args, log, timeout, &[])
}

/// [`run`] with `env` added to the environment.
pub fn run_env(
    bin: &Path,
    args: &[&str],
    log: &Path,
    timeout: Duration,
    env: &[(&str, &Path)],
) -> Ran {
    let mut argv = vec![bin.to_string_lossy().into_owned()];
    argv.extend(args.iter().map(|a| a.to_string()));
    let done = |exit_code: Option<i32>, output: String| Ran {
        call: NsysCall {
            argv: argv.clone(),
            exit_code,
            unix_ns: sys::now_ns(),
        },
        output,
    };
    let _ = fs::remove_file(log);
    let out = match sys::create_new(log, 0o600) {
        Ok(f) => f,
        Err(e) => return done(None, format!("cannot create {}: {e}", log.display())),
    };
    let err = match out.try_clone() {
        Ok(f) => f,
        Err(e) => return done(None, format!("cannot open {}: {e}", log.display())),
    };
    let child = Command::new(bin)
        .args(args)
        .envs(env.iter().copied())
        .stdin(Stdio::null())
        .stdout(out)
        .stderr(err)
        .spawn();
    let mut child = match child {
        Ok(c) => c,
        Err(e) => {
            return done(
                None,
                format!("cannot run {}: {e} (pass --nsys-bin)", bin.display()),
            )
        }
    };
    let deadline = Instant::now() + timeout;
    loop {
        match child.try_wait() {
            Ok(Some(status)) => return done(Some(sys::shell_status(status)), sys::tail(log, 6)),
            Ok(None) if Instant::now() < deadline => sleep(Duration::from_millis(20)),
            _ => {
                let _ = child.kill();
                let _ = child.wait();
                let tail = sys::tail(log, 6);
                return done(
                    None,
                    format!(
                        "killed after {} s without an answer; {tail}",
                        timeout.as_secs()
                    ),
                );
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::resolve;
    use std::ffi::OsStr;
    use std::fs;
    use std::os::unix::fs::PermissionsExt;
    use std::path::Path;

    #[test]
    fn nsys_is_found_on_path_once_and_made_absolute() {
        let dir = std::env::temp_dir().join(format!("jobprof-nsys-path-{}", std::process::id()));
        let _ = fs::remove_dir_all(&dir);
        for d in ["a", "b"] {
            fs::create_dir_all(dir.join(d)).unwrap();
        }
        // Not executable: skipped, as exec would.
        fs::write(dir.join("a/nsys"), "").unwrap();
        fs::write(dir.join("b/nsys"), "#!/bin/sh\n").unwrap();
        fs::set_permissions(dir.join("b/nsys"), fs::Permissions::from_mode(0o755)).unwrap();
        fs::set_permissions(dir.join("b"), fs::Permissions::from_mode(0o777)).unwrap();
        let path = std::env::join_paths([dir.join("none"), dir.join("a"), dir.join("b")]).unwrap();
        let found = resolve(Path::new("nsys"), Some(&path), false).unwrap();
        assert_eq!(found, dir.join("b/nsys"));
        let e = resolve(Path::new("nsys"), Some(OsStr::new("/nonexistent")), false).unwrap_err();
        assert!(
            e.contains("no executable nsys on PATH (/nonexistent)"),
            "{e}"
        );
        let rel = resolve(Path::new("./x/nsys"), None, false).unwrap();
        assert!(rel.is_absolute() && rel.ends_with("x/nsys"), "{rel:?}");
        // As root: one in a directory anyone may write is
        // refused, naming it; the system's shell is root's alone.
        if crate::sys::euid() == 0 {
            let e = resolve(Path::new("nsys"), Some(&path), true).unwrap_err();
            assert!(
                e.contains("not running") && e.contains(&dir.join("b/nsys").display().to_string()),
                "{e}"
            );
            assert!(e.contains("others can change it"), "{e}");
            let sh = resolve(
                Path::new("sh"),
                Some(OsStr::new("/nonexistent:/usr/bin:/bin")),
                true,
            );
            assert!(sh.unwrap().is_absolute());
        }
        fs::remove_dir_all(&dir).unwrap();
    }

    /// Issue 48: the importer is found along nsys's links (Debian's
    /// layout), and as root one others can change is never chosen, given
    /// (`--importer`: an error naming it) or found (skipped).
    #[test]
    fn the_importer_is_found_along_nsys_links_and_as_root_only_if_root_alone_can_change_it() {
        use super::importer;
        let dir = std::env::temp_dir().join(format!("jobprof-importer-{}", std::process::id()));
        let _ = fs::remove_dir_all(&dir);
        for d in [
            "usr/bin",
            "usr/lib/ns/bin",
            "usr/lib/ns/host-linux-x64",
            "usr/lib/x/target",
        ] {
            fs::create_dir_all(dir.join(d)).unwrap();
        }
        let exe = |p: &Path| {
            fs::write(p, "#!/bin/sh\n").unwrap();
            fs::set_permissions(p, fs::Permissions::from_mode(0o755)).unwrap();
        };
        exe(&dir.join("usr/lib/x/target/nsys"));
        let imp = dir.join("usr/lib/ns/host-linux-x64/QdstrmImporter");
        exe(&imp);
        std::os::unix::fs::symlink("../../x/target/nsys", dir.join("usr/lib/ns/bin/nsys")).unwrap();
        std::os::unix::fs::symlink("../lib/ns/bin/nsys", dir.join("usr/bin/nsys")).unwrap();
        let none = Some(OsStr::new("/nonexistent"));
        let found = importer(None, &dir.join("usr/bin/nsys"), none, false).unwrap();
        assert_eq!(fs::canonicalize(found.unwrap()).unwrap(), imp);
        if crate::sys::euid() == 0 {
            // The temporary directory is anyone's: skipped as root, and
            // refused when given.
            let found = importer(None, &dir.join("usr/bin/nsys"), none, true).unwrap();
            assert_eq!(found, None);
            let e = importer(Some(&imp), &dir.join("usr/bin/nsys"), none, true).unwrap_err();
            assert!(e.contains("not running") && e.contains("--importer"), "{e}");
        }
        fs::remove_dir_all(&dir).unwrap();
    }
}
