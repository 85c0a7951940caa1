//! Where each sample's call chain ended, judged from its frame lines as
//! the record gave them (addresses and DSOs), never from the frames' names.
//!
//! A frame-pointer chain (or a `perf script` dwarf unwind) says nothing of
//! why it stopped, but its last frame and its length do: a chain that ends
//! at a return address in no mapping (`[unknown] ([unknown])` at a non-zero
//! address) followed a bad frame pointer; one of [`MAX_STACK`] frames or
//! more hit perf's depth limit; a user stack of one frame never got a
//! caller (the frame pointer at the sample was already unusable). A chain
//! that ends in a zero (`0 [unknown] ([unknown])`: the stack's top) or at
//! any address in a mapping, named or not, is complete as far as the
//! record can tell. [`Chain`] follows one sample's frame lines;
//! [`ChainEnds`] sums the verdicts by weight.

/// perf's default depth limit (`kernel.perf_event_max_stack`, and what
/// `perf script` and the native symbolizer print at most): a chain this
/// long was cut there.
pub const MAX_STACK: u32 = 127;

/// Why a chain ended before the thread's first frame.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Cut {
    /// [`MAX_STACK`] frames or more: the depth limit.
    Depth,
    /// Its last return address is in no mapping: a bad frame pointer.
    Unmapped,
    /// A user stack of the sampled address alone: no caller was recorded.
    NoCaller,
}

impl Cut {
    /// Every cut, in the order [`ChainEnds::cut`] counts them.
    pub const ALL: [Cut; 3] = [Cut::Depth, Cut::Unmapped, Cut::NoCaller];

    /// The words the summary and the warning use.
    pub fn as_str(self) -> &'static str {
        match self {
            Cut::Depth => "call chain at the depth limit",
            Cut::Unmapped => "return address in no mapping",
            Cut::NoCaller => "no caller recorded",
        }
    }
}

/// The weight of folded samples, and of those whose chain was cut, by
/// [`Cut::ALL`].
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct ChainEnds {
    /// Weight of the samples judged (every folded sample with frames).
    pub weight: u64,
    /// Of that, the weight cut short, by [`Cut::ALL`].
    pub cut: [u64; 3],
}

impl ChainEnds {
    /// Adds `other`'s counts.
    pub fn add(&mut self, other: &ChainEnds) {
        self.weight = self.weight.saturating_add(other.weight);
        for (a, b) in self.cut.iter_mut().zip(other.cut) {
            *a = a.saturating_add(b);
        }
    }

    /// Counts one sample of weight `weight` whose frames were `chain`.
    pub(crate) fn count(&mut self, chain: Chain, weight: u64) {
        if chain.frames == 0 {
            return;
        }
        self.weight = self.weight.saturating_add(weight);
        if let Some(c) = chain.cut() {
            let i = Cut::ALL.iter().position(|&a| a == c).unwrap_or(0);
            self.cut[i] = self.cut[i].saturating_add(weight);
        }
    }

    /// The weight cut short.
    pub fn truncated(&self) -> u64 {
        self.cut.iter().fold(0u64, |a, &b| a.saturating_add(b))
    }
}

/// What a frame line's address and DSO say about where a chain is.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(crate) enum Last {
    /// No frame yet.
    #[default]
    None,
    /// Address 0: the top of the stack.
    Zero,
    /// A non-zero address in no mapping.
    Unmapped,
    /// A kernel address.
    Kernel,
    /// A user address in a mapping.
    User,
}

/// One sample's chain as its frame lines went by: how many frames
/// (inlined functions' lines not counted: they share their caller's
/// address) and what the last one was.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(crate) struct Chain {
    pub frames: u32,
    pub last: Last,
}

impl Chain {
    /// Takes the frame line `line` (right-trimmed), whose address token
    /// ends before `line[rest_start - 1]`. A few byte compares, no scan:
    /// it runs for every frame line folded.
    #[inline]
    pub fn frame(&mut self, line: &[u8], rest_start: usize) {
        if line.ends_with(b" (inlined)") {
            return;
        }
        self.frames = self.frames.saturating_add(1);
        // The address token ends at `end` (perf prints no leading zeros).
        let end = rest_start.saturating_sub(1).min(line.len());
        let at = |i: usize| end.checked_sub(i).map(|j| line[j]);
        let zero = at(1) == Some(b'0') && at(2).is_none_or(|b| b.is_ascii_whitespace());
        self.last = if zero {
            Last::Zero
        } else if line.ends_with(b"([unknown])") {
            Last::Unmapped
        } else if end >= 16 && line[end - 16..end - 12] == *b"ffff" {
            // 16 digits from ffff: a kernel address (x86-64, aarch64).
            Last::Kernel
        } else {
            Last::User
        };
    }

    /// Takes a frame line of a structured sample: `address` as printed,
    /// in `module` (`inlined` for an inlined function's line). The same
    /// verdict as [`Self::frame`] on the line `perf script` prints for it.
    #[inline]
    pub fn frame_at(&mut self, address: u64, module: &str) {
        if module == crate::symbolize::sample::INLINED {
            return;
        }
        self.frames = self.frames.saturating_add(1);
        self.last = if address == 0 {
            Last::Zero
        } else if module == "[unknown]" {
            Last::Unmapped
        } else if address >> 48 == 0xffff {
            Last::Kernel
        } else {
            Last::User
        };
    }

    /// Appends the chain `more` (the frames of a block folded before).
    #[inline]
    pub fn extend(&mut self, more: Chain) {
        if more.frames > 0 {
            self.frames = self.frames.saturating_add(more.frames);
            self.last = more.last;
        }
    }

    /// Why the chain was cut short, if it was.
    pub fn cut(self) -> Option<Cut> {
        if self.frames >= MAX_STACK {
            Some(Cut::Depth)
        } else if self.last == Last::Unmapped {
            Some(Cut::Unmapped)
        } else if self.frames == 1 && self.last == Last::User {
            Some(Cut::NoCaller)
        } else {
            None
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn chain(lines: &[&str]) -> Chain {
        let mut c = Chain::default();
        for l in lines {
            let rest = crate::text::perf_script::after_address(l).unwrap();
            c.frame(l.as_bytes(), rest);
        }
        c
    }

    #[test]
    fn a_chain_that_ends_in_a_mapping_or_a_zero_is_complete() {
        let named = chain(&[
            "\t            11bf burn+0x16 (/opt/presto/bin/presto_server)",
            "\t           891f5 start_thread+0x305 (/usr/lib/x86_64-linux-gnu/libc.so.6)",
        ]);
        assert_eq!(named.cut(), None);
        // Unnamed, but in a mapping: no name is required.
        let unnamed = chain(&[
            "\t            11bf burn+0x16 (/opt/presto/bin/presto_server)",
            "\t           891f5 [unknown] (/usr/lib/x86_64-linux-gnu/libc.so.6)",
        ]);
        assert_eq!(unnamed.cut(), None);
        let zero = chain(&[
            "\t            11bf burn+0x16 (/opt/presto/bin/presto_server)",
            "\t               0 [unknown] ([unknown])",
        ]);
        assert_eq!(zero.cut(), None);
        // A kernel thread's stack, and a sample in the kernel.
        let kernel = chain(&["\tffffffff81e00000 ret_from_fork+0x1f ([kernel.kallsyms])"]);
        assert_eq!(kernel.cut(), None);
    }

    #[test]
    fn a_chain_cut_short_says_why() {
        let bad_fp = chain(&[
            "\t            11bf burn+0x16 (/opt/presto/bin/presto_server)",
            "\t    7ffe6eedba65 [unknown] ([unknown])",
        ]);
        assert_eq!(bad_fp.cut(), Some(Cut::Unmapped));
        let alone = chain(&["\t            117b cmp+0x2 (/tmp/t)"]);
        assert_eq!(alone.cut(), Some(Cut::NoCaller));
        let deep: Vec<String> = (0..MAX_STACK)
            .map(|i| format!("\t    {:x} f+0x1 (/bin/w)", 0x1000 + i))
            .collect();
        let deep: Vec<&str> = deep.iter().map(String::as_str).collect();
        assert_eq!(chain(&deep).cut(), Some(Cut::Depth));
        assert_eq!(chain(&deep[1..]).cut(), None);
    }

    #[test]
    fn inlined_lines_are_not_frames_of_the_chain() {
        let c = chain(&[
            "\t            11bf inner+0x4 (inlined)",
            "\t            11bf burn+0x16 (/opt/w)",
        ]);
        assert_eq!((c.frames, c.cut()), (1, Some(Cut::NoCaller)));
        let mut ends = ChainEnds::default();
        ends.count(c, 5);
        ends.count(Chain::default(), 7);
        assert_eq!((ends.weight, ends.truncated()), (5, 5));
    }
}

#[cfg(test)]
mod fold_tests {
    use crate::text::fold::{Folder, Options};

    /// A sample of `frames` frame lines ending at `last`, weight `period`.
    fn sample(period: u64, frames: usize, last: &str) -> String {
        let mut s = format!("w 10 1.000001: {period:10} cpu-clock: \n");
        for i in 0..frames {
            s.push_str(&format!(
                "\t{:>16x} some_function_number_{i}+0x10 (/usr/lib/libwork.so)\n",
                0x1000 + i
            ));
        }
        s.push_str(last);
        s.push_str("\n\n");
        s
    }

    #[test]
    fn the_fold_counts_where_chains_end_also_for_blocks_it_replays() {
        // Long, repeating blocks: the fold replays them from its block
        // cache after the first, and must count them the same.
        let zero = "\t               0 [unknown] ([unknown])";
        let bad = "\t    7ffe6eedba65 [unknown] ([unknown])";
        let mut text = String::new();
        for _ in 0..3000 {
            text.push_str(&sample(3, 12, zero));
            text.push_str(&sample(2, 12, bad));
            text.push_str(&sample(5, 130, zero));
        }
        for threads in [1, 2] {
            let opts = Options {
                threads,
                ..Options::default()
            };
            let f = Folder::new(opts).fold_bytes(text.as_bytes());
            let c = f.stats.chains;
            assert_eq!(c.weight, 3000 * 10, "{c:?}");
            assert_eq!(c.cut, [3000 * 5, 3000 * 2, 0], "{c:?}");
        }
    }
}
