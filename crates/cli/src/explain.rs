//! `sluice check --explain`: what a configuration does to each kind of
//! packet, in words.
//!
//! # Principles
//! - Real packets through the real rules: each kind of packet is built
//!   with `sluice_wire::build`, parsed by `sluice_wire::parse` and
//!   classified by a `sluice_classify::Classifier` made from the checked
//!   configuration, at both halves of the bridge (`in` on the interface it
//!   arrives on, `out` on the one it leaves through), as the engine does;
//!   the outbound decision wins, an unknown queue falls to the interface's
//!   default. A TCP packet follows its connection's handshake, so states
//!   and `flags S/SA` work as they do on the wire. Nothing re-reads the text.
//!   The LAN host has claimed its address, so `$ext_if` means it, as in
//!   bridge mode once a host has ARPed.
//! - Upload is what leaves the WAN interface (ext_if), download what leaves
//!   the LAN interface (int_if). Which is which: an interface with an
//!   `ingress` queue is the LAN side; else a name with `wan`, `ext`,
//!   `egress` or `ppp` is the WAN side and one with `lan` or `int` the LAN
//!   side; else the first interface with queues is the WAN side.
//! - The queue is then described from the IR: its rate (its own bandwidth,
//!   else its nearest parent's, else the interface's), its discipline and
//!   AQM, ingress mode, TCP control, ACK filter, host isolation, autorate.

use serde_json::{json, Value};
use sluice_classify::{Classifier, Decision, Verdict};
use sluice_conf::ir::{Config, Direction, IfaceQueueing, PipeSched, SchedKind};
use sluice_time::{Duration, Instant, Rate};
use sluice_wire::build;
use sluice_wire::tcp_flags::{ACK, PSH, SYN};
use std::fmt::Write as _;
use std::net::{IpAddr, Ipv4Addr};

/// A LAN host and a server beyond the WAN (documentation addresses).
const HOST: Ipv4Addr = Ipv4Addr::new(192, 168, 1, 10);
const SERVER: Ipv4Addr = Ipv4Addr::new(198, 51, 100, 7);
/// The LAN host's MAC (locally administered).
const HOST_MAC: [u8; 6] = [0x02, 0, 0, 0, 0, 0x10];

/// What happens to one kind of packet leaving one interface.
pub struct Row {
    pub kind: &'static str,
    /// Passed or blocked, by which rule line (None: pf's implicit pass).
    pub passed: bool,
    pub rule_line: Option<u32>,
    /// The queue, None when the interface is not shaped.
    pub queue: Option<String>,
    pub rate: Option<Rate>,
    pub discipline: String,
    pub tcp: Vec<&'static str>,
    pub extras: Vec<String>,
}

/// One direction: the interface its packets leave through.
pub struct Side {
    pub direction: &'static str,
    pub iface: String,
    /// The interface's shaping in one line, None when it has no queues.
    pub shaping: Option<String>,
    pub rows: Vec<Row>,
}

pub struct Explanation {
    pub sides: Vec<Side>,
}

/// The WAN and LAN interface names (see the principles).
fn sides(cfg: &Config) -> (String, String) {
    let mut names: Vec<&str> = cfg.interfaces.iter().map(|i| i.ifname.as_str()).collect();
    for r in &cfg.rules {
        if let Some((i, false)) = &r.iface {
            if !names.contains(&i.as_str()) {
                names.push(i);
            }
        }
    }
    let ingress = |n: &str| {
        cfg.interfaces.iter().any(|i| {
            i.ifname == n
                && (i.queues.iter().any(|q| q.ingress)
                    || i.pipe.as_ref().is_some_and(|p| p.ingress))
        })
    };
    let has = |n: &str, words: &[&str]| words.iter().any(|w| n.to_ascii_lowercase().contains(w));
    let wan_words = ["wan", "ext", "egress", "ppp"];
    let lan_words = ["lan", "int"];
    let lan = names.iter().find(|n| ingress(n)).or_else(|| {
        names
            .iter()
            .find(|n| has(n, &lan_words) && !has(n, &wan_words))
    });
    let wan = names
        .iter()
        .find(|n| Some(*n) != lan && has(n, &wan_words))
        .or_else(|| names.iter().find(|n| Some(*n) != lan));
    let wan = wan.map_or("(wan)".to_string(), |s| s.to_string());
    let lan = lan
        .map(|s| s.to_string())
        .or_else(|| names.iter().find(|n| **n != wan).map(|s| s.to_string()))
        .unwrap_or_else(|| "(lan)".to_string());
    (wan, lan)
}

/// One packet's way through the bridge: arriving on `from`, leaving by `to`.
struct Bridge {
    c: Classifier,
    now: Instant,
}

impl Bridge {
    /// The LAN host has ARPed through the bridge, as every host does
    /// within minutes: its address is both interfaces' (`from $ext_if`
    /// matches it), as `sluice run` learns it (docs/dataplane.md).
    fn host_claims_its_address(&mut self, lan: &str, wan: &str) {
        for name in [lan, wan] {
            let id = self.c.iface(name);
            let _ = self
                .c
                .learn_iface_addr(id, IpAddr::V4(HOST), HOST_MAC, self.now);
        }
    }

    /// The decision for `frame` and its queue's name; None for a frame
    /// that does not parse (the builders make none).
    fn pass(&mut self, from: &str, to: &str, frame: &[u8]) -> Option<(Decision, Option<String>)> {
        self.now += Duration::from_millis(1);
        let ip = sluice_wire::parse(frame).ok()?.ip?;
        let (fi, ti) = (self.c.iface(from), self.c.iface(to));
        let din = self.c.classify(self.now, fi, Direction::In, &ip);
        if !din.verdict.is_pass() {
            return Some((din, None));
        }
        let dout = self.c.classify(self.now, ti, Direction::Out, &ip);
        let q = dout
            .queue
            .or(din.queue)
            .map(|q| self.c.queue_name(q).to_string());
        Some((dout, q))
    }
}

/// A TCP segment of the connection between the LAN host's port 50000 and
/// the server's `port`: from the host when `up`, else from the server.
fn seg(up: bool, port: u16, seq: u32, ack: u32, flags: u8, len: usize) -> Vec<u8> {
    let (src, dst, sport, dport) = if up {
        (HOST, SERVER, 50000, port)
    } else {
        (SERVER, HOST, port, 50000)
    };
    build::tcp_with(
        src,
        dst,
        &build::TcpSpec {
            sport,
            dport,
            seq,
            ack,
            flags,
            window: 65535,
            options: &[],
            payload_len: len,
        },
    )
}

/// The kinds of packet, each as the frames before it and the frame asked
/// about: `upload` true for the packet leaving the WAN side.
fn frames(kind: usize, upload: bool) -> (&'static str, Vec<(bool, Vec<u8>)>) {
    // (from the LAN host?, frame)
    let (h, s) = (HOST, SERVER);
    let hs = |dp: u16| {
        vec![
            (true, seg(true, dp, 1000, 0, SYN, 0)),
            (false, seg(false, dp, 5000, 1001, SYN | ACK, 0)),
            (true, seg(true, dp, 1001, 5001, ACK, 0)),
        ]
    };
    let mut v;
    let name = match (kind, upload) {
        (0, true) => {
            v = hs(443);
            v.push((false, seg(false, 443, 5001, 1001, ACK | PSH, 1448)));
            v.push((true, seg(true, 443, 1001, 6449, ACK, 0)));
            "empty TCP ACK (of a download)"
        }
        (0, false) => {
            v = hs(443);
            v.push((true, seg(true, 443, 1001, 5001, ACK | PSH, 1448)));
            v.push((false, seg(false, 443, 5001, 2449, ACK, 0)));
            "empty TCP ACK (of an upload)"
        }
        (1, up) => {
            let q = build::udp(IpAddr::V4(h), IpAddr::V4(s), 40000, 53, 40);
            v = vec![(true, q)];
            if !up {
                v.push((
                    false,
                    build::udp(IpAddr::V4(s), IpAddr::V4(h), 53, 40000, 120),
                ));
                "DNS answer"
            } else {
                "DNS query"
            }
        }
        (2, up) => {
            let req = build::icmp_v4_echo(h, s, 7, 1, 56);
            let reply = build::echo_reply_to(&req).unwrap_or_default();
            v = vec![(true, req)];
            if !up {
                v.push((false, reply));
                "ping (echo reply)"
            } else {
                "ping (echo request)"
            }
        }
        (3, up) => {
            v = hs(22);
            let mut f = if up {
                seg(true, 22, 1001, 5001, ACK | PSH, 48)
            } else {
                seg(false, 22, 5001, 1001, ACK | PSH, 48)
            };
            let _ = build::set_tos(&mut f, 0x10);
            v.push((up, f));
            "interactive SSH (lowdelay)"
        }
        (_, true) => {
            v = hs(443);
            v.push((true, seg(true, 443, 1001, 5001, ACK | PSH, 1448)));
            "bulk TCP upload"
        }
        (_, false) => {
            v = hs(443);
            v.push((false, seg(false, 443, 5001, 1001, ACK | PSH, 1448)));
            "TCP download"
        }
    };
    (name, v)
}

const KINDS: usize = 5;

/// Run every kind of packet through a fresh classifier of `cfg`.
pub fn explain(cfg: &Config) -> Explanation {
    let (wan, lan) = sides(cfg);
    let mut out = Vec::new();
    for (upload, leaving) in [(true, &wan), (false, &lan)] {
        let iq = cfg.interfaces.iter().find(|i| &i.ifname == leaving);
        let mut rows = Vec::new();
        for kind in 0..KINDS {
            let (name, fs) = frames(kind, upload);
            let mut b = Bridge {
                c: Classifier::new(cfg, sluice_classify::Options::default()),
                now: Instant::ZERO,
            };
            b.host_claims_its_address(&lan, &wan);
            // The first frame the rules block decides: a reply whose
            // request was blocked never exists.
            let mut last = None;
            for (from_host, f) in &fs {
                let (from, to) = if *from_host {
                    (&lan, &wan)
                } else {
                    (&wan, &lan)
                };
                let Some((d, q)) = b.pass(from, to, f) else {
                    continue;
                };
                let blocked = !d.verdict.is_pass();
                last = Some((d, q));
                if blocked {
                    break;
                }
            }
            let Some((d, q)) = last else { continue };
            let passed = d.verdict == Verdict::Pass;
            rows.push(describe(cfg, iq, name, passed, &d, q));
        }
        out.push(Side {
            direction: if upload { "upload" } else { "download" },
            iface: leaving.clone(),
            shaping: iq.map(|i| shaping(cfg, i)),
            rows,
        });
    }
    Explanation { sides: out }
}

/// The line of the rule that decided, from the decision's rule index.
fn rule_line(cfg: &Config, d: &Decision) -> Option<u32> {
    d.rule
        .and_then(|i| cfg.rules.get(i as usize))
        .map(|r| r.line)
}

fn describe(
    cfg: &Config,
    iq: Option<&IfaceQueueing>,
    kind: &'static str,
    passed: bool,
    d: &Decision,
    q: Option<String>,
) -> Row {
    let mut row = Row {
        kind,
        passed,
        rule_line: rule_line(cfg, d),
        queue: None,
        rate: None,
        discipline: String::new(),
        tcp: Vec::new(),
        extras: Vec::new(),
    };
    let Some(iq) = iq.filter(|_| passed) else {
        return row;
    };
    let i = q
        .as_deref()
        .and_then(|n| iq.queues.iter().position(|x| x.name == n))
        .unwrap_or(iq.default_queue);
    let Some(queue) = iq.queues.get(i) else {
        return row;
    };
    row.queue = Some(queue.name.clone());
    if q.as_deref().is_some_and(|n| n != queue.name) {
        row.extras.push(format!(
            "`{}` is not on {}: its default queue",
            q.unwrap_or_default(),
            iq.ifname
        ));
    }
    row.rate = Some(rate_of(iq, i));
    row.discipline = discipline(iq, i);
    // TCP control acts on TCP connections only: said where it applies.
    let tcp = if kind.contains("TCP") || kind.contains("SSH") {
        iq.tcp_control(i)
    } else {
        Default::default()
    };
    if tcp.ack_pacing {
        row.tcp.push("ack-pacing");
    }
    if tcp.window_clamp {
        row.tcp.push("window-clamp");
    }
    if ancestors(iq, i).any(|j| iq.queues[j].ingress) || iq.pipe.as_ref().is_some_and(|p| p.ingress)
    {
        row.extras.push("ingress (drops count as sent)".into());
    }
    if let Some(m) = queue.ack_filter {
        row.extras.push(m.name().to_string());
    }
    if let Some(h) = queue.isolate {
        row.extras.push(h.name().to_string());
    }
    row
}

/// `i` and its parents, nearest first.
fn ancestors(iq: &IfaceQueueing, i: usize) -> impl Iterator<Item = usize> + '_ {
    let mut at = Some(i);
    std::iter::from_fn(move || {
        let j = at?;
        at = iq.queues.get(j).and_then(|q| q.parent).filter(|&p| p < j);
        Some(j)
    })
}

/// The queue's own bandwidth, else its nearest parent's, else the interface's.
fn rate_of(iq: &IfaceQueueing, i: usize) -> Rate {
    ancestors(iq, i)
        .find_map(|j| iq.queues[j].bandwidth)
        .unwrap_or_else(|| iq.shaped_rate())
        .min(iq.shaped_rate())
}

fn discipline(iq: &IfaceQueueing, i: usize) -> String {
    let q = &iq.queues[i];
    let ecn = |on: bool| if on { ", ECN" } else { "" };
    if let Some(p) = &iq.pipe {
        let weight = q.weight.map_or(String::new(), |w| {
            format!(", weight {w} of pipe {}", p.name)
        });
        return match &p.sched {
            PipeSched::FqCodel(f) => format!(
                "FQ-CoDel (target {}, interval {}{}){weight}",
                f.target,
                f.interval,
                ecn(f.ecn)
            ),
            PipeSched::Fifo => format!("FIFO of {} packets (tail drop)", p.qlimit),
            PipeSched::Drr => format!("DRR, {} packets (tail drop){weight}", q.qlimit),
            PipeSched::Wf2q => format!("WF2Q+, {} packets (tail drop){weight}", q.qlimit),
        };
    }
    let sched = match iq.sched {
        SchedKind::Priq => format!("PRIQ priority {}", q.priority),
        SchedKind::Cbq => format!("CBQ priority {}", q.priority),
        SchedKind::Fairq => format!("FAIRQ priority {}", q.priority),
        SchedKind::Hfsc | SchedKind::Pipe => "HFSC".to_string(),
    };
    let aqm = if let Some(f) = q.flows {
        format!("FQ-CoDel, {f} flows{}", ecn(q.ecn))
    } else if q.codel.is_some() {
        format!("CoDel{}", ecn(q.ecn))
    } else if q.rio {
        format!("RIO{}", ecn(q.ecn))
    } else if q.red {
        format!("RED{}", ecn(q.ecn))
    } else {
        format!("tail drop at {} packets", q.qlimit)
    };
    format!("{sched}, {aqm}")
}

/// The interface's shaping in one line.
fn shaping(cfg: &Config, iq: &IfaceQueueing) -> String {
    let mut s = format!("shaped at {}", iq.shaped_rate());
    if let Some(p) = &iq.pipe {
        let _ = write!(s, " (pipe {})", p.name);
    }
    let ov = cfg.options.overhead_of(&iq.ifname);
    if ov != sluice_time::Overhead::NONE {
        let atm = if ov.framing == sluice_time::Framing::Atm {
            ", ATM cells"
        } else {
            ""
        };
        let _ = write!(s, ", overhead {} bytes{atm}", ov.bytes);
    }
    if let Some(a) = cfg.options.autorate_of(&iq.ifname) {
        let _ = write!(s, ", autorate {}..{}", a.min, a.max);
        if a.reconfig.is_some() {
            s.push_str(" with a reconfig schedule");
        }
    }
    if cfg.rules.iter().any(|r| r.max_mss.is_some()) {
        s.push_str(", MSS clamped");
    }
    s
}

/// The explanation as text, one table per direction.
pub fn render(file: &str, ex: &Explanation) -> String {
    let mut o = String::new();
    let _ = writeln!(o, "{file}:");
    for side in &ex.sides {
        let what = if side.direction == "upload" {
            "upload: packets leaving"
        } else {
            "download: packets leaving"
        };
        match &side.shaping {
            Some(s) => {
                let _ = writeln!(o, "  {what} {}, {s}", side.iface);
            }
            None => {
                let _ = writeln!(o, "  {what} {}: no queues, forwarded unshaped", side.iface);
            }
        }
        for r in &side.rows {
            let by = r
                .rule_line
                .map_or("no rule matched: pf's implicit pass".to_string(), |l| {
                    format!("rule at line {l}")
                });
            if !r.passed {
                let why = r.rule_line.map_or(
                    "by its state (out of window or the state limit)".to_string(),
                    |l| format!("by the rule at line {l}"),
                );
                let _ = writeln!(o, "    {:<30} blocked {why}", r.kind);
                continue;
            }
            let Some(q) = &r.queue else {
                let _ = writeln!(o, "    {:<30} passed ({by}), unshaped", r.kind);
                continue;
            };
            let rate = r.rate.map_or(String::new(), |r| r.to_string());
            let _ = write!(o, "    {:<30} -> {q} at {rate}: {}", r.kind, r.discipline);
            if !r.tcp.is_empty() {
                let _ = write!(o, "; TCP control: {}", r.tcp.join(", "));
            }
            for e in &r.extras {
                let _ = write!(o, "; {e}");
            }
            let _ = writeln!(o, " ({by})");
        }
    }
    o
}

/// The explanation as JSON: `{wan, lan, upload: {...}, download: {...}}`.
pub fn to_json(ex: &Explanation) -> Value {
    let mut v = json!({});
    for side in &ex.sides {
        let rows: Vec<Value> = side
            .rows
            .iter()
            .map(|r| {
                json!({
                    "packet": r.kind,
                    "passed": r.passed,
                    "rule_line": r.rule_line,
                    "queue": r.queue,
                    "rate_bps": r.rate.map(|r| r.as_bps()),
                    "discipline": if r.queue.is_some() { Some(&r.discipline) } else { None },
                    "tcp_control": r.tcp,
                    "options": r.extras,
                })
            })
            .collect();
        v[side.direction] = json!({
            "interface": side.iface,
            "shaping": side.shaping,
            "packets": rows,
        });
    }
    v
}
