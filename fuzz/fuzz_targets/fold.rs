//! Folds arbitrary bytes in both modes, with 1 and 2 threads and a tiny
//! chunk size, and checks that nothing panics and that the output does not
//! depend on threads or chunking.
#![no_main]

use jobprof::fold::{Compat, Folder, Options};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    for compat in [Compat::None, Compat::Inferno] {
        let one = Folder::new(Options { threads: 1, compat, ..Options::default() }).fold_bytes(data);
        let two = Folder::new(Options { threads: 2, chunk_size: 16, compat, ..Options::default() })
            .fold_bytes(data);
        assert_eq!(one.stacks, two.stacks);
    }
});
