//! The Internet checksum (RFC 1071) and its incremental update (RFC 1624).
//!
//! # Principles
//!
//! - One's-complement sum over 16-bit big-endian words; an odd trailing byte
//!   is padded with zero (RFC 1071 §4.1).
//! - Incremental update uses RFC 1624 eqn. 3, `HC' = ~(~HC + ~m + m')`, which
//!   never produces the -0 (0x0000 ↔ 0xffff) ambiguity of eqn. 2.

/// One's-complement sum of `data` added to `initial`, not yet folded or inverted.
pub(crate) fn sum_words(initial: u32, data: &[u8]) -> u32 {
    let mut acc = initial;
    let mut chunks = data.chunks_exact(2);
    for w in &mut chunks {
        acc = acc.wrapping_add(u32::from(u16::from_be_bytes([w[0], w[1]])));
        acc = (acc & 0xffff) + (acc >> 16);
    }
    if let [last] = chunks.remainder() {
        acc = acc.wrapping_add(u32::from(*last) << 8);
    }
    acc
}

/// Fold carries and invert: the final checksum value.
pub(crate) fn finish(mut acc: u32) -> u16 {
    while acc > 0xffff {
        acc = (acc & 0xffff) + (acc >> 16);
    }
    !(acc as u16)
}

/// The Internet checksum of `data` (checksum field included as it stands).
pub fn internet_checksum(data: &[u8]) -> u16 {
    finish(sum_words(0, data))
}

/// New checksum after one 16-bit word of the covered data changed from `old`
/// to `new` (RFC 1624 eqn. 3).
pub fn checksum_update16(sum: u16, old: u16, new: u16) -> u16 {
    let acc = u32::from(!sum) + u32::from(!old) + u32::from(new);
    finish(acc)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// RFC 1071 §3 example: the words 0001 f203 f4f5 f6f7 sum to 0xddf2.
    #[test]
    fn rfc1071_example() {
        let data = [0x00, 0x01, 0xf2, 0x03, 0xf4, 0xf5, 0xf6, 0xf7];
        assert_eq!(internet_checksum(&data), !0xddf2);
    }

    #[test]
    fn incremental_equals_full_recompute() {
        let mut hdr = [
            0x45u8, 0x00, 0x00, 0x3c, 0x1c, 0x46, 0x40, 0x00, 0x40, 0x06, 0x00, 0x00, 0xac, 0x10,
            0x0a, 0x63, 0xac, 0x10, 0x0a, 0x0c,
        ];
        let c = internet_checksum(&hdr);
        hdr[10..12].copy_from_slice(&c.to_be_bytes());
        assert_eq!(c, 0xb1e6); // the classic worked example's header
        assert_eq!(internet_checksum(&hdr), 0);
        for tos in 0..=255u8 {
            let mut h = hdr;
            let old = u16::from_be_bytes([h[0], h[1]]);
            h[1] = tos;
            let new = u16::from_be_bytes([h[0], h[1]]);
            let inc = checksum_update16(c, old, new);
            h[10..12].copy_from_slice(&inc.to_be_bytes());
            assert_eq!(internet_checksum(&h), 0, "tos {tos:#x}");
        }
    }
}
