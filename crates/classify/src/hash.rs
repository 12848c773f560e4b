//! Keyed hashing: SipHash-1-3 under the caller's 128-bit key.
//!
//! # Principles
//!
//! - The key comes from the caller (the I/O layer reads randomness); this
//!   crate makes no syscall, so `std`'s `RandomState` is not used.
//! - The same key indexes the state table and computes `flow_hash`; both are
//!   unpredictable to a sender who does not know it (FQ-CoDel's bucket choice
//!   must not be steerable, RFC 8290 §4.1.1).

use siphasher::sip::SipHasher13;
use std::hash::{BuildHasher, Hasher};
use std::net::IpAddr;

/// A `BuildHasher` for SipHash-1-3 with a fixed secret key.
#[derive(Clone, Copy, Debug)]
pub(crate) struct KeyedSip {
    k0: u64,
    k1: u64,
}

impl KeyedSip {
    pub(crate) fn new(key: &[u8; 16]) -> KeyedSip {
        let mut a = [0u8; 8];
        let mut b = [0u8; 8];
        a.copy_from_slice(&key[..8]);
        b.copy_from_slice(&key[8..]);
        KeyedSip {
            k0: u64::from_le_bytes(a),
            k1: u64::from_le_bytes(b),
        }
    }
}

impl BuildHasher for KeyedSip {
    type Hasher = SipHasher13;
    fn build_hasher(&self) -> SipHasher13 {
        SipHasher13::new_with_keys(self.k0, self.k1)
    }
}

/// An address as 16 bytes (IPv4 in the IPv4-mapped form) plus a family flag,
/// so hashing is one fixed-size write instead of several small ones.
fn addr_bytes(a: IpAddr) -> ([u8; 16], bool) {
    match a {
        IpAddr::V4(v4) => (v4.to_ipv6_mapped().octets(), false),
        IpAddr::V6(v6) => (v6.octets(), true),
    }
}

/// Serialise (addr, port, addr, port, proto, flag bits 0..=5) into one buffer;
/// bits 6 and 7 carry the address families.
pub(crate) fn tuple_bytes(a: (IpAddr, u16), b: (IpAddr, u16), proto: u8, bits: u8) -> [u8; 38] {
    let (ab, a6) = addr_bytes(a.0);
    let (bb, b6) = addr_bytes(b.0);
    let mut buf = [0u8; 38];
    buf[..16].copy_from_slice(&ab);
    buf[16..18].copy_from_slice(&a.1.to_be_bytes());
    buf[18..34].copy_from_slice(&bb);
    buf[34..36].copy_from_slice(&b.1.to_be_bytes());
    buf[36] = proto;
    buf[37] = (bits & 0x3f) | (u8::from(a6) << 6) | (u8::from(b6) << 7);
    buf
}

/// Keyed hash of one address: a host, for host isolation. Apart from
/// [`flow_hash`] by its length (16 bytes, not 38).
pub(crate) fn host_hash(h: &KeyedSip, a: IpAddr) -> u64 {
    let mut s = h.build_hasher();
    s.write(&addr_bytes(a).0);
    s.finish()
}

/// Keyed hash of the directional 5-tuple (TCP/UDP) or of (src, dst, proto).
pub(crate) fn flow_hash(
    h: &KeyedSip,
    src: IpAddr,
    dst: IpAddr,
    proto: u8,
    ports: Option<(u16, u16)>,
) -> u64 {
    let mut s = h.build_hasher();
    // Bit 0 tells "no ports" apart from ports (0, 0).
    let (sp, dp, bit) = ports.map_or((0, 0, 1), |(a, b)| (a, b, 0));
    s.write(&tuple_bytes((src, sp), (dst, dp), proto, bit));
    s.finish()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn flow_hash_is_keyed_and_directional() {
        let a: IpAddr = "10.0.0.1".parse().unwrap();
        let b: IpAddr = "10.0.0.2".parse().unwrap();
        let k1 = KeyedSip::new(&[1; 16]);
        let k2 = KeyedSip::new(&[2; 16]);
        let h = flow_hash(&k1, a, b, 6, Some((1, 2)));
        assert_eq!(h, flow_hash(&k1, a, b, 6, Some((1, 2))));
        assert_ne!(h, flow_hash(&k2, a, b, 6, Some((1, 2))));
        assert_ne!(h, flow_hash(&k1, b, a, 6, Some((2, 1))));
        assert_ne!(h, flow_hash(&k1, a, b, 6, Some((1, 3))));
        assert_ne!(
            flow_hash(&k1, a, b, 47, None),
            flow_hash(&k1, a, b, 47, Some((0, 0)))
        );
    }
}
