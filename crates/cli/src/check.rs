//! `sluice check [-v] [-D name=value]… FILE…`

use crate::out::{ewrite, ewriteln, owrite};
use clap::Args as ClapArgs;
use std::process::ExitCode;

#[derive(ClapArgs)]
pub struct Args {
    /// Print the canonical form of each file (it parses back to itself).
    #[arg(short, long)]
    verbose: bool,
    /// Define a macro, as pfctl -D does (e.g. -D ext_if=em0). Repeatable.
    #[arg(short = 'D', value_name = "NAME=VALUE", value_parser = parse_define)]
    define: Vec<(String, String)>,
    /// Configuration files in the pf.conf dialect ("-" reads standard input).
    #[arg(required = true, value_name = "FILE")]
    files: Vec<String>,
}

fn parse_define(s: &str) -> Result<(String, String), String> {
    match s.split_once('=') {
        Some((n, v)) if !n.is_empty() => Ok((n.to_string(), v.to_string())),
        _ => Err(format!("expected NAME=VALUE, got `{s}`")),
    }
}

fn read(file: &str) -> std::io::Result<String> {
    if file == "-" {
        std::io::read_to_string(std::io::stdin())
    } else {
        std::fs::read_to_string(file)
    }
}

pub fn run(a: Args) -> ExitCode {
    let mut ok = true;
    for file in &a.files {
        let text = match read(file) {
            Ok(t) => t,
            Err(e) => {
                ewriteln!("error: cannot read {file}: {e}");
                ok = false;
                continue;
            }
        };
        match sluice_conf::check(file, &text, &a.define) {
            Ok(checked) => {
                for w in &checked.warnings {
                    ewrite!("{}", w.render(file, &text));
                }
                if a.verbose {
                    owrite!("{}", sluice_conf::print(&checked.config));
                }
            }
            Err(diags) => {
                for d in &diags {
                    ewrite!("{}", d.render(file, &text));
                }
                ok = false;
            }
        }
    }
    if ok {
        ExitCode::SUCCESS
    } else {
        ExitCode::FAILURE
    }
}
