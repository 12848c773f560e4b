//! TCP option walking, window clamp and window/MSS rewrites never panic, and
//! a rewrite keeps a frame's TCP checksum exactly as valid as it was.
#![no_main]
libfuzzer_sys::fuzz_target!(|data: &[u8]| {
    sluice_wire::fuzz_tcp_entry(data);
});
