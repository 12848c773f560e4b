//! The physics of issue #4: each scenario with and without its shaper.

use crate::{compare, example, netns, p50, pair, phase, run, within, within_link, Load};
use sluice_lab::model::{Dir, Summary};

#[test]
fn tcp_1up_bloats_without_a_shaper_and_not_with_hfsc() {
    let Some(_lane) = netns(Load::Light) else {
        return;
    };
    let runs = compare("tcp_1up", 5);
    let [none, hfsc] = &runs;
    assert_eq!(none.shaper, "none");
    assert_eq!(hfsc.shaper, "hfsc-qlimit9.conf");
    for s in &runs {
        let up = phase(s, "upload");
        within_link(
            &format!("{} upload", s.shaper),
            up.up_bps,
            s.link.up_bps,
            true,
        );
        assert!(
            s.warnings.iter().all(|w| !w.contains("exited")),
            "{:?}",
            s.warnings
        );
    }
    // Without a shaper the modem's 200-packet FIFO (2.4 s at 1 Mbit/s) fills.
    let idle = none.idle_latency_ms.p50;
    let loaded = p50(phase(none, "upload"));
    eprintln!("tcp_1up none: idle {idle:.1} ms, upload p50 {loaded:.0} ms");
    assert!(
        loaded >= 10.0 * idle,
        "bloat: upload p50 {loaded} ms < 10 × idle {idle} ms"
    );
    assert_eq!(none.grade.up.as_deref(), Some("F"));
    // HFSC qlimit 9 keeps the queue in sluice: at most 9 × 12 ms + idle.
    let idle = hfsc.idle_latency_ms.p50;
    let loaded = p50(phase(hfsc, "upload"));
    eprintln!("tcp_1up hfsc: idle {idle:.1} ms, upload p50 {loaded:.0} ms");
    assert!(
        loaded <= idle + 150.0,
        "hfsc: upload p50 {loaded} ms > idle {idle} + 150 ms"
    );
    // sluice's own verdict, read during the run: idle, nothing to judge
    // yet; `none` is no sluice and says nothing.
    assert!(phase(none, "idle").verdicts.is_empty());
    let v = &phase(hfsc, "idle").verdicts;
    assert!(
        v.iter()
            .any(|v| v.last.dir == Dir::Up && v.last.verdict == "not-enough-traffic"),
        "{v:?}"
    );
}

#[test]
fn ack_priority_keeps_the_download_during_an_upload() {
    let Some(_lane) = netns(Load::Light) else {
        return;
    };
    // The upload's set-up crosses the download's full FIFO (~1.5 s per
    // round trip): it sends data ~7 s into its phase, so phases are 15 s.
    let runs = compare("ack_priority", 15);
    let retained = |s: &Summary| {
        let solo = phase(s, "download").down_bps;
        let both = phase(s, "download+upload").down_bps;
        within_link(
            &format!("{} download", s.shaper),
            solo,
            s.link.down_bps,
            false,
        );
        within_link(
            &format!("{} upload", s.shaper),
            phase(s, "upload").up_bps,
            s.link.up_bps,
            false,
        );
        // Not vacuous: the upload really ran during the phase measured.
        let up = phase(s, "download+upload").up_bps;
        assert!(
            up >= 0.3 * s.link.up_bps as f64,
            "{}: upload only {up:.0} bit/s",
            s.shaper
        );
        (solo, both, both / solo.max(1.0))
    };
    let (solo, both, r) = retained(&runs[0]);
    eprintln!(
        "ack_priority none: download {:.1} kB/s alone, {:.1} kB/s with the upload ({:.0} %)",
        solo / 8e3,
        both / 8e3,
        100.0 * r
    );
    let (solo, both, r) = retained(&runs[1]);
    eprintln!(
        "ack_priority priq: download {:.1} kB/s alone, {:.1} kB/s with the upload ({:.0} %)",
        solo / 8e3,
        both / 8e3,
        100.0 * r
    );
    // No bound on the unshaped run's share: with 15 s phases the upload is
    // still setting up and filling the modem's byte FIFO for most of the
    // phase (measured 86 %); the collapse to ~20 % shows once it has
    // (30 s phases, settled half: docs/notebook/2026-11-24-seeds-collapse.md).
    // The download alone fills most of the 512 kbit/s line (64 KB window).
    assert!(solo >= 0.6 * 512e3, "download alone only {solo:.0} bit/s");
    assert!(
        r >= 0.8,
        "PRIQ: the download kept {:.0} % (< 80 %) during the upload",
        100.0 * r
    );
}

#[test]
fn rrul_and_voip_are_better_with_fq_codel() {
    // Alone (its pair of runs at once is all): the shaped rrul's 75 % is
    // the tightest bound here. On the shared machine (load 15, nice 19) it
    // read 57 % and 65 % with voip's and ack_priority's runs beside it,
    // 88-89 % alone or beside its unshaped run only.
    let Some(_lane) = netns(Load::Heavy) else {
        return;
    };
    // rrul's four downloads lose about a second of the line to their
    // start (slow start behind the uploads' ACK share): over 5 s phases
    // that left 69-77 % of the 30 Mbit/s link, with or without the
    // latest changes (three runs each), against the 75 % bound; over 10 s
    // it is a tenth of the phase (86 % typical, but one run of a full
    // suite read 70 %; 60 s phases: 94 %): 15 s.
    for (name, secs) in [("rrul", 15), ("voip", 5)] {
        let runs = compare(name, secs);
        let [none, fq] = &runs;
        for s in &runs {
            let p = &s.phases[1];
            assert!(p.load_down && p.load_up, "{name}: phase 2 loads both ways");
            // Without a shaper the downloads' ACKs wait seconds behind the
            // upload: they need not fill the line (that is the point).
            // With one, the upload also carries the downloads' ACKs, which
            // the shaper charges 38 bytes of Ethernet overhead each (the
            // counters here do not): 60 % of the line is left for data.
            let shaped = s.shaper != "none";
            within_link(
                &format!("{name} {} down", s.shaper),
                p.down_bps,
                s.link.down_bps,
                shaped,
            );
            let min_up = if shaped { 0.6 } else { 0.0 };
            within(
                &format!("{name} {} up", s.shaper),
                p.up_bps,
                s.link.up_bps,
                min_up,
            );
            let v = s
                .voip
                .unwrap_or_else(|| panic!("{name} {}: no voip figures", s.shaper));
            assert!(v.mos >= 1.0 && v.mos <= 4.5, "{v:?}");
            assert_eq!(s.flows.len(), 2);
            eprintln!(
                "{name} {}: idle {:.1} ms, load p50 {:.0} p99 {:.0} ms, grade {}, voip owd {:.0} ms jitter {:.1} ms loss {:.1} % MOS {:.2}",
                s.shaper,
                s.idle_latency_ms.p50,
                p50(p),
                p.latency_ms.map(|l| l.p99).unwrap_or(f64::NAN),
                s.grade.overall,
                v.owd_ms,
                v.jitter_ms,
                v.loss_pct,
                v.mos
            );
        }
        // A 1000-packet FIFO at 5 (2) Mbit/s up is seconds; FQ-CoDel at 97 % is ms.
        assert!(
            p50(&fq.phases[1]) * 3.0 < p50(&none.phases[1]),
            "{name}: shaper p50 {} not well under none {}",
            p50(&fq.phases[1]),
            p50(&none.phases[1])
        );
        let rank = |g: &str| ["A+", "A", "B", "C", "D", "F"].iter().position(|x| *x == g);
        assert!(
            rank(&fq.grade.overall) < rank(&none.grade.overall),
            "{name}: grades"
        );
        let (mn, mf) = (none.voip.unwrap().mos, fq.voip.unwrap().mos);
        assert!(
            mf > mn,
            "{name}: MOS with the shaper {mf:.2} ≤ without {mn:.2}"
        );
    }
}

/// Behind a FIFO of seconds the call still gets its figures. irtt waits
/// for its last replies a multiple of its worst RTT; its own default (3×)
/// outlasted the runner once that RTT passed 4 s, and an interrupted irtt
/// writes nothing: the bloated runs, the ones a MOS is for, had none (`lte`
/// without a shaper, 2026-12-05). 200 packets at 192 kbit/s up are 12.6 s
/// of FIFO; 5 s of load put 4.9–5.2 s in it.
#[test]
fn a_call_behind_seconds_of_fifo_keeps_its_figures() {
    let Some(_lane) = netns(Load::Light) else {
        return;
    };
    let args = [
        "--shaper",
        "none",
        "--duration",
        "5",
        "--up",
        "192k",
        "--buffer",
        "200",
    ];
    let s = run("voip", &args, "voip-bloat");
    let worst_ms = s.phases[1].latency_ms.map_or(0.0, |l| l.max);
    // Under 4 s irtt's old wait ended in time too: the run would prove nothing.
    assert!(
        worst_ms > 4000.0,
        "the FIFO held only {worst_ms} ms: not bloated enough to test the wait"
    );
    let v = s
        .voip
        .unwrap_or_else(|| panic!("no voip figures at a worst RTT of {worst_ms} ms"));
    assert!(v.owd_ms > 1000.0 && v.mos < 2.0, "{v:?}");
}

#[test]
fn rrul_heavy_runs_with_its_shaper() {
    let Some(_lane) = netns(Load::Heavy) else {
        return;
    };
    // 2 × 100 connections take seconds to set up through the queues, and
    // 200 iperf3 streams share the two cores with sluice: the phase is
    // sane (in bounds, loaded, answered), not saturated.
    let conf = example("examples/lab/rrul-paced.conf");
    let heavy = run(
        "rrul_heavy",
        &["--shaper", &conf, "--duration", "8"],
        "rrul_heavy",
    );
    let p = &heavy.phases[1];
    within("rrul_heavy down", p.down_bps, heavy.link.down_bps, 0.3);
    within("rrul_heavy up", p.up_bps, heavy.link.up_bps, 0.3);
    assert!(p.latency_ms.is_some(), "pings answered under 200 flows");
    eprintln!(
        "rrul_heavy paced: idle {:.1} ms, load p50 {:.0} ms, loss {:.1} %, grade {}",
        heavy.idle_latency_ms.p50,
        p50(p),
        p.loss_pct,
        heavy.grade.overall
    );
}

#[test]
fn tcp_1down_runs_with_its_shaper() {
    let Some(_lane) = netns(Load::Light) else {
        return;
    };
    let conf = example("examples/lab/tcp1down-paced.conf");
    let down = run(
        "tcp_1down",
        &["--shaper", &conf, "--duration", "5"],
        "tcp_1down",
    );
    let p = phase(&down, "download");
    within_link("tcp_1down down", p.down_bps, down.link.down_bps, true);
    // The download held to 97 % of the line from its ACKs: the modem's
    // FIFO stays short (20 ms at the default duration,
    // docs/notebook/2026-11-24-tcp-control.md); a
    // bound with room for two shared cores.
    assert!(
        p50(p) <= down.idle_latency_ms.p50 + 60.0,
        "tcp_1down p50 {}",
        p50(p)
    );
    assert_eq!(down.grade.up, None, "no upload phase");
    assert!(down.grade.down.is_some());
}

/// Host `name`'s figures in phase `phase` of a multi-host run.
fn host_phase<'a>(s: &'a Summary, name: &str, phase: &str) -> &'a sluice_lab::model::HostPhase {
    s.hosts
        .iter()
        .find(|h| h.name == name)
        .and_then(|h| h.phases.iter().find(|p| p.name == phase))
        .unwrap_or_else(|| panic!("{}: no host {name} / phase {phase}", s.shaper))
}

#[test]
fn host_fair_has_two_hosts_that_both_reach_the_server() {
    let Some(_lane) = netns(Load::Light) else {
        return;
    };
    // 6 s phases (~27 s a run). The modem's FIFO is cut to 30 packets
    // (0.18 s up): iperf3 opens its 32 connections one after the other,
    // each a round trip behind host A's upload, and behind the scenario's
    // 1000-packet FIFO (6 s up) host B would not have sent anything yet.
    let flows = example("examples/lab/host-fair-flows.conf");
    let runs = pair(
        "host_fair",
        &["--duration", "6", "--buffer", "30"],
        Some(&flows),
    );
    for s in &runs {
        let names: Vec<_> = s
            .hosts
            .iter()
            .map(|h| (h.name.as_str(), h.ip.as_str()))
            .collect();
        assert_eq!(
            names,
            [("A", "10.77.0.1"), ("B", "10.77.0.2")],
            "{}",
            s.shaper
        );
        // Alone, A moves data both ways and B (silent) nothing: the goodput
        // is told apart by host.
        let (a, b) = (
            host_phase(s, "A", "host A alone"),
            host_phase(s, "B", "host A alone"),
        );
        eprintln!(
            "host_fair {} alone: A down {:.0} up {:.0}, B down {:.0} up {:.0} bit/s",
            s.shaper, a.down_bps, a.up_bps, b.down_bps, b.up_bps
        );
        assert!(a.down_bps > 1e5, "{}: A down {}", s.shaper, a.down_bps);
        assert!(
            a.up_bps > 0.3 * s.link.up_bps as f64,
            "{}: A up {}",
            s.shaper,
            a.up_bps
        );
        assert!(
            b.down_bps + b.up_bps < 1e3,
            "{}: silent B moved {} + {} bit/s",
            s.shaper,
            b.down_bps,
            b.up_bps
        );
        assert!(a.down_share_pct.unwrap() > 99.0 && a.up_share_pct.unwrap() > 99.0);
        // A pings and runs the call; B does neither.
        assert!(a.ping_ms.is_some() && a.voip.is_some(), "{}", s.shaper);
        assert!(b.ping_ms.is_none() && b.voip.is_none(), "{}", s.shaper);
        // Together, both hosts' downloads get through; the shares add up.
        let (a, b) = (
            host_phase(s, "A", "both hosts"),
            host_phase(s, "B", "both hosts"),
        );
        eprintln!(
            "host_fair {} both: A down {:.0} ({:.0} %) up {:.0} ({:.0} %); B down {:.0} ({:.0} %) up {:.0} ({:.0} %)",
            s.shaper,
            a.down_bps,
            a.down_share_pct.unwrap_or(f64::NAN),
            a.up_bps,
            a.up_share_pct.unwrap_or(f64::NAN),
            b.down_bps,
            b.down_share_pct.unwrap_or(f64::NAN),
            b.up_bps,
            b.up_share_pct.unwrap_or(f64::NAN)
        );
        // Unshaped, which of B's two clients gets its 33 connections
        // through the full FIFO first varies (each a round trip, a lost
        // SYN a second): B's goodput is counted over both directions.
        assert!(
            a.down_bps + a.up_bps > 1e5 && b.down_bps + b.up_bps > 1e5,
            "{}: both hosts move data",
            s.shaper
        );
        for (a, b) in [
            (a.down_share_pct, b.down_share_pct),
            (a.up_share_pct, b.up_share_pct),
        ] {
            let sum = a.unwrap() + b.unwrap();
            assert!(
                (sum - 100.0).abs() < 1e-6,
                "{}: shares add to {sum}",
                s.shaper
            );
        }
    }
    // Per-flow FQ-CoDel: B's 64 connections against A's 2 take most of
    // each direction (~97 % once settled; the 6 s phase includes B's
    // connection set-up and slow start).
    let fq = &runs[1];
    let (a, b) = (
        host_phase(fq, "A", "both hosts"),
        host_phase(fq, "B", "both hosts"),
    );
    assert!(
        a.down_bps.min(a.up_bps).min(b.down_bps).min(b.up_bps) > 1e5,
        "per-flow FQ: both hosts both ways"
    );
    for (dir, a, b) in [
        ("down", a.down_share_pct.unwrap(), b.down_share_pct.unwrap()),
        ("up", a.up_share_pct.unwrap(), b.up_share_pct.unwrap()),
    ] {
        assert!(
            b >= 55.0 && b > a,
            "per-flow FQ {dir}: B {b:.0} %, A {a:.0} %"
        );
    }
}
