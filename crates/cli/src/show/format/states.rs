//! `show states` (`pfctl -vss`): each state, then its counters.

use super::hms;
use sluice_control::proto::*;
use std::fmt::Write as _;

fn endpoint(addr: &str, port: u16) -> String {
    // pfctl writes IPv6 ports in brackets, since `:` is taken.
    if addr.contains(':') {
        format!("{addr}[{port}]")
    } else {
        format!("{addr}:{port}")
    }
}

/// `pfctl -vss`: `all PROTO A -> B STATE`, then the state's counters.
pub fn format_states(r: &StatesReply) -> String {
    let mut o = String::new();
    for s in &r.states {
        let (a, b) = (endpoint(&s.src, s.src_port), endpoint(&s.dst, s.dst_port));
        // pf shows outbound states initiator first, inbound responder first.
        let pair = if s.direction == "out" {
            format!("{a} -> {b}")
        } else {
            format!("{b} <- {a}")
        };
        let _ = writeln!(o, "all {} {pair}       {}", s.proto, s.state);
        if let Some(w) = &s.windows {
            let _ = writeln!(o, "   {}", windows_text(w));
        }
        let queue = match (&s.queue, &s.queue_pri) {
            (Some(q), Some(p)) => format!("queue ({q}, {p}), "),
            (Some(q), None) => format!("queue {q}, "),
            _ => String::new(),
        };
        let _ = writeln!(
            o,
            "   {queue}age {}, expires in {}, {}:{} pkts, {}:{} bytes, rule {}",
            hms(s.age_ns),
            hms(s.expires_in_ns),
            s.packets[0],
            s.packets[1],
            s.bytes[0],
            s.bytes[1],
            s.rule.map_or("-".to_string(), |r| r.to_string())
        );
        // Passive RTT: sluice to each endpoint and back (smoothed, min).
        let rtt = |e: &Option<RttJson>| {
            e.as_ref().map(|e| {
                format!(
                    "{:.1} ms (min {:.1})",
                    e.smoothed_ns as f64 / 1e6,
                    e.min_ns as f64 / 1e6
                )
            })
        };
        match (rtt(&s.rtt_to_src), rtt(&s.rtt_to_dst)) {
            (None, None) => {}
            (a, b) => {
                let dash = || "-".to_string();
                let _ = writeln!(
                    o,
                    "   rtt to {}: {}, to {}: {}",
                    endpoint(&s.src, s.src_port),
                    a.unwrap_or_else(dash),
                    endpoint(&s.dst, s.dst_port),
                    b.unwrap_or_else(dash)
                );
            }
        }
    }
    if (r.states.len() as u64) < r.total {
        let _ = writeln!(o, "# {} of {} states shown", r.states.len(), r.total);
    }
    o
}

/// pfctl's `[seqlo + span]` for each peer, `wscale N` after each when
/// both scales are known (RFC 7323 applies scaling only if both offered it).
fn windows_text(w: &[WindowJson; 2]) -> String {
    let both = w[0].wscale.is_some() && w[1].wscale.is_some();
    let one = |p: &WindowJson| {
        let span = p.seqhi.wrapping_sub(p.seqlo);
        match p.wscale {
            Some(ws) if both => format!("[{} + {span}] wscale {ws}", p.seqlo),
            _ => format!("[{} + {span}]", p.seqlo),
        }
    };
    format!("{}  {}", one(&w[0]), one(&w[1]))
}
