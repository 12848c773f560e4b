//! Hand-built IR and packets for the classifier tests.
#![allow(dead_code)]

use sluice_classify::{Classifier, Options};
use sluice_conf::ir::*;
use sluice_time::{Instant, Rate};
use sluice_wire::{build, parse, IpInfo};
use std::net::IpAddr;

pub fn ip(s: &str) -> IpAddr {
    s.parse().unwrap()
}

pub fn net(s: &str, prefix: u8) -> IpNet {
    IpNet {
        addr: ip(s),
        prefix,
    }
}

pub fn secs(s: u64) -> Instant {
    Instant::from_nanos(s * 1_000_000_000)
}

/// A rule with every criterion "any"; pass rules keep state (pf's default).
pub fn rule(action: Action) -> Rule {
    Rule {
        action,
        direction: None,
        quick: false,
        log: false,
        iface: None,
        af: None,
        proto: None,
        from: Endpoint::default(),
        to: Endpoint::default(),
        flags: None,
        tos: None,
        icmp_type: None,
        state: if action == Action::Pass {
            StatePolicy::Keep
        } else {
            StatePolicy::No
        },
        queue: None,
        prio: None,
        max_mss: None,
        state_opts: StateOpts::default(),
        line: 0,
    }
}

pub fn pass() -> Rule {
    rule(Action::Pass)
}
/// `pass <dir> on <iface> keep state`, assigning `queue` when given.
pub fn pass_on(dir: Direction, iface: &str, queue: Option<&str>) -> Rule {
    let mut r = pass();
    r.direction = Some(dir);
    r.iface = Some((iface.into(), false));
    r.queue = queue.and_then(|q| queue_pair(q, None));
    r
}
pub fn block() -> Rule {
    rule(Action::Block)
}
pub fn matchr() -> Rule {
    rule(Action::Match)
}

pub fn ep(addr: AddrMatch) -> Endpoint {
    Endpoint {
        addr,
        negated: false,
        port: None,
    }
}

pub fn queue_pair(q: &str, p: Option<&str>) -> Option<(String, Option<String>)> {
    Some((q.to_string(), p.map(str::to_string)))
}

pub fn queue(name: &str) -> Queue {
    Queue::new(name, 0)
}

pub fn iface_queueing(ifname: &str, sched: SchedKind, queues: Vec<Queue>) -> IfaceQueueing {
    IfaceQueueing {
        ifname: ifname.to_string(),
        sched,
        bandwidth: Rate::kbps(128),
        tbrsize: None,
        queues,
        default_queue: 0,
        pipe: None,
        line: 0,
        dialect: Default::default(),
        root_flags: Default::default(),
    }
}

pub fn config(rules: Vec<Rule>) -> Config {
    let rules = rules
        .into_iter()
        .enumerate()
        .map(|(i, mut r)| {
            r.line = i as u32 + 1;
            r
        })
        .collect();
    Config {
        rules,
        ..Config::default()
    }
}

/// `rules` with interface `ext` running `sched` over `queues` (in order).
pub fn config_on_ext(rules: Vec<Rule>, sched: SchedKind, queues: &[&str]) -> Config {
    let mut cfg = config(rules);
    let queues = queues.iter().map(|q| queue(q)).collect();
    cfg.interfaces.push(iface_queueing("ext", sched, queues));
    cfg
}

pub fn classifier(cfg: &Config) -> Classifier {
    Classifier::new(
        cfg,
        Options {
            hash_key: *b"sluice-test-key!",
            ..Options::default()
        },
    )
}

/// The classifier of pf.conf `text` (no macros), through `sluice-conf`'s
/// checks and defaults.
pub fn from_text(text: &str) -> Classifier {
    let c = sluice_conf::check("t.conf", text, &[]).unwrap_or_else(|d| panic!("{d:?}"));
    classifier(&c.config)
}

pub fn info(frame: &[u8]) -> IpInfo {
    parse(frame).unwrap().ip.unwrap()
}

pub fn tcp(src: &str, dst: &str, sport: u16, dport: u16, flags: u8, payload: usize) -> IpInfo {
    info(&build::tcp(ip(src), ip(dst), sport, dport, flags, payload))
}

pub fn udp(src: &str, dst: &str, sport: u16, dport: u16) -> IpInfo {
    info(&build::udp(ip(src), ip(dst), sport, dport, 20))
}
