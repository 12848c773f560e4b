//! Packet parsing (and ECN rewrite of what parsed) must never panic.
#![no_main]
libfuzzer_sys::fuzz_target!(|data: &[u8]| {
    sluice_wire::fuzz_entry(data);
});
