//! The config parser and checker must never panic, whatever the bytes.
#![no_main]
libfuzzer_sys::fuzz_target!(|data: &[u8]| {
    sluice_conf::fuzz_entry(data);
});
