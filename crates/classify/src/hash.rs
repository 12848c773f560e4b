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
use std::hash::{BuildHasher, Hash, Hasher};
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

/// Keyed hash of the directional 5-tuple (TCP/UDP) or of (src, dst, proto).
pub(crate) fn flow_hash(
    h: &KeyedSip,
    src: IpAddr,
    dst: IpAddr,
    proto: u8,
    ports: Option<(u16, u16)>,
) -> u64 {
    let mut s = h.build_hasher();
    src.hash(&mut s);
    dst.hash(&mut s);
    s.write_u8(proto);
    if let Some((sp, dp)) = ports {
        s.write_u16(sp);
        s.write_u16(dp);
    }
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
    }
}
