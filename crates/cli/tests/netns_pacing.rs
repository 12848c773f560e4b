//! Many downloads that start together behind a modem with a short FIFO
//! (issue #13): real kernel TCP (CUBIC) through `sluice run`, the modem an
//! htb at 10 Mbit/s with a FIFO of 100 full frames on the server's side — before
//! sluice, where a download's queue forms. The same 24 downloads run twice,
//! with the download queue as it is and with `ack-pacing window-clamp`:
//! without control their initial windows and slow start overrun the FIFO;
//! with it the FIFO drops nothing, at no cost in goodput.
//!
//! Needs root, `ip`, `tc`, `ping`, `iperf3`, `ss` (scripts/setup.sh);
//! otherwise SKIP, or FAIL under `SLUICE_REQUIRE_NETNS=1` (sluice-testkit).

use sluice_control::proto::QueueJson;
use sluice_lab::iperf3::ClientOptions;
use sluice_lab::{BridgeLab, SERVER_IP};
use sluice_testkit::{bridge_lab, iperf3, Sluice};

const FLOWS: u32 = 24;
/// The FIFO in bytes (100 full frames): a packet count would count the
/// server's GSO super-packets as one each.
const FIFO_BYTES: u32 = 100 * 1514;

fn bin() -> String {
    Sluice::locate(env!("CARGO_BIN_EXE_sluice")).path
}

/// The download queue at 97 % of the modem, FQ-CoDel in ingress mode;
/// `control` adds TCP control.
fn conf(control: &str) -> String {
    format!(
        "queue down on $int_if bandwidth 9700K ingress {control}\n\
         queue dl parent down bandwidth 9700K flows 1024 qlimit 1024 default\n\
         pass out on $int_if keep state set queue dl\n"
    )
}

/// (fresh) modem on the server's link: 10 Mbit/s, a `FIFO_BYTES` queue.
fn modem(lab: &BridgeLab) {
    sluice_testkit::modem(lab, &lab.server, "v0", "10mbit", FIFO_BYTES);
}

/// Packets the modem's FIFO dropped.
fn modem_drops(lab: &BridgeLab) -> u64 {
    let out = lab
        .topo
        .exec(&lab.server, &["tc", "-s", "qdisc", "show", "dev", "v0"])
        .expect("tc -s");
    let text = String::from_utf8_lossy(&out.stdout).to_string();
    let fifo = text
        .split("qdisc ")
        .find(|q| q.starts_with("bfifo"))
        .unwrap_or_else(|| panic!("no bfifo in {text}"));
    fifo.split("(dropped ")
        .nth(1)
        .and_then(|r| r.split(',').next())
        .and_then(|n| n.trim().parse().ok())
        .unwrap_or_else(|| panic!("no drop count in {fifo}"))
}

struct Run {
    goodput_bps: f64,
    drops: u64,
    dl: QueueJson,
}

fn run(lab: &mut BridgeLab, b: &str, control: &str, port: u16) -> Run {
    modem(lab);
    lab.start_sluice(b, &conf(control), &[])
        .unwrap_or_else(|e| panic!("{e}"));
    let mut o = ClientOptions::new(SERVER_IP, port);
    o.reverse = true;
    o.parallel = FLOWS;
    o.seconds = 6;
    let r = iperf3(lab, "downloads", &o);
    let q = lab.queues(b).unwrap_or_else(|e| panic!("{e}"));
    let dl = q
        .ifaces
        .iter()
        .flat_map(|i| i.queues.iter())
        .find(|q| q.name == "dl")
        .cloned()
        .expect("queue dl");
    let drops = modem_drops(lab);
    lab.stop_sluice().expect("stop");
    Run {
        goodput_bps: r.goodput_bps,
        drops,
        dl,
    }
}

#[test]
fn many_downloads_starting_together_leave_the_modem_fifo_short() {
    let Some((_serial, mut lab)) = bridge_lab("pc", &["ip", "tc", "ping", "iperf3", "ss"]) else {
        return;
    };
    let b = bin();
    let free = run(&mut lab, &b, "", 5311);
    let ctl = run(&mut lab, &b, "ack-pacing window-clamp", 5312);
    eprintln!(
        "netns_pacing: {FLOWS} downloads; modem drops {} → {}, goodput {:.2} → {:.2} Mbit/s; tcp {:?}",
        free.drops,
        ctl.drops,
        free.goodput_bps / 1e6,
        ctl.goodput_bps / 1e6,
        ctl.dl.tcp
    );
    assert!(
        free.drops > 0,
        "the uncontrolled start must overrun the FIFO"
    );
    assert_eq!(
        ctl.drops, 0,
        "with TCP control the modem's FIFO drops nothing"
    );
    assert!(
        ctl.goodput_bps >= 0.95 * free.goodput_bps.min(8.5e6),
        "goodput {:.2} against {:.2} Mbit/s uncontrolled",
        ctl.goodput_bps / 1e6,
        free.goodput_bps / 1e6
    );
    let tcp = ctl.dl.tcp.expect("dl is under control");
    assert!(tcp.windows_clamped > 0 && tcp.acks_held > 0, "{tcp:?}");
    assert!(free.dl.tcp.is_none());
}
