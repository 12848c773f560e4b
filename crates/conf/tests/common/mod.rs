//! What the configuration language's test files share.

use sluice_conf::{print, strip_lines, Checked};
use std::fs;
use std::path::{Path, PathBuf};

/// The `.conf` files of `dir` (below this crate), sorted, each with its
/// file name and text.
pub fn conf_files(dir: &str) -> Vec<(PathBuf, String, String)> {
    let d = Path::new(env!("CARGO_MANIFEST_DIR")).join(dir);
    let mut v: Vec<PathBuf> = fs::read_dir(&d)
        .unwrap_or_else(|e| panic!("{}: {e}", d.display()))
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|x| x == "conf"))
        .collect();
    v.sort();
    v.into_iter()
        .map(|f| {
            let name = f.file_name().unwrap().to_string_lossy().to_string();
            let text = fs::read_to_string(&f).unwrap();
            (f, name, text)
        })
        .collect()
}

/// The `#-D name=value` lines of a file's header: command-line defines.
pub fn defines(text: &str) -> Vec<(String, String)> {
    text.lines()
        .filter_map(|l| l.strip_prefix("#-D "))
        .filter_map(|d| d.trim().split_once('='))
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect()
}

/// `None` when `c` (checked from file `name`) prints to a form that checks
/// back to the same configuration and prints to itself again; otherwise
/// what went wrong.
pub fn fixed_point_failure(name: &str, c: &Checked) -> Option<String> {
    let printed = print(&c.config);
    match sluice_conf::check("printed.conf", &printed, &[]) {
        Ok(again) => {
            if strip_lines(&again.config) != strip_lines(&c.config) {
                return Some(format!(
                    "{name}: reading the printed form back changed the config:\n{printed}"
                ));
            }
            let twice = print(&again.config);
            (twice != printed)
                .then(|| format!("{name}: printing is not a fixed point:\n{printed}\n---\n{twice}"))
        }
        Err(d) => {
            let r: String = d
                .iter()
                .map(|d| d.render("printed.conf", &printed))
                .collect();
            Some(format!(
                "{name}: the printed form does not check:\n{r}\n{printed}"
            ))
        }
    }
}
