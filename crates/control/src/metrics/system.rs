//! The daemon's own families: each interface's frame counters, the state
//! table, the packet I/O layer (by interface where it is one's) and the
//! memory queued frames hold.

use super::Out;
use crate::proto::{IfaceCountersJson, InfoReply};

/// A family of one counter per interface: the name after `sluice_iface_`,
/// its value and its help.
type PerIface = (&'static str, fn(&IfaceCountersJson) -> u64, &'static str);

const PER_IFACE: [PerIface; 10] = [
    ("rx_packets_total", |c| c.rx_packets, "Frames received."),
    ("rx_bytes_total", |c| c.rx_bytes, "Bytes received."),
    ("tx_packets_total", |c| c.tx_packets, "Frames transmitted."),
    ("tx_bytes_total", |c| c.tx_bytes, "Bytes transmitted."),
    (
        "non_ip_packets_total",
        |c| c.non_ip,
        "Non-IP frames forwarded (ARP, LLDP …).",
    ),
    (
        "ecn_marked_packets_total",
        |c| c.ecn_marked,
        "Frames sent with CE set by an AQM.",
    ),
    (
        "mss_clamped_total",
        |c| c.mss_clamped,
        "SYNs received whose MSS option scrub (max-mss) lowered.",
    ),
    (
        "mss_untouched_total",
        |c| c.mss_untouched,
        "SYNs under max-mss whose TCP options could not be walked (passed unmodified).",
    ),
    (
        "probes_sent_total",
        |c| c.probes_sent,
        "autorate's echo requests sent (sluice's own frames, not in tx_packets).",
    ),
    (
        "probe_replies_total",
        |c| c.probe_replies,
        "Replies to autorate's probes taken here (not forwarded).",
    ),
];

pub(super) fn iface_families(o: &mut Out, info: &InfoReply) {
    for (suffix, get, help) in PER_IFACE {
        let name = format!("sluice_iface_{suffix}");
        o.family(&name, "counter", help);
        for c in &info.counters {
            o.sample(&name, &[("iface", &c.name)], get(c));
        }
    }
    let name = "sluice_iface_dropped_packets_total";
    o.family(
        name,
        "counter",
        "Frames received and not forwarded, by cause (queue drops counted on the egress interface).",
    );
    for c in &info.counters {
        for (cause, v) in [
            ("malformed", c.malformed),
            ("blocked", c.blocked),
            ("state-limit", c.state_limit),
            ("bad-state", c.bad_state),
            ("no-route", c.no_route),
            ("queue", c.queue_drops),
            ("reload", c.reload_drops),
            ("memory-limit", c.memory_drops),
        ] {
            o.sample(name, &[("iface", &c.name), ("cause", cause)], v);
        }
    }
}

pub(super) fn state_families(o: &mut Out, info: &InfoReply) {
    for (name, kind, v, help) in [
        ("sluice_states", "gauge", info.states, "Resident states."),
        (
            "sluice_state_limit",
            "gauge",
            info.state_limit,
            "Maximum number of states (set limit states).",
        ),
        (
            "sluice_state_inserts_total",
            "counter",
            info.state_inserts,
            "States created.",
        ),
        (
            "sluice_state_removals_total",
            "counter",
            info.state_removals,
            "States removed (expired or replaced).",
        ),
        (
            "sluice_state_limit_hits_total",
            "counter",
            info.state_limit_hits,
            "Packets blocked because the state table was full.",
        ),
        (
            "sluice_state_evictions_total",
            "counter",
            info.state_evictions,
            "Unanswered states evicted to admit new ones into a full table.",
        ),
        (
            "sluice_state_rule_limit_hits_total",
            "counter",
            info.state_rule_limit_hits,
            "States refused by a rule's max or max-src-states.",
        ),
    ] {
        o.family(name, kind, help);
        o.sample(name, &[], v);
    }
}

/// The I/O layer's counters of one interface (`show info` names them
/// `IFACE_STAT`): the stat, its family after `sluice_io_`, and its help.
const IO_PER_IFACE: [(&str, &str, &str); 10] = [
    (
        "rx_frames",
        "rx_frames_total",
        "Frames the packet I/O received.",
    ),
    (
        "tx_frames",
        "tx_frames_total",
        "Frames the packet I/O handed to the kernel.",
    ),
    (
        "ring_drops",
        "ring_drops_total",
        "Frames the kernel dropped because the RX ring was full.",
    ),
    (
        "tx_blocked",
        "tx_blocked_total",
        "Times the kernel pushed back on a send (EAGAIN, ENOBUFS).",
    ),
    (
        "tx_errors",
        "tx_errors_total",
        "Frames the kernel refused outright.",
    ),
    (
        "oversize",
        "oversize_frames_total",
        "Frames longer than the MTU and L2 header (an offload left on).",
    ),
    (
        "link_down",
        "link_down_total",
        "Times the interface went down.",
    ),
    (
        "down_drops",
        "down_drops_total",
        "Frames due on the interface while it was down, released.",
    ),
    (
        "xdp_reattach",
        "xdp_reattaches_total",
        "Times the XDP program was found detached and attached again.",
    ),
    (
        "csum_completed",
        "csum_completed_total",
        "Frames whose checksum the sender left to TX offload, completed before forwarding.",
    ),
];

/// The I/O layer's own: the stat, its family, its type and its help.
const IO_GLOBAL: [(&str, &str, &str, &str); 5] = [
    (
        "log_write_errors",
        "sluice_log_write_errors_total",
        "counter",
        "Log lines that could not be written.",
    ),
    (
        "pool_buffer_bytes",
        "sluice_io_pool_buffer_bytes",
        "gauge",
        "Capacity of one frame buffer.",
    ),
    (
        "pool_max_buffers",
        "sluice_io_pool_max_buffers",
        "gauge",
        "Most free buffers the pool keeps.",
    ),
    (
        "pool_free_buffers",
        "sluice_io_pool_free_buffers",
        "gauge",
        "Free buffers in the pool now.",
    ),
    (
        "pool_allocated",
        "sluice_io_pool_allocated_buffers_total",
        "counter",
        "Buffers allocated since start.",
    ),
];

/// The I/O layer's counters (`show info`'s list, by name), each under its
/// family; an interface's under the label `iface`.
pub(super) fn io_families(o: &mut Out, info: &InfoReply) {
    let value = |stat: &str| info.io.iter().find(|(n, _)| n == stat).map(|(_, v)| *v);
    for (stat, suffix, help) in IO_PER_IFACE {
        let name = format!("sluice_io_{suffix}");
        let per: Vec<(&str, u64)> = info
            .ifaces
            .iter()
            .filter_map(|i| Some((i.as_str(), value(&format!("{i}_{stat}"))?)))
            .collect();
        if per.is_empty() {
            continue;
        }
        o.family(&name, "counter", help);
        for (iface, v) in per {
            o.sample(&name, &[("iface", iface)], v);
        }
    }
    for (stat, name, kind, help) in IO_GLOBAL {
        if let Some(v) = value(stat) {
            o.family(name, kind, help);
            o.sample(name, &[], v);
        }
    }
}

/// Memory held by queued frames and its caps (docs/dataplane.md, "Memory").
pub(super) fn memory_families(o: &mut Out, info: &InfoReply) {
    let m = &info.memory;
    for (name, kind, help, v) in [
        (
            "sluice_memory_held_bytes",
            "gauge",
            "Memory held by queued frames (buffer capacity plus per-frame overhead).",
            m.held_bytes,
        ),
        (
            "sluice_memory_peak_bytes",
            "gauge",
            "Highest memory held by queued frames since start.",
            m.peak_bytes,
        ),
        (
            "sluice_memory_limit_bytes",
            "gauge",
            "Cap on the memory queued frames may hold (--memory-limit).",
            m.limit_bytes,
        ),
        (
            "sluice_memory_limit_drops_total",
            "counter",
            "Frames refused because queued frames held the memory cap.",
            m.limit_drops,
        ),
        (
            "sluice_memory_right_sized_total",
            "counter",
            "Queued small frames copied out of a full-sized receive buffer.",
            m.right_sized,
        ),
    ] {
        o.family(name, kind, help);
        o.sample(name, &[], v);
    }
    if !m.queue_limits.is_empty() {
        let name = "sluice_queue_memory_limit_bytes";
        o.family(name, "gauge", "Memory limit of a queue (FQ-CoDel).");
        for q in &m.queue_limits {
            o.sample(
                name,
                &[("iface", &q.iface), ("queue", &q.queue)],
                q.limit_bytes,
            );
        }
    }
}
