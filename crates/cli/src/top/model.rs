//! The model of `sluice top`: two snapshots of the daemon's replies in, the
//! rows of each view out. Pure: no terminal, no socket, no clock (a
//! snapshot carries the time it was taken), so every number on the screen
//! is unit-tested here.
//!
//! Principles
//! - A rate is a counter's delta between two polls over the polls' own
//!   interval ([`per_sec`], the one place of that arithmetic, shared with
//!   `show queues -v`); a counter that went backwards (a reload re-created
//!   the queue) gives no rate, never a negative one.
//! - Counts on screen are the reply's own fields, so they agree with
//!   `sluice show … --json` taken at the same instant.
//! - A state that was not in the previous snapshot was created since:
//!   all its bytes fall within the interval. A poll without states (the
//!   queues and autorate views do not ask) is no base for states' rates.

pub(crate) use crate::show::per_sec;
use sluice_control::proto::*;
use std::collections::HashMap;
use std::time::Duration;

/// The daemon's replies to one poll.
#[derive(Clone, Debug, PartialEq)]
pub struct Snapshot {
    /// When the poll was answered, on the poller's monotonic clock.
    pub at: Duration,
    pub queues: QueuesReply,
    /// Asked for only by the views that show states (`show states` copies
    /// the table under the engine's lock).
    pub states: Option<StatesReply>,
    pub health: HealthReply,
}

/// Seconds between two snapshots (0 when `prev` is not earlier).
pub fn interval(prev: &Snapshot, now: &Snapshot) -> f64 {
    now.at.saturating_sub(prev.at).as_secs_f64()
}

/// The sojourn column: the last interval's p50/p99 (10–20 s, as `show
/// queues -v`), not since the queue was created, so it moves with the load.
pub fn sojourn(q: &QueueJson) -> (Option<u64>, Option<u64>) {
    (q.sojourn_last_p50_ns, q.sojourn_last_p99_ns)
}

/// A value to sort on: numbers sort largest first, text A to Z.
#[derive(Clone, Debug, PartialEq, PartialOrd)]
pub enum Key {
    Num(f64),
    Text(String),
}

/// A row of one of the tables: its cells as shown, and its sort keys.
pub trait Row {
    /// Column titles.
    const HEADERS: &'static [&'static str];
    /// Widths the cells are laid out in (the last may take the rest).
    const WIDTHS: &'static [u16];
    /// Columns aligned right (numbers).
    const RIGHT: &'static [bool];
    /// The column sorted on until the user picks another.
    const DEFAULT_SORT: usize;
    fn cells(&self) -> Vec<String>;
    fn key(&self, col: usize) -> Key;
}

/// Sorts `rows` on column `col` (numbers descending, text ascending;
/// `reverse` flips it), ties in their previous order.
pub fn sort<R: Row>(rows: &mut [R], col: usize, reverse: bool) {
    rows.sort_by(|a, b| {
        let o = match (a.key(col), b.key(col)) {
            (Key::Num(x), Key::Num(y)) => y.total_cmp(&x),
            (Key::Text(x), Key::Text(y)) => x.cmp(&y),
            (Key::Num(_), Key::Text(_)) => std::cmp::Ordering::Less,
            (Key::Text(_), Key::Num(_)) => std::cmp::Ordering::Greater,
        };
        if reverse {
            o.reverse()
        } else {
            o
        }
    });
}

/// The rows any of whose cells contains `filter` (case-insensitive); an
/// empty filter keeps all.
pub fn filter<R: Row>(rows: Vec<R>, filter: &str) -> Vec<R> {
    if filter.is_empty() {
        return rows;
    }
    let f = filter.to_lowercase();
    rows.into_iter()
        .filter(|r| r.cells().iter().any(|c| c.to_lowercase().contains(&f)))
        .collect()
}

/// A rate cell in three significant digits (`9.87Mb/s`, `123Kb/s`: 8
/// columns at most below 1 Tb/s), `-` when unknown.
pub fn rate_cell(bits_per_sec: Option<f64>) -> String {
    let Some(bps) = bits_per_sec else {
        return "-".into();
    };
    let (div, prefix) = [(1e9, "G"), (1e6, "M"), (1e3, "K")]
        .into_iter()
        // 999.96K is written 1.00M, not 1000K.
        .find(|(div, _)| bps >= *div * 0.9995)
        .unwrap_or((1.0, ""));
    let v = bps / div;
    let decimals = match v {
        v if v >= 99.95 => 0,
        v if v >= 9.995 => 1,
        _ => 2,
    };
    format!("{v:.decimals$}{prefix}b/s")
}

/// A count cell in five columns below 10^14: from five digits on, in
/// thousands, millions or billions (`12K`, `9999M`), rounded down as top does.
pub fn count_cell(n: u64) -> String {
    match [(1_000_000_000, "G"), (1_000_000, "M"), (1_000, "K")]
        .into_iter()
        .find(|(d, _)| n >= d * 10)
    {
        Some((d, s)) => format!("{}{s}", n / d),
        None => n.to_string(),
    }
}

/// Milliseconds, one decimal; `-` for none.
pub fn ms_cell(ns: Option<u64>) -> String {
    match ns.map(|n| n as f64 / 1e6) {
        None => "-".into(),
        Some(ms) if ms >= 99.95 => format!("{ms:.0}ms"),
        Some(ms) => format!("{ms:.1}ms"),
    }
}

fn num(x: Option<f64>) -> Key {
    Key::Num(x.unwrap_or(-1.0))
}

/// One queue of the queues view.
#[derive(Clone, Debug, PartialEq)]
pub struct QueueRow {
    pub name: String,
    pub iface: String,
    /// Bits and packets a second over the last interval.
    pub bps: Option<f64>,
    pub pps: Option<f64>,
    pub qlength: u64,
    pub backlog_bytes: u64,
    /// Cumulative, as `show queues` counts them.
    pub bytes: u64,
    pub drops: u64,
    pub marks: u64,
    pub p50_ns: Option<u64>,
    pub p99_ns: Option<u64>,
}

impl Row for QueueRow {
    const HEADERS: &'static [&'static str] = &[
        "QUEUE", "IF", "RATE", "PPS", "BACKLOG", "DROPS", "MARKS", "P50", "P99",
    ];
    const WIDTHS: &'static [u16] = &[14, 6, 8, 6, 10, 6, 6, 7, 7];
    const RIGHT: &'static [bool] = &[false, false, true, true, true, true, true, true, true];
    const DEFAULT_SORT: usize = usize::MAX;

    fn cells(&self) -> Vec<String> {
        vec![
            self.name.clone(),
            self.iface.clone(),
            rate_cell(self.bps),
            self.pps.map_or("-".into(), |p| format!("{p:.0}")),
            format!(
                "{}/{}",
                count_cell(self.qlength),
                count_cell(self.backlog_bytes)
            ),
            count_cell(self.drops),
            count_cell(self.marks),
            ms_cell(self.p50_ns),
            ms_cell(self.p99_ns),
        ]
    }

    fn key(&self, col: usize) -> Key {
        match col {
            0 => Key::Text(self.name.clone()),
            1 => Key::Text(self.iface.clone()),
            2 => num(self.bps),
            3 => num(self.pps),
            4 => Key::Num(self.backlog_bytes as f64),
            5 => Key::Num(self.drops as f64),
            6 => Key::Num(self.marks as f64),
            7 => num(self.p50_ns.map(|n| n as f64)),
            8 => num(self.p99_ns.map(|n| n as f64)),
            // Unsorted: the tree's own order, parents first.
            _ => Key::Num(0.0),
        }
    }
}

/// The queues of every shaped interface, in the tree's order.
pub fn queue_rows(prev: Option<&Snapshot>, now: &Snapshot) -> Vec<QueueRow> {
    let secs = prev.map_or(0.0, |p| interval(p, now));
    let mut rows = Vec::new();
    for iface in now.queues.ifaces.iter().filter(|i| i.sched.is_some()) {
        for q in &iface.queues {
            let before = prev.and_then(|p| find_queue(&p.queues, &iface.name, &q.name));
            let (p50_ns, p99_ns) = sojourn(q);
            rows.push(QueueRow {
                name: q.name.clone(),
                iface: iface.name.clone(),
                bps: before
                    .and_then(|b| per_sec(q.bytes, b.bytes, secs))
                    .map(|r| r * 8.0),
                pps: before.and_then(|b| per_sec(q.packets, b.packets, secs)),
                qlength: q.qlength,
                backlog_bytes: q.backlog_bytes,
                bytes: q.bytes,
                drops: q.dropped_packets,
                marks: q.ecn_marks,
                p50_ns,
                p99_ns,
            });
        }
    }
    rows
}

fn find_queue<'a>(r: &'a QueuesReply, iface: &str, name: &str) -> Option<&'a QueueJson> {
    r.ifaces
        .iter()
        .find(|i| i.name == iface)?
        .queues
        .iter()
        .find(|q| q.name == name)
}

/// A state's identity across snapshots.
type StateKey<'a> = (&'a str, &'a str, u16, &'a str, u16);

fn state_key(s: &StateJson) -> StateKey<'_> {
    (&s.proto, &s.src, s.src_port, &s.dst, s.dst_port)
}

/// Bytes of `s` in each direction since `prev` (its whole count when it is
/// new; none when a counter went backwards: the same tuple, a new state).
fn state_delta(s: &StateJson, prev: &HashMap<StateKey<'_>, &StateJson>) -> Option<[u64; 2]> {
    let before = prev.get(&state_key(s)).map_or([0, 0], |p| p.bytes);
    Some([
        s.bytes[0].checked_sub(before[0])?,
        s.bytes[1].checked_sub(before[1])?,
    ])
}

/// The states of `now`, and the rates' base: the previous poll's states
/// by tuple and the seconds since, when both polls asked for states.
type Base<'a> = Option<(HashMap<StateKey<'a>, &'a StateJson>, f64)>;

fn state_polls<'a>(prev: Option<&'a Snapshot>, now: &'a Snapshot) -> (&'a [StateJson], Base<'a>) {
    let states = now.states.as_ref().map_or(&[][..], |s| &s.states[..]);
    let base = prev
        .and_then(|p| Some((p.states.as_ref()?, interval(p, now))))
        .filter(|(_, secs)| *secs > 0.0)
        .map(|(p, secs)| (p.states.iter().map(|s| (state_key(s), s)).collect(), secs));
    (states, base)
}

/// One state of the states view.
#[derive(Clone, Debug, PartialEq)]
pub struct StateRow {
    pub proto: String,
    pub src: String,
    pub dst: String,
    pub state: String,
    pub queue: String,
    /// Both directions, cumulative and over the last interval.
    pub bytes: u64,
    pub bps: Option<f64>,
    pub age_ns: u64,
    /// Smoothed passive RTT to the responder.
    pub rtt_ns: Option<u64>,
}

impl Row for StateRow {
    const HEADERS: &'static [&'static str] = &[
        "PR", "SOURCE", "DEST", "STATE", "QUEUE", "BYTES", "RATE", "AGE", "RTT",
    ];
    const WIDTHS: &'static [u16] = &[4, 15, 15, 9, 6, 5, 8, 4, 6];
    const RIGHT: &'static [bool] = &[false, false, false, false, false, true, true, true, true];
    const DEFAULT_SORT: usize = 6;

    fn cells(&self) -> Vec<String> {
        vec![
            self.proto.clone(),
            self.src.clone(),
            self.dst.clone(),
            self.state.clone(),
            self.queue.clone(),
            count_cell(self.bytes),
            rate_cell(self.bps),
            age_cell(self.age_ns),
            ms_cell(self.rtt_ns),
        ]
    }

    fn key(&self, col: usize) -> Key {
        match col {
            0 => Key::Text(self.proto.clone()),
            1 => Key::Text(self.src.clone()),
            2 => Key::Text(self.dst.clone()),
            3 => Key::Text(self.state.clone()),
            4 => Key::Text(self.queue.clone()),
            5 => Key::Num(self.bytes as f64),
            6 => num(self.bps),
            7 => Key::Num(self.age_ns as f64),
            _ => num(self.rtt_ns.map(|n| n as f64)),
        }
    }
}

/// An age as top writes one: `59s`, `12m`, `5h`, `3d`.
pub fn age_cell(ns: u64) -> String {
    let s = ns / 1_000_000_000;
    match s {
        0..60 => format!("{s}s"),
        60..3600 => format!("{}m", s / 60),
        3600..86_400 => format!("{}h", s / 3600),
        _ => format!("{}d", s / 86_400),
    }
}

/// pfctl's `ESTABLISHED:ESTABLISHED` in a column of 9: `EST:EST` (the
/// peers' names of sluice_classify's `ProtoState`).
pub fn short_state(s: &str) -> String {
    let short = |side: &str| {
        match side {
            "CLOSED" => "CLO",
            "SYN_SENT" => "SYNS",
            "ESTABLISHED" => "EST",
            "CLOSING" => "CLSG",
            "FIN_WAIT_2" => "FW2",
            "TIME_WAIT" => "TW",
            "NO_TRAFFIC" => "NOTR",
            "SINGLE" => "SING",
            "MULTIPLE" => "MULT",
            other => other,
        }
        .to_string()
    };
    match s.split_once(':') {
        Some((a, b)) => format!("{}:{}", short(a), short(b)),
        None => short(s),
    }
}

/// `addr:port` (`[addr]:port` for IPv6); the address alone for port 0.
pub fn endpoint(addr: &str, port: u16) -> String {
    match (port, addr.contains(':')) {
        (0, _) => addr.to_string(),
        (_, true) => format!("[{addr}]:{port}"),
        (_, false) => format!("{addr}:{port}"),
    }
}

pub fn state_rows(prev: Option<&Snapshot>, now: &Snapshot) -> Vec<StateRow> {
    let (states, base) = state_polls(prev, now);
    states
        .iter()
        .map(|s| StateRow {
            proto: s.proto.clone(),
            src: endpoint(&s.src, s.src_port),
            dst: endpoint(&s.dst, s.dst_port),
            state: short_state(&s.state),
            queue: s.queue.clone().unwrap_or_else(|| "-".into()),
            bytes: s.bytes[0] + s.bytes[1],
            bps: base.as_ref().and_then(|(index, secs)| {
                state_delta(s, index).map(|d| (d[0] + d[1]) as f64 * 8.0 / secs)
            }),
            age_ns: s.age_ns,
            rtt_ns: s.rtt_to_dst.as_ref().map(|r| r.smoothed_ns),
        })
        .collect()
}

/// One host of the hosts view: what it sent and received through sluice
/// (the sum over its states), its share of each direction, its RTT.
#[derive(Clone, Debug, PartialEq)]
pub struct HostRow {
    pub host: String,
    pub sent_bps: Option<f64>,
    pub sent_share: Option<f64>,
    pub recv_bps: Option<f64>,
    pub recv_share: Option<f64>,
    pub states: u64,
    /// The smallest smoothed RTT from sluice to it among its states.
    pub rtt_ns: Option<u64>,
}

impl Row for HostRow {
    const HEADERS: &'static [&'static str] = &[
        "HOST", "SENT", "SHARE", "RECEIVED", "SHARE", "STATES", "RTT",
    ];
    const WIDTHS: &'static [u16] = &[30, 8, 5, 8, 5, 6, 7];
    const RIGHT: &'static [bool] = &[false, true, true, true, true, true, true];
    const DEFAULT_SORT: usize = 3;

    fn cells(&self) -> Vec<String> {
        let share = |s: Option<f64>| s.map_or("-".into(), |s| format!("{:.0}%", s * 100.0));
        vec![
            self.host.clone(),
            rate_cell(self.sent_bps),
            share(self.sent_share),
            rate_cell(self.recv_bps),
            share(self.recv_share),
            self.states.to_string(),
            ms_cell(self.rtt_ns),
        ]
    }

    fn key(&self, col: usize) -> Key {
        match col {
            0 => Key::Text(self.host.clone()),
            1 | 2 => num(self.sent_bps),
            3 | 4 => num(self.recv_bps),
            5 => Key::Num(self.states as f64),
            _ => num(self.rtt_ns.map(|n| n as f64)),
        }
    }
}

#[derive(Default)]
struct HostSum {
    sent: u64,
    recv: u64,
    states: u64,
    rtt: Option<u64>,
}

pub fn host_rows(prev: Option<&Snapshot>, now: &Snapshot) -> Vec<HostRow> {
    let (states, base) = state_polls(prev, now);
    let mut hosts: HashMap<&str, HostSum> = HashMap::new();
    for s in states {
        let d = base
            .as_ref()
            .and_then(|(index, _)| state_delta(s, index))
            .unwrap_or([0, 0]);
        // The initiator sends direction 0 and receives direction 1.
        for (addr, sent, recv, rtt) in [
            (&s.src, d[0], d[1], &s.rtt_to_src),
            (&s.dst, d[1], d[0], &s.rtt_to_dst),
        ] {
            let h = hosts.entry(addr).or_default();
            h.sent += sent;
            h.recv += recv;
            h.states += 1;
            if let Some(r) = rtt {
                h.rtt = Some(h.rtt.map_or(r.smoothed_ns, |x| x.min(r.smoothed_ns)));
            }
        }
    }
    let total_sent: u64 = hosts.values().map(|h| h.sent).sum();
    let total_recv: u64 = hosts.values().map(|h| h.recv).sum();
    let secs = base.as_ref().map(|b| b.1);
    let rate = |n: u64| secs.map(|secs| n as f64 * 8.0 / secs);
    let share = |n: u64, of: u64| (secs.is_some() && of > 0).then(|| n as f64 / of as f64);
    let mut rows: Vec<HostRow> = hosts
        .into_iter()
        .map(|(host, h)| HostRow {
            host: host.to_string(),
            sent_bps: rate(h.sent),
            sent_share: share(h.sent, total_sent),
            recv_bps: rate(h.recv),
            recv_share: share(h.recv, total_recv),
            states: h.states,
            rtt_ns: h.rtt,
        })
        .collect();
    // A stable order under equal keys: by address.
    rows.sort_by(|a, b| a.host.cmp(&b.host));
    rows
}

/// The health header: one short line per shaped direction.
pub fn verdict_lines(h: &HealthReply) -> Vec<String> {
    if h.directions.is_empty() {
        return vec!["no shaped interface: no verdict".into()];
    }
    h.directions.iter().map(verdict_line).collect()
}

fn verdict_line(d: &HealthJson) -> String {
    let grade = match (&d.grade, d.added_ns) {
        (Some(g), Some(ns)) => format!(", grade {g} (+{:.1}ms)", ns as f64 / 1e6),
        _ => String::new(),
    };
    let what = match d.verdict.as_str() {
        "in-control" => format!("in control{grade}"),
        "not-in-control" => {
            let fix = d.suggested_bps.map_or("enable autorate".into(), |s| {
                format!("try {}", rate_cell(Some(s as f64)))
            });
            format!("NOT in control{grade}: {fix}")
        }
        _ => match &d.held_back_by {
            Some(by) => format!("held back by {by} (not in control): fix it first"),
            None => "not enough traffic to say".into(),
        },
    };
    format!(
        "{} {}: {what}; sending {} of {}",
        d.direction,
        d.iface,
        rate_cell(Some(d.output_bps as f64)),
        rate_cell(Some(d.rate_bps as f64)),
    )
}

/// One poll of a shaped interface, for the autorate view: the rate it is
/// shaped at, what left by it, and what autorate decided meanwhile.
#[derive(Clone, Debug, PartialEq)]
pub struct RatePoint {
    /// Seconds since the first poll.
    pub at: f64,
    /// Whether autorate runs on the interface.
    pub autorate: bool,
    /// autorate's rate (or the configured one, without autorate).
    pub rate_bps: u64,
    /// The root queue's output over the interval.
    pub output_bps: Option<f64>,
    /// The delay signal autorate last acted on.
    pub delay_ns: Option<u64>,
    /// Decisions taken in the interval, by reason (those with any).
    pub decisions: Vec<(String, u64)>,
}

/// The interfaces' points of the interval ending at `now`.
pub fn rate_points(
    prev: Option<&Snapshot>,
    now: &Snapshot,
    t0: Duration,
) -> Vec<(String, RatePoint)> {
    let secs = prev.map_or(0.0, |p| interval(p, now));
    let mut out = Vec::new();
    for iface in now.queues.ifaces.iter().filter(|i| i.sched.is_some()) {
        let before = prev.and_then(|p| p.queues.ifaces.iter().find(|i| i.name == iface.name));
        let root = |i: &IfaceQueues| {
            i.queues
                .iter()
                .find(|q| q.parent.is_none())
                .map(|q| q.bytes)
        };
        let output_bps = match (root(iface), before.and_then(root)) {
            (Some(n), Some(b)) => per_sec(n, b, secs).map(|r| r * 8.0),
            _ => None,
        };
        let a = iface.autorate.as_ref();
        let decisions = match (a, before.and_then(|b| b.autorate.as_ref())) {
            (Some(a), Some(b)) => a
                .decisions
                .iter()
                .filter_map(|(reason, n)| {
                    let was = b
                        .decisions
                        .iter()
                        .find(|(r, _)| r == reason)
                        .map_or(0, |d| d.1);
                    n.checked_sub(was)
                        .filter(|d| *d > 0)
                        .map(|d| (reason.clone(), d))
                })
                .collect(),
            _ => Vec::new(),
        };
        out.push((
            iface.name.clone(),
            RatePoint {
                at: now.at.saturating_sub(t0).as_secs_f64(),
                autorate: a.is_some(),
                rate_bps: a.map_or(iface.bandwidth_bps.unwrap_or(0), |a| a.rate_bps),
                output_bps,
                delay_ns: a.and_then(|a| a.delay_ns),
                decisions,
            },
        ));
    }
    out
}

/// The recent points of each interface, oldest first, at most `cap` each.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct History {
    pub cap: usize,
    pub ifaces: Vec<(String, std::collections::VecDeque<RatePoint>)>,
}

impl History {
    pub fn new(cap: usize) -> History {
        History {
            cap,
            ifaces: Vec::new(),
        }
    }

    pub fn push(&mut self, points: Vec<(String, RatePoint)>) {
        for (iface, p) in points {
            let i = match self.ifaces.iter().position(|(n, _)| *n == iface) {
                Some(i) => i,
                None => {
                    self.ifaces.push((iface, Default::default()));
                    self.ifaces.len() - 1
                }
            };
            let q = &mut self.ifaces[i].1;
            if q.len() >= self.cap.max(1) {
                q.pop_front();
            }
            q.push_back(p);
        }
    }
}
