//! This thread's file system credentials, taken for a while: the one home
//! of the `setfsuid`, `setfsgid` and `setgroups` calls both sides make to
//! read another user's files with that user's rights (jobprof's
//! `sys::creds`, processing a capture that is someone else's; the
//! recorder's `confine`, opening what a worker names). Raw system calls:
//! they change the calling thread only, where the C library's wrappers
//! would change every thread. Every permission check of every lookup in
//! an open, each link followed on the way included, is then the kernel's
//! own for that user (its ACLs too), which a check of mode bits could not
//! match. Behind the `libc` feature (the formats themselves need no
//! dependency).

use std::io;

/// Runs `f` with this thread's file system credentials set to `uid`,
/// `gid` and `groups` when the process is root (only root can take
/// another user's; otherwise `f` runs with the process's own), and gives
/// the previous ones back when `f` returns. Credentials that cannot be
/// taken are an error (`PermissionDenied`, naming the uid and gid), and
/// `f` does not run.
pub fn run_as<T>(
    uid: u32,
    gid: u32,
    groups: &[u32],
    f: impl FnOnce() -> io::Result<T>,
) -> io::Result<T> {
    // SAFETY: geteuid has no preconditions and cannot fail.
    if unsafe { libc::geteuid() } != 0 {
        return f();
    }
    let _back = Taken::take(uid, gid, groups)?;
    f()
}

/// This thread's file system credentials before [`run_as`] took a
/// user's: given back on drop.
struct Taken {
    uid: u32,
    gid: u32,
    groups: Vec<u32>,
}

/// `setgroups` of this thread only.
fn set_groups(groups: &[u32]) -> io::Result<()> {
    // SAFETY: `groups` is a valid array of its length.
    let r = unsafe { libc::syscall(libc::SYS_setgroups, groups.len(), groups.as_ptr()) };
    if r != 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(())
}

/// This thread's supplementary groups.
fn groups_now() -> io::Result<Vec<u32>> {
    // SAFETY: a size of 0 only asks how many groups there are.
    let count = unsafe { libc::syscall(libc::SYS_getgroups, 0, std::ptr::null_mut::<u32>()) };
    if count < 0 {
        return Err(io::Error::last_os_error());
    }
    let mut groups = vec![0u32; count as usize];
    // SAFETY: `groups` has room for `count` groups (this thread's: only it
    // changes them).
    let n = unsafe { libc::syscall(libc::SYS_getgroups, groups.len(), groups.as_mut_ptr()) };
    if n < 0 {
        return Err(io::Error::last_os_error());
    }
    groups.truncate(n as usize);
    Ok(groups)
}

/// Sets this thread's file system uid and gid; what they are now.
fn set_fs_ids(uid: u32, gid: u32) -> (u32, u32) {
    // SAFETY: plain system calls on this thread's credentials. Both return
    // the previous id: asking again with an invalid one says what is set.
    unsafe {
        libc::syscall(libc::SYS_setfsgid, gid);
        libc::syscall(libc::SYS_setfsuid, uid);
        let gid = libc::syscall(libc::SYS_setfsgid, u32::MAX) as u32;
        (libc::syscall(libc::SYS_setfsuid, u32::MAX) as u32, gid)
    }
}

impl Taken {
    fn take(uid: u32, gid: u32, groups: &[u32]) -> io::Result<Taken> {
        let old = groups_now()?;
        let (fsuid, fsgid) = set_fs_ids(u32::MAX, u32::MAX);
        let back = Taken {
            uid: fsuid,
            gid: fsgid,
            groups: old,
        };
        set_groups(groups)?;
        if set_fs_ids(uid, gid) != (uid, gid) {
            return Err(io::Error::new(
                io::ErrorKind::PermissionDenied,
                format!("cannot take the credentials of uid {uid} (gid {gid})"),
            ));
        }
        Ok(back)
    }
}

impl Drop for Taken {
    fn drop(&mut self) {
        // The uid first: root's again, it may set the groups.
        set_fs_ids(self.uid, self.gid);
        let _ = set_groups(&self.groups);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::PermissionsExt;

    /// The overflow user and group (`nobody`, `nogroup`).
    const NOBODY: u32 = 65534;

    #[test]
    fn a_file_is_opened_with_the_users_rights_and_the_callers_come_back() {
        // SAFETY: geteuid has no preconditions.
        if unsafe { libc::geteuid() } != 0 {
            eprintln!("skipped: needs root");
            return;
        }
        let dir = std::env::temp_dir().join(format!("fs-creds-{}", std::process::id()));
        let secret = dir.join("secret");
        std::fs::create_dir_all(&secret).unwrap();
        let mode = |p: &std::path::Path, m| {
            std::fs::set_permissions(p, std::fs::Permissions::from_mode(m)).unwrap()
        };
        mode(&dir, 0o755);
        mode(&secret, 0o700);
        std::fs::write(secret.join("f"), "x").unwrap();
        std::fs::write(dir.join("public"), "y").unwrap();
        let link = dir.join("link");
        std::os::unix::fs::symlink(secret.join("f"), &link).unwrap();
        let groups = groups_now().unwrap();
        let read = |p: &std::path::Path| run_as(NOBODY, NOBODY, &[], || std::fs::read(p));
        assert_eq!(read(&dir.join("public")).unwrap(), b"y");
        for p in [secret.join("f"), link] {
            let e = read(&p).unwrap_err();
            assert_eq!(e.kind(), io::ErrorKind::PermissionDenied, "{}", p.display());
        }
        // The caller's rights and groups are back afterwards.
        assert_eq!(std::fs::read(secret.join("f")).unwrap(), b"x");
        assert_eq!(set_fs_ids(u32::MAX, u32::MAX), (0, 0));
        assert_eq!(groups_now().unwrap(), groups);
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
