//! Opening inputs: memory-mapped files, or byte streams for compressed files
//! (`.gz`, `.zst`, recognised by their magic bytes, not their names), pipes
//! and stdin.
//!
//! Sniffing refuses binary `perf.data` files (magic `PERFILE2`) and other
//! binary data with a message that says what to do instead. This module
//! hands out bytes; it knows nothing about the `perf script` format beyond
//! "text". It never modifies its inputs.

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
    Mapped(Mmap),
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

const PERF_DATA_MAGIC: &[u8] = b"PERFILE2";
const GZIP_MAGIC: &[u8] = &[0x1f, 0x8b];
const ZSTD_MAGIC: &[u8] = &[0x28, 0xb5, 0x2f, 0xfd];

/// Opens `source`: maps a plain regular file, streams everything else.
pub fn open(source: &Source) -> Result<Opened> {
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
                    // SAFETY: the mapping is read-only; jobprof never writes
                    // to its inputs. If another process truncates the file
                    // while we read it we may get SIGBUS, as with any mmap
                    // reader (ripgrep makes the same trade-off).
                    let map = unsafe { Mmap::map(&file) }.map_err(|e| Error::io(path, e))?;
                    Ok(Opened::Mapped(map))
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

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Write;

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
        assert_eq!(err.exit_code(), crate::ExitCode::Usage);
    }

    #[test]
    fn detects_compression() {
        assert_eq!(detect(&[0x1f, 0x8b, 8]), Compression::Gzip);
        assert_eq!(detect(&[0x28, 0xb5, 0x2f, 0xfd]), Compression::Zstd);
        assert_eq!(detect(b"comm 1 2.0: 1 cpu-clock:"), Compression::None);
    }
}
