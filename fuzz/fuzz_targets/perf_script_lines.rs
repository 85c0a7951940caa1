//! Runs every line parser on arbitrary text: none may panic.
#![no_main]

use jobprof::text::perf_script as ps;
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let text = String::from_utf8_lossy(data);
    for line in text.split('\n') {
        let _ = ps::parse_header_compat(line);
        let _ = ps::parse_header_fixed(line);
        let _ = ps::parse_frame_compat(line);
        if let Some(f) = ps::parse_frame_fixed(line) {
            let _ = (f.address(), f.symbol(), f.offset(), f.kind());
        }
        let _ = ps::event_base(line);
        let _ = ps::strip_offset(line);
        let _ = ps::parse_header_simpleperf(line);
        let _ = ps::time_ns(line);
    }
});
