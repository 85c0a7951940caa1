//! The compressed text archive (`perf.script.zst`), written in the same pass
//! that folds the text.
//!
//! Each `perf script` process (one shard, or one time slice) compresses its
//! own output into one zstd frame, in an anonymous temporary file in the
//! capture directory (unlinked from the start, so a killed run leaves
//! nothing behind); when all are done the frames are concatenated, in shard
//! and time order, into the archive through an atomic file. A multi-frame
//! zstd file decompresses (`zstd -dc`, jobprof's own inputs) to the
//! concatenated text, exactly what the old pipeline archived. Only
//! compressed bytes ever touch the disk. When one stream is all there is,
//! zstd's own worker threads compress it ([`Part::create`] `workers`).
//!
//! This module does not know what the text is.

use std::fs::File;
use std::io::{self, Seek, SeekFrom, Write};
use std::path::Path;

use crate::atomic::AtomicFile;
use crate::error::{Error, Result};

/// The default compression level: fast enough to keep up with several
/// `perf script` processes on one core, and ~10x smaller than the text.
pub const DEFAULT_LEVEL: i32 = 3;

/// One compressed stream being written (a zstd frame in a temporary file).
pub struct Part {
    encoder: zstd::Encoder<'static, File>,
    raw_bytes: u64,
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
        })
    }

    /// Bytes of text written so far (before compression).
    pub fn raw_bytes(&self) -> u64 {
        self.raw_bytes
    }

    /// Ends the frame and returns the compressed bytes, ready to be copied.
    pub fn finish(self) -> io::Result<FinishedPart> {
        let mut file = self.encoder.finish()?;
        let compressed = file.stream_position()?;
        file.seek(SeekFrom::Start(0))?;
        Ok(FinishedPart {
            file,
            raw_bytes: self.raw_bytes,
            compressed_bytes: compressed,
        })
    }
}

impl Write for Part {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        let n = self.encoder.write(buf)?;
        self.raw_bytes += n as u64;
        Ok(n)
    }
    fn flush(&mut self) -> io::Result<()> {
        self.encoder.flush()
    }
}

/// A complete compressed part, rewound and ready to be concatenated.
pub struct FinishedPart {
    file: File,
    /// Text bytes it holds.
    pub raw_bytes: u64,
    /// Compressed size.
    pub compressed_bytes: u64,
}

/// Sizes of a written archive.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct ArchiveSizes {
    /// Text bytes (decompressed).
    pub raw_bytes: u64,
    /// Bytes on disk.
    pub compressed_bytes: u64,
}

/// Concatenates `parts` (in order) into `dest`, atomically but without
/// fsync: the capture's marker records its size, which tells a crashed
/// write from a complete one (`crate::result_dir::write_marker`).
pub fn publish(dest: &Path, parts: Vec<FinishedPart>) -> Result<ArchiveSizes> {
    let mut out = AtomicFile::create_deferred(dest)?;
    let mut sizes = ArchiveSizes::default();
    for mut p in parts {
        io::copy(&mut p.file, &mut out).map_err(|e| Error::io(dest, e))?;
        sizes.raw_bytes += p.raw_bytes;
        sizes.compressed_bytes += p.compressed_bytes;
    }
    out.commit()?;
    Ok(sizes)
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
        let dest = dir.path().join("perf.script.zst");
        let sizes = publish(&dest, parts).unwrap();
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
}
