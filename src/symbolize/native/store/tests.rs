use super::*;
use std::path::{Path, PathBuf};

/// A symfs root holding `bin` (a system binary with a build id) as
/// `usr/bin/tool`.
fn root_with(dir: &Path, name: &str, bin: &str) -> PathBuf {
    let root = dir.join(name);
    std::fs::create_dir_all(root.join("usr/bin")).unwrap();
    std::fs::copy(bin, root.join("usr/bin/tool")).unwrap();
    root
}

fn build_id_of(bin: &str) -> Vec<u8> {
    use object::Object;
    let data = std::fs::read(bin).unwrap();
    let file = object::read::elf::ElfFile64::<object::Endianness>::parse(&*data).unwrap();
    let id = file.build_id().ok().flatten();
    id.expect("a system binary with a build id").to_vec()
}

/// What the resolver takes for `path` with `build_id` in the snapshot
/// `root` alone (this host is not searched).
fn resolved(root: &Path, path: &str, build_id: &[u8]) -> Arc<Resolved> {
    Arc::new(crate::symbolize::sources::resolve(
        path,
        build_id,
        &snapshot(root),
    ))
}

/// The search of the snapshot `root` alone.
fn snapshot(root: &Path) -> Search {
    Search {
        symfs: Some(root.to_path_buf()),
        ..Default::default()
    }
}

/// Two snapshots `a` and `b` holding the same binary (ls).
fn two_roots(dir: &Path) -> (PathBuf, PathBuf) {
    (root_with(dir, "a", LS), root_with(dir, "b", LS))
}

/// The store's entry for `path` with `build_id` in the snapshot `root`.
/// Whether `/usr/bin/tool` under `root`, recorded with `build_id`, is
/// keyed by its build id (and content), not by its file's identity.
fn keyed_by_build_id(root: &Path, build_id: &[u8]) -> bool {
    let r = resolved(root, "/usr/bin/tool", build_id);
    let hash = |f: &Source, _| Hashed::read(&f.root, &f.path, f.owner.as_ref());
    matches!(DsoId::of("/usr/bin/tool", &r, hash).0, DsoId::Build { .. })
}

fn dso(store: &Store, root: &Path, path: &str, build_id: &[u8]) -> Arc<Entry> {
    store.dso(path, &resolved(root, path, build_id))
}

const LS: &str = "/bin/ls";
const CAT: &str = "/bin/cat";

#[test]
fn copies_with_one_build_id_share_one_entry_loaded_once() {
    let dir = tempfile::tempdir().unwrap();
    let (a, b) = two_roots(dir.path());
    let id = build_id_of(LS);
    let store = Store::default();
    let ea = dso(&store, &a, "/usr/bin/tool", &id);
    let eb = dso(&store, &b, "/usr/bin/tool", &id);
    assert!(Arc::ptr_eq(&ea, &eb));
    assert!(!ea.symbols().table.is_empty());
    assert!(Arc::ptr_eq(ea.symbols(), eb.symbols()));
    ea.unwind().expect("ls has .eh_frame");
    eb.unwind();
    let (loads, reuses, evictions) = store.figures();
    assert_eq!((loads, reuses, evictions), (2, 1, 0));
    assert!(store.bytes() > 0);
    assert!(
        store.describe().contains("1 DSO(s)"),
        "{}",
        store.describe()
    );
}

#[test]
fn a_symbol_table_from_the_disk_cache_is_the_one_the_files_give() {
    let dir = super::super::cache::test_dir();
    let (a, _) = two_roots(dir.path());
    let id = build_id_of(LS);
    let cache = || Some(Arc::new(Cache::new(dir.path().join("cache"))));
    let plain = Store::default();
    let writer = Store::default().with_disk_cache(cache());
    let reader = Store::default().with_disk_cache(cache());
    let bytes = |store: &Store| {
        let e = dso(store, &a, "/usr/bin/tool", &id);
        e.symbols().encode(&e.resolved)
    };
    let want = bytes(&plain);
    assert_eq!(bytes(&writer), want);
    assert!(
        writer
            .describe()
            .contains("0 hit(s), 1 miss(es), 1 written"),
        "{}",
        writer.describe()
    );
    assert_eq!(bytes(&reader), want);
    assert!(
        reader
            .describe()
            .contains("1 hit(s), 0 miss(es), 0 written"),
        "{}",
        reader.describe()
    );
    // Without a build id recorded the cache is not asked.
    let none = Store::default().with_disk_cache(cache());
    dso(&none, &a, "/usr/bin/tool", &[]).symbols();
    assert!(
        none.describe().contains("0 hit(s), 0 miss(es)"),
        "{}",
        none.describe()
    );
}

#[test]
fn a_file_truncated_while_its_symbols_load_is_noted_and_never_cached() {
    let dir = tempfile::tempdir().unwrap();
    let root = root_with(dir.path(), "a", LS);
    let tool = root.join("usr/bin/tool");
    let id = build_id_of(LS);
    let store =
        Store::default().with_disk_cache(Some(Arc::new(Cache::new(dir.path().join("cache")))));
    let e = dso(&store, &root, "/usr/bin/tool", &id);
    let syms = crate::sys::input::tests::truncated_after_map(&tool, || e.symbols().clone());
    assert!(syms.table.is_empty(), "{} symbols", syms.table.len());
    assert_eq!(e.shrunk(), [tool]);
    let d = store.describe();
    assert!(d.contains("0 written"), "nothing kept from zeros: {d}");
}

#[test]
fn a_file_that_lacks_the_recorded_build_id_is_never_shared() {
    let dir = tempfile::tempdir().unwrap();
    // b's file claims ls's build id but is cat.
    let (a, b) = (
        root_with(dir.path(), "a", LS),
        root_with(dir.path(), "b", CAT),
    );
    let id = build_id_of(LS);
    let store = Store::default();
    let ea = dso(&store, &a, "/usr/bin/tool", &id);
    let eb = dso(&store, &b, "/usr/bin/tool", &id);
    assert!(!Arc::ptr_eq(&ea, &eb));
    assert!(keyed_by_build_id(&a, &id));
    // The resolver takes no file with another build id: b's entry
    // names nothing.
    assert!(eb.symbols().table.is_empty());
    // Nor does a second copy of it name anything.
    let c = root_with(dir.path(), "c", CAT);
    assert!(dso(&store, &c, "/usr/bin/tool", &id)
        .symbols()
        .table
        .is_empty());
    // Without a build id, the same file asked again is shared; another
    // copy is not (file identity).
    let nb = dso(&store, &b, "/usr/bin/tool", &[]);
    assert!(Arc::ptr_eq(&nb, &dso(&store, &b, "/usr/bin/tool", &[])));
    assert!(!Arc::ptr_eq(&nb, &dso(&store, &c, "/usr/bin/tool", &[])));
}

#[test]
fn copies_with_one_build_id_and_other_bytes_share_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let (a, b) = two_roots(dir.path());
    // b's copy: the same build id and size, one byte of a symbol's
    // name changed (what a capture's owner may write).
    let tool = b.join("usr/bin/tool");
    let mut bytes = std::fs::read(&tool).unwrap();
    let at = bytes.windows(5).position(|w| w == b"main\0").unwrap();
    bytes[at] = b'M';
    std::fs::write(&tool, bytes).unwrap();
    let id = build_id_of(LS);
    let store = Store::default();
    let ea = dso(&store, &a, "/usr/bin/tool", &id);
    let eb = dso(&store, &b, "/usr/bin/tool", &id);
    assert!(!Arc::ptr_eq(&ea, &eb));
    assert!(keyed_by_build_id(&b, &id));
}

#[test]
fn a_copy_another_user_may_rewrite_is_shared_only_with_that_user_s() {
    // SAFETY: geteuid has no preconditions.
    if unsafe { libc::geteuid() } != 0 {
        eprintln!("not root: files of another user cannot be made; skipped");
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let (a, b) = two_roots(dir.path());
    let c = root_with(dir.path(), "c", LS);
    for r in [&b, &c] {
        std::os::unix::fs::lchown(r.join("usr/bin/tool"), Some(65534), None).unwrap();
    }
    let id = build_id_of(LS);
    let store = Store::default();
    let ea = dso(&store, &a, "/usr/bin/tool", &id);
    let eb = dso(&store, &b, "/usr/bin/tool", &id);
    assert!(!Arc::ptr_eq(&ea, &eb), "nobody's copy is not root's");
    assert!(Arc::ptr_eq(&eb, &dso(&store, &c, "/usr/bin/tool", &id)));
    // One anyone may write is keyed by its identity alone.
    let everyone = root_with(dir.path(), "d", LS);
    let tool = everyone.join("usr/bin/tool");
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(&tool, std::fs::Permissions::from_mode(0o666)).unwrap();
    let r = resolved(&everyone, "/usr/bin/tool", &id);
    let (key, hashed) = DsoId::of("/usr/bin/tool", &r, |f, _| {
        Hashed::read(&f.root, &f.path, f.owner.as_ref())
    });
    assert!(matches!(key, DsoId::File { .. }) && hashed.is_empty());
}

#[test]
fn another_path_or_build_id_is_another_entry() {
    let dir = tempfile::tempdir().unwrap();
    let a = root_with(dir.path(), "a", LS);
    std::fs::copy(LS, a.join("usr/bin/other")).unwrap();
    let id = build_id_of(LS);
    let store = Store::default();
    let e = dso(&store, &a, "/usr/bin/tool", &id);
    assert!(!Arc::ptr_eq(&e, &dso(&store, &a, "/usr/bin/other", &id)));
    assert!(!Arc::ptr_eq(&e, &dso(&store, &a, "/usr/bin/tool", &[])));
    // A debug file that appears changes which files are read.
    let debug = a.join("usr/lib/debug/usr/bin");
    std::fs::create_dir_all(&debug).unwrap();
    std::fs::copy(LS, debug.join("tool.debug")).unwrap();
    assert!(!Arc::ptr_eq(&e, &dso(&store, &a, "/usr/bin/tool", &id)));
}

#[test]
fn past_the_limit_the_least_recently_asked_entry_goes() {
    let dir = tempfile::tempdir().unwrap();
    let (a, b) = (
        root_with(dir.path(), "a", LS),
        root_with(dir.path(), "b", CAT),
    );
    let (ls, cat) = (build_id_of(LS), build_id_of(CAT));
    // Room for about one symbol table.
    let store = Store::new(1);
    let first = dso(&store, &a, "/usr/bin/tool", &ls);
    first.symbols();
    assert!(store.bytes() > 1);
    let second = dso(&store, &b, "/usr/bin/tool", &cat);
    second.symbols();
    second.unwind().expect("cat has .eh_frame");
    assert_eq!(store.entries().0, 1, "{}", store.describe());
    assert_eq!(store.figures().2, 1);
    // The evicted entry still serves whoever holds it...
    assert!(!first.symbols().table.is_empty());
    // ...and is loaded again when asked for.
    let again = dso(&store, &a, "/usr/bin/tool", &ls);
    assert!(!Arc::ptr_eq(&first, &again));
    assert_eq!(store.entries().0, 1);
    assert_eq!(store.figures().2, 2);
}

#[test]
fn a_store_with_background_loads_warms_each_new_entry_once() {
    let dir = tempfile::tempdir().unwrap();
    let root = root_with(dir.path(), "a", LS);
    let id = build_id_of(LS);
    // Without background loads warming does nothing.
    let quiet = Store::default();
    let e = dso(&quiet, &root, "/usr/bin/tool", &id);
    quiet.warm(&e, true);
    std::thread::sleep(std::time::Duration::from_millis(50));
    assert_eq!(quiet.figures().0, 0);
    let store = Store::default().with_background_loads(true);
    let e = dso(&store, &root, "/usr/bin/tool", &id);
    store.warm(&e, false);
    store.warm(&e, false);
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(30);
    while e.symbols.get().is_none() && std::time::Instant::now() < deadline {
        std::thread::sleep(std::time::Duration::from_millis(5));
    }
    // Loaded once, by the background; the asker's own ask reuses it.
    assert!(!e.symbols().table.is_empty());
    assert_eq!(store.figures().0, 1);
}

#[test]
fn each_search_is_resolved_once_per_run() {
    let dir = tempfile::tempdir().unwrap();
    let (a, b) = two_roots(dir.path());
    let id = build_id_of(LS);
    let store = Store::default();
    let first = store.resolved("/usr/bin/tool", &id, &snapshot(&a));
    assert!(first.binary.is_some());
    // Asked again (another capture of the run): the same answer, even
    // once the file is gone, since it is not looked up again.
    std::fs::remove_file(a.join("usr/bin/tool")).unwrap();
    let again = store.resolved("/usr/bin/tool", &id, &snapshot(&a));
    assert!(Arc::ptr_eq(&first, &again));
    // Another snapshot, or another build id, is resolved on its own.
    let other = store.resolved("/usr/bin/tool", &id, &snapshot(&b));
    assert!(!Arc::ptr_eq(&first, &other));
    let wrong = store.resolved("/usr/bin/tool", &build_id_of(CAT), &snapshot(&b));
    assert!(wrong.binary.is_none(), "{wrong:?}");
}

#[test]
fn a_kallsyms_file_is_read_once_until_it_changes() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("kallsyms");
    let text = b"ffffffff81000000 T _text\nffffffff81000100 T start_kernel\n".to_vec();
    std::fs::write(&path, &text).unwrap();
    let store = Store::default();
    let reads = std::cell::Cell::new(0);
    let ask = || {
        let id = file_id(&std::fs::metadata(&path).unwrap());
        store.kernel_file(id, || {
            reads.set(reads.get() + 1);
            std::fs::read(&path).ok()
        })
    };
    let t1 = ask().unwrap();
    let t2 = ask().unwrap();
    assert!(Arc::ptr_eq(&t1, &t2));
    assert_eq!((reads.get(), t1.len()), (1, 2));
    // Renamed over by a new snapshot: another identity, read again.
    let new = dir.path().join("new");
    std::fs::write(&new, b"ffffffff81000000 T _text\n").unwrap();
    std::fs::rename(&new, &path).unwrap();
    let t3 = ask().unwrap();
    assert_eq!((reads.get(), t3.len()), (2, 1));
    // A failed read names nothing and is not remembered.
    let gone = (1, 2, 3, 4, 5, 6, 7);
    assert!(store.kernel_file(gone, || None).is_none());
}

#[test]
fn kernel_tables_are_shared_by_content() {
    let store = Store::default();
    let text = b"ffffffff81000000 T _text\nffffffff81000100 T start_kernel\n".to_vec();
    let t1 = store.kernel(text.clone());
    let t2 = store.kernel(text.clone());
    assert!(Arc::ptr_eq(&t1, &t2));
    assert_eq!(t1.len(), 2);
    let mut other = text;
    other.extend_from_slice(b"ffffffff81000200 T rest_init\n");
    assert!(!Arc::ptr_eq(&t1, &store.kernel(other)));
    assert_eq!(store.entries().1, 2);
}

#[test]
fn frame_lines_are_kept_per_entry() {
    let e = Entry::empty();
    let mut made = 0;
    let mut make = || {
        made += 1;
        Ok(vec![Line::new("f+0x4", "x")])
    };
    let a = e.line(0x1234, false, &mut make).unwrap();
    let b = e.line(0x1234, false, &mut make).unwrap();
    assert!(Arc::ptr_eq(&a, &b));
    e.line(0x1234, true, &mut make);
    // Lines that depend on the order of lookups are never kept.
    assert_eq!(e.line(0x99, true, || Err(())), None);
    assert!(e.line(0x99, true, &mut make).is_some());
    assert_eq!(made, 3);
}
