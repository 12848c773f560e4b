//! A raw link for the lab's hostile hosts (`sluice lab attack`): crafted
//! frames out of one interface, and the frames that arrive on it.
//!
//! # Principles
//! - Nothing new underneath: the receive side is the data plane's packet
//!   socket (recvmmsg, own outgoing frames ignored), the transmit side its
//!   transmit-only socket (qdisc bypassed, as the bridge sends). Only the
//!   lab's attackers use it, inside the lab's namespaces.
//! - Non-blocking: [`RawLink::recv`] takes what is queued and returns; the
//!   caller paces itself (an attacker is bounded in count and time).

use crate::sock::PacketSocket;
use std::io;

/// One interface's packet sockets: everything received, crafted frames sent.
pub struct RawLink {
    rx: PacketSocket,
    tx: PacketSocket,
}

impl RawLink {
    pub fn open(dev: &str) -> io::Result<RawLink> {
        Ok(RawLink {
            rx: PacketSocket::open(dev, None)?,
            tx: PacketSocket::open_tx(dev)?,
        })
    }

    /// Passes every frame queued now to `f` (at most `max`); returns how
    /// many were taken.
    pub fn recv(&mut self, max: usize, f: &mut dyn FnMut(&[u8])) -> io::Result<usize> {
        self.rx.recv(max, &mut |fr| {
            if !fr.truncated {
                f(fr.data)
            }
        })
    }

    /// Sends `frames` in order; returns how many left (fewer when the
    /// kernel pushed back: the rest may be sent again later).
    pub fn send(&self, frames: &[Vec<u8>]) -> io::Result<usize> {
        let mut done = 0;
        // Bounded: each pass sends at least one frame or returns.
        while done < frames.len() {
            match self.tx.send(&frames[done..]) {
                Ok(0) => return Ok(done),
                Ok(n) => done += n,
                Err((n, e)) => {
                    return if done + n > 0 { Ok(done + n) } else { Err(e) };
                }
            }
        }
        Ok(done)
    }
}
