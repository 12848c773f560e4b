//! The I/O layer's counters for `show info` and the metrics, and the
//! last word on them at the stop.

use crate::debug;
use sluice_io::IoStats;
use std::sync::atomic::Ordering;
use std::sync::Arc;

/// The I/O layer's counters by name, for `show info` and the metrics.
pub(crate) fn io_counters(names: &[String; 2], stats: &IoStats) -> Vec<(String, u64)> {
    let mut v = Vec::new();
    for (name, s) in names.iter().zip(&stats.ifaces) {
        for (what, c) in [
            ("rx_frames", &s.rx_frames),
            ("tx_frames", &s.tx_frames),
            ("ring_drops", &s.ring_drops),
            ("tx_blocked", &s.tx_blocked),
            ("tx_errors", &s.tx_errors),
            ("oversize", &s.oversize),
            ("link_down", &s.link_down),
            ("down_drops", &s.down_drops),
            ("xdp_reattach", &s.xdp_reattach),
            ("csum_completed", &s.csum_completed),
        ] {
            v.push((format!("{name}_{what}"), c.load(Ordering::Relaxed)));
        }
    }
    v.push(("log_write_errors".into(), crate::log::lost()));
    let p = &stats.pool;
    for (what, c) in [
        ("pool_buffer_bytes", &p.buffer_bytes),
        ("pool_max_buffers", &p.max_buffers),
        ("pool_free_buffers", &p.free_buffers),
        ("pool_allocated", &p.allocated),
    ] {
        v.push((what.into(), c.load(Ordering::Relaxed)));
    }
    v
}

/// AF_XDP's queues of each interface for `show info`.
pub(super) fn xdp_queues_json(
    names: [String; 2],
    stats: Arc<IoStats>,
) -> Arc<dyn Fn() -> Vec<crate::proto::XdpIfaceJson> + Send + Sync> {
    use crate::proto::{XdpIfaceJson, XdpQueueJson};
    Arc::new(move || {
        let mut v = Vec::new();
        for (name, s) in names.iter().zip(&stats.ifaces) {
            let Some(x) = s.xdp.lock().unwrap_or_else(|e| e.into_inner()).clone() else {
                continue;
            };
            let queues = x.queues.into_iter().map(|q| XdpQueueJson {
                queue: q.queue,
                mode: if q.zerocopy { "zerocopy" } else { "copy" }.into(),
                copy_reason: q.copy_why,
                rx_frames: q.rx_frames,
                ring_drops: q.ring_drops,
                chunks: q.chunks,
            });
            v.push(XdpIfaceJson {
                iface: name.clone(),
                attach: x.attach.into(),
                tx_queue: x.tx_queue,
                queues: queues.collect(),
            });
        }
        v
    })
}

/// Each port's frame counters, at debug level, once the loop has ended.
pub(super) fn log_final(names: &[String; 2], stats: &IoStats) {
    for (name, s) in names.iter().zip(&stats.ifaces) {
        debug!(
            "{name}: rx {} frames, tx {} frames, ring drops {}, tx errors {}, oversize {}",
            s.rx_frames.load(Ordering::Relaxed),
            s.tx_frames.load(Ordering::Relaxed),
            s.ring_drops.load(Ordering::Relaxed),
            s.tx_errors.load(Ordering::Relaxed),
            s.oversize.load(Ordering::Relaxed)
        );
    }
}
