//! Per-packet link-layer cost. A shaper set to a modem's sync rate must charge
//! each packet what it costs on the modem's wire: PPPoE/VLAN/FCS bytes, and on
//! ADSL the ATM cell tax (48 payload bytes per 53-byte cell, last cell padded).

/// How a packet's bytes are framed on the bottleneck link.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub enum Framing {
    /// Bytes go on the wire as they are (Ethernet, DOCSIS, VDSL2 PTM as approximated).
    #[default]
    Plain,
    /// ATM AAL5: the frame plus overhead is padded to whole 48-byte cell payloads,
    /// each cell costing 53 bytes.
    Atm,
}

/// Link overhead added to every packet's length to get its cost.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub struct Overhead {
    /// Bytes added per packet (may be negative to remove headers the link does not carry).
    pub bytes: i32,
    pub framing: Framing,
}

impl Overhead {
    pub const NONE: Overhead = Overhead {
        bytes: 0,
        framing: Framing::Plain,
    };

    pub const fn plain(bytes: i32) -> Self {
        Overhead {
            bytes,
            framing: Framing::Plain,
        }
    }
    pub const fn atm(bytes: i32) -> Self {
        Overhead {
            bytes,
            framing: Framing::Atm,
        }
    }

    /// Cost in bytes of a frame of `len` bytes. Never below 1, so every packet
    /// consumes some service and zero-cost loops cannot form.
    pub fn cost(&self, len: u32) -> u32 {
        let raw = (len as i64 + self.bytes as i64).max(1) as u64;
        let c = match self.framing {
            Framing::Plain => raw,
            Framing::Atm => raw.div_ceil(48) * 53,
        };
        c.min(u32::MAX as u64) as u32
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn plain_adds_bytes() {
        assert_eq!(Overhead::plain(8).cost(1500), 1508);
        assert_eq!(Overhead::NONE.cost(64), 64);
        assert_eq!(Overhead::plain(-100).cost(40), 1);
    }

    #[test]
    fn atm_pads_to_cells() {
        // A 40-byte ACK with PPPoE-over-ATM's 32 bytes overhead: 72 bytes, two cells.
        assert_eq!(Overhead::atm(32).cost(40), 106);
        // 1500 + 32 = 1532 bytes = 31.9 cells -> 32 cells.
        assert_eq!(Overhead::atm(32).cost(1500), 32 * 53);
        // Exactly one cell.
        assert_eq!(Overhead::atm(0).cost(48), 53);
    }
}
