//! iperf3 servers and clients inside namespaces, results from `-J`.

use crate::netns::{Netns, ProcId, Topology};
use std::io;
use std::time::{Duration, Instant};

/// How long a server gets to start listening.
const SERVER_READY: Duration = Duration::from_secs(3);

/// What the test needs from an iperf3 run.
#[derive(Clone, Debug, PartialEq)]
pub struct Iperf3Result {
    /// Payload bits per second at the receiver (`end.sum_received`). For a
    /// sender-to-server test, the server stops counting only when the
    /// client's end message arrives, which travels behind the data through
    /// any queue on the path: every byte sent in the measured period is
    /// counted, over the time it took to arrive. With `-R` the client stops
    /// at its own clock and misses what a queue still holds: prefer running
    /// the server on the receiving side.
    pub goodput_bps: f64,
    /// Payload bits per second at the sender (`end.sum_sent`).
    pub sent_bps: f64,
    /// TCP retransmissions (`end.sum_sent.retransmits`; 0 for UDP).
    pub retransmits: u64,
    /// Seconds the receiver measured.
    pub seconds: f64,
    /// The receiver's non-omitted intervals as (seconds, bit/s), from the
    /// client's own intervals with `-R`, else from `--get-server-output`
    /// (diagnostics: TCP head-of-line blocking makes single intervals
    /// bursty behind a deep queue, so judge rates on `goodput_bps`).
    pub receiver_intervals: Vec<(f64, f64)>,
    /// UDP only (`end.sum`): datagrams sent and lost, and the seconds they span.
    pub udp: Option<UdpCounts>,
}

/// Datagram counts of a UDP test.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct UdpCounts {
    pub packets: u64,
    pub lost: u64,
    pub seconds: f64,
}

impl UdpCounts {
    /// Datagrams that arrived, per second.
    pub fn received_pps(&self) -> f64 {
        if self.seconds > 0.0 {
            self.packets.saturating_sub(self.lost) as f64 / self.seconds
        } else {
            0.0
        }
    }
}

pub(crate) fn intervals(v: Option<&serde_json::Value>) -> Vec<(f64, f64)> {
    let Some(list) = v.and_then(|x| x.as_array()) else {
        return Vec::new();
    };
    list.iter()
        .filter_map(|i| {
            let sum = i.get("sum")?;
            if sum.get("omitted").and_then(|o| o.as_bool()) == Some(true) {
                return None;
            }
            Some((
                sum.get("seconds")?.as_f64()?,
                sum.get("bits_per_second")?.as_f64()?,
            ))
        })
        .collect()
}

/// Parses iperf3's `-J` output.
pub fn parse_json(text: &str) -> Result<Iperf3Result, String> {
    let v: serde_json::Value =
        serde_json::from_str(text).map_err(|e| format!("iperf3 JSON: {e}"))?;
    if let Some(err) = v.get("error").and_then(|e| e.as_str()) {
        return Err(format!("iperf3: {err}"));
    }
    let end = v.get("end").ok_or("iperf3 JSON: no `end`")?;
    let recv = end
        .get("sum_received")
        .ok_or("iperf3 JSON: no `end.sum_received`")?;
    let sent = end
        .get("sum_sent")
        .ok_or("iperf3 JSON: no `end.sum_sent`")?;
    let f = |o: &serde_json::Value, k: &str| o.get(k).and_then(|x| x.as_f64());
    let reverse = v
        .pointer("/start/test_start/reverse")
        .and_then(|x| x.as_u64())
        .unwrap_or(0)
        != 0;
    let receiver_intervals = if reverse {
        intervals(v.get("intervals"))
    } else {
        intervals(v.pointer("/server_output_json/intervals"))
    };
    let udp = end.get("sum").and_then(|sum| {
        Some(UdpCounts {
            packets: sum.get("packets")?.as_u64()?,
            lost: sum.get("lost_packets")?.as_u64()?,
            seconds: sum.get("seconds")?.as_f64()?,
        })
    });
    Ok(Iperf3Result {
        receiver_intervals,
        udp,
        goodput_bps: f(recv, "bits_per_second").ok_or("iperf3 JSON: no received rate")?,
        sent_bps: f(sent, "bits_per_second").unwrap_or(0.0),
        retransmits: sent
            .get("retransmits")
            .and_then(|x| x.as_u64())
            .unwrap_or(0),
        seconds: f(recv, "seconds").unwrap_or(0.0),
    })
}

/// Client settings.
#[derive(Clone, Debug)]
pub struct ClientOptions {
    pub server: String,
    pub port: u16,
    pub seconds: u32,
    /// Leading seconds left out of the result (slow start), `-O`.
    pub omit_seconds: u32,
    /// `-R`: the server sends.
    pub reverse: bool,
    /// `-C`: congestion control (e.g. "cubic").
    pub congestion: Option<String>,
    /// UDP with this payload length (`-u -l N`), at `udp_rate` (`-b`;
    /// `None`: unlimited, `-b 0`).
    pub udp_len: Option<u32>,
    pub udp_rate: Option<String>,
    /// Socket buffer / TCP window (`-w`, e.g. "64K": a host of the ALTQ era).
    pub window: Option<String>,
    /// `-P N`: parallel streams, started together (1: the default).
    pub parallel: u32,
}

impl ClientOptions {
    pub fn new(server: &str, port: u16) -> ClientOptions {
        ClientOptions {
            server: server.to_string(),
            port,
            seconds: 5,
            omit_seconds: 0,
            reverse: false,
            congestion: Some("cubic".into()),
            udp_len: None,
            udp_rate: None,
            window: None,
            parallel: 1,
        }
    }
}

/// Starts a one-shot server (`-s -1`) on `port` and waits until it listens.
pub fn server(topo: &mut Topology, ns: &Netns, port: u16) -> io::Result<ProcId> {
    let p = port.to_string();
    // -J so that a client's --get-server-output comes back as JSON.
    let id = topo.spawn(ns, &["iperf3", "-s", "-J", "-1", "-p", &p], None)?;
    let t0 = Instant::now();
    let needle = format!(":{port} ");
    while t0.elapsed() < SERVER_READY {
        let out = topo.exec(ns, &["ss", "-Hltn"])?;
        if String::from_utf8_lossy(&out.stdout).contains(&needle) {
            return Ok(id);
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    Err(io::Error::new(
        io::ErrorKind::TimedOut,
        "iperf3 server did not start",
    ))
}

/// Runs a client to completion and parses its result.
pub fn client(topo: &Topology, ns: &Netns, o: &ClientOptions) -> io::Result<Iperf3Result> {
    let (port, t, omit) = (
        o.port.to_string(),
        o.seconds.to_string(),
        o.omit_seconds.to_string(),
    );
    let mut args = vec![
        "iperf3",
        "-J",
        "--get-server-output",
        "-c",
        &o.server,
        "-p",
        &port,
        "-t",
        &t,
        "-O",
        &omit,
    ];
    if o.reverse {
        args.push("-R");
    }
    if let Some(w) = &o.window {
        args.extend(["-w", w.as_str()]);
    }
    let parallel = o.parallel.max(1).to_string();
    if o.parallel > 1 {
        args.extend(["-P", parallel.as_str()]);
    }
    let udp_len = o.udp_len.map(|l| l.to_string());
    match &udp_len {
        Some(l) => {
            let rate = o.udp_rate.as_deref().unwrap_or("0");
            args.extend(["-u", "-b", rate, "-l", l.as_str()]);
        }
        None => {
            if let Some(cc) = &o.congestion {
                args.extend(["-C", cc.as_str()]);
            }
        }
    }
    // iperf3 exits non-zero on failure but still prints JSON with `error`.
    let out = topo.exec_unchecked(ns, &args)?;
    parse_json(&String::from_utf8_lossy(&out.stdout)).map_err(io::Error::other)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_goodput_and_retransmits() {
        let j = r#"{"start":{},"intervals":[],"end":{
            "sum_sent":{"seconds":5.0,"bytes":1,"bits_per_second":9700000.5,"retransmits":12},
            "sum_received":{"seconds":5.02,"bytes":1,"bits_per_second":9563000.25}}}"#;
        let r = parse_json(j).unwrap();
        assert_eq!(r.goodput_bps, 9563000.25);
        assert_eq!(r.sent_bps, 9700000.5);
        assert_eq!(r.retransmits, 12);
        assert_eq!(r.seconds, 5.02);
        assert!(r.receiver_intervals.is_empty(), "no server output here");
        assert_eq!(r.udp, None);
    }

    #[test]
    fn receiver_intervals_come_from_the_receiving_side() {
        let iv = |bps: f64, omitted: bool| {
            format!(r#"{{"sum":{{"seconds":1.0,"bits_per_second":{bps},"omitted":{omitted}}}}}"#)
        };
        let recv = [iv(5e6, true), iv(1e6, false), iv(3e6, false)].join(",");
        let end =
            r#""end":{"sum_sent":{"bits_per_second":1},"sum_received":{"bits_per_second":2}}"#;
        // Upload: the receiver is the server.
        let up = format!(
            r#"{{"start":{{"test_start":{{"reverse":0}}}},"intervals":[{}],{end},"server_output_json":{{"intervals":[{recv}]}}}}"#,
            iv(9e9, false)
        );
        let r = parse_json(&up).unwrap();
        assert_eq!(
            r.receiver_intervals,
            vec![(1.0, 1e6), (1.0, 3e6)],
            "omitted left out"
        );
        assert_eq!(r.goodput_bps, 2.0);
        // Download: the receiver is the client.
        let down =
            format!(r#"{{"start":{{"test_start":{{"reverse":1}}}},"intervals":[{recv}],{end}}}"#);
        assert_eq!(parse_json(&down).unwrap().receiver_intervals.len(), 2);
    }

    #[test]
    fn parses_udp_counts() {
        let j = r#"{"end":{"sum":{"seconds":2.0,"packets":1000,"lost_packets":100,"bits_per_second":1},
            "sum_sent":{"bits_per_second":1},"sum_received":{"bits_per_second":1}}}"#;
        let u = parse_json(j).unwrap().udp.unwrap();
        assert_eq!((u.packets, u.lost), (1000, 100));
        assert_eq!(u.received_pps(), 450.0);
    }

    #[test]
    fn reports_iperf_errors_and_garbage() {
        let e = parse_json(r#"{"start":{},"end":{},"error":"unable to connect to server"}"#);
        assert!(e.unwrap_err().contains("unable to connect"));
        assert!(parse_json("not json").is_err());
        assert!(parse_json(r#"{"end":{"sum_sent":{}}}"#).is_err());
    }
}
