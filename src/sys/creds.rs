//! Whose rights a file is opened with: root processing another user's
//! capture reads the files that capture names on this host with that
//! user's rights, so nothing the user could not read reaches their
//! outputs.
//!
//! [`Creds::owner_of`] says whose a directory's contents are: the nearest
//! of the directory and its ancestors that belongs to someone other than
//! the processing user (that user may replace everything below it), or
//! anyone (`nobody`, `nogroup`, no groups) where a directory on the way is
//! writable by its group or by others without the sticky bit; `None` when
//! the processing user alone could have written there.
//!
//! [`Creds::of_capture`] is the one place that decides whose rights a
//! capture's host files are read with: the worker's, when `capture.json`
//! recorded its uid (the root sidecar publishes root-owned captures of
//! other users' workers, whose DSO paths are the worker's own mmaps) and
//! nothing but the processing user could have written the capture; else
//! [`Creds::owner_of`] its directory.
//!
//! [`Creds::run`] runs a closure with this thread's file system
//! credentials set to the user's (`setfsuid`, `setfsgid` and `setgroups`
//! as raw system calls, in `jobprof_capture_format::fs_creds`, which the
//! recorder uses too: they change the calling thread only, where the C
//! library's wrappers would change every thread), and gives root's back
//! when it returns. Every permission check of every lookup in an open,
//! each link followed on the way included, is then the kernel's own for
//! that user (its ACLs too), which a check of mode bits could not match.
//! Only root can take another user's credentials: a processing user that
//! is not root opens with its own.

use std::io;
use std::path::Path;

use jobprof_capture_format::fs_creds;

/// The overflow user and group (`nobody`, `nogroup`): anyone.
const ANYONE: u32 = 65534;

/// A user's file system credentials.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Creds {
    /// The user id.
    pub uid: u32,
    /// The primary group.
    pub gid: u32,
    /// The supplementary groups.
    pub groups: Vec<u32>,
}

/// This process's effective uid.
pub fn euid() -> u32 {
    // SAFETY: geteuid has no preconditions.
    unsafe { libc::geteuid() }
}

impl Creds {
    /// Anyone: `nobody` in `nogroup`, no other groups.
    pub fn anyone() -> Creds {
        Creds {
            uid: ANYONE,
            gid: ANYONE,
            groups: Vec::new(),
        }
    }

    /// User `uid`'s credentials from the user database (its primary group
    /// and the groups that list it); a uid it does not know has no group
    /// but `nogroup`.
    pub fn of_user(uid: u32) -> Creds {
        let Some((name, gid)) = passwd_entry(uid) else {
            return Creds {
                uid,
                gid: ANYONE,
                groups: Vec::new(),
            };
        };
        Creds {
            uid,
            gid,
            groups: group_list(&name, gid),
        }
    }

    /// Whose the contents of `dir` are, when not only the processing
    /// user's (this module's doc); `None` also when `dir` cannot be
    /// looked at (nothing is read from it then).
    pub fn owner_of(dir: &Path) -> Option<Creds> {
        use std::os::unix::fs::MetadataExt;
        let me = euid();
        let dir = std::fs::canonicalize(dir).ok()?;
        for d in dir.ancestors() {
            let m = std::fs::metadata(d).ok()?;
            if m.uid() != me {
                return Some(Creds::of_user(m.uid()));
            }
            let shared = m.mode() & 0o022 != 0 && m.mode() & 0o1000 == 0;
            if shared {
                return Some(Creds::anyone());
            }
        }
        None
    }

    /// Whose rights this host's files named by the capture in `dir` are
    /// read with (`None`: the processing user's own, read as perf reads
    /// them): [`Creds::owner_of`] `dir` when that names someone, since
    /// they could have rewritten everything in it, `capture.json`
    /// included; else the worker's, when the capture recorded its
    /// effective uid `worker_uid` (and gid `worker_gid`; without one, the
    /// user database's) and that is not the processing user. A root-owned
    /// capture the root sidecar made of `nobody`'s worker is so read as
    /// `nobody`: the DSO paths in it are the worker's own mmaps. Captures
    /// without the ids (older recorders, the old pipeline's, plain
    /// `perf.data`) keep [`Creds::owner_of`] alone.
    pub fn of_capture(
        dir: &Path,
        worker_uid: Option<u32>,
        worker_gid: Option<u32>,
    ) -> Option<Creds> {
        if let Some(owner) = Creds::owner_of(dir) {
            return Some(owner);
        }
        let uid = worker_uid.filter(|&u| u != euid())?;
        let mut c = Creds::of_user(uid);
        if let Some(gid) = worker_gid {
            c.gid = gid;
        }
        Some(c)
    }

    /// Runs `f` with this thread's file system credentials set to these
    /// (when the process is root; otherwise with its own), root's given
    /// back when `f` returns. Credentials that cannot be taken are an
    /// error, and `f` does not run.
    pub fn run<T>(&self, f: impl FnOnce() -> io::Result<T>) -> io::Result<T> {
        fs_creds::run_as(self.uid, self.gid, &self.groups, f)
    }
}

/// The name and primary group of user `uid`, from `/etc/passwd`.
///
/// jobprof is linked statically, and a static C library cannot safely load
/// the NSS modules `/etc/nsswitch.conf` may name after `files`:
/// `getpwuid_r` of a uid that `/etc/passwd` lacks crashed in
/// `libnss_systemd` (SIGSEGV), and a worker's recorded uid is often such
/// a one (a directory service's user, another node's). So the user
/// database is read from its files: a user known only to a directory
/// service (LDAP, sssd) has no group but `nogroup` here, so fewer files
/// are readable as them, never more.
fn passwd_entry(uid: u32) -> Option<(String, u32)> {
    passwd_line(&std::fs::read_to_string("/etc/passwd").ok()?, uid)
}

/// `name:password:uid:gid:...`: the name and gid of the first line of
/// `uid`.
fn passwd_line(text: &str, uid: u32) -> Option<(String, u32)> {
    text.lines().find_map(|l| {
        let f: Vec<&str> = l.split(':').collect();
        match f[..] {
            [name, _, u, g, ..] if !name.is_empty() && u.parse() == Ok(uid) => {
                Some((name.to_string(), g.parse().ok()?))
            }
            _ => None,
        }
    })
}

/// The groups of user `name` (primary group `gid` first), from
/// `/etc/group` ([`passwd_entry`] says why not through the C library).
fn group_list(name: &str, gid: u32) -> Vec<u32> {
    let text = std::fs::read_to_string("/etc/group").unwrap_or_default();
    groups_of(&text, name, gid)
}

/// `name:password:gid:member,member,...`: `gid`, then each group whose
/// members list `name`.
fn groups_of(text: &str, name: &str, gid: u32) -> Vec<u32> {
    let mut groups = vec![gid];
    for l in text.lines() {
        let f: Vec<&str> = l.splitn(4, ':').collect();
        let member = f.len() == 4 && f[3].split(',').any(|m| m.trim() == name);
        match f.get(2).and_then(|g| g.parse::<u32>().ok()) {
            Some(g) if member && !groups.contains(&g) && groups.len() < 65536 => groups.push(g),
            _ => {}
        }
    }
    groups
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::PermissionsExt;

    #[test]
    fn a_file_is_opened_with_the_owners_rights_links_included() {
        if euid() != 0 {
            eprintln!("skipped: needs root");
            return;
        }
        let t = tempfile::tempdir().unwrap();
        let secret = t.path().join("secret");
        std::fs::create_dir(&secret).unwrap();
        std::fs::set_permissions(&secret, std::fs::Permissions::from_mode(0o700)).unwrap();
        std::fs::write(secret.join("f"), "x").unwrap();
        let open = std::fs::set_permissions(t.path(), std::fs::Permissions::from_mode(0o755));
        open.unwrap();
        let public = t.path().join("public");
        std::fs::write(&public, "y").unwrap();
        let link = t.path().join("link");
        std::os::unix::fs::symlink(secret.join("f"), &link).unwrap();
        let nobody = Creds::anyone();
        let read = |p: &Path| nobody.run(|| std::fs::read(p));
        assert_eq!(read(&public).unwrap(), b"y");
        for p in [secret.join("f"), link] {
            let e = read(&p).unwrap_err();
            assert_eq!(e.kind(), io::ErrorKind::PermissionDenied, "{}", p.display());
        }
        // Root's rights are back afterwards.
        assert_eq!(std::fs::read(secret.join("f")).unwrap(), b"x");
    }

    #[test]
    fn the_owner_is_the_nearest_other_user_or_anyone_where_others_may_write() {
        if euid() != 0 {
            eprintln!("skipped: needs root");
            return;
        }
        let t = tempfile::tempdir().unwrap();
        let mode = |p: &Path, m| std::fs::set_permissions(p, std::fs::Permissions::from_mode(m));
        mode(t.path(), 0o755).unwrap();
        assert_eq!(Creds::owner_of(t.path()), None);
        let user = t.path().join("user");
        let capture = user.join("capture");
        std::fs::create_dir_all(&capture).unwrap();
        std::os::unix::fs::chown(&user, Some(ANYONE), None).unwrap();
        assert_eq!(
            Creds::owner_of(&capture).map(|c| c.uid),
            Some(ANYONE),
            "a root-owned capture in a user's result dir is the user's"
        );
        let shared = t.path().join("shared");
        std::fs::create_dir(&shared).unwrap();
        mode(&shared, 0o777).unwrap();
        assert_eq!(Creds::owner_of(&shared), Some(Creds::anyone()));
        mode(&shared, 0o1777).unwrap();
        assert_eq!(Creds::owner_of(&shared), None, "sticky, like /tmp");
    }

    #[test]
    fn the_user_database_is_read_from_its_files() {
        let passwd = "root:x:0:0:root:/root:/bin/bash\n+::::::\n\
                      alice:x:1000:1000::/home/alice:/bin/sh\nbad:x:1001\n";
        assert_eq!(passwd_line(passwd, 1000), Some(("alice".into(), 1000)));
        assert_eq!(passwd_line(passwd, 0), Some(("root".into(), 0)));
        assert_eq!(passwd_line(passwd, 1001), None);
        assert_eq!(passwd_line(passwd, 4242), None);
        let group = "root:x:0:\nusers:x:100:bob, alice\nalice:x:1000:\nadm:x:4:alicea\nx\n";
        assert_eq!(groups_of(group, "alice", 1000), vec![1000, 100]);
        assert_eq!(groups_of(group, "carol", 7), vec![7]);
        // A uid no file knows: no crash, no group but nogroup (a static
        // binary crashed in libnss_systemd's getpwuid_r here).
        let unknown = Creds::of_user(4_000_000_042);
        assert_eq!((unknown.gid, unknown.groups), (ANYONE, vec![]));
        assert_eq!(Creds::of_user(0).gid, 0);
    }

    #[test]
    fn a_capture_is_read_as_its_recorded_worker_unless_another_user_could_write_it() {
        if euid() != 0 {
            eprintln!("skipped: needs root");
            return;
        }
        let t = tempfile::tempdir().unwrap();
        std::fs::set_permissions(t.path(), std::fs::Permissions::from_mode(0o755)).unwrap();
        let root_owned = t.path().join("root");
        std::fs::create_dir(&root_owned).unwrap();
        let of = |d: &Path, u, g| Creds::of_capture(d, u, g);
        // Root's tree: the worker's recorded ids decide.
        let nobody = of(&root_owned, Some(ANYONE), Some(ANYONE)).unwrap();
        assert_eq!((nobody.uid, nobody.gid), (ANYONE, ANYONE));
        assert_eq!(of(&root_owned, Some(ANYONE), Some(4242)).unwrap().gid, 4242);
        assert_eq!(of(&root_owned, Some(ANYONE), None).unwrap().uid, ANYONE);
        assert_eq!(of(&root_owned, Some(0), Some(0)), None, "root's worker");
        assert_eq!(of(&root_owned, None, None), None, "an older capture");
        // A tree another user owns: theirs, whatever capture.json says.
        let users = t.path().join("user");
        std::fs::create_dir(&users).unwrap();
        std::os::unix::fs::chown(&users, Some(4242), None).unwrap();
        for worker in [None, Some(0), Some(ANYONE)] {
            let c = of(&users, worker, worker);
            assert_eq!(c.map(|c| c.uid), Some(4242), "{worker:?}");
        }
    }
}
