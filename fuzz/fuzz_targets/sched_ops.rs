//! Random operation sequences against disciplines, with the trait's
//! invariants asserted after every step (sluice_sched::testing).
#![no_main]
use sluice_sched::testing::{check_bytes, OpSpace};
use sluice_sched::{fifo, fq_codel, ClassId, Qdisc};

libfuzzer_sys::fuzz_target!(|data: &[u8]| {
    let Some((&which, ops)) = data.split_first() else { return };
    let space = OpSpace { classes: vec![ClassId(1), ClassId(2), ClassId(3)], ..OpSpace::default() };
    let mut q: Box<dyn Qdisc> = match which % 2 {
        0 => Box::new(fifo::Fifo::new(fifo::Params { limit_packets: 20, limit_bytes: None })),
        _ => Box::new(fq_codel::FqCodel::new(fq_codel::Params::default())),
    };
    check_bytes(q.as_mut(), &space, ops);
});
