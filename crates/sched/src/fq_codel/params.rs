//! FQ-CoDel's configuration: Linux's defaults and ranges.

use crate::ack_filter::AckFilter;
use sluice_time::Duration;
use std::fmt;

/// Largest `flows` value (Linux's limit too).
pub const MAX_FLOWS: u32 = 65_536;

/// Configuration of [`FqCodel`]. Defaults are Linux's.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Params {
    /// Number of flow queues, 1..=65536.
    pub flows: u32,
    /// Bytes of `cost` a flow may send per round.
    pub quantum_bytes: u32,
    /// Maximum resident packets.
    pub limit_packets: u32,
    /// Maximum resident memory (sum of [`Packet::truesize`]).
    pub memory_limit_bytes: u64,
    /// CoDel target (acceptable standing delay).
    pub target: Duration,
    /// CoDel interval.
    pub interval: Duration,
    /// Mark ECT packets instead of dropping them (CoDel decisions only;
    /// overflow always drops).
    pub ecn: bool,
    /// Most packets dropped from the fattest flow per overflow.
    pub drop_batch: u32,
    /// Thin redundant pure ACKs on enqueue (off by default).
    pub ack_filter: AckFilter,
    /// Fairness between hosts before flows (off: per flow only).
    pub isolation: Isolation,
}

/// Which hosts share fairly before their flows do (CAKE's flow modes with
/// per-flow fairness inside a host; see the module's principles).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub enum Isolation {
    /// Per-flow fairness only (RFC 8290).
    #[default]
    Flows,
    /// Between source hosts (`dual-srchost`): a LAN's hosts on the upload.
    SrcHost,
    /// Between destination hosts (`dual-dsthost`): a LAN's hosts on the
    /// download.
    DstHost,
    /// Between source and destination hosts at once (`triple-isolate`).
    Both,
}

impl Isolation {
    pub fn is_on(self) -> bool {
        self != Isolation::Flows
    }
}

impl Default for Params {
    fn default() -> Self {
        Params {
            flows: 1024,
            quantum_bytes: 1514,
            limit_packets: 10_240,
            memory_limit_bytes: 32 << 20,
            target: Duration::from_millis(5),
            interval: Duration::from_millis(100),
            ecn: true,
            drop_batch: 64,
            ack_filter: AckFilter::Off,
            isolation: Isolation::Flows,
        }
    }
}

/// A parameter outside its range.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ParamError {
    Flows(u32),
    Quantum(u32),
    Limit(u32),
    DropBatch(u32),
}

impl fmt::Display for ParamError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ParamError::Flows(v) => write!(f, "fq_codel: flows {v} out of range (1..=65536)"),
            ParamError::Quantum(v) => write!(f, "fq_codel: quantum {v} must be at least 1 byte"),
            ParamError::Limit(v) => write!(f, "fq_codel: limit {v} must be at least 1 packet"),
            ParamError::DropBatch(v) => write!(f, "fq_codel: drop batch {v} must be at least 1"),
        }
    }
}

impl std::error::Error for ParamError {}

impl Params {
    /// Checks the ranges; [`FqCodel::new`] clamps instead of failing.
    pub fn validate(&self) -> Result<(), ParamError> {
        if self.flows == 0 || self.flows > MAX_FLOWS {
            return Err(ParamError::Flows(self.flows));
        }
        if self.quantum_bytes == 0 {
            return Err(ParamError::Quantum(self.quantum_bytes));
        }
        if self.limit_packets == 0 {
            return Err(ParamError::Limit(self.limit_packets));
        }
        if self.drop_batch == 0 {
            return Err(ParamError::DropBatch(self.drop_batch));
        }
        Ok(())
    }
}
