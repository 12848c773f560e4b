use super::*;

#[test]
fn scripts_decode_to_the_ops_they_were_written_from() {
    let frame = Frame {
        v6: true,
        l4: L4::Udp,
        flags: 3,
        tos: 5,
        vlan: true,
        host: 2,
        remote: 3,
        port: 6,
        alt_sport: true,
        payload: 200,
    };
    let ops = vec![
        Op::Rx {
            iface: 1,
            frame,
            damage: None,
        },
        Op::Rx {
            iface: 0,
            frame,
            damage: Some(Damage::Truncate(17)),
        },
        Op::Rx {
            iface: 1,
            frame: Frame { flags: 5, ..frame },
            damage: Some(Damage::Xor(3, 0x80)),
        },
        Op::RxRaw {
            iface: 1,
            bytes: vec![1, 2, 3],
        },
        Op::PollTx { iface: 1, max: 16 },
        Op::Step {
            step: 15,
            back: true,
        },
        Op::Service,
        Op::Timeout,
        Op::Reload { config: 6 },
    ];
    let bytes = Script::new(4, true).ops(&ops).bytes();
    let (setup, back) = decode(&bytes).unwrap();
    assert_eq!(
        setup,
        Setup {
            config: 4,
            fixed_addrs: true
        }
    );
    assert_eq!(back, ops);
}

#[test]
fn every_shipped_config_builds() {
    for config in 0..CONFIGS.len() {
        Checker::new(Setup {
            config,
            fixed_addrs: false,
        });
    }
}

#[test]
fn the_books_catch_a_frame_that_never_went_in() {
    let mut c = Checker::new(Setup {
        config: 6,
        fixed_addrs: false,
    });
    let r = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| c.out(60, "sent")));
    assert!(r.is_err());
}
