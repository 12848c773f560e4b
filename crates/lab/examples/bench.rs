//! Data-plane benchmark: the same namespaces, kernel bridge versus sluice.
//!
//! `cargo build --release -p sluice && cargo run --release -p sluice-lab
//! --example bench -- target/release/sluice` (as root; needs iperf3).
//! Prints one table: UDP 64 B and 1500 B frames per second received, TCP
//! goodput, for the kernel bridge, sluice unshaped (TPACKET_V3 ring and
//! recvmmsg) and sluice with FQ-CoDel at a rate it cannot reach. The traffic
//! generator is one iperf3 on the same two cores, so absolute pps figures
//! are bounded by it; the ratio to the kernel is the figure to read.

use sluice_lab::iperf3::{self, ClientOptions};
use sluice_lab::{have_tools, Netns, Topology};
use std::time::Duration;

const SECONDS: u32 = 4;

fn build() -> std::io::Result<(Topology, Netns, Netns, Netns)> {
    let mut t = Topology::new("bench");
    let c = t.add_ns("c")?;
    let s = t.add_ns("s")?;
    let v = t.add_ns("v")?;
    t.veth(&c, "c0", &s, "lan0")?;
    t.veth(&v, "v0", &s, "wan0")?;
    t.addr(&c, "c0", "10.78.0.1/24")?;
    t.addr(&v, "v0", "10.78.0.2/24")?;
    let (cm, vm) = (t.mac(&c, "c0")?, t.mac(&v, "v0")?);
    t.neigh(&c, "c0", "10.78.0.2", &vm)?;
    t.neigh(&v, "v0", "10.78.0.1", &cm)?;
    Ok((t, c, s, v))
}

/// (udp 64 B frames/s, udp 1514 B frames/s, tcp goodput bit/s)
fn measure(t: &mut Topology, c: &Netns, v: &Netns, port: &mut u16) -> (f64, f64, f64) {
    let mut run = |udp: Option<u32>| {
        *port += 1;
        iperf3::server(t, v, *port).expect("iperf3 server");
        let mut o = ClientOptions::new("10.78.0.2", *port);
        o.seconds = SECONDS;
        o.udp_len = udp;
        iperf3::client(t, c, &o).expect("iperf3 client")
    };
    // 18 B payload + 8 UDP + 20 IP + 14 Ethernet = 60 B (64 with FCS).
    let small = run(Some(18)).udp.map_or(0.0, |u| u.received_pps());
    let big = run(Some(1472)).udp.map_or(0.0, |u| u.received_pps());
    let tcp = run(None).goodput_bps;
    (small, big, tcp)
}

fn main() {
    let bin = std::env::args()
        .nth(1)
        .unwrap_or_else(|| "target/release/sluice".into());
    if let Err(why) = have_tools(&["iperf3", "ethtool", "ss"]) {
        eprintln!("bench: SKIP: {why}");
        return;
    }
    let (mut t, c, s, v) = build().expect("namespaces");
    let mut port = 5300u16;
    let mut rows: Vec<(String, (f64, f64, f64))> = Vec::new();

    for cmd in [
        &["link", "add", "br0", "type", "bridge"][..],
        &["link", "set", "lan0", "master", "br0"],
        &["link", "set", "wan0", "master", "br0"],
        &["link", "set", "br0", "up"],
    ] {
        t.ip(&s, cmd).expect("bridge");
    }
    std::thread::sleep(Duration::from_millis(300));
    rows.push(("kernel bridge".into(), measure(&mut t, &c, &v, &mut port)));
    t.ip(&s, &["link", "del", "br0"]).expect("bridge del");
    for i in ["lan0", "wan0"] {
        t.ip(&s, &["link", "set", i, "up"]).expect("up");
    }

    let dir = std::env::temp_dir().join(s.name());
    std::fs::create_dir_all(&dir).expect("tmp dir");
    let unshaped = dir.join("unshaped.conf");
    std::fs::write(&unshaped, "pass keep state\n").unwrap();
    let fq = dir.join("fqcodel.conf");
    std::fs::write(
        &fq,
        "queue fq on $ext_if bandwidth 10G flows 1024 qlimit 10240 default\n\
         pass keep state\n",
    )
    .unwrap();
    let cases = [
        ("sluice ring, unshaped", "ring", &unshaped),
        ("sluice mmsg, unshaped", "mmsg", &unshaped),
        ("sluice ring, fq-codel 10G", "ring", &fq),
    ];
    for (name, io, conf) in cases {
        let conf = conf.to_string_lossy().to_string();
        let log = dir.join("sluice.log");
        let id = t
            .spawn(
                &s,
                &[
                    &bin,
                    "run",
                    "-f",
                    &conf,
                    "--bridge",
                    "lan0,wan0",
                    "--io",
                    io,
                    "-v",
                ],
                Some(&log),
            )
            .expect("sluice");
        let mut up = false;
        for _ in 0..50 {
            if t.exec(&c, &["ping", "-c", "1", "-W", "1", "10.78.0.2"])
                .is_ok()
            {
                up = true;
                break;
            }
            std::thread::sleep(Duration::from_millis(100));
        }
        if !up {
            eprintln!(
                "bench: {name}: no path\n{}",
                std::fs::read_to_string(&log).unwrap_or_default()
            );
            return;
        }
        rows.push((name.into(), measure(&mut t, &c, &v, &mut port)));
        let _ = t.stop(id, "TERM");
    }
    let _ = std::fs::remove_dir_all(&dir);

    let k = rows[0].1;
    println!("| path | UDP 64 B kpps | ratio | UDP 1514 B kpps | ratio | TCP Gbit/s | ratio |");
    println!("|---|---:|---:|---:|---:|---:|---:|");
    for (name, (a, b, tcp)) in &rows {
        println!(
            "| {name} | {:.0} | {:.2} | {:.0} | {:.2} | {:.2} | {:.2} |",
            a / 1e3,
            a / k.0,
            b / 1e3,
            b / k.1,
            tcp / 1e9,
            tcp / k.2
        );
    }
}
