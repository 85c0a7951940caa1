//! Memory-mapped inputs ([`Mapping`]) under the one SIGBUS guard of every
//! map jobprof makes, and the sequential reader over a map
//! ([`MappedReader`]) that lets go of the pages behind it. A map is a
//! shared, read-only map of the file, sound only while nobody else
//! changes or truncates it: [`Mapping::of`] ends the process with a
//! message naming a file that shrinks while read (exit code 2), and
//! [`Mapping::of_shrinkable`] puts zero pages over the lost part and lets
//! the reader ask [`Mapping::shrank`] (the parent module's doc says
//! which inputs get which). This module hands out bytes and nothing else.

use std::fs::File;
use std::io::{self, Read};
use std::path::Path;

use memmap2::Mmap;

/// A mapped input, registered with the SIGBUS handler for as long as it
/// lives (derefs to the map).
pub struct Mapping {
    map: Mmap,
    slot: Option<usize>,
    /// The file of a surviving map ([`Mapping::of_shrinkable`]): its size
    /// says whether it shrank within its last page, where no SIGBUS tells.
    file: Option<File>,
}

impl Mapping {
    /// Maps `file` (opened from `path`, a regular file) read-only, shared,
    /// and guarded: a file that shrinks while it is read ends the process
    /// (`_exit(2)`) with a message naming it, not with a bare SIGBUS.
    ///
    /// # Safety
    ///
    /// Nobody may change or truncate the file while the mapping lives: the
    /// map is shared, so another process's writes show through the `&[u8]`
    /// it derefs to (undefined behaviour), and a truncation makes touching
    /// the lost pages raise SIGBUS (which the guard turns into a message
    /// and `_exit(2)`, not into an error). jobprof itself never writes the
    /// files it maps.
    pub(crate) unsafe fn of(file: &File, path: &Path) -> io::Result<Mapping> {
        // SAFETY: the caller promises that nobody changes or truncates the
        // file while it is mapped (this function's `# Safety`).
        let map = unsafe { Mmap::map(file) }?;
        let slot = shrink_guard::register(map.as_ptr() as usize, map.len(), path, false);
        Ok(Mapping {
            map,
            slot,
            file: None,
        })
    }

    /// Maps `file` (opened from `path`, a regular file) read-only, shared,
    /// and guarded so that a truncation is survived: the pages lost read as
    /// zeros and [`Mapping::shrank`] says so afterwards (readers check it
    /// once they are done and throw away what they read). A map the guard
    /// has no room for (more than [`shrink_guard::SLOTS`] at once) is an
    /// error, never an unguarded map.
    ///
    /// # Safety
    ///
    /// The file may shrink at any time (that is survived), but the caller
    /// accepts that its bytes may also change in place under the `&[u8]`
    /// (another process writing the file): what it reads from the map must
    /// be checked as untrusted input, never relied on for memory safety
    /// (offsets bounds-checked, as `object` and `gimli` do).
    pub(crate) unsafe fn of_shrinkable(file: &File, path: &Path) -> io::Result<Mapping> {
        // SAFETY: the caller reads the bytes as untrusted input (this
        // function's `# Safety`); a truncation is the guard's.
        let map = unsafe { Mmap::map(file) }?;
        if map.is_empty() {
            return Ok(Mapping {
                map,
                slot: None,
                file: None,
            });
        }
        let slot = shrink_guard::register(map.as_ptr() as usize, map.len(), path, true);
        if slot.is_none() {
            return Err(io::Error::other(format!(
                "more than {} files mapped at once; not read unguarded",
                shrink_guard::SLOTS
            )));
        }
        let mapping = Mapping {
            map,
            slot,
            file: Some(file.try_clone()?),
        };
        #[cfg(test)]
        super::tests::after_map(path);
        Ok(mapping)
    }

    /// Whether the file shrank under a map made by
    /// [`Mapping::of_shrinkable`] (its lost pages read as zeros, and so do
    /// the bytes past its new end in its last page, which raise no
    /// SIGBUS): what was read from it is not the file's.
    pub fn shrank(&self) -> bool {
        let shorter = |f: &File| {
            f.metadata()
                .map_or(true, |m| m.len() < self.map.len() as u64)
        };
        self.slot.is_some_and(shrink_guard::shrank) || self.file.as_ref().is_some_and(shorter)
    }
}

/// Bytes a sequential reader of a [`Mapping`] gets through before it lets
/// go of the pages behind it.
pub(crate) const RELEASE_STEP: usize = 16 << 20;

impl Mapping {
    /// Lets go of the whole pages within `start..end`: they stay in the page
    /// cache and fault back in if touched again, but no longer count in
    /// the process's resident memory (a sequential reader of a multi-GB
    /// file stays small).
    /// The map's last page counts as whole (it is, in memory) when `end`
    /// reaches the map's end.
    pub(crate) fn release(&self, start: usize, end: usize) {
        let page = page_size();
        let len = self.map.len();
        let start = start.div_ceil(page) * page;
        let end = if end >= len { len } else { end / page * page };
        if end > start {
            // SAFETY: a read-only, shared file mapping of a file nobody
            // changes (`of`'s promise): MADV_DONTNEED only drops the page
            // table entries, and the next access reads the same bytes back
            // from the page cache.
            let _ = unsafe {
                self.map.unchecked_advise_range(
                    memmap2::UncheckedAdvice::DontNeed,
                    start,
                    end - start,
                )
            };
        }
    }
}

/// The size of a memory page (sysconf; 4096 if it will not say).
pub(crate) fn page_size() -> usize {
    // SAFETY: sysconf has no preconditions.
    let p = unsafe { libc::sysconf(libc::_SC_PAGESIZE) };
    if p > 0 {
        p as usize
    } else {
        4096
    }
}

/// `Read + Seek` over a [`Mapping`] (for parsers that want a reader: one
/// copy out of the page cache instead of read(2)'s two), releasing the
/// pages it has read past every [`RELEASE_STEP`] bytes.
pub(crate) struct MappedReader<'a> {
    map: &'a Mapping,
    pos: usize,
    released: usize,
}

impl<'a> MappedReader<'a> {
    /// A reader at the start of `map`.
    pub(crate) fn new(map: &'a Mapping) -> MappedReader<'a> {
        MappedReader {
            map,
            pos: 0,
            released: 0,
        }
    }
}

impl Read for MappedReader<'_> {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        let rest = self.map.get(self.pos..).unwrap_or_default();
        let n = rest.len().min(buf.len());
        buf[..n].copy_from_slice(&rest[..n]);
        self.pos += n;
        if self.pos >= self.released + RELEASE_STEP {
            self.map.release(self.released, self.pos);
            self.released = self.pos;
        }
        Ok(n)
    }
}

impl io::Seek for MappedReader<'_> {
    fn seek(&mut self, to: io::SeekFrom) -> io::Result<u64> {
        let len = self.map.len() as i128;
        let new = match to {
            io::SeekFrom::Start(n) => i128::from(n),
            io::SeekFrom::End(d) => len + i128::from(d),
            io::SeekFrom::Current(d) => self.pos as i128 + i128::from(d),
        };
        let new = usize::try_from(new).map_err(|_| {
            io::Error::new(
                io::ErrorKind::InvalidInput,
                "seek before the start of the file",
            )
        })?;
        self.pos = new;
        // A reader that jumps back starts releasing from there.
        self.released = self.released.min(new);
        Ok(new as u64)
    }
}

impl std::fmt::Debug for Mapping {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Mapping")
            .field("len", &self.map.len())
            .field("shrank", &self.shrank())
            .finish()
    }
}

impl std::ops::Deref for Mapping {
    type Target = Mmap;
    fn deref(&self) -> &Mmap {
        &self.map
    }
}

impl Drop for Mapping {
    fn drop(&mut self) {
        if let Some(slot) = self.slot {
            shrink_guard::unregister(slot);
        }
    }
}

/// The SIGBUS handler for mapped inputs that shrink while read.
mod shrink_guard {
    use std::path::Path;
    use std::sync::atomic::{AtomicBool, AtomicPtr, AtomicUsize, Ordering};
    use std::sync::Once;

    /// Maps registered at once: folding maps one file at a time per input,
    /// the symbol store one per symbol file it holds (its DWARF stays
    /// mapped for the run). Past this, [`super::Mapping::of`] maps
    /// unguarded (SIGBUS then kills the process the usual way) and
    /// [`super::Mapping::of_shrinkable`] refuses to map.
    pub const SLOTS: usize = 4096;

    struct Slot {
        start: AtomicUsize,
        len: AtomicUsize,
        /// A leaked `Box<[u8]>`'s data (the message), or null when free.
        msg: AtomicPtr<u8>,
        msg_len: AtomicUsize,
        /// Survive a shrink (zero pages over the lost part) instead of
        /// ending the process.
        survive: AtomicBool,
        /// The file shrank under a surviving map.
        shrank: AtomicBool,
    }

    #[allow(clippy::declare_interior_mutable_const)]
    const FREE: Slot = Slot {
        start: AtomicUsize::new(0),
        len: AtomicUsize::new(0),
        msg: AtomicPtr::new(std::ptr::null_mut()),
        msg_len: AtomicUsize::new(0),
        survive: AtomicBool::new(false),
        shrank: AtomicBool::new(false),
    };
    static TABLE: [Slot; SLOTS] = [FREE; SLOTS];
    static INSTALL: Once = Once::new();
    /// The page size, read before the handler is installed (sysconf is
    /// not async-signal-safe).
    static PAGE: AtomicUsize = AtomicUsize::new(4096);

    /// Whether the file of slot `i`'s map shrank under it.
    pub fn shrank(i: usize) -> bool {
        TABLE[i].shrank.load(Ordering::Acquire)
    }

    pub fn register(start: usize, len: usize, path: &Path, survive: bool) -> Option<usize> {
        INSTALL.call_once(install);
        let text = format!(
            "jobprof: error: {}: the file shrank while it was being read (truncated or \
             replaced by another process?); run again once it is no longer written\n",
            path.display()
        );
        let msg: Box<[u8]> = text.into_bytes().into_boxed_slice();
        let msg_len = msg.len();
        let ptr = Box::into_raw(msg) as *mut u8;
        for (i, slot) in TABLE.iter().enumerate() {
            if slot
                .msg
                .compare_exchange(
                    std::ptr::null_mut(),
                    ptr,
                    Ordering::AcqRel,
                    Ordering::Relaxed,
                )
                .is_ok()
            {
                slot.msg_len.store(msg_len, Ordering::Release);
                slot.survive.store(survive, Ordering::Release);
                slot.shrank.store(false, Ordering::Release);
                slot.start.store(start, Ordering::Release);
                slot.len.store(len, Ordering::Release);
                return Some(i);
            }
        }
        // SAFETY: `ptr` came from Box::into_raw of a slice of `msg_len` bytes.
        drop(unsafe { Box::from_raw(std::ptr::slice_from_raw_parts_mut(ptr, msg_len)) });
        None
    }

    pub fn unregister(i: usize) {
        let slot = &TABLE[i];
        slot.len.store(0, Ordering::Release);
        slot.start.store(0, Ordering::Release);
        let len = slot.msg_len.load(Ordering::Acquire);
        let ptr = slot.msg.swap(std::ptr::null_mut(), Ordering::AcqRel);
        if !ptr.is_null() {
            // SAFETY: the slot owned this leaked box; it is free now.
            drop(unsafe { Box::from_raw(std::ptr::slice_from_raw_parts_mut(ptr, len)) });
        }
    }

    /// Puts private zero-filled pages over the map from the page holding
    /// `addr` to `end` (the map's end): every page from the fault on lies
    /// past the file's new end. Async-signal-safe (one mmap(2)); whether it
    /// worked.
    fn zero_fill(addr: usize, end: usize) -> bool {
        let page = PAGE.load(Ordering::Relaxed);
        let from = addr / page * page;
        // SAFETY: `from..end` lies inside one of our registered read-only
        // maps (the caller checked): MAP_FIXED replaces those pages of it
        // with anonymous zero pages, which its owner unmaps with the rest.
        let got = unsafe {
            libc::mmap(
                from as *mut libc::c_void,
                end - from,
                libc::PROT_READ,
                libc::MAP_PRIVATE | libc::MAP_ANONYMOUS | libc::MAP_FIXED,
                -1,
                0,
            )
        };
        got as usize == from
    }

    fn install() {
        PAGE.store(super::page_size(), Ordering::Relaxed);
        // SAFETY: a zeroed sigaction with a valid handler and SA_SIGINFO.
        unsafe {
            let mut sa: libc::sigaction = std::mem::zeroed();
            sa.sa_sigaction = on_sigbus as *const () as usize;
            sa.sa_flags = libc::SA_SIGINFO;
            libc::sigemptyset(&mut sa.sa_mask);
            libc::sigaction(libc::SIGBUS, &sa, std::ptr::null_mut());
        }
    }

    /// Async-signal-safe: atomics, mmap(2), write(2) and _exit(2) only.
    extern "C" fn on_sigbus(
        _sig: libc::c_int,
        info: *mut libc::siginfo_t,
        _ctx: *mut libc::c_void,
    ) {
        // SAFETY: the kernel passes a valid siginfo for SA_SIGINFO handlers.
        let addr = unsafe { (*info).si_addr() } as usize;
        for slot in &TABLE {
            let start = slot.start.load(Ordering::Acquire);
            let len = slot.len.load(Ordering::Acquire);
            if len > 0 && addr >= start && addr < start + len {
                if slot.survive.load(Ordering::Acquire) && zero_fill(addr, start + len) {
                    slot.shrank.store(true, Ordering::Release);
                    // The faulting access is retried and reads zeros.
                    return;
                }
                let msg = slot.msg.load(Ordering::Acquire);
                let msg_len = slot.msg_len.load(Ordering::Acquire);
                // SAFETY: write(2) and _exit(2) are async-signal-safe; the
                // message stays alive while its map is registered.
                unsafe {
                    if !msg.is_null() {
                        libc::write(2, msg as *const libc::c_void, msg_len);
                    }
                    libc::_exit(2);
                }
            }
        }
        // Not one of ours: the default action (the process dies of SIGBUS
        // when the faulting access is retried).
        // SAFETY: resetting a signal disposition.
        unsafe {
            libc::signal(libc::SIGBUS, libc::SIG_DFL);
        }
    }
}
