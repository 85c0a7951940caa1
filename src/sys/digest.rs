//! SHA-256 of streamed bytes, as lowercase hex (what `sha256sum` prints):
//! one home for the input hashes of `summary.json` and the report hashes of
//! the nsys manifest.

use std::io::{self, Read};

use sha2::{Digest, Sha256};

/// A reader that hashes and counts every byte read through it.
pub(crate) struct Sha256Reader<R> {
    inner: R,
    hasher: Sha256,
    read: u64,
}

impl<R: Read> Sha256Reader<R> {
    /// Hashes what is read from `inner`.
    pub(crate) fn new(inner: R) -> Self {
        Self {
            inner,
            hasher: Sha256::new(),
            read: 0,
        }
    }

    /// Bytes read so far.
    pub(crate) fn bytes_read(&self) -> u64 {
        self.read
    }

    /// The hex digest of everything read.
    pub(crate) fn hex_digest(self) -> String {
        hex(&self.hasher.finalize())
    }
}

impl<R: Read> Read for Sha256Reader<R> {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        let n = self.inner.read(buf)?;
        self.hasher.update(&buf[..n]);
        self.read += n as u64;
        Ok(n)
    }
}

/// The hex SHA-256 of a mapped file, releasing its pages as it goes (so
/// that hashing gigabytes does not show as gigabytes resident).
pub(crate) fn sha256_hex_mapped(map: &crate::sys::input::Mapping) -> String {
    let mut h = Sha256::new();
    let mut at = 0;
    for chunk in map.chunks(crate::sys::input::RELEASE_STEP) {
        h.update(chunk);
        map.release(at, at + chunk.len());
        at += chunk.len();
    }
    hex(&h.finalize())
}

/// Lowercase hex of `bytes`.
pub(crate) fn hex(bytes: &[u8]) -> String {
    use std::fmt::Write as _;
    bytes
        .iter()
        .fold(String::with_capacity(2 * bytes.len()), |mut s, b| {
            let _ = write!(s, "{b:02x}");
            s
        })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_mapped_file_hashes_as_streamed() {
        use std::io::Write;
        let len = 2 * crate::sys::input::RELEASE_STEP + 777;
        let bytes: Vec<u8> = (0..len).map(|i| (i % 253) as u8).collect();
        let mut f = tempfile::NamedTempFile::new().unwrap();
        f.write_all(&bytes).unwrap();
        // SAFETY: the test's own temporary file, written before and never
        // after.
        let map = unsafe { crate::sys::input::Mapping::of(f.as_file(), f.path()) }.unwrap();
        let mut r = Sha256Reader::new(&bytes[..]);
        io::copy(&mut r, &mut io::sink()).unwrap();
        assert_eq!(sha256_hex_mapped(&map), r.hex_digest());
    }

    #[test]
    fn digest_is_what_sha256sum_prints() {
        let mut r = Sha256Reader::new(&b"abc"[..]);
        io::copy(&mut r, &mut io::sink()).unwrap();
        assert_eq!(r.bytes_read(), 3);
        assert_eq!(
            r.hex_digest(),
            "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"
        );
        assert_eq!(hex(&[0, 0xab, 0x0f]), "00ab0f");
    }
}
