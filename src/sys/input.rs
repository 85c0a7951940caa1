//! Opening inputs: memory-mapped files, or byte streams for compressed files
//! (`.gz`, `.zst`, recognised by their magic bytes, not their names), pipes
//! and stdin.
//!
//! Sniffing refuses binary `perf.data` files (magic `PERFILE2`) and other
//! binary data with a message that says what to do instead. This module
//! hands out bytes; it knows nothing about the `perf script` format beyond
//! "text". It never modifies its inputs.
//!
//! A [`Mapping`] is a shared, read-only map of the file: it is sound only
//! while nobody else changes or truncates the file, which is why
//! [`Mapping::of`] is `unsafe` and its callers say why that holds for
//! them. A file truncated anyway would raise SIGBUS on the next page
//! touched past its new end; [`Mapping`] registers each map with a SIGBUS
//! handler (the one guard of every map jobprof makes) that does one of two
//! things, chosen per map:
//!
//! - [`Mapping::of`] (inputs the user names: folded text, `perf.data`):
//!   write a one-line message naming the file and end the process with
//!   `_exit(2)` (exit code 2, bad input) instead of a bare SIGBUS. That is
//!   no error a caller can handle: the process is gone.
//! - [`Mapping::of_shrinkable`] (files another user may truncate at any
//!   time, such as a capture's `symfs/`): put zero-filled pages over the
//!   lost part of the map (from the faulting page to its end), note that
//!   the file shrank, and let the read go on. The reader gets zeros, then
//!   asks [`Mapping::shrank`] and discards what it read: the file becomes
//!   that reader's clean error, never a crash.
//!
//! A change in place is not caught at all.

use std::fs::File;
use std::io::{self, BufRead, BufReader, Read};
use std::path::{Path, PathBuf};

use memmap2::Mmap;

use crate::error::{Error, Result};

/// Where an input comes from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Source {
    /// A file (or FIFO) on disk.
    Path(PathBuf),
    /// Standard input (`-` on the command line).
    Stdin,
}

impl Source {
    /// `-` means stdin; anything else is a path.
    pub fn from_arg(arg: impl AsRef<Path>) -> Self {
        if arg.as_ref() == Path::new("-") {
            Source::Stdin
        } else {
            Source::Path(arg.as_ref().to_path_buf())
        }
    }

    /// The name used in messages.
    pub fn display_path(&self) -> PathBuf {
        match self {
            Source::Path(p) => p.clone(),
            Source::Stdin => PathBuf::from("<stdin>"),
        }
    }
}

/// The compression detected on an input.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Compression {
    /// Plain text.
    None,
    /// gzip (`1f 8b`), possibly multi-member.
    Gzip,
    /// zstd (`28 b5 2f fd`), possibly multi-frame.
    Zstd,
}

impl Compression {
    fn name(self) -> &'static str {
        match self {
            Compression::None => "plain",
            Compression::Gzip => "gzip",
            Compression::Zstd => "zstd",
        }
    }
}

/// An opened input, ready to be read.
pub enum Opened {
    /// A regular file mapped into memory.
    Mapped(Mapping),
    /// An empty file.
    Empty,
    /// A stream (decompressed on the fly where needed).
    Stream(Stream),
}

/// A readable input stream that names its source in errors.
pub struct Stream {
    reader: Box<dyn Read + Send>,
    path: PathBuf,
    compression: Compression,
    sniffed: bool,
}

impl Stream {
    /// Reads into `buf`, mapping decoder failures onto [`Error::Corrupt`] and
    /// I/O failures onto [`Error::Io`], both naming the input. The first
    /// decoded bytes are sniffed once for binary data.
    pub fn read(&mut self, buf: &mut [u8]) -> Result<usize> {
        loop {
            match self.reader.read(buf) {
                Ok(n) => {
                    if !self.sniffed && n > 0 {
                        self.sniffed = true;
                        sniff_text(&self.path, &buf[..n])?;
                    }
                    return Ok(n);
                }
                Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                Err(e) => {
                    return Err(match self.compression {
                        Compression::None => Error::io(&self.path, e),
                        c => Error::Corrupt {
                            path: self.path.clone(),
                            format: c.name(),
                            source: e,
                        },
                    })
                }
            }
        }
    }

    /// The input's name for messages.
    pub fn path(&self) -> &Path {
        &self.path
    }
}

/// The longest sample (or line) read from a stream input: 64 MiB. Text
/// read from a compressed file, a pipe or stdin is held in memory only up
/// to the next sample boundary (or newline); one longer than this is no
/// `perf script` text (a sample of 127 frames with names of 4 KiB each is
/// half a MiB), but a decompression bomb (gzip members of gigabytes
/// without a newline) that would otherwise be held whole. Readers stop
/// there with [`Error::Oversized`] naming the input.
pub const MAX_RECORD: usize = 64 << 20;

/// The error for a stream input that holds `what` (`a sample`, `a line`)
/// longer than [`MAX_RECORD`].
pub fn oversized(path: &Path, what: &'static str) -> Error {
    Error::Oversized {
        path: path.to_path_buf(),
        what,
        limit: MAX_RECORD,
    }
}

/// The first bytes of a `perf.data` file (perf's file format, version 2).
pub const PERF_DATA_MAGIC: &[u8] = b"PERFILE2";

/// Whether `path` starts with [`PERF_DATA_MAGIC`] (opened without
/// blocking on a FIFO; an error for a file that cannot be opened).
pub fn is_perf_data(path: &Path) -> io::Result<bool> {
    use std::os::unix::fs::OpenOptionsExt;
    let f = std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NONBLOCK)
        .open(path)?;
    if !f.metadata()?.is_file() {
        return Ok(false);
    }
    let mut head = Vec::with_capacity(PERF_DATA_MAGIC.len());
    f.take(PERF_DATA_MAGIC.len() as u64)
        .read_to_end(&mut head)?;
    Ok(head == PERF_DATA_MAGIC)
}
const GZIP_MAGIC: &[u8] = &[0x1f, 0x8b];
const ZSTD_MAGIC: &[u8] = &[0x28, 0xb5, 0x2f, 0xfd];

/// Opens `source`: maps a plain regular file, streams everything else.
/// A mapped file truncated while it is read ends the process with a
/// message naming it (exit 2).
pub fn open(source: &Source) -> Result<Opened> {
    open_as(source, false)
}

/// [`open`]; with `survive`, a mapped file is mapped in the guard's
/// surviving mode ([`Mapping::of_shrinkable`]): its reader checks
/// [`Mapping::shrank`] and makes a truncation its error
/// ([`shrank_error`]).
fn open_as(source: &Source, survive: bool) -> Result<Opened> {
    match source {
        Source::Stdin => {
            let stdin = BufReader::with_capacity(1 << 20, io::stdin());
            open_stream(Box::new(stdin), PathBuf::from("<stdin>"))
        }
        Source::Path(path) => {
            let file = File::open(path).map_err(|e| Error::io(path, e))?;
            let meta = file.metadata().map_err(|e| Error::io(path, e))?;
            if meta.is_dir() {
                return Err(Error::io(
                    path,
                    io::Error::new(io::ErrorKind::InvalidInput, "is a directory, not a file"),
                ));
            }
            if !meta.is_file() {
                // FIFOs, character devices, /dev/stdin: stream them.
                let r = BufReader::with_capacity(1 << 20, file);
                return open_stream(Box::new(r), path.clone());
            }
            if meta.len() == 0 {
                return Ok(Opened::Empty);
            }
            let mut head = [0u8; 4096];
            let n = read_head(&file, &mut head).map_err(|e| Error::io(path, e))?;
            let head = &head[..n];
            match detect(head) {
                Compression::None => {
                    sniff_text(path, head)?;
                    let map = match survive {
                        // SAFETY: a finished text file jobprof never
                        // writes; a truncation reads zeros and the reader
                        // finds it shrank; a line is parsed as untrusted
                        // text.
                        true => unsafe { Mapping::of_shrinkable(&file, path) },
                        // SAFETY: the user hands us a finished text file to
                        // read; jobprof never writes its inputs. One
                        // truncated while folded ends the process with a
                        // message (the SIGBUS guard); appending to it is
                        // harmless (the map keeps its length); rewriting it
                        // in place while it is folded is not supported (as
                        // with ripgrep).
                        false => unsafe { Mapping::of(&file, path) },
                    };
                    Ok(Opened::Mapped(map.map_err(|e| Error::io(path, e))?))
                }
                c => Ok(Opened::Stream(decoder(
                    Box::new(BufReader::with_capacity(1 << 20, file)),
                    c,
                    path.clone(),
                )?)),
            }
        }
    }
}

/// Whether [`open_regular`] may follow a symbolic link at the path itself.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Links {
    /// Follow it (a path the user typed, or one a recorded MMAP names).
    Follow,
    /// Refuse it (files jobprof finds on its own inside a tree: `symfs/`,
    /// `index.json`, `sources.json`).
    Refuse,
}

/// The one way jobprof opens an input file it did not get on stdin: with
/// `O_NONBLOCK` (so a FIFO or device cannot hang the open), then `fstat`:
/// anything but a regular file is an error naming it and what it is;
/// `O_NOFOLLOW` too when `links` is [`Links::Refuse`]. The returned file
/// reads normally (blocking mode restored).
pub fn open_regular(path: &Path, links: Links) -> Result<File> {
    use std::os::unix::fs::OpenOptionsExt;
    let mut flags = libc::O_NONBLOCK;
    if links == Links::Refuse {
        flags |= libc::O_NOFOLLOW;
    }
    let f = std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(flags)
        .open(path)
        .map_err(|e| match e.raw_os_error() {
            Some(libc::ELOOP) if links == Links::Refuse => {
                crate::sys::file_kind::not_plain(path, "a symbolic link")
            }
            _ => Error::io(path, e),
        })?;
    crate::sys::file_kind::regular_blocking(f, path)
}

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
        tests::after_map(path);
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

fn read_head(file: &File, buf: &mut [u8]) -> io::Result<usize> {
    use std::os::unix::fs::FileExt;
    let mut n = 0;
    while n < buf.len() {
        match file.read_at(&mut buf[n..], n as u64) {
            Ok(0) => break,
            Ok(k) => n += k,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
    Ok(n)
}

fn open_stream(mut reader: Box<dyn BufRead + Send>, path: PathBuf) -> Result<Opened> {
    let head = reader.fill_buf().map_err(|e| Error::io(&path, e))?;
    let c = detect(head);
    Ok(Opened::Stream(decoder(reader, c, path)?))
}

fn decoder(reader: Box<dyn BufRead + Send>, c: Compression, path: PathBuf) -> Result<Stream> {
    let reader: Box<dyn Read + Send> = match c {
        Compression::None => reader,
        Compression::Gzip => Box::new(flate2::bufread::MultiGzDecoder::new(reader)),
        Compression::Zstd => {
            let d =
                zstd::stream::read::Decoder::with_buffer(reader).map_err(|e| Error::Corrupt {
                    path: path.clone(),
                    format: "zstd",
                    source: e,
                })?;
            Box::new(d)
        }
    };
    Ok(Stream {
        reader,
        path,
        compression: c,
        sniffed: false,
    })
}

/// Recognises compressed streams by their magic bytes.
pub fn detect(head: &[u8]) -> Compression {
    if head.starts_with(GZIP_MAGIC) {
        Compression::Gzip
    } else if head.starts_with(ZSTD_MAGIC) {
        Compression::Zstd
    } else {
        Compression::None
    }
}

/// Refuses `perf.data` and other binary data, judged on the first bytes.
pub fn sniff_text(path: &Path, head: &[u8]) -> Result<()> {
    if head.starts_with(PERF_DATA_MAGIC) {
        return Err(Error::PerfData {
            path: path.to_path_buf(),
        });
    }
    let what = if head.starts_with(b"\x7fELF") {
        Some("an ELF executable or object")
    } else if head.iter().take(4096).any(|&b| b == 0) {
        Some("it contains NUL bytes")
    } else {
        None
    };
    match what {
        Some(w) => Err(Error::Binary {
            path: path.to_path_buf(),
            what: w.to_string(),
        }),
        None => Ok(()),
    }
}

/// Calls `f` with every line of `src` (plain, `.gz` or `.zst`; `-` is
/// stdin) and its 1-based number, without its `\n`, where it lies: in the
/// mapped file, or in the stream's buffer (a line split across reads is
/// joined first, and refused past [`MAX_RECORD`]). The one line reader
/// of folded files, reports and the trend's tallies. A mapped file
/// truncated while it is read (a capture's `stacks.folded`, which its
/// owner may truncate while root's `reprocess` refreshes the job views)
/// is an error naming it ([`shrank_error`]), after `f` saw zeros.
pub fn each_line(src: &Source, mut f: impl FnMut(u64, &[u8])) -> Result<()> {
    let path = src.display_path();
    match open_as(src, true)? {
        Opened::Empty => {}
        Opened::Mapped(map) => {
            let _ = map.advise(memmap2::Advice::Sequential);
            for (i, line) in split_lines(&map).enumerate() {
                f(i as u64 + 1, line);
            }
            if map.shrank() {
                return Err(shrank_error(&path));
            }
        }
        Opened::Stream(mut s) => {
            let mut buf = vec![0u8; 1 << 20];
            let mut carry: Vec<u8> = Vec::new();
            let mut lineno = 0u64;
            loop {
                let n = s.read(&mut buf)?;
                if n == 0 {
                    break;
                }
                let mut chunk = &buf[..n];
                while let Some(nl) = memchr::memchr(b'\n', chunk) {
                    lineno += 1;
                    if carry.is_empty() {
                        f(lineno, &chunk[..nl]);
                    } else {
                        carry.extend_from_slice(&chunk[..nl]);
                        f(lineno, &carry);
                        carry.clear();
                    }
                    chunk = &chunk[nl + 1..];
                }
                carry.extend_from_slice(chunk);
                if carry.len() > MAX_RECORD {
                    return Err(oversized(&path, "a line"));
                }
            }
            if !carry.is_empty() {
                f(lineno + 1, &carry);
            }
        }
    }
    Ok(())
}

/// The error for a file that shrank under its surviving map while it was
/// read (exit 2, as the guard's own message).
fn shrank_error(path: &Path) -> Error {
    Error::io(
        path,
        io::Error::other(
            "the file shrank while it was being read (truncated or replaced by another \
             process?); run again once it is no longer written",
        ),
    )
}

/// Lines of `data` without their `\n`; a last line without one is included.
pub fn split_lines(data: &[u8]) -> impl Iterator<Item = &[u8]> {
    let mut rest = data;
    std::iter::from_fn(move || {
        if rest.is_empty() {
            return None;
        }
        match memchr::memchr(b'\n', rest) {
            Some(i) => {
                let line = &rest[..i];
                rest = &rest[i + 1..];
                Some(line)
            }
            None => {
                let line = rest;
                rest = &[];
                Some(line)
            }
        }
    })
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use std::io::Write;

    /// A hook tests set on their own thread: called with each file right
    /// after [`Mapping::of_shrinkable`] maps it.
    type Hook = Option<Box<dyn Fn(&Path)>>;
    thread_local! {
        static AFTER_MAP: std::cell::RefCell<Hook> = const { std::cell::RefCell::new(None) };
    }

    pub(super) fn after_map(path: &Path) {
        AFTER_MAP.with(|hook| {
            if let Some(hook) = &*hook.borrow() {
                hook(path);
            }
        });
    }

    /// Runs `f` while every surviving map of `file` made on this thread
    /// has its file truncated to nothing right after the map (between the
    /// map and the reads, as a capture's owner may).
    pub(crate) fn truncated_after_map<T>(file: &Path, f: impl FnOnce() -> T) -> T {
        let file = file.to_path_buf();
        AFTER_MAP.with(|h| {
            *h.borrow_mut() = Some(Box::new(move |p: &Path| {
                if p == file {
                    let f = std::fs::OpenOptions::new().write(true).open(p);
                    f.and_then(|f| f.set_len(0)).unwrap();
                }
            }))
        });
        let out = f();
        AFTER_MAP.with(|h| *h.borrow_mut() = None);
        out
    }

    #[test]
    fn a_surviving_map_reads_zeros_past_a_truncation_and_says_it_shrank() {
        let (f, bytes) = patterned(5 * 4096 + 100);
        // SAFETY: the test's own file; it only shrinks.
        let map = unsafe { Mapping::of_shrinkable(f.as_file(), f.path()) }.unwrap();
        assert_eq!(map[10], bytes[10]);
        assert!(!map.shrank());
        // Cut within a page: its tail reads as zeros without a SIGBUS.
        f.as_file().set_len(4096 + 10).unwrap();
        assert_eq!(map[4096 + 20], 0);
        assert!(map.shrank(), "no signal, but the file is shorter");
        f.as_file().set_len(4096).unwrap();
        assert_eq!(map[100], bytes[100], "the page still in the file");
        assert!(
            map[4096..].iter().all(|&b| b == 0),
            "zeros past the new end"
        );
        assert!(map.shrank());
        assert_eq!(map.len(), bytes.len());
    }

    #[test]
    fn a_line_file_truncated_while_it_is_read_is_an_error_naming_it() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("stacks.folded");
        std::fs::write(&path, "main;f 1\n".repeat(10_000)).unwrap();
        let src = Source::Path(path.clone());
        let mut n = 0;
        each_line(&src, |_, _| n += 1).unwrap();
        assert_eq!(n, 10_000);
        let read = truncated_after_map(&path, || each_line(&src, |_, _| {}));
        let e = read.unwrap_err().to_string();
        assert!(e.contains("stacks.folded") && e.contains("shrank"), "{e}");
    }

    /// A file of `len` bytes of a position-dependent pattern.
    fn patterned(len: usize) -> (tempfile::NamedTempFile, Vec<u8>) {
        let bytes: Vec<u8> = (0..len).map(|i| (i % 251) as u8).collect();
        let mut f = tempfile::NamedTempFile::new().unwrap();
        f.write_all(&bytes).unwrap();
        (f, bytes)
    }

    #[test]
    fn mapped_reader_reads_seeks_and_rereads_released_pages() {
        use std::io::Seek;
        let (f, bytes) = patterned(2 * RELEASE_STEP + 12_345);
        // SAFETY: the test's own temporary file, written before and never
        // after.
        let map = unsafe { Mapping::of(f.as_file(), f.path()) }.unwrap();
        let mut r = MappedReader::new(&map);
        let mut got = Vec::new();
        let mut buf = vec![0; 1_000_003];
        loop {
            let n = r.read(&mut buf).unwrap();
            if n == 0 {
                break;
            }
            got.extend_from_slice(&buf[..n]);
        }
        assert!(got == bytes, "one pass reads every byte");
        // Released pages read back the same.
        assert_eq!(r.seek(io::SeekFrom::Start(0)).unwrap(), 0);
        let mut again = Vec::new();
        r.read_to_end(&mut again).unwrap();
        assert!(again == bytes, "a second pass after the release");
        r.seek(io::SeekFrom::End(-10)).unwrap();
        let mut tail = Vec::new();
        r.read_to_end(&mut tail).unwrap();
        assert_eq!(tail, bytes[bytes.len() - 10..]);
        r.seek(io::SeekFrom::Current(-4)).unwrap();
        assert_eq!(r.read(&mut buf).unwrap(), 4);
        assert!(r
            .seek(io::SeekFrom::Current(-(bytes.len() as i64) - 1))
            .is_err());
    }

    #[test]
    fn refuses_perf_data() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("perf.data");
        std::fs::write(&p, b"PERFILE2\0\0\0\x68").unwrap();
        let err = open(&Source::Path(p.clone())).err().unwrap();
        assert!(matches!(err, Error::PerfData { .. }));
        assert!(err.to_string().contains("perf script"));
        assert!(err.to_string().contains(&*p.to_string_lossy()));
    }

    #[test]
    fn refuses_perf_data_inside_gzip() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("x.gz");
        let mut enc = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::fast());
        enc.write_all(b"PERFILE2 binary").unwrap();
        std::fs::write(&p, enc.finish().unwrap()).unwrap();
        let Opened::Stream(mut s) = open(&Source::Path(p)).unwrap() else {
            panic!()
        };
        let mut buf = [0u8; 64];
        assert!(matches!(s.read(&mut buf), Err(Error::PerfData { .. })));
    }

    #[test]
    fn missing_file_names_the_path() {
        let err = open(&Source::Path("/no/such/jobprof-input".into()))
            .err()
            .unwrap();
        assert!(err.to_string().contains("/no/such/jobprof-input"));
        assert_eq!(err.exit_code(), Some(crate::ExitCode::Usage));
    }

    #[test]
    fn detects_compression() {
        assert_eq!(detect(&[0x1f, 0x8b, 8]), Compression::Gzip);
        assert_eq!(detect(&[0x28, 0xb5, 0x2f, 0xfd]), Compression::Zstd);
        assert_eq!(detect(b"comm 1 2.0: 1 cpu-clock:"), Compression::None);
    }

    #[test]
    fn a_mapped_file_that_shrinks_is_an_error_naming_it_not_a_crash() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("shrinking.perf.txt");
        let page = "comm 1 1.0: 1 cpu-clock:\n\tf (x)\n\n".repeat(4096);
        std::fs::write(&path, &page).unwrap();
        let mut fds = [0; 2];
        // SAFETY: a valid two-element array.
        assert_eq!(unsafe { libc::pipe(fds.as_mut_ptr()) }, 0);
        // SAFETY: the child only maps, truncates, reads and exits.
        let pid = unsafe { libc::fork() };
        if pid == 0 {
            // SAFETY: in the child: stderr onto the pipe.
            unsafe { libc::dup2(fds[1], 2) };
            let Ok(Opened::Mapped(map)) = open(&Source::Path(path.clone())) else {
                // SAFETY: leaving the child.
                unsafe { libc::_exit(9) };
            };
            std::fs::OpenOptions::new()
                .write(true)
                .open(&path)
                .and_then(|f| f.set_len(0))
                .ok();
            let last = map[map.len() - 1];
            // SAFETY: leaving the child (never reached: the read faults).
            unsafe { libc::_exit(i32::from(last)) };
        }
        // SAFETY: the parent side of the pipe and the child's status.
        unsafe { libc::close(fds[1]) };
        let mut status = 0;
        // SAFETY: waiting for our own child.
        assert_eq!(unsafe { libc::waitpid(pid, &mut status, 0) }, pid);
        let mut err = String::new();
        use std::os::fd::FromRawFd;
        // SAFETY: the read end is ours alone.
        let mut r = unsafe { File::from_raw_fd(fds[0]) };
        r.read_to_string(&mut err).unwrap();
        assert!(libc::WIFEXITED(status), "killed by a signal: {status}");
        assert_eq!(libc::WEXITSTATUS(status), 2, "{err}");
        assert!(
            err.contains("shrinking.perf.txt") && err.contains("shrank"),
            "{err}"
        );
    }
}
