//! See `fuzz/harness.rs` for what this target checks.
#![no_main]

#[path = "../harness.rs"]
mod harness;

libfuzzer_sys::fuzz_target!(|data: &[u8]| harness::rdb(data));
