//! IR → runtime queue trees. The one place that knows both the config's
//! vocabulary and the schedulers' constructors.
//!
//! Mapping (pf and dummynet semantics; see docs/engine.md):
//! - every shaped interface gets ALTQ's token-bucket regulator at its
//!   `bandwidth` as the root, so PRIQ/FAIRQ/CBQ/HFSC never send faster than the link;
//! - FAIRQ: each class's buckets hold the class's own leaf (FIFO, RED,
//!   RIO), made on first use; `qlimit` is therefore per bucket, as in ALTQ;
//!   a dummynet pipe paces itself and needs none;
//! - a leaf's queue is FIFO with `qlimit` packets, RED/RIO with `red`/`rio`,
//!   FQ-CoDel with `flows N` (OpenBSD 5.5+), always ECN-capable there;
//! - HFSC: `bandwidth` alone means a linear link-sharing curve (ALTQ does the
//!   same); 5.5+ `min`/`max` arrive as realtime/upperlimit;
//! - a leaf with ALTQ's `codel` flag (FreeBSD) is a CoDel queue of `qlimit`
//!   packets (`sluice_sched::codel`), whatever `red`/`rio` says, as in ALTQ;
//! - a pipe's queues share it by weight (DRR or WF2Q+); with `sched fq_codel`
//!   each weighted queue is an FQ-CoDel of its own under DRR (a waking queue
//!   first on a quarter quantum, as a sparse flow), and a pipe with
//!   one queue is a plain FQ-CoDel;
//! - `ingress` (sched's `ingress` module): the interface's shaper charges
//!   the drops of every leaf that has it, or has a parent that has it, as if
//!   sent — the token bucket for PRIQ/CBQ/HFSC trees, the link for a pipe
//!   (where it covers all of the pipe's queues).
//! - `ack-filter` turns on the ACK filter of a leaf's FIFO, RED/RIO or
//!   FQ-CoDel (a pipe's on every queue of it).

use sluice_conf::ir::{self, IfaceQueueing, PipeSched, SchedKind};
use sluice_sched::ingress::Ingress;
use sluice_sched::{
    cbq, codel, drr, fairq, fifo, fq_codel, hfsc, pipe, priq, red, tbr, wf2q, AckFilter, ClassId,
    Qdisc,
};
use sluice_time::Rate;
use std::fmt;

/// A class of a built tree, for statistics and queue-name resolution.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ClassInfo {
    pub id: ClassId,
    pub name: String,
    pub parent: Option<String>,
    pub leaf: bool,
    pub bandwidth: Option<Rate>,
    pub priority: u8,
    pub qlimit: u32,
    /// `ack-pacing` / `window-clamp` for the TCP connections whose data
    /// uses this class (crate::tcpctl).
    pub tcp: ir::TcpControl,
    /// The rate TCP control shares among those connections: the class's
    /// upper limit or bandwidth, else its nearest ancestor's, else the
    /// interface's.
    pub pace_rate: Rate,
    /// The leaf's host isolation: TCP control shares by host too.
    pub isolate: Option<ir::HostIsolation>,
}

/// A built queue tree of one interface.
pub struct Tree {
    pub root: Box<dyn Qdisc>,
    pub classes: Vec<ClassInfo>,
    pub default: ClassId,
    pub kind: SchedKind,
    pub bandwidth: Rate,
    /// A leaf isolates hosts: packets need their hosts in the flow key
    /// ([`sluice_sched::Packet::flow_key`]).
    pub isolating: bool,
    /// Its classes' sojourn at the last interval starts (`show queues -v`).
    pub sojourn_marks: crate::report::SojournMarks,
}

/// The scheduler's host isolation for the configuration's.
fn isolation(m: Option<ir::HostIsolation>) -> fq_codel::Isolation {
    match m {
        None => fq_codel::Isolation::Flows,
        Some(ir::HostIsolation::SrcHost) => fq_codel::Isolation::SrcHost,
        Some(ir::HostIsolation::DstHost) => fq_codel::Isolation::DstHost,
        Some(ir::HostIsolation::Both) => fq_codel::Isolation::Both,
    }
}

/// Why a tree could not be built (the config checker should have caught it).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct BuildError {
    pub iface: String,
    pub message: String,
}

impl fmt::Display for BuildError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "interface {}: {}", self.iface, self.message)
    }
}

impl std::error::Error for BuildError {}

/// Class ids are the queue's index in the IR plus one; 0 is the root.
fn class_id(idx: usize) -> ClassId {
    ClassId(idx as u32 + 1)
}

/// A scheduler whose classes are the interface's queues, in order (no
/// tree: PRIQ, FAIRQ, a pipe's DRR or WF²Q+), `add` putting each in, and
/// the default queue's class its default.
fn classes_in_order<S: Qdisc + 'static, E: fmt::Debug, F: fmt::Debug>(
    q: &IfaceQueueing,
    mut s: S,
    mut add: impl FnMut(&mut S, ClassId, &ir::Queue) -> Result<(), E>,
    set_default: impl FnOnce(&mut S, ClassId) -> Result<(), F>,
) -> Result<Box<dyn Qdisc>, BuildError> {
    for (i, qu) in q.queues.iter().enumerate() {
        add(&mut s, class_id(i), qu).map_err(|e| err(q, e))?;
    }
    set_default(&mut s, class_id(q.default_queue)).map_err(|e| err(q, e))?;
    Ok(Box::new(s))
}

fn err(q: &IfaceQueueing, e: impl fmt::Debug) -> BuildError {
    BuildError {
        iface: q.ifname.clone(),
        message: format!("{e:?}"),
    }
}

/// RIO's drop precedence from the DiffServ AF codepoint (RFC 2597: AFxy has
/// drop precedence y = 1..3) of the frame's IP header; 0 for anything else.
fn dscp_drop_precedence(pkt: &sluice_sched::Packet) -> u8 {
    let Ok(info) = sluice_wire::parse(&pkt.data) else {
        return 0;
    };
    let Some(ip) = info.ip else { return 0 };
    let dscp = ip.tos >> 2;
    let class = dscp >> 3;
    if !(1..=4).contains(&class) || dscp & 1 != 0 {
        return 0;
    }
    ((dscp >> 1) & 3).saturating_sub(1).min(2)
}

/// The memory limit of a leaf's own queue (FQ-CoDel's `memory_limit`,
/// Linux's default 32 MiB; pf.conf has no word for it), if it has one.
pub fn queue_memory_limit(q: &ir::Queue) -> Option<u64> {
    q.flows
        .map(|_| fq_codel::Params::default().memory_limit_bytes)
}

/// The scheduler's ACK filter for the configuration's `ack-filter`.
fn ack_filter(m: Option<ir::AckFilterMode>) -> AckFilter {
    match m {
        None => AckFilter::Off,
        Some(ir::AckFilterMode::Conservative) => AckFilter::Conservative,
        Some(ir::AckFilterMode::Aggressive) => AckFilter::Aggressive,
    }
}

/// The queue a leaf class holds its packets in.
fn leaf(q: &ir::Queue, rate: Rate) -> Box<dyn Qdisc> {
    if let Some(flows) = q.flows {
        let d = fq_codel::Params::default();
        return Box::new(fq_codel::FqCodel::new(fq_codel::Params {
            flows: flows.clamp(1, 65_536),
            quantum_bytes: q.quantum.unwrap_or(d.quantum_bytes),
            limit_packets: q.qlimit.max(1),
            ecn: true,
            ack_filter: ack_filter(q.ack_filter),
            isolation: isolation(q.isolate),
            ..d
        }));
    }
    // FreeBSD's ALTQ puts CoDel over whatever RED/RIO set up: CoDel decides.
    if let Some(c) = q.codel {
        return Box::new(codel::Codel::new(
            codel::Params {
                target: c.target,
                interval: c.interval,
                ecn: c.ecn,
                ..codel::Params::default()
            },
            q.qlimit.max(1),
        ));
    }
    if q.red || q.rio {
        let limit = q.qlimit.max(1);
        // RED's average tracks idle time in units of one typical packet at
        // this queue's rate (ALTQ assumes 1000-byte packets).
        let idle_pkt_time = rate.tx_time(1000);
        if q.rio {
            let mut p = red::RioParams {
                limit_packets: limit,
                ecn: q.ecn,
                idle_pkt_time,
                precedence: dscp_drop_precedence,
                ..red::RioParams::default()
            };
            for t in &mut p.thresholds {
                t.max_th = t.max_th.min(limit);
                t.min_th = t.min_th.min(t.max_th.saturating_sub(1));
            }
            return Box::new(red::Rio::new(p).with_ack_filter(ack_filter(q.ack_filter)));
        }
        let d = red::Params::default();
        let max_th = d.max_th.min(limit);
        return Box::new(
            red::Red::new(red::Params {
                limit_packets: limit,
                max_th,
                min_th: d.min_th.min(max_th.saturating_sub(1)),
                ecn: q.ecn,
                idle_pkt_time,
                ..d
            })
            .with_ack_filter(ack_filter(q.ack_filter)),
        );
    }
    Box::new(
        fifo::Fifo::new(fifo::Params {
            limit_packets: q.qlimit.max(1),
            limit_bytes: q.qlimit_bytes,
        })
        .with_ack_filter(ack_filter(q.ack_filter)),
    )
}

/// A curve that grants nothing (`min 0`, as the OpenBSD FAQ writes for a
/// spam tarpit) is no curve at all, as in ALTQ.
fn curve(c: &ir::ServiceCurve) -> Option<hfsc::ServiceCurve> {
    (c.m1 != Rate::ZERO || c.m2 != Rate::ZERO).then_some(hfsc::ServiceCurve {
        m1: c.m1,
        d: c.d,
        m2: c.m2,
    })
}

/// See [`ClassInfo::pace_rate`]. The parent chain is finite (sema refuses
/// cycles); the walk is bounded by the number of queues anyway.
fn pace_rate<'a>(q: &'a IfaceQueueing, mut qu: &'a ir::Queue) -> Rate {
    for _ in 0..=q.queues.len() {
        let own = qu.upperlimit.map(|c| c.m2).or(qu.bandwidth);
        if let Some(r) = own.filter(|r| *r != Rate::ZERO) {
            return r.min(q.link_rate());
        }
        match qu.parent.and_then(|p| q.queues.get(p)) {
            Some(p) => qu = p,
            None => break,
        }
    }
    q.link_rate()
}

/// Builds the tree of one interface, served at its link rate (the
/// bandwidth, or the altq line's upperlimit below it).
pub fn build_tree(q: &IfaceQueueing) -> Result<Tree, BuildError> {
    let bw = q.link_rate();
    let pipe_isolates = q.pipe.as_ref().is_some_and(|p| p.isolate.is_some());
    let isolating = pipe_isolates || q.queues.iter().any(|qu| qu.isolate.is_some());
    let classes: Vec<ClassInfo> = q
        .queues
        .iter()
        .enumerate()
        .map(|(i, qu)| ClassInfo {
            id: class_id(i),
            name: qu.name.clone(),
            parent: qu.parent.map(|p| q.queues[p].name.clone()),
            leaf: qu.children.is_empty(),
            bandwidth: qu.bandwidth,
            priority: qu.priority,
            qlimit: qu.qlimit,
            tcp: q.tcp_control(i),
            pace_rate: pace_rate(q, qu),
            isolate: qu.isolate,
        })
        .collect();
    let default = class_id(q.default_queue);
    let rate_of = |qu: &ir::Queue| qu.bandwidth.unwrap_or(bw);
    // The tree, whichever root the pipe or the token bucket makes.
    let tree = move |root: Box<dyn Qdisc>| Tree {
        root,
        classes,
        default,
        kind: q.sched,
        bandwidth: bw,
        isolating,
        sojourn_marks: Default::default(),
    };

    let inner: Box<dyn Qdisc> = match q.sched {
        SchedKind::Priq => classes_in_order(
            q,
            priq::Priq::new(),
            |s, id, qu| s.add_class(id, qu.priority, leaf(qu, rate_of(qu))),
            priq::Priq::set_default,
        )?,
        SchedKind::Fairq => classes_in_order(
            q,
            fairq::Fairq::new(),
            |s, id, qu| {
                let params = fairq::ClassParams {
                    priority: qu.priority,
                    buckets: qu.buckets.unwrap_or(fairq::DEFAULT_BUCKETS),
                    bandwidth: qu.bandwidth,
                    hogs: qu.hogs,
                };
                // Each bucket holds the queue's own leaf (qlimit, RED, RIO
                // per bucket, as ALTQ's fairq).
                let own = qu.clone();
                let make: fairq::LeafFactory = Box::new(move || leaf(&own, bw));
                s.add_class(id, params, make)
            },
            fairq::Fairq::set_default,
        )?,
        SchedKind::Hfsc => {
            let mut s = hfsc::Hfsc::new(bw);
            for (i, qu) in q.queues.iter().enumerate() {
                let is_leaf = qu.children.is_empty();
                // ALTQ semantics: a real-time curve only means something on a
                // leaf (interior ones are ignored), and link-sharing defaults to
                // the queue's bandwidth. A class that must share links (every
                // interior class, any class with an upper limit) but names no
                // rate gets the nearest rate it did name.
                let rt = qu.realtime.filter(|_| is_leaf).and_then(|c| curve(&c));
                let ul = qu.upperlimit.and_then(|c| curve(&c));
                let ls = qu
                    .linkshare
                    .and_then(|c| curve(&c))
                    .or_else(|| qu.bandwidth.map(hfsc::ServiceCurve::linear))
                    .or_else(|| {
                        (!is_leaf || ul.is_some() || rt.is_none()).then(|| {
                            hfsc::ServiceCurve::linear(
                                ul.map(|c| c.m2).or(rt.map(|c| c.m2)).unwrap_or(bw),
                            )
                        })
                    });
                let params = hfsc::ClassParams { rt, ls, ul };
                let l = qu.children.is_empty().then(|| leaf(qu, rate_of(qu)));
                s.add_class(class_id(i), qu.parent.map(class_id), params, l)
                    .map_err(|e| err(q, e))?;
            }
            s.set_default(default).map_err(|e| err(q, e))?;
            Box::new(s)
        }
        SchedKind::Cbq => {
            let mut s = cbq::Cbq::new(bw);
            for (i, qu) in q.queues.iter().enumerate() {
                let params = cbq::ClassParams {
                    rate: rate_of(qu),
                    priority: qu.priority,
                    borrow: qu.borrow,
                };
                let l = qu.children.is_empty().then(|| leaf(qu, rate_of(qu)));
                s.add_class(class_id(i), qu.parent.map(class_id), params, l)
                    .map_err(|e| err(q, e))?;
            }
            // As in ALTQ, every CBQ class holds a queue: an interior one
            // queues what rules (or the default) send it, on the allocation
            // it shares with its children.
            for (i, qu) in q.queues.iter().enumerate() {
                if !qu.children.is_empty() {
                    s.add_queue(class_id(i), leaf(qu, rate_of(qu)))
                        .map_err(|e| err(q, e))?;
                }
            }
            s.set_default(default).map_err(|e| err(q, e))?;
            Box::new(s)
        }
        SchedKind::Pipe => {
            let p = q
                .pipe
                .as_ref()
                .ok_or_else(|| err(q, "pipe without parameters"))?;
            let sched = pipe_sched(q, p)?;
            let params = pipe::Params {
                rate: bw,
                burst_bytes: 0,
                delay: p.delay,
                loss_ppm: p.loss_ppm,
                seed: 0x5eed_0000 ^ q.line as u64,
                // dummynet's fq_codel scheduler keeps its own queues, bounded
                // by its own `limit`: the pipe's qlimit is for the others.
                queue_limit_packets: match p.sched {
                    PipeSched::FqCodel(_) => 0,
                    _ => p.qlimit.max(1),
                },
            };
            // The pipe paces itself: no token bucket above it.
            let mut link = pipe::Pipe::new(params, sched);
            if p.ingress {
                // Every queue of the pipe, by class, so each reports its own.
                link.set_ingress(Ingress::classes((0..q.queues.len()).map(class_id)));
            }
            return Ok(tree(Box::new(link)));
        }
    };
    let mut t = tbr::Params::for_rate(bw);
    if let Some(size) = q.tbrsize {
        t.bucket_bytes = size;
    }
    let mut root = tbr::Tbr::new(t, inner);
    let charged = ingress_leaves(q);
    if !charged.is_empty() {
        root.set_ingress(Ingress::classes(charged));
    }
    Ok(tree(Box::new(root)))
}

/// The leaf classes in ingress mode: those with `ingress`, or under a
/// queue with it.
fn ingress_leaves(q: &IfaceQueueing) -> Vec<ClassId> {
    let on = |mut i: usize| {
        // Parents come before children: each step goes up, so at most
        // `queues.len()` steps.
        for _ in 0..=q.queues.len() {
            let Some(qu) = q.queues.get(i) else {
                return false;
            };
            if qu.ingress {
                return true;
            }
            match qu.parent {
                Some(p) if p < i => i = p,
                _ => return false,
            }
        }
        false
    };
    (0..q.queues.len())
        .filter(|&i| q.queues[i].children.is_empty() && on(i))
        .map(class_id)
        .collect()
}

/// What the interface's shaper charged for the drops of `class` in
/// ingress mode (packets, bytes); `None` when the class is not in it. The
/// root class (id 0) reports the whole interface.
pub fn ingress_charged(root: &dyn Qdisc, class: ClassId) -> Option<(u64, u64)> {
    let ingress = root.ingress().filter(|i| i.is_on())?;
    let c = if class == ClassId::ROOT {
        ingress.total()
    } else {
        ingress.charged(class)?
    };
    Some((c.packets, c.bytes))
}

fn pipe_sched(q: &IfaceQueueing, p: &ir::Pipe) -> Result<Box<dyn Qdisc>, BuildError> {
    let weight = |qu: &ir::Queue| qu.weight.unwrap_or(1).clamp(1, 100);
    // A pipe's `ack-filter` covers every queue of it.
    let filter_of = |qu: &ir::Queue| ack_filter(qu.ack_filter.or(p.ack_filter));
    let fifo_of = |qu: &ir::Queue| -> Box<dyn Qdisc> {
        Box::new(
            fifo::Fifo::new(fifo::Params {
                limit_packets: qu.qlimit.max(1),
                limit_bytes: qu.qlimit_bytes,
            })
            .with_ack_filter(filter_of(qu)),
        )
    };
    let default = class_id(q.default_queue);
    Ok(match &p.sched {
        PipeSched::Fifo => Box::new(
            fifo::Fifo::new(fifo::Params {
                limit_packets: p.qlimit.max(1),
                limit_bytes: None,
            })
            .with_ack_filter(ack_filter(p.ack_filter)),
        ),
        PipeSched::Drr => classes_in_order(
            q,
            drr::Drr::new(1514),
            |s, id, qu| s.add_class(id, weight(qu), fifo_of(qu)),
            drr::Drr::set_default,
        )?,
        PipeSched::Wf2q => classes_in_order(
            q,
            wf2q::Wf2q::new(),
            |s, id, qu| s.add_class(id, weight(qu), fifo_of(qu)),
            wf2q::Wf2q::set_default,
        )?,
        PipeSched::FqCodel(fp) => {
            let make = |filter: AckFilter, isolate: Option<ir::HostIsolation>| -> Box<dyn Qdisc> {
                Box::new(fq_codel::FqCodel::new(fq_codel::Params {
                    flows: fp.flows.clamp(1, 65_536),
                    quantum_bytes: fp.quantum,
                    limit_packets: fp.limit.max(1),
                    target: fp.target,
                    interval: fp.interval,
                    ecn: fp.ecn,
                    ack_filter: filter,
                    isolation: isolation(isolate),
                    ..fq_codel::Params::default()
                }))
            };
            if q.queues.len() <= 1 {
                let first = q.queues.first();
                make(
                    first.map_or(ack_filter(p.ack_filter), filter_of),
                    first.map_or(p.isolate, |qu| qu.isolate),
                )
            } else {
                // A queue that wakes goes first on a quarter quantum, as
                // a sparse flow does inside each queue (drr's principles).
                let quantum = fp.quantum.max(256);
                let mut s = drr::Drr::new(quantum).wake_first(quantum / 4);
                for (i, qu) in q.queues.iter().enumerate() {
                    s.add_class(class_id(i), weight(qu), make(filter_of(qu), qu.isolate))
                        .map_err(|e| err(q, e))?;
                }
                s.set_default(default).map_err(|e| err(q, e))?;
                Box::new(s)
            }
        }
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use sluice_sched::{DropReason, Packet};
    use sluice_time::Instant;

    fn tree(text: &str) -> Tree {
        let c = sluice_conf::check("t.conf", text, &[]).expect("a valid config");
        build_tree(&c.config.interfaces[0]).expect("it builds")
    }

    #[test]
    fn the_altq_lines_upperlimit_caps_the_tree_not_its_children() {
        let text = "altq on em0 hfsc(upperlimit 80%) bandwidth 10Mb queue { a, b }\n\
                    queue a bandwidth 50% hfsc(default)\nqueue b bandwidth 4Mb\n";
        let c = sluice_conf::check("t.conf", text, &[]).expect("a valid config");
        let iq = &c.config.interfaces[0];
        // Percentages resolve against the interface, as pfctl's do.
        assert_eq!(iq.queues[0].bandwidth, Some(Rate::mbps(5)));
        assert_eq!(iq.link_rate(), Rate::mbps(8));
        assert_eq!(tree(text).bandwidth, Rate::mbps(8));
        let plain =
            "altq on em0 hfsc bandwidth 10Mb queue { a }\nqueue a bandwidth 1Mb hfsc(default)\n";
        assert_eq!(tree(plain).bandwidth, Rate::mbps(10));
    }

    /// Offers `n` packets of class `class` at once; returns the (packets,
    /// bytes) of the drops a shaper in ingress mode should have charged.
    fn flood(t: &mut Tree, class: ClassId, n: u64) -> (u64, u64) {
        let mut drops = Vec::new();
        for id in 0..n {
            t.root.enqueue(
                Packet::synthetic(id, 1000, 7, class),
                Instant(0),
                &mut drops,
            );
        }
        let charged = drops
            .iter()
            .filter(|d| matches!(d.reason, DropReason::QueueFull | DropReason::Aqm));
        (
            charged.clone().count() as u64,
            charged.map(|d| u64::from(d.pkt.cost)).sum(),
        )
    }

    #[test]
    fn ingress_on_a_parent_reaches_every_leaf_under_it_and_counts_their_drops() {
        // Class ids are the queue's index + 1: down 1, a 2, b 3.
        let mut t = tree(
            "queue down on em1 bandwidth 10M ingress\n\
             queue a parent down bandwidth 5M flows 16 qlimit 2 default\n\
             queue b parent down bandwidth 5M flows 16 qlimit 2\n",
        );
        for c in [ClassId::ROOT, ClassId(2), ClassId(3)] {
            assert_eq!(ingress_charged(t.root.as_ref(), c), Some((0, 0)), "{c:?}");
        }
        let want = flood(&mut t, ClassId(2), 6);
        assert!(want.0 > 0, "qlimit 2 overflows");
        assert_eq!(ingress_charged(t.root.as_ref(), ClassId(2)), Some(want));
        assert_eq!(ingress_charged(t.root.as_ref(), ClassId(3)), Some((0, 0)));
        assert_eq!(ingress_charged(t.root.as_ref(), ClassId::ROOT), Some(want));
    }

    #[test]
    fn ingress_on_one_altq_leaf_only_and_off_without_the_option() {
        let t = tree(
            "altq on em1 hfsc bandwidth 10Mb queue { a, b }\n\
             queue a bandwidth 50% hfsc(default red ingress)\n\
             queue b bandwidth 50% hfsc(red)\n",
        );
        assert_eq!(ingress_charged(t.root.as_ref(), ClassId(1)), Some((0, 0)));
        assert_eq!(ingress_charged(t.root.as_ref(), ClassId(2)), None);
        let t = tree(
            "altq on em1 hfsc bandwidth 10Mb queue { a }\nqueue a bandwidth 100% hfsc(default red)\n",
        );
        assert_eq!(ingress_charged(t.root.as_ref(), ClassId::ROOT), None);
    }

    #[test]
    fn an_fq_codel_pipe_is_bounded_by_its_own_limit_not_the_pipe_qlimit() {
        // 100 flows of 2 packets each: the default pipe qlimit (50) would
        // refuse half of them; FQ-CoDel's limit (10240) takes them all.
        let mut t = tree("pipe up on em0 bandwidth 5Mb sched fq_codel\n");
        let mut drops = Vec::new();
        for id in 0..200u64 {
            let pkt = Packet::synthetic(id, 1000, id / 2, t.default);
            t.root.enqueue(pkt, Instant::ZERO, &mut drops);
        }
        assert!(drops.is_empty(), "{} dropped", drops.len());
        assert_eq!(t.root.len(), 200);
        // A FIFO pipe keeps its qlimit.
        let mut t = tree("pipe up on em0 bandwidth 5Mb\n");
        for id in 0..200u64 {
            t.root.enqueue(
                Packet::synthetic(id, 1000, id, t.default),
                Instant::ZERO,
                &mut drops,
            );
        }
        assert!(drops.len() >= 140, "qlimit 50 refused {}", drops.len());
    }

    /// Drains `t` at its rate for `ms` milliseconds after offering `n`
    /// 1000-byte packets at once; returns how many CoDel (the AQM) dropped.
    fn aqm_drops(t: &mut Tree, n: u64, ms: u64) -> usize {
        let mut drops = Vec::new();
        for id in 0..n {
            let pkt = Packet::synthetic(id, 1000, 7, t.default);
            t.root.enqueue(pkt, Instant::ZERO, &mut drops);
        }
        for step in 0..=ms {
            let now = Instant(step * 1_000_000);
            // Bounded by the backlog: each call sends or drops a packet, or stops.
            while t.root.dequeue(now, &mut drops).is_some() {}
        }
        drops.iter().filter(|d| d.reason == DropReason::Aqm).count()
    }

    #[test]
    fn freebsd_altq_codel_is_a_codel_queue_and_a_fifo_without_it() {
        // 300 packets at 1 Mbit/s stand 2.4 s in the queue: far above the
        // 5 ms target for more than the 100 ms interval, so CoDel drops.
        for text in [
            "altq on em1 codel bandwidth 1Mb qlimit 1000\n",
            "altq on em1 priq bandwidth 1Mb queue { a }\nqueue a qlimit 1000 priq(default codel)\n",
            "altq on em1 hfsc bandwidth 1Mb queue { a }\nqueue a bandwidth 100% qlimit 1000 hfsc(default red codel)\n",
            // FAIRQ: CoDel in each bucket (the test's packets share one).
            "altq on em1 fairq bandwidth 1Mb queue { a }\nqueue a qlimit 1000 fairq(default codel)\n",
        ] {
            let dropped = aqm_drops(&mut tree(text), 300, 3000);
            assert!(dropped >= 10, "{text}: CoDel dropped {dropped}");
        }
        let fifo =
            "altq on em1 priq bandwidth 1Mb queue { a }\nqueue a qlimit 1000 priq(default)\n";
        assert_eq!(aqm_drops(&mut tree(fifo), 300, 3000), 0);
    }

    #[test]
    fn an_ingress_pipe_charges_its_link_for_its_drops() {
        let mut t = tree("pipe down on em1 bandwidth 10Mb sched fq_codel (limit 3) ingress\n");
        let class = t.default;
        let want = flood(&mut t, class, 8);
        assert!(want.0 > 0, "limit 3 overflows");
        assert_eq!(ingress_charged(t.root.as_ref(), ClassId::ROOT), Some(want));
        let t = tree("pipe down on em1 bandwidth 10Mb sched fq_codel\n");
        assert_eq!(ingress_charged(t.root.as_ref(), ClassId::ROOT), None);
    }
}
