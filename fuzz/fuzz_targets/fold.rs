//! Folds arbitrary bytes in both modes, with 1 and 2 threads and a tiny
//! chunk size, and checks that nothing panics and that the output does not
//! depend on threads or chunking.
#![no_main]

use jobprof::text::fold::{Compat, Folder, Options};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    for compat in [Compat::None, Compat::Inferno] {
        let mut o = Options::default();
        o.compat = compat;
        o.threads = 1;
        let one = Folder::new(o.clone()).fold_bytes(data);
        o.threads = 2;
        o.chunk_size = 16;
        let two = Folder::new(o).fold_bytes(data);
        assert_eq!(one.stacks, two.stacks);
    }
});
