//! The leaf of this crate's tests of the classful disciplines: the real
//! drop-tail FIFO, with a limit in packets.

use crate::fifo;
use crate::Qdisc;

pub(crate) struct Fifo;

impl Fifo {
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
