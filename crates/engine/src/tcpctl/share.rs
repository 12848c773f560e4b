//! Shares by demand: what a trickling or idle flow does not use goes to the
//! flows that would use it.
//!
//! # Principles
//!
//! - **Max-min fairness** (Bertsekas & Gallager, *Data Networks* §6.5.2):
//!   no flow's share can grow without shrinking one that is no larger. A
//!   flow that used under half of the equal share over the last look
//!   ([`super::EPOCH`]) is *light*: it keeps twice what it used (room to
//!   grow, so a flow speeding up finds its share within a few looks); the
//!   others share the rest equally, never less than the equal share.
//! - **Cheap flows dilute nothing.** A connection that moves a byte now
//!   and then counts among the active flows, but as light it takes almost
//!   nothing from the level; one host's hundred idle sockets leave a
//!   download its rate.
//! - **When in doubt, equal.** With no heavy flow (all starting, or all
//!   light) the level is the equal share: a flow in slow start looks light
//!   and must not be shown a window as if it had the class alone.
//! - The same rule shares between hosts (by-host classes), each host's
//!   demand the sum of its flows'; within a host its flows share equally.

use sluice_time::Duration;

/// The share (bit/s) of each heavy flow of a class paced at `pace_bps`
/// whose `n` sharing flows include `light` flows that used `used_bps` in
/// all: at least the equal share `pace / n`.
pub(super) fn level(pace_bps: u64, n: u32, light: u32, used_bps: u64) -> u64 {
    let n = n.max(1);
    let equal = pace_bps / u64::from(n);
    let heavy = n.saturating_sub(light);
    if heavy == 0 {
        return equal;
    }
    let rest = pace_bps.saturating_sub(used_bps.saturating_mul(2));
    (rest / u64::from(heavy)).max(equal)
}

/// What a group of flows (a class's, or by host a class's hosts') used
/// since the last look: `(light members, their use in bit/s)`, a member
/// being light when it used under half of `equal_bps`. `uses`: bytes
/// each member had acknowledged over `dt`.
pub(super) fn light_use(
    uses: impl Iterator<Item = u64>,
    dt: Duration,
    equal_bps: u64,
) -> (u32, u64) {
    let (mut light, mut used) = (0u32, 0u64);
    for bytes in uses {
        let bps = rate_bps(bytes, dt);
        if bps.saturating_mul(2) < equal_bps {
            light += 1;
            used = used.saturating_add(bps);
        }
    }
    (light, used)
}

/// `bytes` over `dt` in bit/s.
fn rate_bps(bytes: u64, dt: Duration) -> u64 {
    let bps = u128::from(bytes) * 8 * 1_000_000_000 / u128::from(dt.0.max(1));
    u64::try_from(bps).unwrap_or(u64::MAX)
}

#[cfg(test)]
mod tests {
    use super::*;

    const LOOK: Duration = Duration::from_millis(250);

    #[test]
    fn trickling_flows_leave_the_heavy_one_the_rest() {
        // 10 Mbit/s, one bulk flow and 99 that each moved 10 bytes.
        let uses = std::iter::once(300_000).chain(std::iter::repeat_n(10, 99));
        let (light, used) = light_use(uses, LOOK, 10_000_000 / 100);
        assert_eq!((light, used), (99, 99 * 320));
        let l = level(10_000_000, 100, light, used);
        assert!(l > 9_900_000, "{l}");
    }

    #[test]
    fn equal_users_share_equally_and_no_heavy_flow_means_equal() {
        let uses = std::iter::repeat_n(78_125, 4); // 2.5 Mbit/s each
        let (light, used) = light_use(uses, LOOK, 10_000_000 / 4);
        assert_eq!((light, used), (0, 0));
        assert_eq!(level(10_000_000, 4, light, used), 2_500_000);
        // All four starting (light): the equal share, not the whole class.
        assert_eq!(level(10_000_000, 4, 4, 400_000), 2_500_000);
    }

    #[test]
    fn a_light_flow_keeps_room_to_double() {
        // Two flows at 10 Mbit/s: one used 1 Mbit/s, the other takes the
        // rest but 2 Mbit/s.
        let (light, used) = light_use([31_250u64, 300_000].into_iter(), LOOK, 5_000_000);
        assert_eq!((light, used), (1, 1_000_000));
        assert_eq!(level(10_000_000, 2, light, used), 8_000_000);
    }

    #[test]
    fn never_below_the_equal_share_nor_dividing_by_zero() {
        assert_eq!(level(10_000_000, 0, 0, 0), 10_000_000);
        assert_eq!(level(10_000_000, 2, 1, u64::MAX), 5_000_000);
        assert_eq!(rate_bps(1, Duration::ZERO), 8_000_000_000);
    }
}
