//! What the configuration language's test files share.

use sluice_conf::{print, strip_lines, Checked};

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
