//! How the captures of a tree are shared among the tasks of a Slurm job
//! array without the tasks talking to each other: by a stable hash of each
//! capture's path below its root ([`Split::takes`]).

use std::path::{Path, PathBuf};

use crate::error::{Error, Result};

/// How the captures of a tree are shared among the tasks of a job array.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Split {
    /// This task's position, `0..count`.
    pub index: usize,
    /// How many tasks share the work.
    pub count: usize,
}

impl Split {
    /// A split, checked: `count >= 1` and `index < count`.
    pub fn new(index: usize, count: usize) -> Result<Split> {
        if count == 0 {
            return Err(Error::Usage("--array-count must be at least 1".into()));
        }
        if index >= count {
            return Err(Error::Usage(format!(
                "--array-index {index} is not below --array-count {count}; \
                 tasks are numbered 0..{count}"
            )));
        }
        Ok(Split { index, count })
    }

    /// The split of a Slurm array task, from the variables Slurm sets:
    /// `SLURM_ARRAY_TASK_ID`, `SLURM_ARRAY_TASK_MIN` (the first id, so that
    /// `--array=1-8` works), `SLURM_ARRAY_TASK_STEP` (`--array=0-15:2`) and
    /// `SLURM_ARRAY_TASK_COUNT` (else `(MAX - MIN) / STEP + 1`). `None`
    /// outside an array job. `var` looks a variable up (`std::env::var`).
    pub fn from_slurm_env(var: impl Fn(&str) -> Option<String>) -> Result<Option<Split>> {
        let num = |name: &str| -> Result<Option<usize>> {
            match var(name) {
                None => Ok(None),
                Some(v) if v.trim().is_empty() => Ok(None),
                Some(v) => v.trim().parse().map(Some).map_err(|_| {
                    Error::Usage(format!("{name}={v} is not a number (set by Slurm?)"))
                }),
            }
        };
        let Some(id) = num("SLURM_ARRAY_TASK_ID")? else {
            return Ok(None);
        };
        let min = num("SLURM_ARRAY_TASK_MIN")?.unwrap_or(0);
        let step = num("SLURM_ARRAY_TASK_STEP")?.unwrap_or(1).max(1);
        let count = match (num("SLURM_ARRAY_TASK_COUNT")?, num("SLURM_ARRAY_TASK_MAX")?) {
            (Some(c), _) => c,
            (None, Some(max)) if max >= min => (max - min) / step + 1,
            _ => {
                return Err(Error::Usage(
                    "SLURM_ARRAY_TASK_ID is set but neither SLURM_ARRAY_TASK_COUNT nor \
                     SLURM_ARRAY_TASK_MAX is: pass --array-index and --array-count"
                        .into(),
                ))
            }
        };
        if id < min || (id - min) % step != 0 {
            return Err(Error::Usage(format!(
                "SLURM_ARRAY_TASK_ID={id} is not in the range starting at {min} with step \
                 {step}; arrays with id lists (--array=1,5,9) need --array-index and \
                 --array-count"
            )));
        }
        Split::new((id - min) / step, count).map(Some)
    }

    /// Whether this task takes the item whose key (its path below the root
    /// it was found under, [`share_key`]) is `key`. By a hash of the key,
    /// not by position: every item goes to exactly one task, and an item
    /// stays with its task when result directories appear or vanish
    /// between the tasks' starts (with positions, every later item shifted
    /// and was never done). Shares are even on average, not to one item.
    pub fn takes(&self, key: &[u8]) -> bool {
        (stable_hash(key) % self.count as u64) as usize == self.index
    }
}

/// The key an item is shared by: its path below the root it was found
/// under (the same for every task, whatever the mount point).
pub fn share_key<'a>(dir: &'a Path, roots: &[PathBuf]) -> &'a [u8] {
    use std::os::unix::ffi::OsStrExt;
    let rel = roots
        .iter()
        .find_map(|r| dir.strip_prefix(r).ok())
        .unwrap_or(dir);
    rel.as_os_str().as_bytes()
}

/// FNV-1a, then the splitmix64 finalizer: the same on every host and
/// build (std's hasher is seeded per process).
fn stable_hash(key: &[u8]) -> u64 {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for &b in key {
        h = (h ^ u64::from(b)).wrapping_mul(0x0100_0000_01b3);
    }
    h ^= h >> 30;
    h = h.wrapping_mul(0xbf58_476d_1ce4_e5b9);
    h ^= h >> 27;
    h = h.wrapping_mul(0x94d0_49bb_1331_11eb);
    h ^ (h >> 31)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashMap;

    fn env(pairs: &[(&str, &str)]) -> impl Fn(&str) -> Option<String> {
        let m: HashMap<String, String> = pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect();
        move |k| m.get(k).cloned()
    }

    #[test]
    fn split_from_slurm_array_variables() {
        assert_eq!(Split::from_slurm_env(env(&[])).unwrap(), None);
        let s = Split::from_slurm_env(env(&[
            ("SLURM_ARRAY_TASK_ID", "3"),
            ("SLURM_ARRAY_TASK_COUNT", "4"),
        ]))
        .unwrap();
        assert_eq!(s, Some(Split { index: 3, count: 4 }));
        // --array=1-8: ids start at MIN.
        let s = Split::from_slurm_env(env(&[
            ("SLURM_ARRAY_TASK_ID", "1"),
            ("SLURM_ARRAY_TASK_MIN", "1"),
            ("SLURM_ARRAY_TASK_MAX", "8"),
        ]))
        .unwrap();
        assert_eq!(s, Some(Split { index: 0, count: 8 }));
        // --array=0-6:2 -> ids 0 2 4 6.
        let s = Split::from_slurm_env(env(&[
            ("SLURM_ARRAY_TASK_ID", "4"),
            ("SLURM_ARRAY_TASK_MIN", "0"),
            ("SLURM_ARRAY_TASK_MAX", "6"),
            ("SLURM_ARRAY_TASK_STEP", "2"),
        ]))
        .unwrap();
        assert_eq!(s, Some(Split { index: 2, count: 4 }));
        assert!(Split::from_slurm_env(env(&[("SLURM_ARRAY_TASK_ID", "1")])).is_err());
        assert!(Split::from_slurm_env(env(&[
            ("SLURM_ARRAY_TASK_ID", "x"),
            ("SLURM_ARRAY_TASK_COUNT", "2")
        ]))
        .is_err());
        assert!(Split::new(2, 2).is_err() && Split::new(0, 0).is_err());
    }

    #[test]
    fn every_item_goes_to_exactly_one_task() {
        for count in 1..6 {
            for n in 0..20 {
                let mut seen = vec![0; n];
                for index in 0..count {
                    let s = Split::new(index, count).unwrap();
                    (0..n)
                        .filter(|p| s.takes(format!("result_dir_{p}/worker_0/q1").as_bytes()))
                        .for_each(|p| seen[p] += 1);
                }
                assert!(seen.iter().all(|c| *c == 1), "{count} tasks, {n} items");
            }
        }
    }
}
