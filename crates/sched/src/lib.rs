//! Every queueing discipline of sluice, behind one object-safe trait.
//!
//! Owns: the [`Packet`] as schedulers see it (an opaque frame plus the metadata
//! they need), the [`Qdisc`] trait, drop reasons, per-queue statistics, and the
//! disciplines: FIFO, PRIQ, FAIRQ, CBQ, HFSC, RED/RIO, CoDel, FQ-CoDel, DRR, WF2Q+, the
//! token-bucket regulator and the dummynet-style pipe, the ingress mode of
//! the two shapers (drops charged as if sent, [`ingress`]), and the ACK
//! filter a FIFO, RED/RIO or FQ-CoDel leaf applies on enqueue. Depends on
//! `sluice-time`, and on `sluice-wire` for the ACK filter's reading of TCP
//! headers. Sans-IO: every time-dependent call takes `now`; nothing here
//! reads a clock or makes a syscall. Disciplines never write packet bytes
//! (only the ACK filter reads them): ECN marking sets [`Packet::ecn`] and
//! the caller rewrites the header on the way out.
//!
//! The op-sequence model checker in [`testing`] asserts the invariants of the
//! trait after every step; every discipline runs through it.
#![forbid(unsafe_code)]

pub mod ack_filter;
mod class;
mod leaf;
mod packet;
mod qdisc;
mod stats;
pub mod testing;

pub mod codel;
pub mod fifo;
pub mod fq_codel;
pub mod priq;
pub mod red;

pub mod hfsc;
pub mod ingress;

pub mod cbq;
pub mod drr;
pub mod fairq;
pub mod pipe;
pub mod tbr;
pub mod wf2q;

pub use ack_filter::AckFilter;
pub use packet::{ClassId, Ecn, Packet, PACKET_OVERHEAD};
pub use qdisc::{DropReason, Dropped, Drops, Enqueue, Qdisc, HOLD_PASS_BYTES};
pub use stats::QueueStats;
