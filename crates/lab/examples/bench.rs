//! Data-plane benchmark (issue #3): the kernel bridge versus sluice on the
//! same namespaces. The logic is `sluice_lab::bench`; this prints its table.
//!
//! `cargo build --release -p sluice && cargo run --release -p sluice-lab
//! --example bench -- target/release/sluice [--repeats N] [--ring]
//! [--seconds S] [--accuracy-only | --no-accuracy] [--rates BPS,…] [--json FILE]` (as
//! root; needs iperf3).

use sluice_lab::bench::{self, BenchOptions};
use std::process::ExitCode;

fn main() -> ExitCode {
    let mut args = std::env::args().skip(1);
    let mut bin = "target/release/sluice".to_string();
    let mut json = None;
    let mut o = BenchOptions::default();
    // Bounded by the argument list.
    while let Some(a) = args.next() {
        let mut num = |what: &str| -> Option<u32> {
            let v = args.next().and_then(|v| v.parse().ok());
            if v.is_none() {
                eprintln!("bench: {what} needs a number");
            }
            v
        };
        match a.as_str() {
            "--repeats" => match num("--repeats") {
                Some(n) => o.repeats = n,
                None => return ExitCode::FAILURE,
            },
            "--seconds" => match num("--seconds") {
                Some(n) => o.seconds = n,
                None => return ExitCode::FAILURE,
            },
            "--ring" => o.io_methods.push("ring".into()),
            "--accuracy-only" => o.forwarding = false,
            "--no-accuracy" => o.accuracy_rates_bps.clear(),
            "--rates" => {
                let list = args.next().unwrap_or_default();
                match list
                    .split(',')
                    .map(str::parse)
                    .collect::<Result<Vec<u64>, _>>()
                {
                    Ok(v) => o.accuracy_rates_bps = v,
                    Err(e) => {
                        eprintln!("bench: --rates BPS,BPS,…: {e}");
                        return ExitCode::FAILURE;
                    }
                }
            }
            "--json" => json = args.next(),
            _ => bin = a,
        }
    }
    let report = match bench::run(&bin, &o, &mut |line| eprintln!("bench: {line}")) {
        Ok(r) => r,
        Err(e) => {
            eprintln!("bench: {e}");
            return ExitCode::FAILURE;
        }
    };
    print!("{}", bench::table(&report));
    if let Some(path) = json {
        let text = serde_json::to_string_pretty(&report).expect("a report serialises");
        if let Err(e) = std::fs::write(&path, text) {
            eprintln!("bench: {path}: {e}");
            return ExitCode::FAILURE;
        }
    }
    ExitCode::SUCCESS
}
