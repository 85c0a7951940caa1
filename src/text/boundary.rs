//! Sample boundaries in `perf script` text: a sample ends at a blank line,
//! so text cut just past a `\n\n` holds whole samples, and such pieces can
//! be folded, walked or archived on their own and in any order. This is
//! the one place that finds those cuts ([`last`], [`next`], [`ends_at`])
//! and cuts a stream into such pieces ([`Chunker`]).

/// What ends a sample: the newline of its last line and a blank line.
const BLANK: &[u8] = b"\n\n";

/// Whether `text` ends at a sample boundary.
pub fn ends_at(text: &[u8]) -> bool {
    text.ends_with(BLANK)
}

/// Just past the last blank line of `text`; `None` when it has none.
pub fn last(text: &[u8]) -> Option<usize> {
    memchr::memmem::rfind(text, BLANK).map(|i| i + 2)
}

/// Just past the first blank line that ends after `from` (one straddling
/// `from` included); `None` when there is none.
pub fn next(text: &[u8], from: usize) -> Option<usize> {
    if from >= text.len() {
        return None;
    }
    // Start one byte early so a `\n\n` straddling `from` is found.
    let start = from.saturating_sub(1);
    memchr::memmem::find(&text[start..], BLANK).map(|i| start + i + 2)
}

/// Cuts a stream into blocks that end at sample boundaries, so blocks from
/// different `perf script` processes can be folded in any interleaving.
#[derive(Default)]
pub struct Chunker {
    pending: Vec<u8>,
}

/// What is left when the stream ends.
pub struct Tail {
    /// The last block, ending at a sample boundary (empty when nothing was
    /// pending).
    pub block: Vec<u8>,
    /// Bytes added to end the stream at a sample boundary (also archived,
    /// so the archive is exactly what was folded).
    pub extra: Vec<u8>,
}

/// Bytes pending before [`Chunker::push`] cuts a block.
const BLOCK: usize = 4 << 20;

impl Chunker {
    /// Adds `bytes`; a block, cut at the last sample boundary, once
    /// [`BLOCK`] bytes are pending.
    pub fn push(&mut self, bytes: &[u8]) -> Option<Vec<u8>> {
        self.pending.extend_from_slice(bytes);
        if self.pending.len() < BLOCK {
            return None;
        }
        let cut = last(&self.pending)?;
        let rest = self.pending.split_off(cut);
        Some(std::mem::replace(&mut self.pending, rest))
    }

    /// The pending bytes, padded to end at a sample boundary.
    pub fn finish(self) -> Tail {
        let mut block = self.pending;
        let extra: &[u8] = if block.is_empty() || ends_at(&block) {
            b""
        } else if block.ends_with(b"\n") {
            b"\n"
        } else {
            b"\n\n"
        };
        block.extend_from_slice(extra);
        Tail {
            block,
            extra: extra.to_vec(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn chunker_cuts_at_sample_boundaries_and_loses_nothing() {
        let sample = b"comm 1 1.0: 1 cpu-clock:\n\tf (x)\n\n";
        let mut input = Vec::new();
        while input.len() < 3 * BLOCK {
            input.extend_from_slice(sample);
        }
        input.extend_from_slice(b"comm 1 2.0: 1 cpu-clock:\n\tlast (x)\n");
        let mut c = Chunker::default();
        let mut out = Vec::new();
        for piece in input.chunks(100_003) {
            if let Some(b) = c.push(piece) {
                assert!(b.ends_with(b"\n\n"));
                out.extend_from_slice(&b);
            }
        }
        let tail = c.finish();
        assert_eq!(tail.extra, b"\n");
        out.extend_from_slice(&tail.block);
        input.extend_from_slice(&tail.extra);
        assert_eq!(out, input);
    }

    #[test]
    fn boundaries_are_found_past_blank_lines() {
        let t = b"a\n\tb\n\nc\n\td\n\n";
        assert_eq!(last(t), Some(t.len()));
        assert_eq!(last(b"a\n\tb\n"), None);
        assert_eq!(next(t, 0), Some(6));
        // A blank line straddling `from` counts; one ending at it does not.
        assert_eq!(next(t, 5), Some(6));
        assert_eq!(next(t, 6), Some(t.len()));
        assert_eq!(next(t, t.len()), None);
        assert!(ends_at(t) && !ends_at(b"a\n"));
    }
}
