//! `--metrics ADDR:PORT`: the Prometheus text exposition (format 0.0.4) of a
//! running daemon over a minimal HTTP/1.0 server (`GET /metrics`).
//!
//! # Principles
//!
//! - **Loopback unless told otherwise**: the counters tell who talks to whom
//!   how much; `sluice run` refuses a non-loopback address without
//!   `--metrics-public`.
//! - **Cheap for the data plane**: a scrape copies the same snapshots as
//!   `sluice show`, all under one engine lock (held only to copy), and
//!   formats outside.
//! - **Bounded**: each scrape is served on its own thread, at most
//!   [`MAX_CLIENTS`] at once (more are answered 503 and counted); a request
//!   head is read up to [`MAX_HEAD_BYTES`] within [`CLIENT_TIMEOUT`] of the
//!   accept, in total, and the answer written within as long again, so a
//!   slow client holds one thread for seconds, never the endpoint. A refused
//!   client is answered without waiting for it: the accept thread never
//!   blocks on one. Slots are not counted per client: on loopback every
//!   local user is 127.0.0.1, and a TCP peer's uid is not known, so any
//!   local user can keep the 8 busy (scrapes fail, counted as refused;
//!   the data plane only sees the bounded lock takers).
//! - **Names people can graph** (Prometheus's naming guide): base units
//!   (`_seconds`, `_bytes`, `_packets`; a rate is `_bytes_per_second`,
//!   the unit its `_bytes_total` counters give under `rate()`, never
//!   bits), `_total` on every counter and only there, every family with
//!   `# HELP` and `# TYPE`, the interface as the label `iface`, never
//!   inside a name or a value. Durations whose quantiles matter (sojourn,
//!   latency added under load, RTT) are histograms of cumulative
//!   buckets, so `histogram_quantile(q, rate(…_bucket[w]))` gives any
//!   quantile over any recent window `w`.
//! - **One bucket layout** ([`LE_US`]): edges of sluice_time's
//!   histogram, so each `le` count is exact.

use crate::proto::InfoReply;
use crate::snapshot::Scrape;
use crate::DaemonState;
use sluice_time::{Duration, Histogram};
use std::fmt::Write as _;

mod autorate;
pub mod dashboard;
mod health;
mod queues;
mod serve;
mod system;
use autorate::autorate_families;
use health::health_families;
use queues::queue_families;
pub use serve::{spawn_metrics, CLIENT_TIMEOUT, MAX_CLIENTS, MAX_HEAD_BYTES};
use system::{iface_families, io_families, memory_families, state_families};

/// The exposition of a running daemon, from one copy of the engine taken
/// under one lock ([`crate::snapshot::scrape`]).
pub fn render(state: &DaemonState) -> String {
    render_scrape(&crate::snapshot::scrape(state))
}

/// Pure formatter over one scrape: the golden tests pin it.
pub fn render_scrape(s: &Scrape) -> String {
    let mut o = Out::default();
    info_families(&mut o, &s.info);
    queue_families(&mut o, &s.queues, &s.sojourn);
    iface_families(&mut o, &s.info);
    autorate_families(&mut o, &s.queues);
    health_families(&mut o, &s.health, &s.added);
    state_families(&mut o, &s.info);
    io_families(&mut o, &s.info);
    memory_families(&mut o, &s.info);
    clients_families(&mut o, &s.info);
    rtt_histograms(&mut o, &s.rtt);
    o.text
}

fn info_families(o: &mut Out, info: &InfoReply) {
    o.family(
        "sluice_info",
        "gauge",
        "Constant 1, labelled with the version and I/O method.",
    );
    o.sample(
        "sluice_info",
        &[("version", &info.version), ("io_method", &info.io_method)],
        1,
    );
    o.family(
        "sluice_uptime_seconds",
        "gauge",
        "Seconds since the daemon started.",
    );
    o.sample("sluice_uptime_seconds", &[], secs(info.uptime_ns));
}

/// The control socket's and the metrics endpoint's clients.
fn clients_families(o: &mut Out, info: &InfoReply) {
    let name = "sluice_clients_refused_total";
    o.family(
        name,
        "counter",
        "Connections refused because the server was serving its maximum of clients.",
    );
    for c in &info.clients {
        o.sample(name, &[("server", &c.server)], c.refused);
    }
}

/// `le` bounds of every duration histogram, microseconds: the edges of
/// sluice_time's buckets (8 per octave) at 2^k and 1.5 x 2^k, so a count
/// is exact, not within a bucket; from 128 us (below it, a LAN's round
/// trip and an idle queue's wait) to 4.2 s (a full queue at a slow rate).
pub const LE_US: [u64; 31] = {
    let mut v = [0u64; 31];
    let mut i = 0;
    while i < 31 {
        let p = 1u64 << (7 + i / 2);
        v[i] = if i % 2 == 0 { p } else { p + p / 2 };
        i += 1;
    }
    v
};

/// A Prometheus histogram of `h` under `labels`: cumulative `_bucket`s at
/// [`LE_US`] and `+Inf`, `_sum` in seconds, `_count`.
fn histogram(o: &mut Out, name: &str, labels: &[(&str, &str)], h: &Histogram) {
    let bucket = format!("{name}_bucket");
    let les = LE_US.map(|us| {
        (
            (us as f64 / 1e6).to_string(),
            h.count_at_most(Duration::from_micros(us)),
        )
    });
    let inf = [("+Inf".to_string(), h.count())];
    for (le, n) in les.iter().chain(&inf) {
        let mut l = labels.to_vec();
        l.push(("le", le));
        o.sample(&bucket, &l, n);
    }
    o.sample(&format!("{name}_sum"), labels, h.sum().as_secs_f64());
    o.sample(&format!("{name}_count"), labels, h.count());
}

/// Passive TCP RTT samples (sluice to an endpoint and back), by endpoint.
fn rtt_histograms(o: &mut Out, h: &[Histogram; 2]) {
    let name = "sluice_tcp_rtt_seconds";
    o.family(
        name,
        "histogram",
        "Passive TCP round-trip times from sluice to the connection's responder or initiator and back.",
    );
    for (endpoint, h) in [("responder", &h[0]), ("initiator", &h[1])] {
        histogram(o, name, &[("endpoint", endpoint)], h);
    }
}

/// Exposition text, written family by family (`# HELP`, `# TYPE`, samples).
#[derive(Default)]
struct Out {
    text: String,
}

impl Out {
    fn family(&mut self, name: &str, kind: &str, help: &str) {
        let _ = writeln!(self.text, "# HELP {name} {help}");
        let _ = writeln!(self.text, "# TYPE {name} {kind}");
    }

    fn sample(&mut self, name: &str, labels: &[(&str, &str)], value: impl std::fmt::Display) {
        self.text.push_str(name);
        if !labels.is_empty() {
            self.text.push('{');
            for (i, (k, v)) in labels.iter().enumerate() {
                if i > 0 {
                    self.text.push(',');
                }
                let _ = write!(self.text, "{k}=\"{}\"", escape(v));
            }
            self.text.push('}');
        }
        let _ = writeln!(self.text, " {value}");
    }
}

/// Label values escape backslash, double quote and newline (format 0.0.4).
fn escape(v: &str) -> String {
    v.replace('\\', r"\\")
        .replace('"', r#"\""#)
        .replace('\n', r"\n")
}

fn secs(ns: u64) -> f64 {
    ns as f64 / 1e9
}

/// A bit rate of the protocol (`*_bps`) in the metrics' unit.
fn bytes_per_second(bps: u64) -> f64 {
    bps as f64 / 8.0
}

#[cfg(test)]
mod tests;
