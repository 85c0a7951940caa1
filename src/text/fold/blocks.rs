//! Whole frame blocks seen before: the lines between a sample's header and
//! the blank line that ends it, with what folding them did to the stack.
//!
//! Real captures repeat a few thousand distinct stacks over hundreds of
//! thousands of samples (the benchmark's frame-pointer capture: 331,531
//! samples, 2,972 distinct blocks, 807 MB of frame lines). A block seen
//! before then costs one scan for its end, one hash and one compare,
//! instead of a hash and a table probe per frame line.
//!
//! The folder caches a block only when folding it line by line touched
//! nothing but the stack (no skipped, non-UTF-8 or header line, no sample
//! ended inside it), and keys it by its exact bytes and the one piece of
//! sample state frame lines depend on (whether the process is Java): so
//! replaying an entry is exactly what folding the same bytes again would
//! do. The cache stops growing at a byte budget, and turns itself off for
//! inputs whose blocks do not repeat or are short (there it would only add
//! the scan and the hash).

use std::hash::Hasher;

use rustc_hash::FxHasher;

use super::chain::Chain;

/// Block bytes kept at most, per folding thread: `fold -j 16` on a node
/// with 16 cores then holds at most 128 MiB of them. (The benchmark's fp
/// capture has 6.2 MiB of distinct blocks.)
const BUDGET: usize = 8 << 20;
/// Longest block cached.
const MAX_BLOCK: usize = 256 << 10;
/// Lookups after which a cache that hits less than a quarter of the time,
/// or whose blocks are short, turns itself off.
const TRIAL: u64 = 2048;
/// Mean block length (bytes) below which replaying does not pay: a block
/// costs a scan for its end, a hash and a compare of all its bytes, about
/// what folding 8 frame lines one by one costs (on the real-workload bench
/// input, blocks of 1.6 lines on average, the cache made folding 5%
/// slower).
const MIN_MEAN_BLOCK: u64 = 512;

/// What replaying a cached block does.
pub(super) struct Replay<'a> {
    /// Ids the block's lines append to the stack, in order.
    pub ids: &'a [u32],
    /// Lines in the block.
    pub lines: u32,
    /// A `--skip-after` frame in it: the rest of the sample is skipped.
    pub skip_remaining: bool,
    /// The call chain its lines make.
    pub chain: Chain,
}

struct Entry {
    hash: u64,
    at: u32,
    len: u32,
    ids_at: u32,
    ids_len: u32,
    lines: u32,
    java: bool,
    skip_remaining: bool,
    chain: Chain,
}

pub(super) struct BlockCache {
    table: hashbrown::HashTable<Entry>,
    bytes: Vec<u8>,
    ids: Vec<u32>,
    end: memchr::memmem::Finder<'static>,
    lookups: u64,
    hits: u64,
    /// Bytes of the blocks looked up.
    looked_up: u64,
    off: bool,
}

impl Default for BlockCache {
    fn default() -> Self {
        BlockCache {
            table: hashbrown::HashTable::new(),
            bytes: Vec::new(),
            ids: Vec::new(),
            end: memchr::memmem::Finder::new(b"\n\n").into_owned(),
            lookups: 0,
            hits: 0,
            looked_up: 0,
            off: false,
        }
    }
}

fn hash(block: &[u8], java: bool) -> u64 {
    let mut h = FxHasher::default();
    h.write(block);
    h.write_u8(java as u8);
    h.finish()
}

impl BlockCache {
    /// The frame block at the start of `rest` (just after a header line):
    /// its length up to and including the newline before the blank line
    /// that ends it. `None` when the cache is off, or no blank line ends it
    /// within `rest`, or it is empty or too long.
    pub(super) fn block_at(&self, rest: &[u8]) -> Option<usize> {
        if self.off || !matches!(rest.first(), Some(b'\t' | b' ')) {
            return None;
        }
        let i = self.end.find(&rest[..rest.len().min(MAX_BLOCK + 1)])?;
        Some(i + 1)
    }

    /// The replay of `block` folded for a Java process or not, if cached.
    pub(super) fn find(&mut self, block: &[u8], java: bool) -> Option<Replay<'_>> {
        self.lookups += 1;
        self.looked_up += block.len() as u64;
        if self.lookups == TRIAL
            && (self.hits * 4 < self.lookups || self.looked_up < MIN_MEAN_BLOCK * TRIAL)
        {
            self.off = true;
        }
        let h = hash(block, java);
        let bytes = &self.bytes;
        let e = self.table.find(h, |e| {
            e.hash == h
                && e.java == java
                && e.len as usize == block.len()
                && bytes[e.at as usize..][..block.len()] == *block
        })?;
        self.hits += 1;
        Some(Replay {
            ids: &self.ids[e.ids_at as usize..][..e.ids_len as usize],
            lines: e.lines,
            skip_remaining: e.skip_remaining,
            chain: e.chain,
        })
    }

    /// Remembers what folding `block` line by line did.
    pub(super) fn insert(&mut self, block: &[u8], java: bool, replay: Replay<'_>) {
        if self.off || self.bytes.len() + block.len() > BUDGET {
            return;
        }
        let h = hash(block, java);
        let entry = Entry {
            hash: h,
            at: self.bytes.len() as u32,
            len: block.len() as u32,
            ids_at: self.ids.len() as u32,
            ids_len: replay.ids.len() as u32,
            lines: replay.lines,
            java,
            skip_remaining: replay.skip_remaining,
            chain: replay.chain,
        };
        self.bytes.extend_from_slice(block);
        self.ids.extend_from_slice(replay.ids);
        self.table.insert_unique(h, entry, |e| e.hash);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_block_ends_before_the_blank_line() {
        let c = BlockCache::default();
        let text = b"\t1 a (x)\n\t2 b (x)\n\nnext";
        assert_eq!(c.block_at(text), Some(18));
        assert_eq!(&text[..18], b"\t1 a (x)\n\t2 b (x)\n");
        // A header, not frames; no end in sight.
        assert_eq!(c.block_at(b"comm 1 2: x\n\n"), None);
        assert_eq!(c.block_at(b"\t1 a (x)\n\t2 b (x)\n"), None);
    }

    #[test]
    fn replays_what_was_inserted_for_the_same_bytes_and_java_flag() {
        let mut c = BlockCache::default();
        let block = b"\t1 a (x)\n";
        assert!(c.find(block, false).is_none());
        let ids = [3, 4];
        c.insert(
            block,
            false,
            Replay {
                ids: &ids,
                lines: 1,
                skip_remaining: true,
                chain: Chain::default(),
            },
        );
        let r = c.find(block, false).unwrap();
        assert_eq!((r.ids, r.lines, r.skip_remaining), (&ids[..], 1, true));
        assert!(c.find(block, true).is_none());
        assert!(c.find(b"\t1 a (y)\n", false).is_none());
    }

    #[test]
    fn turns_itself_off_when_blocks_are_short() {
        let mut c = BlockCache::default();
        let block = b"\t1 a (x)\n\t2 b (x)\n";
        let ids = [1];
        let replay = || Replay {
            ids: &ids,
            lines: 2,
            skip_remaining: false,
            chain: Chain::default(),
        };
        c.insert(block, false, replay());
        for _ in 0..TRIAL {
            assert!(c.find(block, false).is_some());
        }
        assert_eq!(c.block_at(b"\t1 a (x)\n\n"), None);
        // Long blocks that repeat keep it on.
        let mut c = BlockCache::default();
        let long = "\t1 some_function_name+0x10 (/usr/lib/libx.so)\n".repeat(20);
        c.insert(long.as_bytes(), false, replay());
        for _ in 0..TRIAL {
            assert!(c.find(long.as_bytes(), false).is_some());
        }
        assert!(c.block_at(format!("{long}\n").as_bytes()).is_some());
    }

    #[test]
    fn turns_itself_off_when_blocks_do_not_repeat() {
        let mut c = BlockCache::default();
        for i in 0..TRIAL {
            let block = format!("\t{i} f (x)\n");
            assert!(c.find(block.as_bytes(), false).is_none());
        }
        assert_eq!(c.block_at(b"\t1 a (x)\n\n"), None);
    }
}
