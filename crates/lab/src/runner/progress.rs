//! Progress on stderr: a bar redrawn in place on a terminal, one line per
//! phase otherwise (CI has no TTY).

use crate::model::Scenario;
use std::io::{IsTerminal, Write};

/// How progress is shown on stderr.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Progress {
    Off,
    /// One line per phase (no TTY, e.g. CI).
    Lines,
    /// A bar redrawn in place.
    Bar,
}

impl Progress {
    /// A bar on a terminal, lines otherwise.
    pub fn auto() -> Progress {
        if std::io::stderr().is_terminal() {
            Progress::Bar
        } else {
            Progress::Lines
        }
    }
}

pub(crate) struct Bar {
    pub(crate) mode: Progress,
    pub(crate) tag: String,
    pub(crate) last_phase: Option<usize>,
}

impl Bar {
    pub(crate) fn show(&mut self, s: &Scenario, t: f64) {
        let windows = s.phase_windows();
        let total = s.total_secs();
        let Some(i) = windows.iter().position(|&(a, b)| t >= a && t < b) else {
            return;
        };
        let n = windows.len();
        let name = &s.phases[i].name;
        let left = (total - t).max(0.0);
        let phase_left = (windows[i].1 - t).max(0.0);
        match self.mode {
            Progress::Off => {}
            Progress::Lines => {
                if self.last_phase != Some(i) {
                    let _ = writeln!(
                        std::io::stderr(),
                        "[{}] phase {}/{n} {name} ({:.0} s), {left:.0} s left",
                        self.tag,
                        i + 1,
                        s.phases[i].secs
                    );
                }
            }
            Progress::Bar => {
                const WIDTH: usize = 30;
                let done = ((t / total.max(1e-9)) * WIDTH as f64) as usize;
                let done = done.min(WIDTH);
                let _ = write!(
                    std::io::stderr(),
                    "\r\x1b[K[{}] [{}{}] phase {}/{n} {name}: {phase_left:.0} s, run {left:.0} s left",
                    self.tag,
                    "#".repeat(done),
                    "-".repeat(WIDTH - done),
                    i + 1
                );
                let _ = std::io::stderr().flush();
            }
        }
        self.last_phase = Some(i);
    }

    pub(crate) fn note(&mut self, msg: &str) {
        match self.mode {
            Progress::Off => {}
            Progress::Lines => {
                let _ = writeln!(std::io::stderr(), "[{}] {msg}", self.tag);
            }
            Progress::Bar => {
                let _ = write!(std::io::stderr(), "\r\x1b[K[{}] {msg}", self.tag);
                let _ = std::io::stderr().flush();
            }
        }
    }

    pub(crate) fn done(&mut self) {
        if self.mode == Progress::Bar {
            let _ = writeln!(std::io::stderr());
        }
    }
}
