//! Unit tests of `sources`, beside it so that its own file stays short.

use super::*;

fn id_of(p: &Path) -> Vec<u8> {
    let data = std::fs::read(p).unwrap();
    let file = ElfFile64::<Endianness>::parse(&*data).unwrap();
    file.build_id().unwrap().unwrap().to_vec()
}

/// This test binary: an ELF file with a build id (rustc's linker
/// gives one).
fn exe() -> Option<(PathBuf, Vec<u8>)> {
    let exe = std::env::current_exe().unwrap();
    let data = std::fs::read(&exe).unwrap();
    let file = ElfFile64::<Endianness>::parse(&*data).ok()?;
    let id = file.build_id().ok().flatten()?.to_vec();
    Some((exe, id))
}

/// Copies `from` to `at`, its directories made.
fn copy_to(from: &Path, at: &Path) {
    std::fs::create_dir_all(at.parent().unwrap()).unwrap();
    std::fs::copy(from, at).unwrap();
}

/// Runs `f` in a forked child and returns its exit status (a signal
/// that kills it is part of the status).
fn in_child(f: impl FnOnce() -> i32) -> i32 {
    // SAFETY: the child runs `f` and leaves with _exit.
    let pid = unsafe { libc::fork() };
    if pid == 0 {
        let code = f();
        // SAFETY: leaving the child.
        unsafe { libc::_exit(code) };
    }
    let mut status = 0;
    // SAFETY: waiting for our own child.
    assert_eq!(unsafe { libc::waitpid(pid, &mut status, 0) }, pid);
    status
}

#[test]
fn a_symbol_file_truncated_after_it_is_mapped_is_read_as_shrunk_not_a_crash() {
    let dir = tempfile::tempdir().unwrap();
    let symfs = dir.path().join("symfs");
    let path = symfs.join("usr/lib/libx.so");
    std::fs::create_dir_all(path.parent().unwrap()).unwrap();
    std::fs::write(&path, vec![0x5a; 64 << 10]).unwrap();
    // The capture's owner truncates the file between the map and the
    // read: the read sees zeros, the map says it shrank.
    let status = in_child(|| {
        let Some(map) = map_file(&symfs, &path) else {
            return 9;
        };
        std::fs::OpenOptions::new()
            .write(true)
            .open(&path)
            .and_then(|f| f.set_len(0))
            .ok();
        let last = map[map.len() - 1];
        i32::from(last == 0 && map.shrank())
    });
    assert!(libc::WIFEXITED(status), "killed by a signal: {status}");
    assert_eq!(libc::WEXITSTATUS(status), 1);
}

#[test]
fn padded_ids_are_the_same_id() {
    assert!(same_id(&[1, 2, 0, 0], &[1, 2]));
    assert!(same_id(&[1, 2], &[1, 2]));
    assert!(!same_id(&[1, 3], &[1, 2]));
    assert!(!same_id(&[1], &[1, 2]));
    assert!(!same_id(&[1, 2], &[]));
}

#[test]
fn a_file_with_another_build_id_is_never_taken() {
    let Some((exe, id)) = exe() else {
        eprintln!("skipped: this test binary has no build id");
        return;
    };
    let host = tempfile::tempdir().unwrap();
    copy_to(&exe, &host.path().join("opt/app/server"));
    let search = Search {
        host: Some(host.path().to_path_buf()),
        ..Search::default()
    };
    let mut other = id.clone();
    other[0] ^= 0xff;
    let r = resolve("/opt/app/server", &other, &search);
    assert!(!r.found(), "{r:?}");
    let why = r.describe();
    assert!(why.starts_with("none: host file "), "{why}");
    assert!(why.contains(&crate::sys::digest::hex(&id)), "{why}");
    assert!(why.contains(&crate::sys::digest::hex(&other)), "{why}");
    // Its own id: taken, from the host.
    let r = resolve("/opt/app/server", &id, &search);
    assert_eq!(r.binary.as_ref().unwrap().kind, Kind::HostFile);
    assert_eq!(id_of(&r.binary.unwrap().path), id);
    // No id recorded: taken by path, as perf does.
    assert!(resolve("/opt/app/server", &[], &search).binary.is_some());
}

#[test]
fn without_a_recorded_id_debug_files_are_found_by_the_binarys_own_id() {
    let Some((exe, id)) = exe() else {
        panic!("this test binary has no build id");
    };
    let host = tempfile::tempdir().unwrap();
    copy_to(&exe, &host.path().join("usr/lib/libx.so"));
    let hex = crate::sys::digest::hex(&id);
    let by_id = format!("usr/lib/debug/.build-id/{}/{}.debug", &hex[..2], &hex[2..]);
    copy_to(&exe, &host.path().join(&by_id));
    let search = Search {
        host: Some(host.path().to_path_buf()),
        ..Search::default()
    };
    // As perf's dso__load: the live file's id finds its debug file.
    let r = resolve("/usr/lib/libx.so", &[], &search);
    assert_eq!(r.binary.as_ref().unwrap().kind, Kind::HostFile);
    assert_eq!(r.debug.len(), 1, "{r:?}");
    assert_eq!(r.debug[0].kind, Kind::HostDebug);
    assert!(r.recorded.is_empty(), "the recorded id is still none");
    // Found inside a snapshot the same way, by the snapshot's copy.
    let symfs = tempfile::tempdir().unwrap();
    copy_to(&exe, &symfs.path().join("usr/lib/libx.so"));
    let with_snapshot = Search {
        symfs: Some(symfs.path().to_path_buf()),
        ..search.clone()
    };
    let r = resolve("/usr/lib/libx.so", &[], &with_snapshot);
    assert_eq!(r.binary.as_ref().unwrap().kind, Kind::Snapshot);
    assert_eq!(r.debug[0].kind, Kind::HostDebug, "{r:?}");
    // A file of another id under that name is not taken.
    let other = host.path().join(&by_id);
    std::fs::remove_file(&other).unwrap();
    let mut bytes = std::fs::read(&exe).unwrap();
    let at = bytes.windows(id.len()).position(|w| w == id).unwrap();
    bytes[at] ^= 0xff;
    std::fs::write(&other, bytes).unwrap();
    let r = resolve("/usr/lib/libx.so", &[], &search);
    assert!(r.debug.is_empty(), "{r:?}");
    assert_eq!(r.rejected.len(), 1, "{r:?}");
    // Another user's capture: no id recorded names nothing here.
    let theirs = Search {
        owner: Some(Creds::anyone()),
        ..search
    };
    assert!(!resolve("/usr/lib/libx.so", &[], &theirs).found());
}

#[test]
fn another_users_capture_reads_host_files_as_that_user_and_by_build_id_only() {
    use std::os::unix::fs::PermissionsExt;
    let Some((exe, id)) = exe() else {
        return;
    };
    if crate::sys::creds::euid() != 0 {
        eprintln!("skipped: needs root");
        return;
    }
    let host = tempfile::tempdir().unwrap();
    copy_to(&exe, &host.path().join("opt/app/server"));
    let private = host.path().join("opt");
    let mode = |m| std::fs::set_permissions(&private, std::fs::Permissions::from_mode(m));
    mode(0o700).unwrap();
    let search = Search {
        host: Some(host.path().to_path_buf()),
        owner: Some(Creds::anyone()),
        ..Search::default()
    };
    // No build id recorded: never by the path alone.
    let r = resolve("/opt/app/server", &[], &search);
    assert!(!r.found(), "{r:?}");
    assert!(
        r.describe().contains("recorded no build id"),
        "{}",
        r.describe()
    );
    // Its build id, in a directory the owner may not search: refused.
    let r = resolve("/opt/app/server", &id, &search);
    assert!(!r.found(), "{r:?}");
    assert!(
        r.describe().contains("owner may not read it"),
        "{}",
        r.describe()
    );
    // Readable by the owner: taken, and opened as the owner later.
    mode(0o755).unwrap();
    let r = resolve("/opt/app/server", &id, &search);
    let b = r.binary.as_ref().expect("taken by its build id");
    assert_eq!(b.owner, Some(Creds::anyone()));
    assert!(b.map().is_some());
    mode(0o700).unwrap();
    assert!(b.map().is_none(), "reopened with the owner's rights");
    // The processing user's own capture: by path, as perf does.
    let own = Search {
        owner: None,
        ..search
    };
    assert!(resolve("/opt/app/server", &[], &own).found());
}

#[test]
fn candidates_in_order_snapshot_then_host_debug_then_host_file() {
    let Some((exe, id)) = exe() else {
        return;
    };
    let hex = crate::sys::digest::hex(&id);
    let (nn, rest) = hex.split_at(2);
    let tmp = tempfile::tempdir().unwrap();
    let (symfs, host, extra) = (
        tmp.path().join("symfs"),
        tmp.path().join("host"),
        tmp.path().join("extra"),
    );
    let put = |p: PathBuf| copy_to(&exe, &p);
    put(symfs.join("opt/app/server"));
    put(host.join("opt/app/server"));
    put(host.join(format!("usr/lib/debug/.build-id/{nn}/{rest}.debug")));
    put(extra.join(format!(".build-id/{nn}/{rest}.debug")));
    let search = Search {
        symfs: Some(symfs.clone()),
        host: Some(host.clone()),
        debug_dirs: vec![extra.clone()],
        ..Search::default()
    };
    let r = resolve("/opt/app/server", &id, &search);
    let b = r.binary.as_ref().unwrap();
    assert_eq!(
        (b.kind, b.root.as_path()),
        (Kind::Snapshot, symfs.as_path())
    );
    let kinds: Vec<Kind> = r.debug.iter().map(|s| s.kind).collect();
    assert_eq!(kinds, [Kind::HostDebug, Kind::DebugDir]);
    assert!(r.describe().starts_with("snapshot "), "{}", r.describe());
    // Climbing paths and anonymous names name nothing.
    assert!(!resolve("/../opt/app/server", &id, &search).found());
    assert!(!resolve("//anon", &id, &search).found());
    // The vDSO: the snapshot's copy only.
    put(symfs.join("[vdso]"));
    let r = resolve("[vdso]", &id, &search);
    assert_eq!(r.binary.unwrap().kind, Kind::Snapshot);
}
