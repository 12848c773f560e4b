//! `show info`'s AF_XDP block: per interface, how the XDP program is
//! attached and the queue it transmits on, then each RX queue's socket —
//! its mode (zero-copy or copy, and why copy) and its counters.

use sluice_control::proto::XdpIfaceJson;
use std::fmt::Write as _;

/// Nothing on AF_PACKET (no interface runs AF_XDP).
pub(super) fn format_xdp(o: &mut String, ifaces: &[XdpIfaceJson]) {
    if ifaces.is_empty() {
        return;
    }
    let _ = writeln!(
        o,
        "{:<26}{:>10}{:>16}{:>10}",
        "AF_XDP queues", "mode", "rx frames", "drops"
    );
    for x in ifaces {
        // Every queue of an interface has the same depth.
        let depth = match x.queues.first().map(|q| q.chunks) {
            Some(n) if n > 0 => format!(" of {n} chunks"),
            _ => String::new(),
        };
        let _ = writeln!(
            o,
            "  {} ({} XDP, {} RX queues{depth}, transmits on queue {})",
            x.iface,
            x.attach,
            x.queues.len(),
            x.tx_queue
        );
        for q in &x.queues {
            let _ = write!(
                o,
                "    {:<22}{:>10}{:>16}{:>10}",
                format!("queue {}", q.queue),
                q.mode,
                q.rx_frames,
                q.ring_drops
            );
            if let Some(why) = &q.copy_reason {
                let _ = write!(o, "  {why}");
            }
            o.push('\n');
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use sluice_control::proto::XdpQueueJson;

    #[test]
    fn each_queue_shows_its_mode_counters_and_why_copy() {
        let q = |queue, zc: bool, rx| XdpQueueJson {
            queue,
            mode: if zc { "zerocopy" } else { "copy" }.into(),
            copy_reason: (!zc).then(|| "zero-copy refused by the driver: EOPNOTSUPP".into()),
            rx_frames: rx,
            ring_drops: queue as u64,
            chunks: 4096,
        };
        let ifaces = [XdpIfaceJson {
            iface: "eth0".into(),
            attach: "native".into(),
            tx_queue: 0,
            queues: vec![q(0, true, 1200), q(1, false, 34)],
        }];
        let mut o = String::new();
        format_xdp(&mut o, &ifaces);
        let want = "\
AF_XDP queues                   mode       rx frames     drops
  eth0 (native XDP, 2 RX queues of 4096 chunks, transmits on queue 0)
    queue 0                 zerocopy            1200         0
    queue 1                     copy              34         1  zero-copy refused by the driver: EOPNOTSUPP
";
        assert_eq!(o, want);
        // A daemon that did not report the depth: none shown.
        let mut old = ifaces.clone();
        old[0].queues.iter_mut().for_each(|q| q.chunks = 0);
        let mut o = String::new();
        format_xdp(&mut o, &old);
        assert!(o.contains("(native XDP, 2 RX queues, transmits"), "{o}");
        let mut none = String::new();
        format_xdp(&mut none, &[]);
        assert_eq!(none, "", "AF_PACKET prints no block");
    }
}
