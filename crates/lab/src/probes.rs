//! The probes of a run: ping, irtt and the interface rate sampler, and the
//! parsers that turn their raw output into run-time series.
//!
//! # Principles
//! - Times are wall-clock Unix seconds until they are mapped onto the run's
//!   origin (`t0`): `ping -D` and irtt both print wall time, and so does the
//!   sampler, so the three series share one clock.
//! - A ping probe is lost only when its reply never came (not when it is
//!   later than the next send: under bloat the RTT is many intervals); its
//!   send time is its reply time minus its RTT, or from its sequence number
//!   when it was lost.
//! - The parsers accept any text: a malformed line is skipped, never a
//!   panic.

use crate::model::{Dir, HostRateSample, IrttSample, PingSample, RateSample, ShaperRateSample};
use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

/// Wall clock now, Unix seconds.
pub fn wall_now() -> f64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_secs_f64())
        .unwrap_or(0.0)
}

/// One answered ping: sequence number, reply wall time, RTT.
#[derive(Clone, Copy, Debug, PartialEq)]
struct Reply {
    seq: u64,
    reply_wall: f64,
    rtt_ms: f64,
}

/// Value after `key` up to the next space (`icmp_seq=12 ` → "12").
fn field<'a>(line: &'a str, key: &str) -> Option<&'a str> {
    let at = line.find(key)? + key.len();
    let rest = line.get(at..)?;
    Some(rest.split_whitespace().next().unwrap_or(""))
}

fn parse_reply(line: &str) -> Option<Reply> {
    let line = line.trim();
    let ts = line.strip_prefix('[')?;
    let (ts, rest) = ts.split_once(']')?;
    if !rest.contains("bytes from") {
        return None;
    }
    Some(Reply {
        seq: field(rest, "icmp_seq=")?.parse().ok()?,
        reply_wall: ts.trim().parse().ok()?,
        rtt_ms: field(rest, "time=")?.parse().ok()?,
    })
}

/// `N packets transmitted` of ping's summary.
fn transmitted(text: &str) -> Option<u64> {
    text.lines()
        .find(|l| l.contains("packets transmitted"))
        .and_then(|l| l.split_whitespace().next())
        .and_then(|n| n.parse().ok())
}

/// Most recent answered RTT in ms and the worst so far (for the linger).
pub fn ping_worst_ms(text: &str) -> f64 {
    text.lines()
        .filter_map(parse_reply)
        .map(|r| r.rtt_ms)
        .fold(0.0, f64::max)
}

/// Turns `ping -D -i interval` output into samples in run time.
///
/// `start_wall` is when ping was started (the send time of its first probe
/// when no reply tells better); `t0_wall` the run's origin. Sequence
/// numbers are 16-bit on the wire: they are unwrapped against the expected
/// count. Duplicates (`DUP!`) keep the first reply.
pub fn parse_ping(text: &str, interval_s: f64, start_wall: f64, t0_wall: f64) -> Vec<PingSample> {
    let mut replies: BTreeMap<u64, Reply> = BTreeMap::new();
    let mut epoch = 0u64; // Multiples of 65536 already passed.
    let mut last_seq = 0u64;
    for r in text.lines().filter_map(parse_reply) {
        let mut seq = r.seq + epoch;
        // A jump back by more than half the space is a wrap, not reordering.
        if seq + 32768 < last_seq {
            epoch += 65536;
            seq += 65536;
        }
        last_seq = last_seq.max(seq);
        replies.entry(seq).or_insert(Reply { seq, ..r });
    }
    let sent = transmitted(text)
        .unwrap_or(0)
        .max(replies.keys().next_back().copied().unwrap_or(0));
    // Anchor the schedule on the first answered probe (the most exact send
    // time there is), else on the process start.
    let (anchor_seq, anchor_wall) = replies
        .values()
        .next()
        .map(|r| (r.seq, r.reply_wall - r.rtt_ms / 1e3))
        .unwrap_or((1, start_wall));
    // ping numbers from 1; sent count bounds the loop (one entry per probe).
    (1..=sent)
        .map(|seq| match replies.get(&seq) {
            Some(r) => PingSample {
                t_s: r.reply_wall - r.rtt_ms / 1e3 - t0_wall,
                rtt_ms: Some(r.rtt_ms),
            },
            None => PingSample {
                t_s: anchor_wall + (seq as f64 - anchor_seq as f64) * interval_s - t0_wall,
                rtt_ms: None,
            },
        })
        .collect()
}

/// Turns irtt's `-o` JSON into samples in run time (wall clock on both
/// ends is this machine's, so one-way delays are meaningful).
pub fn parse_irtt(text: &str, interval_s: f64, t0_wall: f64) -> Result<Vec<IrttSample>, String> {
    let v: serde_json::Value = serde_json::from_str(text).map_err(|e| format!("irtt JSON: {e}"))?;
    let trips = v
        .get("round_trips")
        .and_then(|r| r.as_array())
        .ok_or("irtt JSON: no round_trips")?;
    let ns_ms = |x: Option<&serde_json::Value>| x.and_then(|v| v.as_f64()).map(|n| n / 1e6);
    let first_send = trips
        .iter()
        .find_map(|t| t.pointer("/timestamps/client/send/wall")?.as_f64())
        .map(|ns| ns / 1e9);
    let mut out = Vec::with_capacity(trips.len());
    for t in trips {
        let seq = t.get("seqno").and_then(|s| s.as_f64()).unwrap_or(0.0);
        let send = t
            .pointer("/timestamps/client/send/wall")
            .and_then(|w| w.as_f64())
            .map(|ns| ns / 1e9)
            .or_else(|| first_send.map(|f| f + seq * interval_s));
        let Some(send) = send else { continue };
        let lost = t.get("lost").and_then(|l| l.as_str()).unwrap_or("false");
        let (rtt, up, down) = match lost {
            "false" => (
                ns_ms(t.pointer("/delay/rtt")),
                ns_ms(t.pointer("/delay/send")),
                ns_ms(t.pointer("/delay/receive")),
            ),
            // Lost on the way back: the server saw it, the upward delay is known.
            "true_down" => (None, ns_ms(t.pointer("/delay/send")), None),
            _ => (None, None, None),
        };
        out.push(IrttSample {
            t_s: send - t0_wall,
            rtt_ms: rtt,
            up_owd_ms: up,
            down_owd_ms: down,
        });
    }
    Ok(out)
}

/// sluice's rate per direction from its autorate decision log
/// (`autorate.csv`, docs/autorate.md: `time_unix_s,iface,…,old_bps,new_bps,
/// reason,dry_run`) in run time: per interface the rate it started at
/// (the first line's `old_bps`, from 0) and each decision's `new_bps`.
/// The LAN interface's rate is the download's, the WAN one's the upload's;
/// dry-run lines leave the shaper as it was and are skipped.
pub fn parse_autorate(
    text: &str,
    t0_wall: f64,
    lan_if: &str,
    wan_if: &str,
) -> Result<Vec<ShaperRateSample>, String> {
    let mut out = Vec::new();
    let mut seen = [false; 2];
    for (n, line) in text.lines().enumerate().skip(1) {
        let f: Vec<&str> = line.split(',').collect();
        if f.len() < 10 {
            return Err(format!(
                "autorate.csv line {}: {} fields, 10 expected",
                n + 1,
                f.len()
            ));
        }
        let dir = match f[1] {
            i if i == lan_if => Dir::Down,
            i if i == wan_if => Dir::Up,
            _ => continue,
        };
        let num = |s: &str, what: &str| -> Result<f64, String> {
            s.parse::<f64>()
                .map_err(|_| format!("autorate.csv line {}: {what} `{s}` is not a number", n + 1))
        };
        if f[9] == "1" {
            continue;
        }
        let t_s = num(f[0], "time")? - t0_wall;
        let k = usize::from(dir == Dir::Up);
        if !seen[k] {
            seen[k] = true;
            out.push(ShaperRateSample {
                t_s: t_s.min(0.0),
                dir,
                bps: num(f[6], "old_bps")?,
            });
        }
        out.push(ShaperRateSample {
            t_s,
            dir,
            bps: num(f[7], "new_bps")?,
        });
    }
    Ok(out)
}

/// Received bytes of `ifname` in a `/proc/net/dev` text.
pub fn rx_bytes(net_dev: &str, ifname: &str) -> Option<u64> {
    net_dev.lines().find_map(|l| {
        let (name, rest) = l.split_once(':')?;
        (name.trim() == ifname).then(|| rest.split_whitespace().next()?.parse().ok())?
    })
}

/// Samples the received bytes of the client's and the server's interface
/// every `period` through `/proc/<pid>/net/dev` of a process living in
/// each namespace (no process spawned per sample).
pub struct RateSampler {
    stop: Arc<AtomicBool>,
    handle: Option<JoinHandle<Vec<RateSample>>>,
}

/// Where one direction is counted: the receiver's interface.
pub struct RxPoint {
    /// A process inside the receiver's namespace.
    pub pid: u32,
    pub ifname: String,
}

impl RateSampler {
    /// Starts sampling: `down` is counted at the client, `up` at the
    /// server; samples are stamped in run time (`t0_wall`).
    pub fn start(down: RxPoint, up: RxPoint, period: Duration, t0_wall: f64) -> RateSampler {
        let stop = Arc::new(AtomicBool::new(false));
        let flag = stop.clone();
        let handle = std::thread::spawn(move || {
            let read = |p: &RxPoint| -> Option<u64> {
                let path = PathBuf::from(format!("/proc/{}/net/dev", p.pid));
                rx_bytes(&std::fs::read_to_string(path).ok()?, &p.ifname)
            };
            let mut out = Vec::new();
            let mut prev = (wall_now(), read(&down), read(&up));
            let mut next = std::time::Instant::now() + period;
            // Bounded by the stop flag, set when the run ends.
            while !flag.load(Ordering::Relaxed) {
                let now = std::time::Instant::now();
                if next > now {
                    std::thread::sleep(next - now);
                }
                next += period;
                let cur = (wall_now(), read(&down), read(&up));
                let dt = cur.0 - prev.0;
                if dt > 0.0 {
                    let bps = |a: Option<u64>, b: Option<u64>| match (a, b) {
                        (Some(a), Some(b)) => b.saturating_sub(a) as f64 * 8.0 / dt,
                        _ => 0.0,
                    };
                    out.push(RateSample {
                        t_s: cur.0 - t0_wall,
                        down_bps: bps(prev.1, cur.1),
                        up_bps: bps(prev.2, cur.2),
                    });
                }
                prev = cur;
            }
            out
        });
        RateSampler {
            stop,
            handle: Some(handle),
        }
    }

    /// Stops the thread and returns its samples.
    pub fn finish(mut self) -> Vec<RateSample> {
        self.stop.store(true, Ordering::Relaxed);
        self.handle
            .take()
            .and_then(|h| h.join().ok())
            .unwrap_or_default()
    }
}

impl Drop for RateSampler {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
    }
}

/// One TCP connection of `ss -tinH` output: its two ends and tcp_info's
/// byte counters (RFC 4898: `bytes_acked`, data of ours the peer has
/// acknowledged; `bytes_received`, data received in order).
#[derive(Clone, Debug, PartialEq)]
pub struct SsConn {
    pub local: String,
    pub peer: String,
    /// The peer's IPv4 address (a v4-mapped `[::ffff:a.b.c.d]` unwrapped).
    pub peer_ip: String,
    pub acked: u64,
    pub received: u64,
}

/// `[::ffff:10.77.0.1]:5201` or `10.77.0.1:5201` → `10.77.0.1`.
fn endpoint_ip(ep: &str) -> &str {
    let host = ep.rsplit_once(':').map(|(h, _)| h).unwrap_or(ep);
    let host = host.trim_start_matches('[').trim_end_matches(']');
    host.strip_prefix("::ffff:").unwrap_or(host)
}

/// The connections of `ss -tinH state established` (two lines each: the
/// addresses, then an indented line of `key:value` details). A connection
/// without counters (a kernel without them) counts zero bytes.
pub fn parse_ss(text: &str) -> Vec<SsConn> {
    let mut out: Vec<SsConn> = Vec::new();
    for line in text.lines() {
        if line.trim().is_empty() {
            continue;
        }
        if !line.starts_with([' ', '\t']) {
            // `Recv-Q Send-Q Local Peer`: the last two fields are the ends.
            let f: Vec<&str> = line.split_whitespace().collect();
            if f.len() < 2 {
                continue;
            }
            let (local, peer) = (f[f.len() - 2], f[f.len() - 1]);
            out.push(SsConn {
                local: local.to_string(),
                peer: peer.to_string(),
                peer_ip: endpoint_ip(peer).to_string(),
                acked: 0,
                received: 0,
            });
        } else if let Some(c) = out.last_mut() {
            for kv in line.split_whitespace() {
                let num = |key: &str| kv.strip_prefix(key).and_then(|v| v.parse::<u64>().ok());
                if let Some(v) = num("bytes_acked:") {
                    c.acked = v;
                } else if let Some(v) = num("bytes_received:") {
                    c.received = v;
                }
            }
        }
    }
    out
}

/// Per-host TCP goodput from successive `ss` snapshots of the server's
/// connections: a host's down bytes are what the server's sockets to it
/// had acknowledged, its up bytes what they received.
///
/// Connections that close keep their last counts (a host's total never
/// goes down), so a flow that ends between two snapshots loses at most
/// one interval's bytes, not its whole history.
pub struct HostMeter {
    ips: Vec<String>,
    /// Every connection seen, by its two ends: its host and last counts.
    conns: BTreeMap<(String, String), (usize, u64, u64)>,
    /// The previous snapshot's time and per-host totals (down, up).
    last: Option<(f64, Vec<(u64, u64)>)>,
}

impl HostMeter {
    /// `ips[i]` is host `i`'s address.
    pub fn new(ips: Vec<String>) -> HostMeter {
        HostMeter {
            ips,
            conns: BTreeMap::new(),
            last: None,
        }
    }

    /// Takes the snapshot `ss_text` taken at run time `t_s`; one sample per
    /// host for the interval since the previous snapshot (none for the
    /// first, or when time did not advance).
    pub fn sample(&mut self, t_s: f64, ss_text: &str) -> Vec<HostRateSample> {
        for c in parse_ss(ss_text) {
            let Some(h) = self.ips.iter().position(|ip| *ip == c.peer_ip) else {
                continue;
            };
            let e = self.conns.entry((c.local, c.peer)).or_insert((h, 0, 0));
            e.1 = e.1.max(c.acked);
            e.2 = e.2.max(c.received);
        }
        let mut totals = vec![(0u64, 0u64); self.ips.len()];
        for &(h, acked, received) in self.conns.values() {
            totals[h].0 += acked;
            totals[h].1 += received;
        }
        let out = match &self.last {
            Some((t_prev, prev)) if t_s > *t_prev => {
                let dt = t_s - t_prev;
                let bps = |now: u64, before: u64| now.saturating_sub(before) as f64 * 8.0 / dt;
                totals
                    .iter()
                    .zip(prev)
                    .enumerate()
                    .map(|(host, (now, before))| HostRateSample {
                        t_s,
                        host,
                        down_bps: bps(now.0, before.0),
                        up_bps: bps(now.1, before.1),
                    })
                    .collect()
            }
            Some(_) => return Vec::new(),
            None => Vec::new(),
        };
        self.last = Some((t_s, totals));
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const PING: &str = "PING 10.77.0.2 (10.77.0.2) 56(84) bytes of data.
[1000.100000] 64 bytes from 10.77.0.2: icmp_seq=1 ttl=64 time=100 ms
[1000.900000] 64 bytes from 10.77.0.2: icmp_seq=3 ttl=64 time=700 ms
[1000.901000] 64 bytes from 10.77.0.2: icmp_seq=3 ttl=64 time=701 ms (DUP!)
garbage [ line ] icmp_seq=x
[1001.500000] 64 bytes from 10.77.0.2: icmp_seq=2 ttl=64 time=1400 ms

--- 10.77.0.2 ping statistics ---
5 packets transmitted, 3 received, 40% packet loss, time 400ms
";

    #[test]
    fn ping_late_replies_are_not_losses_and_lost_ones_get_their_slot() {
        let s = parse_ping(PING, 0.1, 999.0, 1000.0);
        assert_eq!(s.len(), 5, "one sample per transmitted probe");
        // seq 1 sent at 1000.0 = t 0.
        assert!((s[0].t_s - 0.0).abs() < 1e-9);
        assert_eq!(s[0].rtt_ms, Some(100.0));
        // seq 2 answered after seq 3: late, not lost; sent at 1000.1.
        assert_eq!(s[1].rtt_ms, Some(1400.0));
        assert!((s[1].t_s - 0.1).abs() < 1e-9);
        // The duplicate did not replace the first reply.
        assert_eq!(s[2].rtt_ms, Some(700.0));
        // seq 4 and 5 never answered: sent on the schedule of seq 1.
        assert_eq!(s[3].rtt_ms, None);
        assert!((s[3].t_s - 0.3).abs() < 1e-9);
        assert!((s[4].t_s - 0.4).abs() < 1e-9);
        assert_eq!(ping_worst_ms(PING), 1400.0);
    }

    #[test]
    fn ping_without_replies_uses_the_start_time() {
        let s = parse_ping("5 packets transmitted, 0 received", 0.2, 1000.0, 1000.0);
        assert_eq!(s.len(), 5);
        assert!(s.iter().all(|p| p.rtt_ms.is_none()));
        assert!((s[4].t_s - 0.8).abs() < 1e-9);
        assert!(parse_ping("", 0.1, 0.0, 0.0).is_empty());
        assert!(parse_ping("[x] 64 bytes from : icmp_seq= time=", 0.1, 0.0, 0.0).is_empty());
    }

    #[test]
    fn ping_sequence_wraps() {
        let text = "[10.0] 64 bytes from a: icmp_seq=65535 ttl=1 time=1 ms\n\
                    [10.1] 64 bytes from a: icmp_seq=0 ttl=1 time=1 ms\n";
        let s = parse_ping(text, 0.1, 0.0, 0.0);
        assert_eq!(s.len(), 65536);
        assert_eq!(s[65534].rtt_ms, Some(1.0));
        assert_eq!(s[65535].rtt_ms, Some(1.0));
    }

    #[test]
    fn irtt_round_trips_map_to_samples() {
        let j = r#"{"round_trips":[
          {"seqno":0,"lost":"false","timestamps":{"client":{"send":{"wall":1000000000000}}},
           "delay":{"rtt":30000000,"send":10000000,"receive":20000000}},
          {"seqno":1,"lost":"true_down","timestamps":{"client":{"send":{"wall":1000020000000}}},
           "delay":{"send":12000000}},
          {"seqno":2,"lost":"true","timestamps":{}}
        ]}"#;
        let s = parse_irtt(j, 0.02, 1000.0).unwrap();
        assert_eq!(s.len(), 3);
        assert_eq!(
            (s[0].rtt_ms, s[0].up_owd_ms, s[0].down_owd_ms),
            (Some(30.0), Some(10.0), Some(20.0))
        );
        assert!(s[0].t_s.abs() < 1e-9);
        assert_eq!((s[1].rtt_ms, s[1].up_owd_ms), (None, Some(12.0)));
        // No send time: placed on the schedule of the first probe.
        assert!((s[2].t_s - 0.04).abs() < 1e-9);
        assert_eq!(s[2].rtt_ms, None);
        assert!(parse_irtt("{}", 0.02, 0.0).is_err());
        assert!(parse_irtt("nope", 0.02, 0.0).is_err());
    }

    #[test]
    fn net_dev_rx_bytes() {
        let t =
            "Inter-|   Receive\n face |bytes    packets\n    lo: 10 1 0 0\n    c0: 123456 99 0 0\n";
        assert_eq!(rx_bytes(t, "c0"), Some(123456));
        assert_eq!(rx_bytes(t, "lo"), Some(10));
        assert_eq!(rx_bytes(t, "v0"), None);
        assert_eq!(rx_bytes("c0:", "c0"), None);
    }

    #[test]
    fn ss_connections_and_their_byte_counts() {
        let text = "0 0 10.77.1.2:5201 10.77.0.1:40000 \n\t cubic wscale:7,7 bytes_sent:9 bytes_acked:1000 bytes_received:20 segs_out:3\n\
                    851385 0 [::ffff:10.77.1.2]:5203 [::ffff:10.77.0.2]:40002\n\t cubic bytes_received:5000 segs_in:9\n\
                    garbage\n";
        let c = parse_ss(text);
        assert_eq!(c.len(), 2, "a line of one field is no connection");
        assert_eq!(
            (c[0].peer_ip.as_str(), c[0].acked, c[0].received),
            ("10.77.0.1", 1000, 20)
        );
        assert_eq!(
            (c[1].peer_ip.as_str(), c[1].acked, c[1].received),
            ("10.77.0.2", 0, 5000)
        );
        assert_eq!(c[1].local, "[::ffff:10.77.1.2]:5203");
    }

    #[test]
    fn host_goodput_is_per_peer_and_survives_closed_connections() {
        let mut m = HostMeter::new(vec!["10.77.0.1".into(), "10.77.0.2".into()]);
        let conn = |peer: &str, port: u16, acked: u64, rcvd: u64| {
            format!("0 0 10.77.1.2:{port} {peer}:4{port}\n\t bytes_acked:{acked} bytes_received:{rcvd}\n")
        };
        assert!(
            m.sample(1.0, &conn("10.77.0.1", 1, 0, 0)).is_empty(),
            "first snapshot"
        );
        // Host A: 125 000 bytes down in 1 s; host B: two connections of
        // 62 500 bytes up each; a stranger is not counted.
        let t = conn("10.77.0.1", 1, 125_000, 0)
            + &conn("10.77.0.2", 2, 0, 62_500)
            + &conn("10.77.0.2", 3, 0, 62_500)
            + &conn("10.9.9.9", 4, 9_999_999, 9_999_999);
        let s = m.sample(2.0, &t);
        assert_eq!(s.len(), 2);
        assert_eq!((s[0].host, s[0].down_bps, s[0].up_bps), (0, 1e6, 0.0));
        assert_eq!((s[1].host, s[1].down_bps, s[1].up_bps), (1, 0.0, 1e6));
        // One of B's connections closed: B's rate is the other's increase,
        // not minus what the closed one had carried.
        let t = conn("10.77.0.1", 1, 125_000, 0) + &conn("10.77.0.2", 2, 0, 125_000);
        let s = m.sample(2.5, &t);
        assert_eq!((s[0].down_bps, s[1].up_bps), (0.0, 1e6));
        assert!(m.sample(2.5, &t).is_empty(), "no time, no sample");
    }

    #[test]
    fn autorate_log_gives_each_directions_rate_in_run_time() {
        let csv = "time_unix_s,iface,delay_ms,flows,newest_age_ms,achieved_bps,old_bps,new_bps,reason,dry_run\n\
                   1000.500,lan0,23.5,4,12,19000000,20000000,15000000,delay,0\n\
                   1001.000,wan0,,0,,0,5000000,5000000,unsure,0\n\
                   1001.250,lan0,30,4,10,14000000,15000000,9000000,delay,1\n\
                   1002.000,lan0,2,4,10,14000000,15000000,15300000,load,0\n";
        let v = parse_autorate(csv, 1000.0, "lan0", "wan0").unwrap();
        let got: Vec<(f64, Dir, f64)> = v.iter().map(|r| (r.t_s, r.dir, r.bps)).collect();
        assert_eq!(
            got,
            [
                (0.0, Dir::Down, 20e6),
                (0.5, Dir::Down, 15e6),
                (0.0, Dir::Up, 5e6),
                (1.0, Dir::Up, 5e6),
                (2.0, Dir::Down, 15.3e6),
            ],
            "the start rate, each decision; dry-run lines skipped"
        );
        let e = parse_autorate("h\n1,lan0,x\n", 0.0, "lan0", "wan0").unwrap_err();
        assert!(e.contains("line 2: 3 fields"), "{e}");
    }
}
