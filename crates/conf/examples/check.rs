//! Development aid: `cargo run -p sluice-conf --example check -- FILE [-D name=value]…`
//! prints the canonical form and warnings, or the diagnostics (exit 1).

fn main() {
    let mut args = std::env::args().skip(1);
    let mut file = None;
    let mut defines = Vec::new();
    while let Some(a) = args.next() {
        if a == "-D" {
            if let Some((k, v)) = args.next().as_deref().and_then(|d| d.split_once('=')) {
                defines.push((k.to_string(), v.to_string()));
            }
        } else {
            file = Some(a);
        }
    }
    let Some(file) = file else {
        eprintln!("usage: check FILE [-D name=value]...");
        std::process::exit(2);
    };
    let text = std::fs::read_to_string(&file).unwrap_or_else(|e| {
        eprintln!("{file}: {e}");
        std::process::exit(2)
    });
    match sluice_conf::check(&file, &text, &defines) {
        Ok(c) => {
            for w in &c.warnings {
                eprint!("{}", w.render(&file, &text));
            }
            print!("{}", sluice_conf::print(&c.config));
        }
        Err(d) => {
            for d in &d {
                eprint!("{}", d.render(&file, &text));
            }
            std::process::exit(1);
        }
    }
}
