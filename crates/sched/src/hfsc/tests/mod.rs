//! HFSC guarantees in virtual time: the link is simulated by sending one
//! packet, advancing time by its transmission time at the link rate, repeat.

mod contract;
mod guarantees;
mod sharing;
mod support;
