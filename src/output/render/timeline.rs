//! The data of the flamegraph page's timeline (a FlameScope-style heat map):
//! sample counts per 20 ms cell of the capture's window, per thread and per
//! stack, compact enough to embed in the page. Stacks are kept as a prefix
//! tree of interned frames (a node is its parent and its frame), so a stack
//! costs one node id per sample cell instead of its text; the page sums the
//! cells of a selected range into the tree and draws that range's
//! flamegraph. Built from one walk over the samples
//! ([`crate::text::samples::walk`]); memory grows with distinct (cell, stack,
//! thread) triples, never with the text.

use std::collections::HashMap;

use serde::Serialize;

use crate::text::fold::TimeCells;
use crate::text::samples::Sample;

/// Width of one heat-map cell.
pub const CELL_NS: u64 = 20_000_000;

/// Counts per cell, thread and stack; see the module docs.
#[derive(Debug, Default)]
pub struct Timeline {
    frames: Vec<String>,
    frame_ids: HashMap<String, u32>,
    /// `(parent, frame)` per node; node 0 is the root.
    nodes: Vec<(u32, u32)>,
    node_ids: HashMap<(u32, u32), u32>,
    stack_leaf: HashMap<String, u32>,
    threads: Vec<String>,
    thread_samples: Vec<u64>,
    thread_ids: HashMap<(String, String), u32>,
    counts: HashMap<(u64, u32, u32), u32>,
    untimed: u64,
}

/// The form embedded in the page (all ids are indexes).
#[derive(Serialize)]
struct Embedded<'a> {
    #[serde(rename = "cellMs")]
    cell_ms: u64,
    /// perf's clock at cell 0, in seconds.
    #[serde(rename = "startS")]
    start_s: f64,
    cells: u64,
    frames: &'a [String],
    /// Flat `parent, frame` pairs; node 0 is the root.
    nodes: Vec<u32>,
    threads: &'a [String],
    #[serde(rename = "threadSamples")]
    thread_samples: &'a [u64],
    /// Flat `cell, node, thread, count` quadruples, by cell.
    counts: Vec<u64>,
}

impl Timeline {
    /// An empty timeline.
    pub fn new() -> Self {
        Timeline {
            nodes: vec![(u32::MAX, u32::MAX)],
            ..Timeline::default()
        }
    }

    /// The timeline of a fold's cells ([`crate::text::fold::TimeCells`]):
    /// the same as [`Timeline::add`] of every sample in the text's order,
    /// since the cells list stacks and threads in the order the text first
    /// has them.
    pub fn from_cells(c: &TimeCells) -> Self {
        debug_assert_eq!(c.cell_ns, CELL_NS, "cells of the timeline's width");
        let mut t = Timeline::new();
        let nodes: Vec<u32> = c.stacks.iter().map(|s| t.leaf(s)).collect();
        let threads: Vec<u32> = (c.threads.iter())
            .map(|(comm, tid)| t.thread(comm, tid))
            .collect();
        for &(cell, stack, thread, n) in &c.counts {
            let thread = threads[thread as usize];
            t.thread_samples[thread as usize] += u64::from(n);
            *t.counts
                .entry((cell, nodes[stack as usize], thread))
                .or_insert(0) += n;
        }
        t.untimed = c.untimed;
        t
    }

    /// Adds one sample (samples without a time are counted, not placed).
    pub fn add(&mut self, s: &Sample<'_>) {
        let Some(t) = s.time_ns else {
            self.untimed += 1;
            return;
        };
        let node = self.leaf(s.stack);
        let thread = self.thread(s.comm, s.tid);
        self.thread_samples[thread as usize] += 1;
        *self.counts.entry((t / CELL_NS, node, thread)).or_insert(0) += 1;
    }

    /// Whether any sample had a time.
    pub fn is_empty(&self) -> bool {
        self.counts.is_empty()
    }

    /// Samples without a time (the text printed none).
    pub fn untimed(&self) -> u64 {
        self.untimed
    }

    fn leaf(&mut self, stack: &str) -> u32 {
        if let Some(&n) = self.stack_leaf.get(stack) {
            return n;
        }
        let mut node = 0u32;
        for frame in stack.split(';') {
            let f = match self.frame_ids.get(frame) {
                Some(&f) => f,
                None => {
                    let f = self.frames.len() as u32;
                    self.frames.push(frame.to_string());
                    self.frame_ids.insert(frame.to_string(), f);
                    f
                }
            };
            node = match self.node_ids.get(&(node, f)) {
                Some(&n) => n,
                None => {
                    let n = self.nodes.len() as u32;
                    self.nodes.push((node, f));
                    self.node_ids.insert((node, f), n);
                    n
                }
            };
        }
        self.stack_leaf.insert(stack.to_string(), node);
        node
    }

    fn thread(&mut self, comm: &str, tid: &str) -> u32 {
        let key = (comm.to_string(), tid.to_string());
        if let Some(&t) = self.thread_ids.get(&key) {
            return t;
        }
        let t = self.threads.len() as u32;
        self.threads.push(format!("{comm} {tid}"));
        self.thread_samples.push(0);
        self.thread_ids.insert(key, t);
        t
    }

    /// The JSON embedded in the page, safe inside a `<script>` element and
    /// free of `://` (every `/` and `<` in strings is escaped).
    pub fn to_json(&self) -> String {
        let first = self.counts.keys().map(|k| k.0).min().unwrap_or(0);
        let last = self.counts.keys().map(|k| k.0).max().unwrap_or(0);
        let mut quads: Vec<(u64, u32, u32, u32)> = self
            .counts
            .iter()
            .map(|(&(c, n, t), &k)| (c - first, n, t, k))
            .collect();
        quads.sort_unstable();
        let e = Embedded {
            cell_ms: CELL_NS / 1_000_000,
            start_s: (first * CELL_NS) as f64 / 1e9,
            cells: last - first + 1,
            frames: &self.frames,
            nodes: self
                .nodes
                .iter()
                .skip(1)
                .flat_map(|&(p, f)| [p, f])
                .collect(),
            threads: &self.threads,
            thread_samples: &self.thread_samples,
            counts: quads
                .iter()
                .flat_map(|&(c, n, t, k)| [c, u64::from(n), u64::from(t), u64::from(k)])
                .collect(),
        };
        serde_json::to_string(&e)
            .expect("plain data serializes")
            .replace('/', "\\/")
            .replace('<', "\\u003c")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sample<'a>(stack: &'a str, tid: &'a str, t: u64) -> Sample<'a> {
        Sample {
            comm: "w",
            pid: "?",
            tid,
            time_ns: Some(t),
            weight: 1,
            stack,
            frames: &[],
        }
    }

    #[test]
    fn stacks_share_prefixes_and_cells_count() {
        let mut tl = Timeline::new();
        tl.add(&sample("w;main;a", "1", 1_000_000_000));
        tl.add(&sample("w;main;a", "1", 1_005_000_000));
        tl.add(&sample("w;main;b", "2", 1_050_000_000));
        let v: serde_json::Value = serde_json::from_str(&tl.to_json()).unwrap();
        // w, main, a, b: nodes 1..=4 (w, main, a, b).
        assert_eq!(v["nodes"].as_array().unwrap().len(), 8);
        assert_eq!(v["cells"], 3);
        let counts: Vec<u64> = v["counts"]
            .as_array()
            .unwrap()
            .iter()
            .map(|x| x.as_u64().unwrap())
            .collect();
        assert_eq!(counts, [0, 3, 0, 2, 2, 4, 1, 1]);
        assert!(!tl.to_json().contains("://"));
    }

    /// The fold's cells, folded in parallel chunks and with two units
    /// pushed interleaved, make the timeline a walk over the text makes.
    #[test]
    fn the_folds_cells_make_the_timeline_a_walk_makes() {
        use crate::text::fold::{self, Folder};
        let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("fixtures");
        for name in ["mt-fp.perf.txt", "dwarf-inline.perf.txt", "cxx-fp.perf.txt"] {
            let path = root.join(name);
            let text = std::fs::read(&path).unwrap();
            let opts = fold::Options {
                time_cells: Some(CELL_NS),
                threads: 3,
                chunk_size: 4096,
                block_size: 16 << 10,
                ..fold::Options::default()
            };
            let whole = Folder::new(opts.clone()).fold_bytes(&text);
            let walk_opts = fold::Options {
                event_filter: whole.stats.event.clone(),
                ..opts.clone()
            };
            let mut walked = Timeline::new();
            crate::text::samples::walk(&path, &walk_opts, |s| walked.add(s)).unwrap();
            assert!(!walked.is_empty(), "{name}");
            let from_whole = Timeline::from_cells(whole.cells.as_ref().unwrap());
            assert_eq!(from_whole.to_json(), walked.to_json(), "{name}");
            // Two units in blocks at sample boundaries, the second's first.
            let mid = crate::text::boundary::next(&text, text.len() / 2).unwrap();
            let blocks = |t: &[u8]| {
                let (mut v, mut at) = (Vec::new(), 0);
                while at < t.len() {
                    let end = crate::text::boundary::next(t, at + 5000).unwrap_or(t.len());
                    v.push(t[at..end].to_vec());
                    at = end;
                }
                v
            };
            let (a, b) = (blocks(&text[..mid]), blocks(&text[mid..]));
            let mut stream = Folder::new(walk_opts.clone()).stream();
            for i in 0..a.len().max(b.len()) {
                if let Some(x) = b.get(i) {
                    stream.push_whole_of(1, x);
                }
                if let Some(x) = a.get(i) {
                    stream.push_whole_of(0, x);
                }
            }
            let pushed = stream.finish();
            assert_eq!(pushed.to_bytes(), whole.to_bytes(), "{name}");
            let from_pushed = Timeline::from_cells(pushed.cells.as_ref().unwrap());
            assert_eq!(from_pushed.to_json(), walked.to_json(), "{name}");
        }
    }
}
