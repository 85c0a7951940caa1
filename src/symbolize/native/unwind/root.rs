//! The root frame of aarch64 dwarf stacks. A thread's outermost function
//! (`start_thread` under glibc's `thread_start`, `__libc_start_call_main`
//! under `_start`) restores x29 = 0 and x30 = the return address into the
//! root from its frame record. framehop ends the stack when the restored
//! frame pointer is 0 and drops that return address; perf's libunwind
//! takes it as one more frame (the root, whose CFI then marks the return
//! address undefined), so `perf script` prints `thread_start` and `_start`
//! as the first frame of every thread. [`Trail`] keeps the last two stack
//! reads of a step, where framehop's frame-pointer rules read the frame
//! record (x30 at A + 8, then x29 at A).

/// The last two stack words a step read, oldest first: (address, value).
#[derive(Clone, Copy, Debug, Default)]
pub(super) struct Trail([Option<(u64, u64)>; 2]);

impl Trail {
    /// Records one read.
    pub(super) fn read(&mut self, at: u64, value: u64) {
        self.0 = [self.0[1], Some((at, value))];
    }

    /// The return address of the root when the step ended the stack on a
    /// frame record {x29 = 0, x30 = a nonzero return address} (its last
    /// reads: x30 at A + 8, then x29 at A), with `strip` removing the
    /// pointer authentication code.
    pub(super) fn root(&self, strip: impl Fn(u64) -> u64) -> Option<u64> {
        match self.0 {
            [Some((lr_at, lr)), Some((fp_at, 0))] if fp_at.checked_add(8) == Some(lr_at) => {
                Some(strip(lr)).filter(|&ra| ra != 0)
            }
            _ => None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_frame_record_with_a_null_frame_pointer_is_the_root() {
        let mut t = Trail::default();
        t.read(0x1000, 0xdead);
        t.read(0x2008, 0xffff_aaaa_0000_1234);
        t.read(0x2000, 0);
        assert_eq!(t.root(|a| a & 0xffff_ffff_ffff), Some(0xaaaa_0000_1234));
    }

    #[test]
    fn anything_else_is_not() {
        let mut t = Trail::default();
        assert_eq!(t.root(|a| a), None);
        t.read(0x2008, 0x1234);
        t.read(0x2000, 0x3000); // a frame pointer: not the end
        assert_eq!(t.root(|a| a), None);
        t.read(0x3008, 0);
        t.read(0x3000, 0); // no return address either
        assert_eq!(t.root(|a| a), None);
        t.read(0x4010, 0x1234);
        t.read(0x4000, 0); // not one frame record
        assert_eq!(t.root(|a| a), None);
    }
}
