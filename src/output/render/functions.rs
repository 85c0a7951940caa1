//! The data of the flamegraph page's function table and its callers /
//! callees view ("sandwich"): every distinct stack of the profile, compact
//! enough to embed in the page, from which the page's script computes each
//! function's self and total (a function counted once per stack even when
//! it recurses, as `perf report --children` counts) and, for a picked
//! function, the merged tree of its callers and of its callees.
//!
//! The stacks are written as their prefix tree (the call tree the
//! flamegraph draws), in preorder, which is the order of the stacks once
//! sorted frame by frame ([`super::frame_ordered`]): a node is its frame's
//! name (interned: an index into `names`, the most used names first, so
//! that the common ones are short numbers) and how many levels to go up
//! from the node before it to reach its parent. A node's own count (the
//! count of the stack that ends there) is stored apart, only for the nodes
//! that have one, as the gap from the previous such node. Every count is
//! divided by `unit`, the greatest common divisor of all counts (perf's
//! `cpu-clock` periods are all multiples of one period); the page
//! multiplies back. So a stack that shares all but its leaf with the one
//! before it costs about a dozen bytes, whatever its depth:
//!
//! ```text
//! {"v":1,"unit":10,"names":["f","app","main"],"nodes":[0,1,0,0,1,2,0,0],"self":[2,1,2,4]}
//! ```
//!
//! is `app;f 10` and `app;main;f 40`: nodes `app`, `app;f` (up 0: the
//! node before is its parent), `app;main` (up 1: its parent is the parent
//! of the node before), `app;main;f`; stacks end at node 1 (count 1 x 10)
//! and node 3 (gap 2, count 4 x 10).
//!
//! Memory and time grow with the distinct stacks; the text of a name is
//! written once.

use std::collections::HashMap;

use serde::Serialize;

/// Version of the embedded form; the page refuses a form it does not know.
pub const VERSION: u32 = 1;

/// The largest sum of (scaled) counts the page adds exactly (2^53: numbers
/// in JavaScript are doubles).
const EXACT_IN_JS: u64 = 1 << 53;

/// The profile's stacks as a prefix tree of interned names; see the module
/// docs.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CallTree {
    /// Function names, by how many nodes name them (most first), then by
    /// first use.
    names: Vec<String>,
    /// `(up, name)` per node in preorder: `up` is how many levels above the
    /// node before it its parent is (0: the node before is its parent).
    nodes: Vec<(u32, u32)>,
    /// `(node, count)` for the nodes where a stack ends, by node.
    selfs: Vec<(u32, u64)>,
    /// What one unit of the stored counts is.
    unit: u64,
}

/// The form embedded in the page.
#[derive(Serialize)]
struct Embedded<'a> {
    v: u32,
    unit: u64,
    names: &'a [String],
    /// Flat `up, name` pairs, one per node, preorder.
    nodes: Vec<u32>,
    /// Flat `gap, count` pairs: the node (its index minus the previous
    /// pair's node, the first counted from -1) and its own count / unit.
    #[serde(rename = "self")]
    selfs: Vec<u64>,
}

fn gcd(mut a: u64, mut b: u64) -> u64 {
    while b != 0 {
        (a, b) = (b, a % b);
    }
    a
}

impl CallTree {
    /// The tree of `ordered`, stacks in frame order with non-zero counts
    /// and no two equal ([`super::frame_ordered`]'s output).
    pub fn from_ordered(ordered: &[(&str, u64)]) -> CallTree {
        let unit = ordered.iter().fold(0, |g, &(_, c)| gcd(g, c)).max(1);
        let sum: u128 = ordered.iter().map(|&(_, c)| u128::from(c / unit)).sum();
        // Keep the page's sums exact: scale down (in powers of two) when
        // the total would not fit a double's integers.
        let mut shift = 0;
        while sum >> shift > u128::from(EXACT_IN_JS) {
            shift += 1;
        }
        let mut first_use: Vec<&str> = Vec::new();
        let mut ids: HashMap<&str, u32> = HashMap::new();
        let mut raw: Vec<(u32, u32)> = Vec::new();
        let mut uses: Vec<u64> = Vec::new();
        let mut selfs = Vec::with_capacity(ordered.len());
        // The frames of the current path (of the node last added).
        let mut path: Vec<&str> = Vec::new();
        for &(stack, count) in ordered {
            let frames: Vec<&str> = stack.split(';').collect();
            let common = path.iter().zip(&frames).take_while(|(a, b)| a == b).count();
            // The stacks are in frame order and distinct, so a stack never
            // repeats the path (it would be the same stack) unless it is a
            // prefix of the one before, which frame order puts first.
            debug_assert!(common < frames.len() || frames.len() == path.len());
            let mut up = (path.len() - common) as u32;
            path.truncate(common);
            for &frame in &frames[common..] {
                let id = *ids.entry(frame).or_insert_with(|| {
                    first_use.push(frame);
                    uses.push(0);
                    (first_use.len() - 1) as u32
                });
                uses[id as usize] += 1;
                raw.push((up, id));
                up = 0;
                path.push(frame);
            }
            let node = raw.len().saturating_sub(1) as u32;
            selfs.push((node, (count / unit) >> shift));
        }
        // Most used names get the smallest ids.
        let mut order: Vec<u32> = (0..first_use.len() as u32).collect();
        order.sort_by_key(|&i| (std::cmp::Reverse(uses[i as usize]), i));
        let mut rank = vec![0u32; order.len()];
        for (r, &i) in order.iter().enumerate() {
            rank[i as usize] = r as u32;
        }
        CallTree {
            names: order
                .iter()
                .map(|&i| first_use[i as usize].to_string())
                .collect(),
            nodes: raw
                .into_iter()
                .map(|(up, f)| (up, rank[f as usize]))
                .collect(),
            selfs,
            unit: unit << shift,
        }
    }

    /// Whether the tree has no stack.
    pub fn is_empty(&self) -> bool {
        self.selfs.is_empty()
    }

    /// The JSON embedded in the page, safe inside a `<script>` element and
    /// free of `://` (every `/` and `<` in strings is escaped).
    pub fn to_json(&self) -> String {
        let mut prev = -1i64;
        let e = Embedded {
            v: VERSION,
            unit: self.unit,
            names: &self.names,
            nodes: self.nodes.iter().flat_map(|&(u, f)| [u, f]).collect(),
            selfs: self
                .selfs
                .iter()
                .flat_map(|&(n, c)| {
                    let gap = i64::from(n) - prev;
                    prev = i64::from(n);
                    [gap as u64, c]
                })
                .collect(),
        };
        serde_json::to_string(&e)
            .expect("plain data serializes")
            .replace('/', "\\/")
            .replace('<', "\\u003c")
    }

    /// The stacks back from the tree, in frame order, counts times `unit`
    /// (what the page reads; for tests and tools).
    pub fn stacks(&self) -> Vec<(String, u64)> {
        let mut path: Vec<u32> = Vec::new();
        let mut ends: HashMap<u32, u64> = HashMap::new();
        for &(n, c) in &self.selfs {
            ends.insert(n, c * self.unit);
        }
        let mut out = Vec::new();
        for (i, &(up, f)) in self.nodes.iter().enumerate() {
            // `up` counts from the node before, which is on the path.
            path.truncate(path.len() - up as usize);
            path.push(f);
            if let Some(&c) = ends.get(&(i as u32)) {
                let names: Vec<&str> = path
                    .iter()
                    .map(|&f| self.names[f as usize].as_str())
                    .collect();
                out.push((names.join(";"), c));
            }
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::super::frame_ordered;
    use super::*;

    fn tree(stacks: &[(&str, u64)]) -> CallTree {
        let mut held = Vec::new();
        CallTree::from_ordered(&frame_ordered(stacks, &mut held))
    }

    fn json(t: &CallTree) -> serde_json::Value {
        serde_json::from_str(&t.to_json()).unwrap()
    }

    #[test]
    fn stacks_share_their_prefix_and_names_are_interned_most_used_first() {
        let t = tree(&[("app;main;f", 40), ("app;f", 10)]);
        let v = json(&t);
        // f is named by two nodes: id 0; app and main by one, in first use.
        assert_eq!(v["names"], serde_json::json!(["f", "app", "main"]));
        // Frame order: app;f before app;main;f. Nodes app, app;f (parent:
        // the node before), app;main (parent: one level above app;f),
        // app;main;f.
        assert_eq!(v["nodes"], serde_json::json!([0, 1, 0, 0, 1, 2, 0, 0]));
        // Counts over their gcd (10): app;f is node 1, app;main;f node 3.
        assert_eq!(v["unit"], 10);
        assert_eq!(v["self"], serde_json::json!([2, 1, 2, 4]));
        assert_eq!(v["v"], VERSION);
    }

    #[test]
    fn a_stack_that_is_a_prefix_of_another_counts_at_its_inner_node() {
        let t = tree(&[("a;b", 3), ("a", 2), ("a;b;c", 7)]);
        let v = json(&t);
        // One node per distinct prefix; a, a;b and a;b;c all end a stack.
        assert_eq!(v["nodes"].as_array().unwrap().len(), 6);
        assert_eq!(v["self"], serde_json::json!([1, 2, 1, 3, 1, 7]));
        assert_eq!(v["unit"], 1);
    }

    #[test]
    fn the_stacks_come_back_as_given() {
        let input = [
            ("app;main;parse_query;tokenize", 40u64),
            ("app;main;parse_query", 10),
            ("app;main;(anonymous namespace)::plan_join", 25),
            ("app;main;run<alloc::vec::Vec<u8>>", 20),
            ("app;main.cold;abort_slow", 3),
            ("app;main;fetch;http://example.invalid/x", 2),
            ("app;main;f;g;f;g;f", 6),
            ("other", 1),
        ];
        let t = tree(&input);
        let mut want: Vec<(String, u64)> = input.iter().map(|&(s, c)| (s.to_string(), c)).collect();
        let mut got = t.stacks();
        want.sort();
        got.sort();
        assert_eq!(got, want);
        // And from its JSON, read back as the page reads it.
        let v = json(&t);
        let names: Vec<String> = serde_json::from_value(v["names"].clone()).unwrap();
        assert!(names.contains(&"http://example.invalid/x".to_string()));
        assert!(!t.to_json().contains("://") && !t.to_json().contains('<'));
    }

    #[test]
    fn counts_are_divided_by_their_gcd_and_kept_exact_for_the_page() {
        let t = tree(&[("a;b", 10_101_010), ("a;c", 30_303_030)]);
        assert_eq!(json(&t)["unit"], 10_101_010);
        assert_eq!(json(&t)["self"], serde_json::json!([2, 1, 1, 3]));
        // Counts whose sum is past 2^53 are scaled down in powers of two.
        let big = tree(&[("a", (1 << 60) + 1), ("b", 1 << 60)]);
        let v = json(&big);
        let unit = v["unit"].as_u64().unwrap();
        let sum: u64 = v["self"]
            .as_array()
            .unwrap()
            .iter()
            .skip(1)
            .step_by(2)
            .map(|c| c.as_u64().unwrap())
            .sum();
        assert!(sum <= EXACT_IN_JS, "{v}");
        assert!(unit.is_power_of_two() && unit > 1, "{v}");
    }

    #[test]
    fn an_empty_profile_is_an_empty_tree() {
        let t = tree(&[]);
        assert!(t.is_empty());
        assert_eq!(json(&t)["nodes"], serde_json::json!([]));
    }
}
