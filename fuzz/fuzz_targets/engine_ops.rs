//! Arbitrary frames and clock steps through the whole engine, from a shipped
//! configuration the first byte picks, with its contract asserted after every
//! step (sluice_engine::testing). Seeds: crates/engine/tests/seeds/engine_ops.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| sluice_engine::testing::check_bytes(data));
