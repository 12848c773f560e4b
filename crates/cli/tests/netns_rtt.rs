//! Passive RTT of real TCP through `sluice run` (issue #13 item 4): an
//! upload shaped to 2 Mbit/s behind a 100-packet queue. The state shows
//! the half toward the server (which includes sluice's own queue: the
//! timing starts when a segment reaches sluice) far above the half toward
//! the client (a veth away), and the metrics histogram has the samples.
//!
//! Needs root, `ip`, `ping`, `iperf3`, `ss`, `python3` (scripts/setup.sh);
//! otherwise SKIP, or FAIL under `SLUICE_REQUIRE_NETNS=1` (sluice-testkit).

use sluice_control::proto::{Reply, StateJson};
use sluice_lab::iperf3::ClientOptions;
use sluice_lab::SERVER_IP;
use sluice_testkit::{bridge_lab, iperf3, Sluice};

const METRICS: &str = "127.0.0.1:9189";

fn bin() -> String {
    Sluice::locate(env!("CARGO_BIN_EXE_sluice")).path
}

fn ms(ns: u64) -> f64 {
    ns as f64 / 1e6
}

#[test]
fn a_shaped_upload_shows_its_queue_in_the_rtt_toward_the_server() {
    let Some((_serial, mut lab)) = bridge_lab("rt", &["ip", "ping", "iperf3", "ss", "python3"])
    else {
        return;
    };
    let b = bin();
    let conf = "altq on $ext_if hfsc bandwidth 2Mb queue { up }\n\
        queue up bandwidth 100% qlimit 100 hfsc(default)\n\
        pass out on $ext_if proto tcp keep state\n";
    lab.start_sluice(&b, conf, &["--metrics", METRICS])
        .unwrap_or_else(|e| panic!("{e}"));
    let mut o = ClientOptions::new(SERVER_IP, 5301);
    // One measurement in flight per direction: at ~250 ms of queue, 6 s
    // gives ~24 samples toward the server.
    o.seconds = 6;
    // The states outlive the transfer (tcp.closed): read them afterwards.
    let up = iperf3(&mut lab, "upload", &o);
    let Reply::States(st) = lab.show(&b, "states").unwrap_or_else(|e| panic!("{e}")) else {
        panic!("show states answered something else");
    };
    let data: Vec<&StateJson> = st
        .states
        .iter()
        .filter(|s| s.dst_port == 5301 && s.rtt_to_dst.is_some())
        .collect();
    let s = data
        .iter()
        .max_by_key(|s| s.bytes[0])
        .unwrap_or_else(|| panic!("no timed state of the upload: {:?}", st.states));
    let (to_dst, to_src) = (s.rtt_to_dst.clone().unwrap(), s.rtt_to_src.clone());
    let metrics = lab
        .topo
        .exec(
            &lab.shaper,
            &[
                "python3",
                "-c",
                &format!(
                    "import urllib.request;print(urllib.request.urlopen('http://{METRICS}/metrics').read().decode())"
                ),
            ],
        )
        .expect("scrape");
    let text = String::from_utf8_lossy(&metrics.stdout);
    let count = text
        .lines()
        .find_map(|l| l.strip_prefix("sluice_tcp_rtt_seconds_count{endpoint=\"responder\"} "))
        .and_then(|v| v.trim().parse::<u64>().ok())
        .unwrap_or(0);
    eprintln!(
        "netns_rtt: upload {:.2} Mbit/s; toward the server smoothed {:.1} ms (min {:.1}, {} samples), \
         toward the client {:?}; metrics: {count} samples toward responders",
        up.goodput_bps / 1e6,
        ms(to_dst.smoothed_ns),
        ms(to_dst.min_ns),
        to_dst.samples,
        to_src.as_ref().map(|r| ms(r.smoothed_ns)),
    );
    assert!(to_dst.samples >= 10, "{to_dst:?}");
    assert!(to_dst.min_ns <= to_dst.smoothed_ns);
    // 100 × 1514 B at 2 Mbit/s is 600 ms; CUBIC keeps much of it queued.
    assert!(
        ms(to_dst.smoothed_ns) > 30.0,
        "the queue does not show toward the server: {to_dst:?}"
    );
    let to_src = to_src.expect("the client's ACKs time the half toward it");
    assert!(
        ms(to_src.smoothed_ns) < 10.0,
        "a veth away should be well under 10 ms: {to_src:?}"
    );
    assert!(
        count >= u64::from(to_dst.samples) / 2,
        "metrics count {count}\n{text}"
    );
    assert!(lab.stop_sluice().unwrap().is_some_and(|s| s.success()));
}
