#![no_main]
//! `cairn_fuzz::checkpoint`: see that function for the input and the properties.

libfuzzer_sys::fuzz_target!(|data: &[u8]| cairn_fuzz::checkpoint(data));
