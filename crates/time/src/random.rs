//! A seeded random stream and a draw with a probability in millionths: the
//! pipes' and the lab delay line's random loss, the lab's spoofed fields.
//!
//! # Principles
//!
//! - **SplitMix64** (Steele, Lea & Flood 2014, "Fast splittable
//!   pseudorandom number generators"): tiny, fast, and every seed — 0
//!   included — gives a full-period stream, so a seed recorded with a run
//!   replays it exactly. Not for secrets.
//! - **No modulo bias**: a probability is drawn by multiply-shift of the
//!   stream's top 32 bits, not by a remainder.

/// One in a million: the unit of [`SplitMix64::chance`].
pub const PPM: u32 = 1_000_000;

/// The SplitMix64 stream from a seed.
#[derive(Clone, Debug)]
pub struct SplitMix64(u64);

impl SplitMix64 {
    pub fn new(seed: u64) -> SplitMix64 {
        SplitMix64(seed)
    }

    pub fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    /// True with probability `ppm / 10⁶`; no draw at all for 0.
    pub fn chance(&mut self, ppm: u32) -> bool {
        if ppm == 0 {
            return false;
        }
        let draw = ((self.next_u64() >> 32) * u64::from(PPM)) >> 32;
        draw < u64::from(ppm)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_reference_stream_from_seed_0() {
        // The first outputs of SplitMix64 seeded with 0 (the published
        // reference values).
        let mut r = SplitMix64::new(0);
        assert_eq!(r.next_u64(), 0xE220_A839_7B1D_CDAF);
        assert_eq!(r.next_u64(), 0x6E78_9E6A_A1B9_65F4);
    }

    #[test]
    fn chance_draws_its_probability() {
        let mut r = SplitMix64::new(7);
        let n = 200_000;
        let hits = (0..n).filter(|_| r.chance(30_000)).count();
        let p = hits as f64 / f64::from(n);
        assert!((0.028..0.032).contains(&p), "{p}");
        assert!(!r.chance(0));
        assert!(r.chance(PPM));
    }
}
