#![no_main]
//! `cairn_fuzz::response_log`: see that function for the input and the properties.

libfuzzer_sys::fuzz_target!(|data: &[u8]| cairn_fuzz::response_log(data));
