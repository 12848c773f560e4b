//! Random operation sequences against every discipline, with the trait's
//! invariants asserted after every step (sluice_sched::testing). The first
//! byte picks the discipline, the rest are operations.
#![no_main]
use sluice_sched::testing::{check_bytes, OpSpace};
use sluice_sched::{
    cbq, codel, drr, fifo, fq_codel, hfsc, pipe, priq, red, tbr, wf2q, ClassId, Qdisc,
};
use sluice_time::{Duration, Rate};

fn leaf() -> Box<dyn Qdisc> {
    Box::new(fifo::Fifo::new(fifo::Params { limit_packets: 8, limit_bytes: None }))
}

fn make(which: u8) -> Box<dyn Qdisc> {
    let classes = [ClassId(1), ClassId(2), ClassId(3)];
    match which % 11 {
        0 => leaf(),
        1 => Box::new(fq_codel::FqCodel::new(fq_codel::Params { flows: 4, limit_packets: 16, ..Default::default() })),
        2 => Box::new(codel::Codel::new(codel::Params::default(), 16)),
        3 => Box::new(red::Red::new(red::Params { ecn: true, ..Default::default() })),
        4 => {
            let mut p = priq::Priq::new();
            for (i, c) in classes.iter().enumerate() {
                p.add_class(*c, i as u8 * 3, leaf()).unwrap();
            }
            p.set_default(classes[0]).unwrap();
            Box::new(p)
        }
        5 => {
            let mut h = hfsc::Hfsc::new(Rate::mbps(1));
            let ls = |k| Some(hfsc::ServiceCurve::linear(Rate::kbps(k)));
            h.add_class(classes[0], None, hfsc::ClassParams { ls: ls(300), ..Default::default() }, Some(leaf())).unwrap();
            h.add_class(classes[1], None, hfsc::ClassParams { rt: ls(200), ls: ls(300), ul: ls(400) }, Some(leaf())).unwrap();
            h.add_class(classes[2], None, hfsc::ClassParams { ls: ls(400), ul: ls(100), ..Default::default() }, Some(leaf())).unwrap();
            h.set_default(classes[0]).unwrap();
            Box::new(tbr::Tbr::new(tbr::Params::for_rate(Rate::mbps(1)), Box::new(h)))
        }
        6 => {
            let mut c = cbq::Cbq::new(Rate::mbps(1));
            for (i, id) in classes.iter().enumerate() {
                let p = cbq::ClassParams { rate: Rate::kbps(300), priority: i as u8, borrow: i == 0 };
                c.add_class(*id, None, p, Some(leaf())).unwrap();
            }
            c.set_default(classes[0]).unwrap();
            Box::new(c)
        }
        7 => {
            let mut d = drr::Drr::new(1514);
            for (i, c) in classes.iter().enumerate() {
                d.add_class(*c, 1 + 4 * i as u32, leaf()).unwrap();
            }
            d.set_default(classes[0]).unwrap();
            Box::new(d)
        }
        8 => {
            let mut w = wf2q::Wf2q::new();
            for (i, c) in classes.iter().enumerate() {
                w.add_class(*c, 1 + 4 * i as u32, leaf()).unwrap();
            }
            w.set_default(classes[0]).unwrap();
            Box::new(w)
        }
        9 => Box::new(pipe::Pipe::new(
            pipe::Params {
                rate: Rate::mbps(2),
                delay: Duration::from_millis(10),
                loss_ppm: 50_000,
                seed: 7,
                queue_limit_packets: 20,
                ..Default::default()
            },
            leaf(),
        )),
        _ => Box::new(tbr::Tbr::new(tbr::Params::for_rate(Rate::kbps(128)), leaf())),
    }
}

libfuzzer_sys::fuzz_target!(|data: &[u8]| {
    let Some((&which, ops)) = data.split_first() else { return };
    let space = OpSpace { classes: vec![ClassId(1), ClassId(2), ClassId(3)], ..OpSpace::default() };
    let mut q = make(which);
    check_bytes(q.as_mut(), &space, ops);
});
