//! Slow and hostile clients cannot block the control socket or the metrics
//! endpoint (issue #12 item 6): a request has a total deadline however its
//! bytes trickle in, clients are served concurrently up to a cap and refused
//! at once beyond it, and `reload -f` reads regular files of bounded size
//! only.

use sluice_control::proto::{Reply, Request};
use sluice_control::testing::{example_daemon, tmpdir};
use sluice_control::{load, request, MAX_CONFIG_BYTES};
use std::io::{BufRead, BufReader, Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::os::unix::net::UnixStream;
use std::path::Path;
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

/// Sends one space every 500 ms (never a newline, never a blank line) on
/// `w` until writing fails or 8 s have passed; meanwhile reads on `r` and
/// returns how long the server took to close the connection (EOF or error).
fn trickle<S: Read + Write + Send + 'static>(mut w: S, mut r: S, first: &[u8]) -> Duration {
    let t0 = Instant::now();
    w.write_all(first).unwrap();
    let writer = std::thread::spawn(move || {
        while t0.elapsed() < Duration::from_secs(8) {
            std::thread::sleep(Duration::from_millis(500));
            if w.write_all(b" ").is_err() {
                return;
            }
        }
    });
    let mut buf = [0u8; 4096];
    loop {
        match r.read(&mut buf) {
            Ok(0) | Err(_) => break,
            Ok(_) => {}
        }
    }
    let took = t0.elapsed();
    let _ = writer.join();
    took
}

/// Starts [`trickle`] on `w`/`r` on a thread, lets the server take it up
/// first, then times `ask`: what `ask` returned, how long it waited, and
/// the trickler's thread.
fn behind_a_trickler<S: Read + Write + Send + 'static, T>(
    w: S,
    r: S,
    first: &'static [u8],
    ask: impl FnOnce() -> T,
) -> (T, Duration, std::thread::JoinHandle<Duration>) {
    let slow = std::thread::spawn(move || trickle(w, r, first));
    // Let the server start on the slow client first.
    std::thread::sleep(Duration::from_millis(700));
    let t = Instant::now();
    let got = ask();
    (got, t.elapsed(), slow)
}

#[test]
fn a_trickling_control_client_neither_delays_others_nor_outlives_its_deadline() {
    let d = example_daemon("trickle-ctl");
    let s = UnixStream::connect(&d.sock).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    let r = s.try_clone().unwrap();
    let (reply, waited, slow) = behind_a_trickler(s, r, b"{\"cmd\":", || {
        request(&d.sock, &Request::ShowInfo).unwrap()
    });
    assert!(matches!(reply, Reply::Info(_)), "{reply:?}");
    assert!(
        waited < Duration::from_secs(1),
        "show info waited {waited:?}"
    );
    let held = slow.join().unwrap();
    // CLIENT_TIMEOUT (2 s) after it connected, however it trickled.
    assert!(
        held >= Duration::from_millis(1500) && held < Duration::from_secs(3),
        "the trickling client was held {held:?}"
    );
    eprintln!("show info behind a trickling client: {waited:?}; trickler cut off after {held:?}");
}

fn metrics_daemon(name: &str) -> (sluice_control::testing::TestDaemon, SocketAddr) {
    let d = example_daemon(name);
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let addr: SocketAddr = format!("127.0.0.1:{port}").parse().unwrap();
    // Ends when the daemon's drop sets `stop` (detached: not joined).
    drop(sluice_control::spawn_metrics(addr, d.state.clone()).unwrap());
    (d, addr)
}

fn scrape(addr: SocketAddr) -> String {
    scrape_within(addr, Duration::from_secs(10))
}

#[test]
fn a_trickling_scraper_neither_delays_others_nor_outlives_its_deadline() {
    let (_d, addr) = metrics_daemon("trickle-metrics");
    let s = TcpStream::connect(addr).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    let r = s.try_clone().unwrap();
    let prefix = b"GET /metrics HTTP/1.0\r\n";
    let (answer, waited, slow) = behind_a_trickler(s, r, prefix, || scrape(addr));
    assert!(answer.starts_with("HTTP/1.0 200 OK\r\n"), "{answer}");
    assert!(
        waited < Duration::from_secs(1),
        "the scrape waited {waited:?}"
    );
    let held = slow.join().unwrap();
    assert!(
        held >= Duration::from_millis(1500) && held < Duration::from_secs(3),
        "the trickling scraper was held {held:?}"
    );
    eprintln!("scrape behind a trickling client: {waited:?}; trickler cut off after {held:?}");
}

/// Waits (bounded) until `busy()` is `n`.
fn wait_busy(busy: impl Fn() -> usize, n: usize) {
    let t = Instant::now();
    while busy() != n {
        assert!(
            t.elapsed() < Duration::from_secs(3),
            "busy {} != {n}",
            busy()
        );
        std::thread::sleep(Duration::from_millis(10));
    }
}

#[test]
fn control_clients_over_the_cap_are_refused_at_once_and_counted() {
    let d = example_daemon("cap-ctl");
    let cap = sluice_control::server::MAX_CLIENTS;
    let idle: Vec<UnixStream> = (0..cap)
        .map(|_| UnixStream::connect(&d.sock).unwrap())
        .collect();
    let slots = &d.state.clients.control;
    wait_busy(|| slots.busy(), cap);
    let t = Instant::now();
    let extra = UnixStream::connect(&d.sock).unwrap();
    extra
        .set_read_timeout(Some(Duration::from_secs(1)))
        .unwrap();
    let mut line = String::new();
    BufReader::new(&extra)
        .read_line(&mut line)
        .expect("refused with a reply, at once");
    assert!(
        t.elapsed() < Duration::from_millis(500),
        "{:?}",
        t.elapsed()
    );
    let reply: Reply = serde_json::from_str(&line).unwrap();
    let Reply::Error { message } = reply else {
        panic!("{line}")
    };
    assert!(message.starts_with("busy:"), "{message}");
    assert_eq!(slots.refused.load(Ordering::Relaxed), 1);
    drop(idle);
    wait_busy(|| slots.busy(), 0);
    let reply = request(&d.sock, &Request::ShowInfo).unwrap();
    assert!(matches!(reply, Reply::Info(_)), "{reply:?}");
}

/// The metrics endpoint at `addr` with every client slot taken by an
/// idle connection (returned: they hold their slots until dropped).
fn metrics_at_cap(addr: SocketAddr, slots: &sluice_control::conn::Slots) -> Vec<TcpStream> {
    let cap = sluice_control::metrics::MAX_CLIENTS;
    let idle = (0..cap)
        .map(|_| TcpStream::connect(addr).unwrap())
        .collect();
    wait_busy(|| slots.busy(), cap);
    idle
}

/// One scrape's whole answer, which must come within `limit`.
fn scrape_within(addr: SocketAddr, limit: Duration) -> String {
    let mut s = TcpStream::connect(addr).unwrap();
    s.set_read_timeout(Some(limit)).unwrap();
    s.write_all(b"GET /metrics HTTP/1.0\r\n\r\n").unwrap();
    let mut r = String::new();
    s.read_to_string(&mut r).expect("an answer in time");
    r
}

#[test]
fn scrapes_over_the_cap_are_refused_at_once_and_counted() {
    let (d, addr) = metrics_daemon("cap-metrics");
    let slots = &d.state.clients.metrics;
    let idle = metrics_at_cap(addr, slots);
    let t = Instant::now();
    let r = scrape_within(addr, Duration::from_secs(1));
    assert!(
        t.elapsed() < Duration::from_millis(500),
        "{:?}",
        t.elapsed()
    );
    assert!(r.starts_with("HTTP/1.0 503 "), "{r}");
    assert_eq!(slots.refused.load(Ordering::Relaxed), 1);
    drop(idle);
    wait_busy(|| slots.busy(), 0);
    let answer = scrape(addr);
    assert!(answer.starts_with("HTTP/1.0 200 OK\r\n"), "{answer}");
    assert!(
        answer.contains("sluice_clients_refused_total{server=\"metrics\"} 1\n"),
        "{answer}"
    );
}

/// The accept thread never waits on a refused client (it waited up to
/// 100 ms + 100 ms on each): ten silent clients over the cap delay the
/// refusal of the next one by nothing.
#[test]
fn silent_clients_over_the_cap_do_not_hold_up_the_accept_thread() {
    let (d, addr) = metrics_daemon("cap-silent");
    let slots = &d.state.clients.metrics;
    let idle = metrics_at_cap(addr, slots);
    let t = Instant::now();
    let silent: Vec<TcpStream> = (0..10).map(|_| TcpStream::connect(addr).unwrap()).collect();
    let r = scrape_within(addr, Duration::from_secs(3));
    let took = t.elapsed();
    assert!(r.starts_with("HTTP/1.0 503 "), "{r}");
    // Each silent client held the accept thread for 100 ms before.
    assert!(took < Duration::from_millis(500), "{took:?}");
    // The silent ones got their 503 too, without having asked.
    for mut s in silent {
        s.set_read_timeout(Some(Duration::from_secs(3))).unwrap();
        let mut r = String::new();
        s.read_to_string(&mut r).unwrap();
        assert!(r.starts_with("HTTP/1.0 503 "), "{r}");
    }
    assert_eq!(slots.refused.load(Ordering::Relaxed), 11);
    drop(idle);
}

/// `load(path)` on a thread: its error, or a panic if it takes over 2 s.
fn load_err_promptly(path: &Path) -> String {
    let p = path.to_path_buf();
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let _ = tx.send(load(&p, &[]).err());
    });
    rx.recv_timeout(Duration::from_secs(2))
        .unwrap_or_else(|_| panic!("load({}) blocked", path.display()))
        .unwrap_or_else(|| panic!("load({}) succeeded", path.display()))
}

#[test]
fn load_refuses_fifos_devices_and_oversized_files_promptly() {
    let dir = tmpdir("load-special");
    let fifo = dir.join("fifo.conf");
    let st = std::process::Command::new("mkfifo")
        .arg(&fifo)
        .status()
        .unwrap();
    assert!(st.success());
    for p in [fifo.as_path(), Path::new("/dev/zero"), dir.as_path()] {
        let e = load_err_promptly(p);
        assert_eq!(
            e,
            format!(
                "error: {} is not a regular file (a FIFO, device or directory cannot be a configuration)\n",
                p.display()
            )
        );
    }
    let big = dir.join("big.conf");
    let f = std::fs::File::create(&big).unwrap();
    f.set_len(MAX_CONFIG_BYTES + 1).unwrap();
    let e = load_err_promptly(&big);
    assert!(
        e.contains(&format!("is {} bytes", MAX_CONFIG_BYTES + 1))
            && e.contains(&format!("cap of {MAX_CONFIG_BYTES} bytes")),
        "{e}"
    );
    let _ = std::fs::remove_dir_all(dir);
}
