//! Named configurations on the simulator: a shaper on each side of sluice
//! below a symmetric modem, bulk TCP one way and a pinger, and one line of
//! outcomes per case (the snapshot's format).

use super::{Dir, Link, Load, Outcome, Sim};
use crate::{Engine, Options};
use sluice_time::{Duration, Rate};
use std::fmt::Write as _;

/// The discipline sluice shapes with.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Shaper {
    /// A `pipe` with `sched fq_codel` each way (the download one `ingress`).
    FqCodel,
    /// `altq … priq`: ICMP at priority 7, the rest at 1 (qlimit 50).
    Priq,
}

/// One row of the table.
#[derive(Clone, Copy, Debug)]
pub struct Case {
    pub shaper: Shaper,
    /// The modem's rate each way; sluice shapes at 95 % of it.
    pub mbps: u64,
    pub flows: usize,
    /// Base round trip (twice the delay line's one way).
    pub rtt_ms: u64,
    pub dir: Dir,
    /// `ack-pacing window-clamp` on both shapers.
    pub ack_pacing: bool,
    /// FQ-CoDel only: both pipes start at twice the modem's rate under
    /// `autorate (min ¼, max 2×)`, which must find the modem's rate from
    /// the traffic's own delay (crate::autorate).
    pub autorate: bool,
}

impl Case {
    pub fn name(&self) -> String {
        format!(
            "{} {}M {} {}x rtt{}{}",
            match self.shaper {
                Shaper::FqCodel => "fq_codel",
                Shaper::Priq => "priq",
            },
            self.mbps,
            match self.dir {
                Dir::Down => "down",
                Dir::Up => "up",
            },
            self.flows,
            self.rtt_ms,
            if self.ack_pacing { " ack-pacing" } else { "" },
        ) + if self.autorate { " autorate" } else { "" }
    }

    /// The pf.conf text (`lan0` the LAN side, `wan0` the modem's).
    pub fn conf(&self) -> String {
        let mut kbps = self.mbps * 1000 * 95 / 100;
        let mut ctl = String::from(if self.ack_pacing {
            " ack-pacing window-clamp"
        } else {
            ""
        });
        if self.autorate {
            let k = self.mbps * 1000;
            kbps = 2 * k;
            ctl += &format!(" autorate (min {}Kb, max {}Kb)", k / 4, 2 * k);
        }
        match self.shaper {
            Shaper::FqCodel => format!(
                "pipe up on wan0 bandwidth {kbps}Kb sched fq_codel{ctl}\n\
                 pipe down on lan0 bandwidth {kbps}Kb sched fq_codel ingress{ctl}\n\
                 queue up_q pipe up default\n\
                 queue down_q pipe down default\n\
                 pass out on wan0 keep state queue up_q\n\
                 pass out on lan0 keep state queue down_q\n"
            ),
            Shaper::Priq => {
                let opts = if self.ack_pacing {
                    "priq(default ack-pacing window-clamp)"
                } else {
                    "priq(default)"
                };
                format!(
                    "altq on wan0 priq bandwidth {kbps}Kb queue {{ u_hi, u_lo }}\n\
                     queue u_hi priority 7\n\
                     queue u_lo priority 1 {opts}\n\
                     altq on lan0 priq bandwidth {kbps}Kb queue {{ d_hi, d_lo }}\n\
                     queue d_hi priority 7\n\
                     queue d_lo priority 1 {opts}\n\
                     pass out on wan0 keep state queue u_lo\n\
                     pass out on lan0 keep state queue d_lo\n\
                     pass out on wan0 proto icmp keep state queue u_hi\n\
                     pass out on lan0 proto icmp keep state queue d_hi\n"
                )
            }
        }
    }

    /// The engine of [`conf`](Self::conf), with a fixed hash key.
    pub fn engine(&self) -> Result<Engine, String> {
        let text = self.conf();
        let cfg = sluice_conf::check("netsim.conf", &text, &[])
            .map_err(|d| {
                d.iter()
                    .map(|d| d.render("netsim.conf", &text))
                    .collect::<String>()
            })?
            .config;
        Engine::new(&cfg, Options::bridge("lan0", "wan0", [7; 16])).map_err(|e| e.to_string())
    }

    pub fn link(&self) -> Link {
        let rate = Rate::mbps(self.mbps);
        Link {
            down: rate,
            up: rate,
            // 100 full frames, as a modem's (and the lab's `netns_pacing`).
            fifo_bytes: 100 * 1514,
            one_way: Duration::from_millis(self.rtt_ms / 2),
        }
    }

    /// Long enough for a 1 Mbit/s flow to leave slow start and settle;
    /// at 100 Mbit/s a shorter run holds as many round trips and frames.
    pub fn load(&self) -> Load {
        let (warmup, duration) = match self.mbps {
            0..=1 => (4000, 12_000),
            2..=99 => (2000, 5000),
            _ => (1000, 2500),
        };
        Load {
            flows: self.flows,
            dir: self.dir,
            ping_every: Duration::from_millis(20),
            warmup: Duration::from_millis(warmup),
            duration: Duration::from_millis(duration),
        }
    }

    pub fn run(&self) -> Result<Outcome, String> {
        Ok(Sim::new(self.engine()?, self.link(), self.load()).run())
    }
}

/// A case's outcomes: total and per-flow goodput (Mbit/s), Jain's index,
/// the pinger's p50/p99 (ms) and losses, drops in sluice by cause, in the
/// modem, the senders' retransmissions and timeouts; with autorate, the
/// shapers' final rates (Mbit/s) and the decisions logged.
pub fn render(name: &str, o: &Outcome) -> String {
    let mbit = |r: Rate| r.as_bps() as f64 / 1e6;
    let ms = |d: Option<Duration>| d.map_or(f64::NAN, |d| d.as_nanos() as f64 / 1e6);
    let mut s = format!("{name}\n  goodput {:.3} [", mbit(o.total()));
    for (k, g) in o.goodput.iter().enumerate() {
        let sep = if k == 0 { "" } else { " " };
        let _ = write!(s, "{sep}{:.3}", mbit(*g));
    }
    let _ = write!(
        s,
        "] jain {:.3}\n  ping p50 {:.1} p99 {:.1} lost {}\n  drops sluice {}",
        o.jain(),
        ms(o.rtt_percentile(50)),
        ms(o.rtt_percentile(99)),
        o.pings_lost,
        o.engine_drops.values().sum::<u64>(),
    );
    for (cause, n) in &o.engine_drops {
        let _ = write!(s, " {cause}={n}");
    }
    let _ = writeln!(
        s,
        " modem {} retransmits {} timeouts {}",
        o.modem_drops, o.retransmits, o.timeouts
    );
    if let Some((down, up, logged)) = o.autorate {
        let _ = writeln!(
            s,
            "  autorate down {:.3} up {:.3} decisions {logged}",
            mbit(down),
            mbit(up)
        );
    }
    s
}
