//! Processes and threads as perf's `machine` tracks them from the
//! records: the command name of each thread (`COMM`, inherited on `FORK`,
//! `:TID` when never seen), and each process's memory maps (`MMAP`,
//! `MMAP2`; a new map cuts what it overlaps; a forked process starts with a
//! copy of its parent's maps, a new thread shares them). Maps name DSOs by
//! a small id; the symbol tables live elsewhere.

use rustc_hash::FxHashMap as HashMap;

/// One mapping of a DSO into a process.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Map {
    /// First address.
    pub start: u64,
    /// One past the last address.
    pub end: u64,
    /// File offset of `start`.
    pub pgoff: u64,
    /// The DSO (index into the DSO list).
    pub dso: u32,
}

impl Map {
    /// File offset of `ip` (perf's `map_ip`), in perf's wrapping `u64`
    /// arithmetic: a damaged `pgoff` gives a wrong offset, as in perf, not
    /// an overflow.
    pub fn rel(&self, ip: u64) -> u64 {
        ip.wrapping_sub(self.start).wrapping_add(self.pgoff)
    }
}

/// Non-overlapping maps sorted by start.
#[derive(Debug, Clone, Default)]
pub struct Maps {
    maps: Vec<Map>,
}

impl Maps {
    /// Adds `m`, trimming or splitting the maps it overlaps.
    pub fn insert(&mut self, m: Map) {
        if m.end <= m.start {
            return;
        }
        let mut out = Vec::with_capacity(self.maps.len() + 2);
        for &o in &self.maps {
            if o.end <= m.start || o.start >= m.end {
                out.push(o);
                continue;
            }
            if o.start < m.start {
                out.push(Map { end: m.start, ..o });
            }
            if o.end > m.end {
                out.push(Map {
                    start: m.end,
                    pgoff: o.pgoff.wrapping_add(m.end - o.start),
                    ..o
                });
            }
        }
        let pos = out.partition_point(|x| x.start < m.start);
        out.insert(pos, m);
        self.maps = out;
    }

    /// The maps, by start address.
    pub fn iter(&self) -> impl Iterator<Item = &Map> {
        self.maps.iter()
    }

    /// The map holding `ip`, trying `last` (the map of the caller's
    /// previous lookup) first: a stack's frames mostly lie in the map of
    /// the frame before them, and the search costs more than the check.
    pub fn find_after<'m>(&'m self, ip: u64, last: &mut Option<&'m Map>) -> Option<&'m Map> {
        if let Some(m) = *last {
            if m.start <= ip && ip < m.end {
                return Some(m);
            }
        }
        let found = self.find(ip);
        *last = found;
        found
    }

    /// The map holding `ip`.
    pub fn find(&self, ip: u64) -> Option<&Map> {
        let i = self
            .maps
            .partition_point(|m| m.start <= ip)
            .checked_sub(1)?;
        let m = &self.maps[i];
        (ip < m.end).then_some(m)
    }
}

/// Threads and processes seen so far.
#[derive(Debug, Default)]
pub struct Machine {
    comms: HashMap<i32, String>,
    maps: HashMap<i32, Maps>,
    /// Kernel maps (`pid -1` records: `[kernel.kallsyms]_text`, modules).
    pub kernel: Maps,
}

impl Machine {
    /// `COMM`: names thread `tid` (control characters escaped,
    /// [`crate::sys::printable`]: a thread's name is the thread's to set).
    pub fn comm(&mut self, tid: i32, name: &str) {
        let name = crate::sys::printable::printable_text(name).into_owned();
        self.comms.insert(tid, name);
    }

    /// `FORK`: thread `tid` of `pid` created by `ptid` of `ppid`.
    pub fn fork(&mut self, pid: i32, ppid: i32, tid: i32, ptid: i32) {
        if let Some(c) = self.comms.get(&ptid).cloned() {
            self.comms.insert(tid, c);
        }
        if pid != ppid {
            // A new process: a copy of the parent's address space.
            let parent = self.maps.get(&ppid).cloned().unwrap_or_default();
            self.maps.insert(pid, parent);
        }
    }

    /// `MMAP`/`MMAP2` of a user process.
    pub fn mmap(&mut self, pid: i32, m: Map) {
        self.maps.entry(pid).or_default().insert(m);
    }

    /// The thread's command name: perf's `swapper` for the idle thread and
    /// `:TID` for a thread never named.
    pub fn comm_of(&self, tid: i32) -> std::borrow::Cow<'_, str> {
        match self.comms.get(&tid) {
            Some(c) => std::borrow::Cow::Borrowed(c),
            None if tid == 0 => std::borrow::Cow::Borrowed("swapper"),
            None => std::borrow::Cow::Owned(format!(":{tid}")),
        }
    }

    /// The user map of `pid` holding `ip`.
    pub fn user_map(&self, pid: i32, ip: u64) -> Option<&Map> {
        self.maps.get(&pid)?.find(ip)
    }

    /// The maps of process `pid`, if it has any.
    pub fn maps_of(&self, pid: i32) -> Option<&Maps> {
        self.maps.get(&pid)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn m(start: u64, end: u64, pgoff: u64, dso: u32) -> Map {
        Map {
            start,
            end,
            pgoff,
            dso,
        }
    }

    #[test]
    fn overlapping_map_splits_the_old_one() {
        let mut maps = Maps::default();
        maps.insert(m(0x1000, 0x5000, 0, 1));
        maps.insert(m(0x2000, 0x3000, 0x100, 2));
        assert_eq!(maps.find(0x1800).unwrap().dso, 1);
        assert_eq!(maps.find(0x2800).unwrap().dso, 2);
        let tail = maps.find(0x3800).unwrap();
        assert_eq!((tail.dso, tail.start, tail.pgoff), (1, 0x3000, 0x2000));
        assert_eq!(tail.rel(0x3800), 0x2800);
        assert!(maps.find(0x5000).is_none());
        assert!(maps.find(0x10).is_none());
    }

    #[test]
    fn fork_copies_maps_threads_share_them_comm_inherited() {
        let mut mc = Machine::default();
        mc.comm(10, "worker");
        mc.mmap(10, m(0x1000, 0x2000, 0, 1));
        mc.fork(10, 10, 11, 10);
        assert_eq!(mc.comm_of(11), "worker");
        mc.fork(20, 10, 20, 10);
        mc.mmap(10, m(0x1000, 0x2000, 0, 7));
        assert_eq!(mc.user_map(20, 0x1800).unwrap().dso, 1);
        assert_eq!(mc.user_map(10, 0x1800).unwrap().dso, 7);
        assert_eq!(mc.comm_of(99), ":99");
    }
}
