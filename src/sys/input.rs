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

use crate::error::{Error, Result};

mod mapping;

pub use mapping::Mapping;
pub(crate) use mapping::{page_size, MappedReader, RELEASE_STEP};

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
