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

    /// Runs `f` with this thread's file system credentials set to these
    /// (when the process is root; otherwise with its own), root's given
    /// back when `f` returns. Credentials that cannot be taken are an
    /// error, and `f` does not run.
    pub fn run<T>(&self, f: impl FnOnce() -> io::Result<T>) -> io::Result<T> {
        fs_creds::run_as(self.uid, self.gid, &self.groups, f)
    }
}

/// The name and primary group of user `uid`.
fn passwd_entry(uid: u32) -> Option<(std::ffi::CString, u32)> {
    let mut buf = vec![0u8; 16 << 10];
    // SAFETY: a zeroed passwd is a valid out-parameter.
    let mut pw: libc::passwd = unsafe { std::mem::zeroed() };
    let mut out: *mut libc::passwd = std::ptr::null_mut();
    // SAFETY: valid buffers of the lengths given; `out` is set to `&pw`
    // or null.
    let r = unsafe { libc::getpwuid_r(uid, &mut pw, buf.as_mut_ptr().cast(), buf.len(), &mut out) };
    if r != 0 || out.is_null() || pw.pw_name.is_null() {
        return None;
    }
    // SAFETY: getpwuid_r filled `pw` with strings inside `buf`.
    let name = unsafe { std::ffi::CStr::from_ptr(pw.pw_name) }.to_owned();
    Some((name, pw.pw_gid))
}

/// The groups of user `name` (primary group `gid` first).
fn group_list(name: &std::ffi::CStr, gid: u32) -> Vec<u32> {
    let mut n: libc::c_int = 64;
    loop {
        let mut groups = vec![0 as libc::gid_t; n as usize];
        let asked = n;
        // SAFETY: `groups` has room for `n` entries; `n` is updated.
        let r = unsafe { libc::getgrouplist(name.as_ptr(), gid, groups.as_mut_ptr(), &mut n) };
        if r >= 0 {
            groups.truncate(n.max(0) as usize);
            return groups;
        }
        if n <= asked {
            // No count to grow to: the primary group alone.
            return vec![gid];
        }
    }
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
}
