//! `sluice init --down RATE --up RATE [--link L] [--autorate] [--hosts]
//! [--wan IF --lan IF] [-o FILE]`: a commented pf.conf for a line, from
//! the recipe in `sluice_conf::recipe` (sqm-scripts' few knobs).
//!
//! # Principles
//! - The recipe is a pure function of the knobs; this module parses the
//!   flags and writes the text (stdout, or `-o FILE`).
//! - Exit status: 0 written; 2 a knob refused (a rate out of range or
//!   nonsense, like clap's usage errors); 1 the file could not be written.

use crate::out::{ewriteln, owrite};
use clap::Args as ClapArgs;
use sluice_conf::recipe::{line_rate, recipe, Knobs, Link};
use std::process::ExitCode;

#[derive(ClapArgs)]
pub struct Args {
    /// The line's download rate, measured (e.g. 30M, 512k, 1.5G): the
    /// shaper takes 95 % of it. Bits per second.
    #[arg(long, value_name = "RATE")]
    down: String,
    /// The line's upload rate, measured; the shaper takes 95 % of it.
    #[arg(long, value_name = "RATE")]
    up: String,
    /// The line's framing: its per-packet overhead (and ATM cells on adsl
    /// and pppoe); raw adds none (a shaper upstream that counts Ethernet
    /// frames); lte and starlink also get autorate.
    #[arg(long, value_name = "LINK", default_value = "ethernet",
          value_parser = ["ethernet", "raw", "docsis", "vdsl", "adsl", "pppoe", "lte", "starlink"])]
    link: String,
    /// Follow a rate that moves (on by default for lte and starlink):
    /// between a quarter of each rate and the rate given.
    #[arg(long)]
    autorate: bool,
    /// Share each direction fairly between LAN hosts first, then between
    /// each host's flows (CAKE's dual-srchost/dual-dsthost).
    #[arg(long)]
    hosts: bool,
    /// The WAN-side interface (toward the modem): the file's ext_if.
    #[arg(long, value_name = "IF", default_value = "wan0")]
    wan: String,
    /// The LAN-side interface: the file's int_if.
    #[arg(long, value_name = "IF", default_value = "lan0")]
    lan: String,
    /// Write the configuration to FILE instead of standard output.
    #[arg(short = 'o', long = "output", value_name = "FILE")]
    output: Option<std::path::PathBuf>,
}

pub fn run(a: Args) -> ExitCode {
    let knobs = line_rate("--down", &a.down).and_then(|down| {
        Ok(Knobs {
            down,
            up: line_rate("--up", &a.up)?,
            link: Link::from_name(&a.link).unwrap_or(Link::Ethernet),
            autorate: a.autorate,
            hosts: a.hosts,
            wan: a.wan.clone(),
            lan: a.lan.clone(),
        })
    });
    let text = match knobs.and_then(|k| recipe(&k)) {
        Ok(t) => t,
        Err(e) => {
            ewriteln!("error: {e}");
            return ExitCode::from(2);
        }
    };
    match &a.output {
        None => {
            owrite!("{text}");
            ExitCode::SUCCESS
        }
        Some(path) => match std::fs::write(path, &text) {
            Ok(()) => ExitCode::SUCCESS,
            Err(e) => {
                ewriteln!("error: cannot write {}: {e}", path.display());
                ExitCode::FAILURE
            }
        },
    }
}
