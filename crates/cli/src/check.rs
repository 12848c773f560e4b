//! `sluice check [-v] [-D name=value]… FILE…`

use crate::out::{ewrite, ewriteln, owrite};
use clap::Args as ClapArgs;
use std::process::ExitCode;

#[derive(ClapArgs)]
pub struct Args {
    /// Print the canonical form of each file (it parses back to itself).
    #[arg(short, long)]
    verbose: bool,
    /// Refuse what pfctl loads and sluice only warns about: a rule naming
    /// a queue that does not exist.
    #[arg(long)]
    strict: bool,
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

/// A file through the daemon's own bounded read (regular files of at most
/// `sluice_control::MAX_CONFIG_BYTES`); standard input through the same cap.
fn read(file: &str) -> Result<String, String> {
    if file == "-" {
        use std::io::Read;
        let cap = sluice_control::MAX_CONFIG_BYTES;
        let mut text = String::new();
        std::io::stdin()
            .take(cap + 1)
            .read_to_string(&mut text)
            .map_err(|e| format!("cannot read {file}: {e}"))?;
        if text.len() as u64 > cap {
            return Err(format!(
                "standard input is over the cap of {cap} bytes on a configuration"
            ));
        }
        Ok(text)
    } else {
        sluice_control::read_config(std::path::Path::new(file))
    }
}

pub fn run(a: Args) -> ExitCode {
    let mut ok = true;
    for file in &a.files {
        let text = match read(file) {
            Ok(t) => t,
            Err(e) => {
                ewriteln!("error: {e}");
                ok = false;
                continue;
            }
        };
        // Table files are read as pfctl reads them: relative to our cwd.
        let opts = sluice_conf::CheckOptions {
            strict: a.strict,
            files: Some(&sluice_control::TableFiles),
        };
        match sluice_conf::check_with(file, &text, &a.define, &opts) {
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
