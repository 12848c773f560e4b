//! The metrics server's routes: `/metrics`, the web dashboard (`/`) and
//! the JSON it reads (`/api/snapshot`, `/api/states`).
//!
//! # Principles
//! - **One data path**: the JSON is the control protocol's own messages
//!   (`show queues|info|health|states --json`), serialised by serde as
//!   the control socket does; the page derives rates from their counters.
//! - **Self-contained**: one page, its CSS, JS and SVG charts inline
//!   (docs/adr/0004-dashboard.md); its Content-Security-Policy lets it
//!   reach nothing but this server.
//! - **Bad input costs nothing**: the route is decided from the request
//!   line alone; an unknown path (404) or another method (405, `Allow`)
//!   is answered without taking the engine lock. Read-only: no route
//!   changes anything.

use crate::proto::{HealthReply, InfoReply, QueuesReply, StatesReply};
use crate::{snapshot, DaemonState};
use serde::{Deserialize, Serialize};
use std::borrow::Cow;
use std::io::{self, Write};

/// The page, served as it is.
const PAGE: &str = include_str!("dashboard.html");

/// States in `/api/states`, the largest by bytes: the page's per-host
/// shares are of the top talkers, and a busy table's 100 000 states
/// would be megabytes each poll.
pub const DASHBOARD_STATES_CAP: usize = 1000;

/// Only the page may run scripts, and only this server is reachable.
const PAGE_HEADERS: &str = "Content-Security-Policy: default-src 'none'; \
    script-src 'unsafe-inline'; style-src 'unsafe-inline'; connect-src 'self'; \
    img-src data:; base-uri 'none'; form-action 'none'\r\n\
    X-Content-Type-Options: nosniff\r\nCache-Control: no-store\r\n";
const JSON_HEADERS: &str = "X-Content-Type-Options: nosniff\r\nCache-Control: no-store\r\n";
const ALLOW: &str = "Allow: GET, HEAD\r\n";

/// What the server can serve.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Route {
    Metrics,
    Page,
    Snapshot,
    States,
}

fn route(path: &str) -> Option<Route> {
    match path {
        "/metrics" => Some(Route::Metrics),
        "/" | "/index.html" => Some(Route::Page),
        "/api/snapshot" => Some(Route::Snapshot),
        "/api/states" => Some(Route::States),
        _ => None,
    }
}

/// `GET /api/snapshot`: what `show queues`, `show info` and `show health`
/// print with `--json`, copied under one engine lock (a metrics scrape's
/// copy).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Snapshot {
    pub queues: QueuesReply,
    pub info: InfoReply,
    pub health: HealthReply,
}

/// An HTTP answer: status line, type, extra header lines, body.
pub(super) struct Answer {
    pub status: &'static str,
    pub ctype: &'static str,
    pub headers: &'static str,
    pub body: Cow<'static, str>,
}

impl Answer {
    pub fn text(status: &'static str, body: &'static str) -> Answer {
        Answer {
            status,
            ctype: "text/plain; charset=utf-8",
            headers: "",
            body: Cow::Borrowed(body),
        }
    }

    /// Writes the answer; `head_only` (a HEAD request): without its body.
    pub fn write(&self, s: &mut impl Write, head_only: bool) -> io::Result<()> {
        let head = format!(
            "HTTP/1.0 {}\r\nContent-Type: {}\r\nContent-Length: {}\r\n{}Connection: close\r\n\r\n",
            self.status,
            self.ctype,
            self.body.len(),
            self.headers
        );
        s.write_all(head.as_bytes())?;
        if head_only {
            return Ok(());
        }
        s.write_all(self.body.as_bytes())
    }
}

/// The answer to `method path`; the engine lock is taken only for a GET
/// or HEAD of a route that reads the engine.
pub(super) fn answer(method: &str, path: &str, state: &DaemonState) -> Answer {
    let Some(r) = route(path) else {
        return Answer::text("404 Not Found", "not found\n");
    };
    if method != "GET" && method != "HEAD" {
        return Answer {
            headers: ALLOW,
            ..Answer::text("405 Method Not Allowed", "GET or HEAD only\n")
        };
    }
    match r {
        Route::Metrics => Answer {
            status: "200 OK",
            ctype: "text/plain; version=0.0.4; charset=utf-8",
            headers: "",
            body: Cow::Owned(super::render(state)),
        },
        Route::Page => Answer {
            status: "200 OK",
            ctype: "text/html; charset=utf-8",
            headers: PAGE_HEADERS,
            body: Cow::Borrowed(PAGE),
        },
        Route::Snapshot => json(&snapshot(state)),
        Route::States => json(&top_states(snapshot::states(state))),
    }
}

fn json(v: &impl Serialize) -> Answer {
    match serde_json::to_string(v) {
        Ok(body) => Answer {
            status: "200 OK",
            ctype: "application/json",
            headers: JSON_HEADERS,
            body: Cow::Owned(body),
        },
        Err(_) => Answer::text("500 Internal Server Error", "cannot serialise\n"),
    }
}

/// The dashboard's copy: one engine lock, as a metrics scrape.
pub fn snapshot(state: &DaemonState) -> Snapshot {
    let s = snapshot::scrape(state);
    Snapshot {
        queues: s.queues,
        info: s.info,
        health: s.health,
    }
}

/// `show states`' answer cut to its [`DASHBOARD_STATES_CAP`] largest by
/// bytes (both ways); `total` still counts them all.
pub fn top_states(mut r: StatesReply) -> StatesReply {
    r.states
        .sort_unstable_by_key(|s| std::cmp::Reverse(s.bytes[0].saturating_add(s.bytes[1])));
    r.states.truncate(DASHBOARD_STATES_CAP);
    r
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testing::example_daemon;

    fn locks() -> u64 {
        crate::LOCKS_TAKEN.with(|n| n.get())
    }

    fn written(a: &Answer, head_only: bool) -> String {
        let mut out = Vec::new();
        a.write(&mut out, head_only).unwrap();
        String::from_utf8(out).unwrap()
    }

    /// An unknown path is 404 whatever the method, and neither it nor a
    /// known path asked with another method takes the engine lock.
    #[test]
    fn bad_requests_are_answered_without_the_engine_lock() {
        let d = example_daemon("dash-bad");
        let before = locks();
        for (method, path) in [
            ("GET", "/nope"),
            ("GET", "/api/"),
            ("GET", "/metrics/"),
            ("GET", "/index.htm"),
            ("POST", "/nope"),
            ("GET", ""),
            ("", ""),
        ] {
            let a = answer(method, path, &d.state);
            assert_eq!(a.status, "404 Not Found", "{method} {path}");
            assert!(!written(&a, false).contains("Allow:"));
        }
        for method in ["POST", "PUT", "DELETE", "OPTIONS", "PATCH", "get", "BREW"] {
            for path in ["/", "/metrics", "/api/snapshot", "/api/states"] {
                let a = answer(method, path, &d.state);
                assert_eq!(a.status, "405 Method Not Allowed", "{method} {path}");
                let text = written(&a, false);
                assert!(text.contains("\r\nAllow: GET, HEAD\r\n"), "{text}");
            }
        }
        assert_eq!(locks() - before, 0, "engine locks taken by bad requests");
    }

    /// HEAD: GET's status and headers, its Content-Length, no body.
    #[test]
    fn head_is_get_without_the_body() {
        let d = example_daemon("dash-head");
        for path in ["/", "/api/snapshot", "/metrics"] {
            let get = written(&answer("GET", path, &d.state), false);
            let head = written(&answer("HEAD", path, &d.state), true);
            let (get_head, body) = get.split_once("\r\n\r\n").unwrap();
            assert!(head.ends_with("\r\n\r\n") && head.starts_with("HTTP/1.0 200 OK\r\n"));
            assert!(!body.is_empty(), "{path}");
            // The snapshot's uptime moves between the two; its length may too.
            if path == "/" {
                assert_eq!(head, format!("{get_head}\r\n\r\n"));
            } else {
                assert!(head.contains("Content-Length: "), "{head}");
            }
        }
    }

    /// The JSON is `show queues|info|health --json`'s messages, from one
    /// engine lock.
    #[test]
    fn the_snapshot_is_the_show_messages_under_one_lock() {
        let d = example_daemon("dash-snap");
        let before = locks();
        let a = answer("GET", "/api/snapshot", &d.state);
        assert_eq!(locks() - before, 1, "engine locks per snapshot");
        assert_eq!((a.status, a.ctype), ("200 OK", "application/json"));
        let s: Snapshot = serde_json::from_str(&a.body).unwrap();
        assert_eq!(s.queues, snapshot::queues(&d.state));
        // Equal but for how long the verdict has held (a wall clock).
        let mut health = snapshot::health(&d.state);
        assert_eq!(health.directions.len(), s.health.directions.len());
        for (h, mine) in health.directions.iter_mut().zip(&s.health.directions) {
            h.since_ns = mine.since_ns;
        }
        assert_eq!(s.health, health);
        let info = snapshot::info(&d.state);
        assert_eq!(
            (&s.info.counters, s.info.states),
            (&info.counters, info.states)
        );
        let q = s.queues.ifaces.iter().find(|i| i.name == "wan0").unwrap();
        assert!(q.queues.iter().any(|q| q.name == "q_def" && q.packets > 0));
    }

    /// `/api/states`: `show states` cut to the largest by bytes, the
    /// total intact.
    #[test]
    fn states_are_the_largest_first_and_capped() {
        let d = example_daemon("dash-states");
        let a = answer("GET", "/api/states", &d.state);
        let r: StatesReply = serde_json::from_str(&a.body).unwrap();
        assert_eq!(r.total, 21);
        assert_eq!(r.states.len(), 21);
        let sizes: Vec<u64> = r.states.iter().map(|s| s.bytes[0] + s.bytes[1]).collect();
        assert!(sizes.windows(2).all(|w| w[0] >= w[1]), "{sizes:?}");
        assert!(sizes[0] > sizes[20], "{sizes:?}");

        let mut many = r.clone();
        let one = r.states[0].clone();
        many.states = (0..DASHBOARD_STATES_CAP as u64 + 5)
            .map(|i| crate::proto::StateJson {
                bytes: [i, 1],
                ..one.clone()
            })
            .collect();
        let cut = top_states(many);
        assert_eq!(cut.states.len(), DASHBOARD_STATES_CAP);
        assert_eq!(cut.states[0].bytes[0], DASHBOARD_STATES_CAP as u64 + 4);
        assert_eq!(cut.total, 21);
    }

    /// Nothing on the page is fetched from elsewhere: no URL with a
    /// scheme or a protocol-relative one, no external script or sheet,
    /// and it reads the routes served here.
    #[test]
    fn the_page_is_self_contained() {
        for needle in [
            "http:",
            "https:",
            "src=\"//",
            "href=\"//",
            "<link",
            "@import",
            " src=",
        ] {
            assert!(!PAGE.contains(needle), "the page contains {needle:?}");
        }
        assert!(PAGE.contains("'/api/snapshot'") && PAGE.contains("'/api/states'"));
        let a = Answer {
            body: Cow::Borrowed(""),
            ..answer("GET", "/", &example_daemon("dash-page").state)
        };
        let text = written(&a, false);
        assert!(text.contains("Content-Security-Policy: default-src 'none';"));
        assert!(text.contains("connect-src 'self'"));
    }
}
