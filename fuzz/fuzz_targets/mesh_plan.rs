#![no_main]
libfuzzer_sys::fuzz_target!(|data: &[u8]| meshdns_fuzz::mesh_plan(data));
