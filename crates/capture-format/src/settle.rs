//! When a report that another process writes is complete: the settling
//! rule `jobprof nsys collect` and `jobprof-record sidecar --tool nsys`
//! share. Nsight Systems writes nothing until its session ends and then
//! writes for seconds to minutes, in bursts, with pauses longer than any
//! poll interval; so a report counts as written only once it is non-empty
//! and neither its size nor its modification time (nor those of the files
//! watched with it) changed for a whole settle window. Decided on bytes
//! and times, never on file counts. Pure: the callers stat the files and
//! keep the clock.

use std::collections::{BTreeMap, BTreeSet};
use std::time::{Duration, Instant};

/// Size and modification time of a file: what settling compares.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Stamp {
    /// Its size in bytes.
    pub bytes: u64,
    /// Its modification time, nanoseconds since the Unix epoch.
    pub mtime_ns: i64,
}

/// What one file last looked like and when that last changed.
#[derive(Debug, Clone, Copy)]
struct Seen {
    stamp: Stamp,
    /// `None` while unchanged since the first poll (we never saw it change).
    changed_at: Option<Instant>,
}

/// The stamps of a set of files across polls: which changed, and when
/// anything last did.
#[derive(Debug, Clone)]
pub struct Watch<K: Ord + Clone> {
    seen: BTreeMap<K, Seen>,
    /// When a file last appeared, changed or vanished (at first: `new`'s time).
    pub last_change: Instant,
    /// Whether a poll happened yet (the first one sees no growth).
    polled: bool,
}

impl<K: Ord + Clone> Watch<K> {
    /// A watch that has seen nothing yet, started at `now`.
    pub fn new(now: Instant) -> Watch<K> {
        Watch {
            seen: BTreeMap::new(),
            last_change: now,
            polled: false,
        }
    }

    /// Records the current stamps; any new, changed or vanished file moves
    /// `last_change` to `now`. Returns the files that changed since the
    /// previous poll (none at the first).
    pub fn update(&mut self, current: &[(K, Stamp)], now: Instant) -> BTreeSet<K> {
        let first = !self.polled;
        self.polled = true;
        let mut changed = BTreeSet::new();
        let mut next = BTreeMap::new();
        for (key, stamp) in current {
            let seen = match self.seen.get(key) {
                Some(s) if s.stamp == *stamp => *s,
                _ => {
                    if !first {
                        changed.insert(key.clone());
                    }
                    self.last_change = now;
                    Seen {
                        stamp: *stamp,
                        changed_at: (!first).then_some(now),
                    }
                }
            };
            next.insert(key.clone(), seen);
        }
        if self.seen.keys().any(|k| !next.contains_key(k)) {
            self.last_change = now;
        }
        self.seen = next;
        changed
    }

    /// When `key` was last seen changing (`None`: not since the first poll).
    pub fn changed_at(&self, key: &K) -> Option<Instant> {
        self.seen.get(key).and_then(|s| s.changed_at)
    }

    /// How long nothing changed, at `now`.
    pub fn quiet_for(&self, now: Instant) -> Duration {
        now.saturating_duration_since(self.last_change)
    }
}

/// Changed within the last settle window: seen changing at `changed_at`,
/// or, if unchanged since the first poll, modified (by its mtime,
/// `mtime_ns`, against the wall clock `now_ns`) that recently.
pub fn recently_changed(
    changed_at: Option<Instant>,
    mtime_ns: i64,
    now: Instant,
    now_ns: i64,
    settle: Duration,
) -> bool {
    match changed_at {
        Some(t) => now.saturating_duration_since(t) < settle,
        None => now_ns.saturating_sub(mtime_ns) < settle.as_nanos() as i64,
    }
}

/// The settling rule: reports are complete when there is at least one,
/// none is empty, and nothing changed for the settle window.
pub fn settled(sizes: &[u64], quiet_for: Duration, settle: Duration) -> bool {
    !sizes.is_empty() && sizes.iter().all(|&b| b > 0) && quiet_for >= settle
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn watch_counts_new_changed_and_vanished_files_as_changes() {
        let t0 = Instant::now();
        let mut w = Watch::new(t0);
        let a = "a".to_string();
        let s = Stamp {
            bytes: 1,
            mtime_ns: 1,
        };
        let t1 = t0 + Duration::from_secs(1);
        assert!(
            w.update(&[(a.clone(), s)], t1).is_empty(),
            "first poll: no growth"
        );
        assert_eq!(w.last_change, t1);
        let t2 = t1 + Duration::from_secs(1);
        w.update(&[(a.clone(), s)], t2);
        assert_eq!(w.last_change, t1, "unchanged");
        assert_eq!(w.quiet_for(t2), Duration::from_secs(1));
        let t3 = t2 + Duration::from_secs(1);
        let touched = Stamp { mtime_ns: 2, ..s };
        assert_eq!(w.update(&[(a.clone(), touched)], t3).len(), 1);
        assert_eq!(w.last_change, t3, "mtime alone counts");
        assert_eq!(w.changed_at(&a), Some(t3));
        let t4 = t3 + Duration::from_secs(1);
        w.update(&[], t4);
        assert_eq!(w.last_change, t4, "vanishing counts");
    }

    #[test]
    fn settled_needs_reports_all_non_empty_and_quiet() {
        let (s, q) = (Duration::from_secs(15), Duration::from_secs(15));
        assert!(settled(&[1, 2], q, s));
        assert!(!settled(&[], q, s), "nothing yet");
        assert!(!settled(&[1, 0], q, s), "an empty report");
        assert!(
            !settled(&[1], q - Duration::from_millis(1), s),
            "too recent"
        );
    }

    #[test]
    fn recently_changed_uses_the_mtime_until_a_change_is_seen() {
        let now = Instant::now();
        let settle = Duration::from_secs(10);
        let now_ns = 100_000_000_000;
        assert!(recently_changed(None, now_ns - 1, now, now_ns, settle));
        assert!(!recently_changed(None, 0, now, now_ns, settle));
        assert!(recently_changed(Some(now), 0, now, now_ns, settle));
    }
}
