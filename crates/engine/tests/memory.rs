//! Memory held by queued frames: counted as what is really held (buffer
//! capacity plus a fixed overhead), right-sized when a small frame waits in
//! a big receive buffer, and capped with a counted drop cause.

mod common;

use common::{bridge_keyed, config, udp_frame, LAN, WAN};
use sluice_engine::{DropCause, Engine, Rx, DEFAULT_MEMORY_LIMIT};
use sluice_sched::PACKET_OVERHEAD;
use sluice_time::{Duration, Instant};
/// What the I/O layer's pool hands over: a receive buffer sized for a
/// full frame, whatever arrived in it.
const POOL_BUFFER: usize = 2048;

fn engine(text: &str) -> Engine {
    bridge_keyed(text, [1; 16])
}

/// A slow queue with room for every frame these tests send: nothing leaves
/// while they look, and only the memory cap can refuse.
const SLOW: &str = "
altq on $ext_if priq bandwidth 64Kb queue { q }
queue q priority 1 qlimit 65535 priq(default)
";

/// A 60-byte UDP frame (the size of a bare TCP ACK) in a pool-sized buffer.
fn small_frame(i: u32) -> Vec<u8> {
    let f = udp_frame(1024 + (i % 60_000) as u16, 18);
    assert_eq!(f.len(), 60);
    let mut v = Vec::with_capacity(POOL_BUFFER);
    v.extend_from_slice(&f);
    v
}

const T0: Instant = Instant(1_000_000_000);

#[test]
fn queued_small_frames_hold_their_size_not_the_pool_buffer() {
    const N: u64 = 20_000;
    let mut e = engine(SLOW);
    let mut spares = 0u64;
    for i in 0..N as u32 {
        assert_eq!(
            e.handle_rx(T0, LAN, small_frame(i)),
            Rx::Queued { egress: WAN }
        );
        while let Some(b) = e.poll_spare() {
            assert!(b.is_empty() && b.capacity() >= POOL_BUFFER);
            spares += 1;
        }
    }
    let m = e.memory();
    assert_eq!(m.frames, N);
    // The first frame found its queue empty and kept its buffer (it would
    // usually leave at once); every later one was moved to a 60-byte buffer
    // and its pool buffer handed back.
    let per_frame = 60 + PACKET_OVERHEAD;
    let want = (N - 1) * per_frame + POOL_BUFFER as u64 + PACKET_OVERHEAD;
    assert_eq!(m.held_bytes, want, "{m:?}");
    assert_eq!(m.right_sized, N - 1);
    assert_eq!(spares, N - 1);
    // Before: every frame held its pool buffer, N × (2048 + overhead).
    let pooled = N * (POOL_BUFFER as u64 + PACKET_OVERHEAD);
    assert!(
        m.held_bytes * 10 < pooled,
        "{} bytes held, {pooled} if each frame kept its pool buffer",
        m.held_bytes
    );
    // Users still see wire bytes as backlog.
    let rep = e.report();
    let q = rep[WAN].class("q").unwrap();
    assert_eq!(q.backlog_bytes, N * 60);
    assert_eq!(m.peak_bytes, m.held_bytes);

    // Everything sent: nothing is held any more, the peak remains.
    let mut now = T0;
    let mut sent = 0;
    while sent < 50 {
        match e.poll_tx(now, WAN) {
            Some(f) => {
                assert_eq!(f.len(), 60);
                sent += 1;
            }
            None => now = e.poll_timeout().unwrap().max(now + Duration(1)),
        }
    }
    let after = e.memory();
    assert_eq!(
        after.held_bytes,
        want - POOL_BUFFER as u64 - PACKET_OVERHEAD - 49 * per_frame
    );
    assert_eq!(after.peak_bytes, m.peak_bytes);
}

#[test]
fn the_memory_cap_refuses_with_a_counted_cause_and_frees_as_frames_leave() {
    let mut e = engine(SLOW);
    assert_eq!(e.memory().limit_bytes, DEFAULT_MEMORY_LIMIT);
    let frame = |i: u16| udp_frame(2000 + i, 1458);
    // Room for 100 queued full-size frames, which are never right-sized.
    let full = frame(0).capacity() as u64 + PACKET_OVERHEAD;
    let limit = 100 * full;
    e.set_memory_limit(limit);
    let mut refused = 0;
    for i in 0..150u16 {
        let f = frame(i);
        assert_eq!(f.len(), 1500);
        match e.handle_rx(T0, LAN, f) {
            Rx::Queued { .. } => {}
            Rx::Dropped(DropCause::MemoryLimit) => refused += 1,
            other => panic!("frame {i}: {other:?}"),
        }
    }
    assert_eq!(refused, 50);
    let m = e.memory();
    assert_eq!((m.held_bytes, m.limit_drops, m.frames), (limit, 50, 100));
    assert_eq!(e.counters(WAN).unwrap().memory_drops, 50);
    let mut handed_back = 0;
    while let Some(d) = e.poll_dropped() {
        assert_eq!(
            (d.cause, d.iface, d.frame.len()),
            (DropCause::MemoryLimit, WAN, 1500)
        );
        assert_eq!(d.cause.name(), "memory-limit");
        handed_back += 1;
    }
    assert_eq!(handed_back, 50);
    // One frame leaves: room for exactly one more.
    let mut now = T0;
    loop {
        if e.poll_tx(now, WAN).is_some() {
            break;
        }
        now = e.poll_timeout().unwrap().max(now + Duration(1));
    }
    assert_eq!(
        e.handle_rx(now, LAN, frame(500)),
        Rx::Queued { egress: WAN }
    );
    assert_eq!(
        e.handle_rx(now, LAN, frame(501)),
        Rx::Dropped(DropCause::MemoryLimit)
    );
}

#[test]
fn unshaped_passthrough_frames_are_counted_too() {
    // No queue tree on either side: frames wait in the passthrough queue
    // until the I/O layer polls them.
    let mut e = engine("pass all\n");
    for i in 0..10 {
        e.handle_rx(T0, LAN, small_frame(i));
    }
    let m = e.memory();
    assert_eq!(m.frames, 10);
    assert_eq!(
        m.held_bytes,
        9 * (60 + PACKET_OVERHEAD) + POOL_BUFFER as u64 + PACKET_OVERHEAD
    );
    while e.poll_tx(T0, WAN).is_some() {}
    assert_eq!(e.memory().held_bytes, 0);
    assert_eq!(e.memory().frames, 0);
}

#[test]
fn a_reload_keeps_the_books() {
    let mut e = engine(SLOW);
    for i in 0..100 {
        e.handle_rx(T0, LAN, small_frame(i));
    }
    let before = e.memory().held_bytes;
    // Same queue name: every frame kept, still held.
    let keep = "altq on $ext_if priq bandwidth 1Mb queue { q }\nqueue q priority 2 qlimit 1000 priq(default)\n";
    let cfg = config(keep);
    assert_eq!(e.reload(&cfg).unwrap().kept, 100);
    assert_eq!(e.memory().held_bytes, before);
    // The queue vanishes: every frame dropped, nothing held.
    let gone = "altq on $ext_if priq bandwidth 1Mb queue { x }\nqueue x priority 1 priq(default)\n";
    let cfg = config(gone);
    assert_eq!(e.reload(&cfg).unwrap().dropped, 100);
    assert_eq!(e.memory().held_bytes, 0);
}
