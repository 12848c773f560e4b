//! The leaf of this crate's tests of the classful disciplines: the real
//! drop-tail FIFO, with a limit in packets.

use crate::fifo;
use crate::Qdisc;

pub(crate) struct Fifo;

impl Fifo {
    // Kept as `Fifo::new` so the tests read as before; it builds the real one.
    #[allow(clippy::new_ret_no_self)]
    pub fn new(limit_packets: usize) -> fifo::Fifo {
        fifo::Fifo::new(fifo::Params {
            limit_packets: u32::try_from(limit_packets).unwrap_or(u32::MAX),
            limit_bytes: None,
        })
    }
    pub fn boxed(limit_packets: usize) -> Box<dyn Qdisc> {
        Box::new(Fifo::new(limit_packets))
    }
}
