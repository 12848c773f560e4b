//! Hostile hosts in the lab (`sluice lab run --attack KIND`, issue #36):
//! one LAN host that plays against the shaper while the scenario's victim
//! downloads and calls, so a report shows both with and without it.
//!
//! # Principles
//! - Bounded in count and time: each attack has a fixed budget of frames
//!   and seconds that the attacker process enforces itself
//!   (`sluice lab attack`, crates/cli/src/lab/attack.rs), and the runner
//!   stops it at its planned end whatever it is doing.
//! - Inside the lab only: the attacker sends from the client namespace's
//!   `c0`; every address it writes (its own, spoofed LAN sources,
//!   fabricated claims) is inside the lab's 10.77.0.0/16, and its frames
//!   go no further than the lab's modem and server namespaces.
//! - A second process in the client namespace, not a host of its own: a
//!   second LAN host needs the switch namespace in the path, so the run
//!   with the attack would not cross the same network as the run without.
//!   The shaper sees an attack only through the frames on `lan0`, which
//!   are the same from either place.
//! - It starts [`LEAD_S`] into the first loaded phase, once the victim's
//!   download is under way, and ends with that phase (a SYN flood after
//!   its 5 s).

use serde::{Deserialize, Serialize};

/// How long after the first loaded phase begins the attack starts.
pub const LEAD_S: f64 = 5.0;
/// The port of the attacker's own TCP peer in the server namespace (the
/// forged-ACK connection and the SYN flood's target).
pub const SINK_PORT: u16 = 5399;
/// Longest an attack runs, whatever the phase's length.
pub const MAX_SECS: f64 = 600.0;
/// The SYN flood's rate and length (issue #36's goal).
pub const SYN_PER_S: u32 = 1000;
pub const SYN_FLOOD_S: f64 = 5.0;
/// Gratuitous ARP claims: how many addresses, how often refreshed (just
/// under the 60 s after which the shaper forgets a quiet address).
pub const CLAIMS: u32 = 256;
pub const CLAIM_REFRESH_S: f64 = 59.0;
/// One forged ACK every this many seconds.
pub const FORGED_ACK_EVERY_S: f64 = 5.0;
/// The forged ACK's advance beyond what the peer sent (RFC 793's largest
/// "newer" ACK in sequence space).
pub const FORGED_ADVANCE: u32 = 0x7fff_ffff;

/// What the hostile host does.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Attack {
    /// Opens its own TCP connection through the shaper to the server
    /// namespace, then sends pure ACKs on it acknowledging
    /// [`FORGED_ADVANCE`] bytes beyond what the server sent.
    ForgedAck,
    /// [`SYN_PER_S`] SYNs per second from spoofed LAN sources to a
    /// listening port, for [`SYN_FLOOD_S`].
    SynFlood,
    /// [`CLAIMS`] gratuitous ARPs for fabricated addresses, refreshed
    /// every [`CLAIM_REFRESH_S`].
    AddrClaims,
    /// `Scenario::lying`'s connections from one remote host
    /// ([`crate::topo::LIAR_IP`], the server namespace's second address,
    /// another network than the victim's server) whose TCP timestamp clock lies: the server's TCP
    /// sends, the delay line rewrites its TSval (`sluice delay-line
    /// --ts-lie`), and the client holds the connections open.
    LyingClock,
}

/// How a lying remote clock runs (`--lie`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Clock {
    /// TSval ticks honestly for 3 s (past a receiver's clock check), then
    /// stops.
    Frozen,
    /// TSval runs 1.2× the real clock from the start.
    Fast,
    /// TSval ticks honestly for 3 s, then runs 0.8×: it falls behind as if
    /// each segment waited longer and longer (added server-side delay).
    Slow,
}

impl Clock {
    pub const ALL: [Clock; 3] = [Clock::Frozen, Clock::Fast, Clock::Slow];

    pub fn name(self) -> &'static str {
        match self {
            Clock::Frozen => "frozen",
            Clock::Fast => "fast",
            Clock::Slow => "slow",
        }
    }

    pub fn parse(s: &str) -> Result<Clock, String> {
        Clock::ALL
            .into_iter()
            .find(|c| c.name() == s.trim())
            .ok_or_else(|| format!("`{s}`: allowed: frozen, fast (1.2x), slow (0.8x)"))
    }

    /// (numerator, denominator) of the lying clock's rate.
    pub fn rate(self) -> (u64, u64) {
        match self {
            Clock::Frozen => (0, 1),
            Clock::Fast => (6, 5),
            Clock::Slow => (4, 5),
        }
    }
}

/// The lying connections of [`Attack::LyingClock`].
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Lying {
    /// How many (issue #36: 2, 6 and 50).
    pub liars: u32,
    pub clock: Clock,
}

impl Default for Lying {
    fn default() -> Self {
        Lying {
            liars: 6,
            clock: Clock::Frozen,
        }
    }
}

/// Most lying connections (the attacker's peer serves this many).
pub const MAX_LIARS: u32 = 64;

impl Attack {
    pub const ALL: [Attack; 4] = [
        Attack::ForgedAck,
        Attack::SynFlood,
        Attack::AddrClaims,
        Attack::LyingClock,
    ];

    pub fn name(self) -> &'static str {
        match self {
            Attack::ForgedAck => "forged-ack",
            Attack::SynFlood => "syn-flood",
            Attack::AddrClaims => "addr-claims",
            Attack::LyingClock => "lying-clock",
        }
    }

    /// `none` is no attack.
    pub fn parse(s: &str) -> Result<Option<Attack>, String> {
        let t = s.trim();
        if t == "none" {
            return Ok(None);
        }
        Attack::ALL
            .into_iter()
            .find(|a| a.name() == t)
            .map(Some)
            .ok_or_else(|| {
                let names: Vec<_> = Attack::ALL.iter().map(|a| a.name()).collect();
                format!("`{s}`: allowed attacks: none, {}", names.join(", "))
            })
    }

    /// Whether it needs a listener of its own in the server namespace.
    pub fn needs_sink(self) -> bool {
        matches!(
            self,
            Attack::ForgedAck | Attack::SynFlood | Attack::LyingClock
        )
    }
}

/// When an attack runs in a scenario: `[start_s, start_s + secs)`.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Plan {
    pub attack: Attack,
    pub start_s: f64,
    pub secs: f64,
}

/// What the attack did (`summary.json`'s `attack`).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct AttackRecord {
    pub kind: Attack,
    /// Where it ran from.
    pub from: String,
    pub start_s: f64,
    /// When its process ended (run time), if it was seen to.
    pub end_s: Option<f64>,
    /// Crafted frames sent.
    pub sent: u64,
    /// The attacker's own account (connection, addresses used…).
    pub detail: String,
    /// `lying-clock`: how many connections lied, and how.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub lying: Option<Lying>,
    /// Why it did not run as planned.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
}

/// The attacker's report on stdout: one JSON object.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct AttackerOutput {
    pub sent: u64,
    pub detail: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_round_trip_and_none_is_no_attack() {
        for a in Attack::ALL {
            assert_eq!(Attack::parse(a.name()), Ok(Some(a)));
            let json = serde_json::to_string(&a).unwrap();
            assert_eq!(json, format!("\"{}\"", a.name()));
        }
        assert_eq!(Attack::parse("none"), Ok(None));
        let e = Attack::parse("ddos").unwrap_err();
        assert!(e.contains("forged-ack") && e.contains("none"), "{e}");
    }

    #[test]
    fn lying_clocks_are_named_and_labelled() {
        for c in Clock::ALL {
            assert_eq!(Clock::parse(c.name()), Ok(c));
        }
        assert!(Clock::parse("1.2x").unwrap_err().contains("frozen"));
        assert_eq!(Clock::Fast.rate(), (6, 5));
        let mut s = crate::scenario::tcp_1down();
        assert_eq!(s.run_label("x.conf"), "x.conf");
        s.attack = Some(Attack::LyingClock);
        s.lying = Lying {
            liars: 50,
            clock: Clock::Slow,
        };
        assert_eq!(s.run_label("x.conf"), "x.conf + lying-clock 50 slow");
        s.attack = Some(Attack::SynFlood);
        assert_eq!(s.run_label("x.conf"), "x.conf + syn-flood");
    }

    #[test]
    fn the_attack_starts_into_the_loaded_phase_and_ends_with_it() {
        let mut s = crate::scenario::tcp_1down();
        for p in &mut s.phases {
            p.secs = 20.0;
        }
        assert_eq!(s.attack_plan(), None);
        s.attack = Some(Attack::ForgedAck);
        let p = s.attack_plan().unwrap();
        assert_eq!((p.start_s, p.secs), (25.0, 15.0));
        s.attack = Some(Attack::SynFlood);
        assert_eq!(s.attack_plan().unwrap().secs, SYN_FLOOD_S);
        // A short phase: a quarter of it first.
        for p in &mut s.phases {
            p.secs = 8.0;
        }
        assert_eq!(s.attack_plan().unwrap().start_s, 10.0);
    }
}
