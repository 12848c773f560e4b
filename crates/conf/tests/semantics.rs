//! What the IR says for small inputs: units, percentages, list expansion,
//! macros, the 5.5+ → HFSC mapping, and where errors point.

use sluice_conf::ir::*;
use sluice_conf::{check, overhead_preset, Severity};
use sluice_time::{Duration, Overhead, Rate};

fn ok(text: &str) -> Config {
    match check("t.conf", text, &[]) {
        Ok(c) => c.config,
        Err(d) => panic!(
            "{}",
            d.iter()
                .map(|d| d.render("t.conf", text))
                .collect::<String>()
        ),
    }
}

fn errors(text: &str) -> Vec<sluice_conf::Diagnostic> {
    let d = check("t.conf", text, &[]).expect_err("should fail");
    d.into_iter()
        .filter(|d| d.severity == Severity::Error)
        .collect()
}

#[test]
fn ten_gigabit_does_not_wrap() {
    let c = ok("altq on ix0 hfsc bandwidth 10Gb queue { a }\nqueue a bandwidth 45% qlimit 1000 hfsc(default upperlimit 5Gb)\n");
    let i = &c.interfaces[0];
    assert_eq!(i.bandwidth, Rate::gbps(10));
    assert!(i.bandwidth.as_bps() > u64::from(u32::MAX));
    assert_eq!(i.queues[0].bandwidth, Some(Rate::mbps(4500)));
    assert_eq!(
        i.queues[0].upperlimit,
        Some(ServiceCurve::linear(Rate::gbps(5)))
    );
}

#[test]
fn percentages_are_of_the_parent() {
    let c = ok("altq on em0 cbq bandwidth 2Mb queue { p, d }\n\
                queue p bandwidth 50% { c1, c2 }\n\
                queue c1 bandwidth 25% qlimit 5\n\
                queue c2 bandwidth 12.5% qlimit 5\n\
                queue d bandwidth 10% qlimit 5 cbq(default)\n");
    let q = &c.interfaces[0].queues;
    let bw = |n: &str| q.iter().find(|x| x.name == n).unwrap().bandwidth;
    assert_eq!(bw("p"), Some(Rate::mbps(1)));
    assert_eq!(bw("c1"), Some(Rate::kbps(250)));
    assert_eq!(bw("c2"), Some(Rate::bps(125_000)));
    assert_eq!(bw("d"), Some(Rate::kbps(200)));
    // parents before children, children indexed
    let p = q.iter().position(|x| x.name == "p").unwrap();
    assert!(q[p]
        .children
        .iter()
        .all(|&c| c > p && q[c].parent == Some(p)));
}

#[test]
fn lists_expand_to_the_cross_product_in_order() {
    let c = ok("pass out on { em0 em1 } proto { tcp, udp } from { 10.0.0.1 10.0.0.2 } to any port { 53 80 }\n");
    assert_eq!(c.rules.len(), 16);
    let r = &c.rules;
    assert_eq!(r[0].iface, Some(("em0".into(), false)));
    assert_eq!(r[0].proto, Some(6));
    assert_eq!(r[0].to.port, Some(PortOp::Eq(53)));
    assert_eq!(r[1].to.port, Some(PortOp::Eq(80)));
    assert_eq!(r[15].iface, Some(("em1".into(), false)));
    assert_eq!(r[15].proto, Some(17));
    assert!(r
        .iter()
        .all(|r| r.line == 1 && r.state == StatePolicy::Keep));
}

#[test]
fn mixed_families_are_dropped_like_pf() {
    let c = ok("pass from { 10.0.0.1 2001:db8::1 } to { 192.0.2.1 2001:db8::2 }\npass inet6 from { 10.0.0.1 2001:db8::1 }\n");
    assert_eq!(c.rules.len(), 3);
    assert_eq!(c.rules[2].af, Some(AddrFamily::Inet6));
}

#[test]
fn macros_lists_and_defines() {
    let text = "ports = \"{ ssh www }\"\nnet = \"10.1.0.0/16\"\nall_nets = \"{\" $net \"192.168.0.0/24 }\"\npass in on $if proto tcp from $all_nets to port $ports\n";
    let c = check("t", text, &[("if".into(), "vio0".into())])
        .unwrap()
        .config;
    assert_eq!(c.rules.len(), 4);
    assert_eq!(
        c.rules[0].from.addr,
        AddrMatch::Net(IpNet {
            addr: "10.1.0.0".parse().unwrap(),
            prefix: 16
        })
    );
    assert_eq!(c.rules[0].to.port, Some(PortOp::Eq(22)));
    assert_eq!(c.rules[3].to.port, Some(PortOp::Eq(80)));
    assert_eq!(c.rules[3].iface, Some(("vio0".into(), false)));
    let d = check("t", "pass on $if\n", &[]).unwrap_err();
    assert!(d[0].message.contains("$if") && d[0].hint.as_deref().unwrap().contains("-D if="));
    assert_eq!((d[0].span.start, d[0].span.end), (8, 11));
}

#[test]
fn openbsd_55_queues_map_to_hfsc_curves() {
    let c = ok("queue root on em0 bandwidth 10M\n\
                queue a parent root bandwidth 6M burst 9M for 50ms min 1M max 8M qlimit 30 default\n\
                queue b parent root bandwidth 4M flows 1024 quantum 300 qlimit 100\n\
                match out set queue b set prio (1, 6)\n");
    let i = &c.interfaces[0];
    assert_eq!(
        (i.sched, i.bandwidth, i.default_queue),
        (SchedKind::Hfsc, Rate::mbps(10), 1)
    );
    let a = &i.queues[1];
    assert_eq!(
        a.linkshare,
        Some(ServiceCurve {
            m1: Rate::mbps(9),
            d: Duration::from_millis(50),
            m2: Rate::mbps(6)
        })
    );
    assert_eq!(a.realtime, Some(ServiceCurve::linear(Rate::mbps(1))));
    assert_eq!(a.upperlimit, Some(ServiceCurve::linear(Rate::mbps(8))));
    assert_eq!((a.parent, a.qlimit), (Some(0), 30));
    let b = &i.queues[2];
    assert_eq!((b.flows, b.quantum), (Some(1024), Some(300)));
    assert_eq!(c.rules[0].queue, Some(("b".into(), None)));
    assert_eq!(c.rules[0].prio, Some((1, Some(6))));
    assert_eq!(c.rules[0].state, StatePolicy::No);
}

#[test]
fn hfsc_realtime_curve_and_defaults() {
    let c = ok("altq on em0 hfsc bandwidth 1Mb queue { v, d }\nqueue v bandwidth 10% qlimit 5 hfsc(realtime (160Kb 20 64Kb))\nqueue d bandwidth 90% qlimit 10 hfsc(default)\n");
    let v = &c.interfaces[0].queues[0];
    assert_eq!(
        v.realtime,
        Some(ServiceCurve {
            m1: Rate::kbps(160),
            d: Duration::from_millis(20),
            m2: Rate::kbps(64)
        })
    );
    assert_eq!(
        v.linkshare,
        Some(ServiceCurve::linear(Rate::kbps(100))),
        "linkshare defaults to bandwidth"
    );
    assert_eq!(v.priority, 1);
}

#[test]
fn overhead_presets_and_options() {
    assert_eq!(overhead_preset("ethernet"), Some(Overhead::plain(38)));
    assert_eq!(overhead_preset("pppoe-llcsnap"), Some(Overhead::atm(40)));
    assert_eq!(overhead_preset("conservative"), Some(Overhead::atm(48)));
    assert_eq!(overhead_preset("nope"), None);
    let c = ok("set overhead on em0 44 atm\nset overhead on em1 docsis\nset limit { states 20000, frags 2000 }\nset skip on lo\nset timeout { tcp.established 600, interval 10 }\n");
    assert_eq!(
        c.options.overhead,
        vec![
            ("em0".into(), Overhead::atm(44)),
            ("em1".into(), Overhead::plain(18))
        ]
    );
    assert_eq!(c.options.state_limit, 20_000);
}

#[test]
fn errors_point_at_the_token() {
    let text =
        "altq on em0 priq bandwidth 1Mb queue { a }\nqueue a priority 3 qlimit 0 priq(default)\n";
    let e = errors(text);
    assert_eq!(e.len(), 1);
    assert_eq!(&text[e[0].span.start..e[0].span.end], "0");
    // An unknown queue is a warning (pfctl loads it); under --strict an error.
    let text = "pass out queue nope\n";
    let w = check("t.conf", text, &[]).expect("loads").warnings;
    assert_eq!(&text[w[0].span.start..w[0].span.end], "nope");
    let strict = sluice_conf::CheckOptions {
        strict: true,
        files: None,
    };
    let e = sluice_conf::check_with("t.conf", text, &[], &strict).expect_err("--strict refuses");
    assert_eq!(&text[e[0].span.start..e[0].span.end], "nope");
    assert!(e[0]
        .hint
        .as_deref()
        .unwrap()
        .contains("no queues are defined"));
}

#[test]
fn pipes_without_queues_are_one_queue() {
    let c = ok("pipe p on em0 bandwidth 10Mb delay 20ms plr 0.01 qlimit 100 sched fifo\npass out queue p\n");
    let i = &c.interfaces[0];
    let p = i.pipe.as_ref().unwrap();
    assert_eq!(
        (p.delay, p.loss_ppm, p.qlimit, p.sched.clone()),
        (Duration::from_millis(20), 10_000, 100, PipeSched::Fifo)
    );
    assert_eq!(i.queues.len(), 1);
    assert!(i.queues[0].default);
}

#[test]
fn one_scheduler_per_interface() {
    let e = errors("altq on em0 priq bandwidth 1Mb queue { a }\nqueue a priority 3 qlimit 5 priq(default)\npipe p on em0 bandwidth 1Mb qlimit 5\n");
    assert!(e[0].message.contains("already has a queue tree"), "{e:?}");
    assert_eq!(e[0].notes.len(), 1);
}

#[test]
fn ingress_is_kept_where_written_and_a_pipe_gives_it_to_its_queues() {
    let c = ok("queue down on em1 bandwidth 10M ingress\n\
                queue a parent down bandwidth 5M flows 16 default\n\
                queue b parent down bandwidth 5M flows 16\n\
                altq on em2 priq bandwidth 10Mb queue { x, y }\n\
                queue x priority 1 priq(default red ingress)\n\
                queue y priority 2 priq(red) ingress\n\
                pipe p on em3 bandwidth 10Mb sched fq_codel ingress\n\
                queue p1 pipe p weight 1 default\n\
                queue p2 pipe p weight 2\n\
                pipe u on em4 bandwidth 1Mb sched fq_codel\n");
    let on = |name: &str| c.interfaces.iter().find(|i| i.ifname == name).unwrap();
    let flags = |name: &str| -> Vec<bool> { on(name).queues.iter().map(|q| q.ingress).collect() };
    assert_eq!(
        flags("em1"),
        [true, false, false],
        "5.5+: on the queue that says it"
    );
    assert_eq!(flags("em2"), [true, true], "ALTQ: in priq(…) or bare");
    assert_eq!(flags("em3"), [true, true], "a pipe's queues");
    assert_eq!(on("em3").pipe.as_ref().map(|p| p.ingress), Some(true));
    assert_eq!(flags("em4"), [false]);
    assert_eq!(on("em4").pipe.as_ref().map(|p| p.ingress), Some(false));
}

#[test]
fn tcp_control_is_kept_where_written_and_covers_the_leaves_under_it() {
    let c = ok("queue down on em1 bandwidth 10M ack-pacing\n\
                queue a parent down bandwidth 5M flows 16 default window-clamp\n\
                queue b parent down bandwidth 5M flows 16\n\
                altq on em2 hfsc bandwidth 10Mb queue { x, y }\n\
                queue x bandwidth 5Mb hfsc(default window-clamp ack-pacing)\n\
                queue y bandwidth 5Mb hfsc(red) ack-pacing\n\
                pipe p on em3 bandwidth 10Mb sched drr window-clamp\n\
                queue p1 pipe p weight 1 default ack-pacing\n\
                queue p2 pipe p weight 2\n\
                pipe u on em4 bandwidth 1Mb sched fq_codel ack-pacing\n");
    let on = |name: &str| c.interfaces.iter().find(|i| i.ifname == name).unwrap();
    let tc = |pacing, clamp| TcpControl {
        ack_pacing: pacing,
        window_clamp: clamp,
    };
    let written =
        |name: &str| -> Vec<TcpControl> { on(name).queues.iter().map(|q| q.tcp).collect() };
    let resolved = |name: &str| -> Vec<TcpControl> {
        let i = on(name);
        (0..i.queues.len()).map(|q| i.tcp_control(q)).collect()
    };
    // 5.5+: kept on the queue that says it; a leaf gets its parent's too.
    assert_eq!(
        written("em1"),
        [tc(true, false), tc(false, true), tc(false, false)]
    );
    assert_eq!(
        resolved("em1"),
        [tc(true, false), tc(true, true), tc(true, false)]
    );
    // ALTQ: in hfsc(…) or bare, each word on its own.
    assert_eq!(written("em2"), [tc(true, true), tc(true, false)]);
    // A pipe's own is copied to each queue; a queue may add to it.
    assert_eq!(written("em3"), [tc(true, true), tc(false, true)]);
    assert_eq!(
        on("em3").pipe.as_ref().map(|p| p.tcp),
        Some(tc(false, true))
    );
    assert_eq!(written("em4"), [tc(true, false)], "the pipe's one queue");
    assert_eq!(
        on("em4").pipe.as_ref().map(|p| p.tcp),
        Some(tc(true, false))
    );
    assert_eq!(
        on("em4").tcp_control(7),
        TcpControl::default(),
        "out of range"
    );
}

#[test]
fn autorate_reconfig_shorthand_long_form_and_defaults() {
    let c = ok(
        "queue a on em0 bandwidth 20M default autorate (reconfig starlink)\n\
                pipe b on em1 bandwidth 10Mb autorate (reconfig (at 57s every 60s lead 1.5 ms))\n\
                pipe c on em2 bandwidth 10Mb autorate (dry-run)\n\
                pass out proto tcp keep state\n",
    );
    let r = |i: &str| c.options.autorate_of(i).unwrap().reconfig;
    assert_eq!(r("em0"), Some(Reconfig::STARLINK));
    assert_eq!(
        r("em1"),
        Some(Reconfig {
            every: Duration::from_secs(60),
            at: Duration::from_secs(57),
            lead: Duration::from_micros(1500),
            hold: Reconfig::DEFAULT_HOLD,
        })
    );
    assert_eq!(r("em2"), None);
    // An invalid schedule drops the interface's autorate with an error.
    let text = "pipe b on em1 bandwidth 10Mb autorate (reconfig (every 15s, at 15s))\n";
    let e = errors(text);
    assert_eq!(e.len(), 1);
    assert_eq!(&text[e[0].span.start..e[0].span.end], "15s");
    assert_eq!(e[0].span.start, text.rfind("15s").unwrap());
}
