//! A minimal drop-tail FIFO used as the leaf in this crate's tests of the
//! classful disciplines (the real leaves are written elsewhere and plugged by
//! the engine).

use crate::{ClassId, DropReason, Dropped, Drops, Enqueue, Packet, Qdisc, QueueStats};
use sluice_time::Instant;
use std::collections::VecDeque;

pub(crate) struct Fifo {
    q: VecDeque<Packet>,
    bytes: u64,
    limit_packets: usize,
    stats: QueueStats,
}

impl Fifo {
    pub fn new(limit_packets: usize) -> Fifo {
        Fifo {
            q: VecDeque::new(),
            bytes: 0,
            limit_packets,
            stats: QueueStats::default(),
        }
    }
    pub fn boxed(limit_packets: usize) -> Box<dyn Qdisc> {
        Box::new(Fifo::new(limit_packets))
    }
}

impl Qdisc for Fifo {
    fn enqueue(&mut self, mut pkt: Packet, now: Instant, drops: &mut Drops) -> Enqueue {
        if self.q.len() >= self.limit_packets {
            self.stats.on_drop(&pkt, DropReason::QueueFull);
            drops.push(Dropped {
                pkt,
                reason: DropReason::QueueFull,
            });
            return Enqueue::Rejected;
        }
        pkt.enqueued_at = now;
        self.stats.on_enqueue(&pkt);
        self.bytes += pkt.len as u64;
        self.q.push_back(pkt);
        Enqueue::Queued
    }
    fn dequeue(&mut self, now: Instant, _drops: &mut Drops) -> Option<Packet> {
        let p = self.q.pop_front()?;
        self.bytes -= p.len as u64;
        self.stats.on_dequeue(&p, now);
        Some(p)
    }
    fn peek_len(&mut self, _now: Instant, _drops: &mut Drops) -> Option<u32> {
        self.q.front().map(|p| p.cost)
    }
    fn next_wakeup(&self) -> Option<Instant> {
        None
    }
    fn len(&self) -> usize {
        self.q.len()
    }
    fn backlog_bytes(&self) -> u64 {
        self.bytes
    }
    fn purge(&mut self, drops: &mut Drops) {
        for pkt in self.q.drain(..) {
            self.stats.on_drop_resident(&pkt, DropReason::Purge);
            drops.push(Dropped {
                pkt,
                reason: DropReason::Purge,
            });
        }
        self.bytes = 0;
    }
    fn visit_stats(&self, f: &mut dyn FnMut(ClassId, &QueueStats)) {
        f(ClassId::ROOT, &self.stats);
    }
}
