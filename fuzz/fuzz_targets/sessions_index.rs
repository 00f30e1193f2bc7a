#![no_main]
//! `cairn_fuzz::sessions_index`: see that function for the input and the properties.

libfuzzer_sys::fuzz_target!(|data: &[u8]| cairn_fuzz::sessions_index(data));
