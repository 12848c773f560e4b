//! Every shipped example checks clean (no errors) and survives the printer.

use sluice_conf::{check, print, strip_lines, Severity};
use std::fs;
use std::path::Path;

fn example(name: &str, defines: &[(String, String)]) -> sluice_conf::Checked {
    let p = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../../examples")
        .join(name);
    let text = fs::read_to_string(&p).unwrap();
    let c = check(name, &text, defines).unwrap_or_else(|d| {
        panic!(
            "{name}:\n{}",
            d.iter().map(|d| d.render(name, &text)).collect::<String>()
        )
    });
    let again = check("printed", &print(&c.config), &[]).expect("printed form checks");
    assert_eq!(strip_lines(&again.config), strip_lines(&c.config), "{name}");
    c
}

#[test]
fn all_examples_check() {
    let d = vec![("ext_if".to_string(), "em0".to_string())];
    for n in [
        "priq-ack.conf",
        "openbsd-fqcodel.conf",
        "cbq-borrow.conf",
        "hfsc-realtime.conf",
        "dummynet-opnsense.conf",
        "fairq.conf",
    ] {
        example(n, &[]);
    }
    example("hfsc-qlimit9.conf", &d);
}

#[test]
fn hfsc_qlimit9_needs_its_define() {
    let text = fs::read_to_string(
        Path::new(env!("CARGO_MANIFEST_DIR")).join("../../examples/hfsc-qlimit9.conf"),
    )
    .unwrap();
    let d = check("f", &text, &[]).unwrap_err();
    assert!(
        d.iter()
            .all(|d| d.severity == Severity::Error && d.message.contains("$ext_if")),
        "{d:?}"
    );
    assert!(d[0].hint.as_deref().unwrap_or("").contains("-D ext_if="));
    let c = example("hfsc-qlimit9.conf", &[("ext_if".into(), "em0".into())]);
    let q = &c.config.interfaces[0].queues[0];
    assert_eq!((q.name.as_str(), q.qlimit, q.default), ("bb", 9, true));
    assert_eq!(q.bandwidth, Some(sluice_time::Rate::mbps(1)));
    assert!(
        c.warnings.is_empty(),
        "9 packets at 1 Mbit/s drain in 108 ms: no warning"
    );
}

#[test]
fn dummynet_example_maps_to_pipes() {
    use sluice_conf::ir::{PipeSched, SchedKind};
    let c = example("dummynet-opnsense.conf", &[]);
    let cfg = &c.config;
    assert_eq!(cfg.interfaces.len(), 2);
    let up = &cfg.interfaces[0];
    assert_eq!(
        (up.ifname.as_str(), up.sched, up.bandwidth.as_bps()),
        ("em0", SchedKind::Pipe, 970_000)
    );
    let pipe = up.pipe.as_ref().unwrap();
    let PipeSched::FqCodel(f) = pipe.sched else {
        panic!("fq_codel expected")
    };
    assert!(f.ecn);
    assert_eq!(f.target, sluice_time::Duration::from_millis(5));
    assert_eq!(
        up.queues
            .iter()
            .map(|q| (q.name.as_str(), q.weight))
            .collect::<Vec<_>>(),
        vec![("up_ack", Some(10)), ("up_bulk", Some(1))]
    );
    assert_eq!(up.queues[up.default_queue].name, "up_bulk");
    assert_eq!(
        cfg.options.overhead,
        vec![("em0".to_string(), sluice_time::Overhead::plain(38))]
    );
    assert_eq!(
        cfg.rules[0].queue,
        Some(("up_bulk".into(), Some("up_ack".into())))
    );
    assert_eq!(cfg.rules[1].to.port, Some(sluice_conf::ir::PortOp::Eq(53)));
}
