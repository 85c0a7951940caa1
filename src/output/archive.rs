//! The compressed text archive (`perf.script.zst`), written in the same pass
//! that folds the text.
//!
//! Each `perf script` process (one shard, or one time slice) compresses its
//! own output into one zstd frame (a native run: one frame per block of
//! text, [`Part::write_block`]), in an anonymous temporary file in the
//! capture directory (unlinked from the start, so a killed run leaves
//! nothing behind); a finished frame is checked (it must decompress to the
//! text written) and appended to one anonymous [`Spool`] file, so open
//! files stay bounded by the processes running, however many shards and
//! slices there are. When all are done the frames are concatenated, in shard
//! and time order, into the archive through an atomic file. A multi-frame
//! zstd file decompresses (`zstd -dc`, jobprof's own inputs) to the
//! concatenated text, exactly what the old pipeline archived. Only
//! compressed bytes ever touch the disk. When one stream is all there is,
//! zstd's own worker threads compress it ([`Part::create`] `workers`).
//!
//! [`recompress`] turns the old pipeline's `perf.script.gz` into such an
//! archive. This module does not know what the text is.

use std::fs::{self, File};
use std::io::{self, Read, Seek, SeekFrom, Write};
use std::path::Path;
use std::sync::Mutex;

use crate::error::{Error, Result};
use crate::sys::atomic::{AtomicFile, Destination};

/// The default compression level. 1 (zstd's fast strategy) rather than 3:
/// once the native symbolizer makes the text, compression is the largest
/// cost left (a quarter of `process`'s CPU at level 3, where zstd's block
/// pre-splitter alone takes 8%); level 1 compresses `perf script` text
/// ~1.6x faster for an archive ~8% larger (still ~230x smaller than the
/// text on the benchmark capture).
pub const DEFAULT_LEVEL: i32 = 1;

/// One compressed stream being written (a zstd frame in a temporary file,
/// or a run of frames written by [`Part::write_block`]).
pub struct Part {
    encoder: zstd::Encoder<'static, File>,
    raw_bytes: u64,
    level: i32,
    workers: u32,
    /// Whether the stream encoder has taken text (blocks then go through
    /// it too, to keep the order).
    streamed: bool,
    /// Compressor and output buffer of [`Part::write_block`].
    bulk: Option<(zstd::bulk::Compressor<'static>, Vec<u8>)>,
}

impl Part {
    /// Starts a part in an anonymous temporary file in `dir`. `workers` > 0
    /// lets zstd compress on that many extra threads.
    pub fn create(dir: &Path, level: i32, workers: u32) -> Result<Part> {
        let file = tempfile::tempfile_in(dir).map_err(|e| Error::io(dir, e))?;
        let mut encoder = zstd::Encoder::new(file, level).map_err(|e| Error::io(dir, e))?;
        if workers > 0 {
            // Not fatal: a zstd built without threads just compresses on
            // the calling thread.
            let _ = encoder.multithread(workers);
        }
        Ok(Part {
            encoder,
            raw_bytes: 0,
            level,
            workers,
            streamed: false,
            bulk: None,
        })
    }

    /// Writes `block` (a few MiB of text that a reader may start at) as a
    /// frame of its own: one copy and one pass less than the stream, at
    /// the cost of the matches the stream would find across blocks. The
    /// stream is used instead when it already has text, or when zstd
    /// worker threads were asked for.
    pub fn write_block(&mut self, block: &[u8]) -> io::Result<()> {
        if self.streamed || self.workers > 0 {
            return self.write_all(block);
        }
        if self.bulk.is_none() {
            self.bulk = Some((zstd::bulk::Compressor::new(self.level)?, Vec::new()));
        }
        let (c, out) = self.bulk.as_mut().expect("made above");
        out.clear();
        out.reserve(zstd::zstd_safe::compress_bound(block.len()));
        c.compress_to_buffer(block, out)?;
        self.encoder.get_mut().write_all(out)?;
        self.raw_bytes += block.len() as u64;
        Ok(())
    }

    /// Bytes of text written so far (before compression).
    pub fn raw_bytes(&self) -> u64 {
        self.raw_bytes
    }

    /// Ends the frame and checks it: the frame must decompress to exactly
    /// the text written. Any error (a full disk above all) is returned,
    /// never ignored: a part that cannot be finished fails its shard.
    pub fn finish(self) -> io::Result<FinishedPart> {
        let mut file = self.encoder.finish()?;
        file.flush()?;
        let compressed = file.stream_position()?;
        file.seek(SeekFrom::Start(0))?;
        let mut counter = Counter(0);
        zstd::stream::copy_decode(&mut file, &mut counter)?;
        if counter.0 != self.raw_bytes {
            return Err(io::Error::other(format!(
                "compressed part holds {} bytes of text, {} were written",
                counter.0, self.raw_bytes
            )));
        }
        file.seek(SeekFrom::Start(0))?;
        Ok(FinishedPart {
            file,
            raw_bytes: self.raw_bytes,
            compressed_bytes: compressed,
        })
    }
}

/// Counts bytes written to it and keeps none.
struct Counter(u64);

impl Write for Counter {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        self.0 += buf.len() as u64;
        Ok(buf.len())
    }
    fn flush(&mut self) -> io::Result<()> {
        Ok(())
    }
}

impl Write for Part {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        self.streamed = true;
        let n = self.encoder.write(buf)?;
        self.raw_bytes += n as u64;
        Ok(n)
    }
    fn flush(&mut self) -> io::Result<()> {
        self.encoder.flush()
    }
}

/// A complete, checked compressed part, rewound and ready to be spooled.
pub struct FinishedPart {
    file: File,
    /// Text bytes it holds.
    pub raw_bytes: u64,
    /// Compressed size.
    pub compressed_bytes: u64,
}

/// Where finished parts wait for publishing, in the order they finish: one
/// anonymous temporary file (nothing left behind by a killed run) however
/// many shards and slices there are, so open files stay bounded by the
/// parts still running.
pub struct Spool {
    file: Mutex<File>,
}

/// A part's place in the [`Spool`].
#[derive(Debug, Clone, Copy)]
pub struct Spooled {
    offset: u64,
    /// Text bytes it holds.
    pub raw_bytes: u64,
    /// Compressed size.
    pub compressed_bytes: u64,
}

impl Spool {
    /// An empty spool in `dir` (the capture directory: same filesystem as
    /// the archive).
    pub fn create(dir: &Path) -> Result<Spool> {
        let file = tempfile::tempfile_in(dir).map_err(|e| Error::io(dir, e))?;
        Ok(Spool {
            file: Mutex::new(file),
        })
    }

    /// Appends a finished part (and closes its file).
    pub fn append(&self, mut part: FinishedPart) -> io::Result<Spooled> {
        let mut file = self.file.lock().unwrap_or_else(|e| e.into_inner());
        let offset = file.seek(SeekFrom::End(0))?;
        let copied = io::copy(&mut part.file, &mut *file)?;
        if copied != part.compressed_bytes {
            // Leave no partial frame for the next append to follow.
            file.set_len(offset)?;
            return Err(io::Error::other(format!(
                "spooled {copied} of {} compressed bytes",
                part.compressed_bytes
            )));
        }
        Ok(Spooled {
            offset,
            raw_bytes: part.raw_bytes,
            compressed_bytes: part.compressed_bytes,
        })
    }
}

/// Sizes of a written archive.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct ArchiveSizes {
    /// Text bytes (decompressed).
    pub raw_bytes: u64,
    /// Bytes on disk.
    pub compressed_bytes: u64,
}

/// Concatenates the spooled `parts` (in the order given) into `dest` inside
/// a capture directory ([`Destination::Confined`]), atomically but without
/// fsync: the capture's marker records its size, which tells a crashed
/// write from a complete one (`crate::capture::write_marker`). Every
/// part must copy whole; on any error the previous archive stays as it
/// was. `mode_limit` narrows the archive's mode to the capture's raw data
/// ([`AtomicFile::limit_mode`]).
pub fn publish(
    dest: &Path,
    spool: Spool,
    parts: &[Spooled],
    mode_limit: Option<u32>,
) -> Result<ArchiveSizes> {
    let mut out = AtomicFile::open(dest, Destination::Confined, false)?;
    if let Some(m) = mode_limit {
        out.limit_mode(m);
    }
    let mut file = spool.file.into_inner().unwrap_or_else(|e| e.into_inner());
    let mut sizes = ArchiveSizes::default();
    for p in parts {
        let copy = |file: &mut File, out: &mut AtomicFile| -> io::Result<u64> {
            file.seek(SeekFrom::Start(p.offset))?;
            io::copy(&mut file.take(p.compressed_bytes), out)
        };
        let copied = copy(&mut file, &mut out).map_err(|e| Error::io(dest, e))?;
        if copied != p.compressed_bytes {
            return Err(Error::io(
                dest,
                io::Error::other(format!(
                    "a compressed part has {copied} bytes in the spool, {} were written",
                    p.compressed_bytes
                )),
            ));
        }
        sizes.raw_bytes += p.raw_bytes;
        sizes.compressed_bytes += p.compressed_bytes;
    }
    out.flush().map_err(|e| Error::io(dest, e))?;
    out.commit()?;
    Ok(sizes)
}

/// Streams `gz` (gzip, possibly multi-member) into `zst` (one zstd frame,
/// written atomically). Returns the text and compressed sizes.
pub fn recompress(gz: &Path, zst: &Path, level: i32) -> Result<(u64, u64)> {
    let file = fs::File::open(gz).map_err(|e| Error::io(gz, e))?;
    let mut decoder = flate2::read::MultiGzDecoder::new(io::BufReader::new(file));
    let out = AtomicFile::open(zst, Destination::Confined, true)?;
    let mut encoder = zstd::Encoder::new(out, level).map_err(|e| Error::io(zst, e))?;
    let mut buf = vec![0u8; 1 << 20];
    let mut raw = 0u64;
    loop {
        let n = match decoder.read(&mut buf) {
            Ok(0) => break,
            Ok(n) => n,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
            Err(source) => {
                return Err(Error::Corrupt {
                    path: gz.to_path_buf(),
                    format: "gzip",
                    source,
                })
            }
        };
        raw += n as u64;
        encoder
            .write_all(&buf[..n])
            .map_err(|e| Error::io(zst, e))?;
    }
    let out = encoder.finish().map_err(|e| Error::io(zst, e))?;
    out.commit()?;
    Ok((raw, fs::metadata(zst).map(|m| m.len()).unwrap_or(0)))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parts_concatenate_into_one_stream() {
        let dir = tempfile::tempdir().unwrap();
        let mut parts = Vec::new();
        for (text, workers) in [("first\n\n", 0), ("second\n\n", 2)] {
            let mut p = Part::create(dir.path(), DEFAULT_LEVEL, workers).unwrap();
            p.write_all(text.as_bytes()).unwrap();
            assert_eq!(p.raw_bytes(), text.len() as u64);
            parts.push(p.finish().unwrap());
        }
        // Spooled out of order, published in order.
        let spool = Spool::create(dir.path()).unwrap();
        let second = spool.append(parts.pop().unwrap()).unwrap();
        let first = spool.append(parts.pop().unwrap()).unwrap();
        let dest = dir.path().join("perf.script.zst");
        let sizes = publish(&dest, spool, &[first, second], None).unwrap();
        assert_eq!(sizes.raw_bytes, 15);
        assert_eq!(
            sizes.compressed_bytes,
            std::fs::metadata(&dest).unwrap().len()
        );
        let text = zstd::decode_all(File::open(&dest).unwrap()).unwrap();
        assert_eq!(text, b"first\n\nsecond\n\n");
        // The temporary parts were anonymous: only the archive is left.
        assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 1);
    }

    #[test]
    fn blocks_are_frames_of_their_own_and_keep_their_order() {
        let dir = tempfile::tempdir().unwrap();
        let decoded = |p: Part| {
            let mut f = p.finish().unwrap();
            let mut z = Vec::new();
            f.file.read_to_end(&mut z).unwrap();
            (zstd::decode_all(&z[..]).unwrap(), f.raw_bytes)
        };
        // Blocks only: one frame each (and the stream's empty one).
        let mut p = Part::create(dir.path(), DEFAULT_LEVEL, 0).unwrap();
        p.write_block(b"a\n\n").unwrap();
        p.write_block(b"b\n\n").unwrap();
        assert_eq!(decoded(p), (b"a\n\nb\n\n".to_vec(), 6));
        // After streamed text, blocks follow it through the stream.
        let mut p = Part::create(dir.path(), DEFAULT_LEVEL, 0).unwrap();
        p.write_all(b"s\n\n").unwrap();
        p.write_block(b"b\n\n").unwrap();
        assert_eq!(decoded(p), (b"s\n\nb\n\n".to_vec(), 6));
        // With zstd workers, the stream takes them.
        let mut p = Part::create(dir.path(), DEFAULT_LEVEL, 2).unwrap();
        p.write_block(b"m\n\n").unwrap();
        assert_eq!(decoded(p), (b"m\n\n".to_vec(), 3));
    }
}
