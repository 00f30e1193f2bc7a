#![no_main]
//! `cairn_fuzz::responses_stream`: see that function for the input and the properties.

libfuzzer_sys::fuzz_target!(|data: &[u8]| cairn_fuzz::responses_stream(data));
