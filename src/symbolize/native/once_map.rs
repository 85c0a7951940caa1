//! One value per key, loaded once by the first shard or time slice that
//! asks for it and then shared by all of them: a DSO's symbols, its unwind
//! tables, a symbol file's DWARF. The map's lock is held only to find the
//! key's cell, never while a value loads, so different files load in
//! parallel and a second asker of the same one waits for the first.

use std::collections::HashMap;
use std::hash::Hash;
use std::sync::{Arc, Mutex, OnceLock};

/// Values by key, each loaded at most once.
pub struct OnceMap<K, V> {
    cells: Mutex<HashMap<K, Arc<OnceLock<V>>>>,
}

impl<K, V> Default for OnceMap<K, V> {
    fn default() -> Self {
        OnceMap {
            cells: Mutex::new(HashMap::new()),
        }
    }
}

impl<K, V> std::fmt::Debug for OnceMap<K, V> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("OnceMap")
    }
}

impl<K: Eq + Hash, V: Clone> OnceMap<K, V> {
    /// The value of `key`, loaded with `load` by the first caller.
    pub fn get_or_load(&self, key: K, load: impl FnOnce() -> V) -> V {
        let cell = {
            let mut m = self.cells.lock().unwrap_or_else(|e| e.into_inner());
            m.entry(key).or_default().clone()
        };
        cell.get_or_init(load).clone()
    }

    /// The values loaded so far.
    pub fn loaded(&self) -> Vec<V> {
        let m = self.cells.lock().unwrap_or_else(|e| e.into_inner());
        m.values().filter_map(|c| c.get().cloned()).collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn loads_each_key_once() {
        let m: OnceMap<&str, u32> = OnceMap::default();
        let loads = std::sync::atomic::AtomicU32::new(0);
        let load = |v| {
            loads.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
            v
        };
        assert_eq!(m.get_or_load("a", || load(1)), 1);
        assert_eq!(m.get_or_load("a", || load(2)), 1);
        assert_eq!(m.get_or_load("b", || load(3)), 3);
        assert_eq!(loads.into_inner(), 2);
        let mut loaded = m.loaded();
        loaded.sort();
        assert_eq!(loaded, [1, 3]);
    }
}
