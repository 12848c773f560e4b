//! The Unix-socket server: an accept thread, and one thread per client up
//! to [`MAX_CLIENTS`], each request read and each reply written within its
//! deadline.

use crate::conn::{Deadlined, Slots};
use crate::proto::{Reply, Request, MAX_REQUEST_BYTES};
use crate::{reload_strict, snapshot, DaemonState};
use std::io::{self, BufRead, BufReader, Read, Write};
use std::os::unix::fs::{DirBuilderExt, FileTypeExt, PermissionsExt};
use std::os::unix::net::{UnixListener, UnixStream};
use std::path::{Path, PathBuf};
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

/// Time a client has to send a whole request line (counted from when the
/// server starts waiting for it, however the bytes trickle in) and, apart,
/// to take a whole reply: past it the connection is dropped, so a slow or
/// silent client holds its thread at most this long per request.
pub const CLIENT_TIMEOUT: Duration = Duration::from_secs(2);
/// Clients served at once. The socket is root-only, and `sluice` sends one
/// request per connection: 4 leave room for a monitoring loop, an operator
/// and a reload while one slow client is waited out, and bound the threads
/// (and engine-lock takers) a misbehaving root process can make.
pub const MAX_CLIENTS: usize = 4;
/// How long a refused client (over [`MAX_CLIENTS`]) gets to take its one
/// error line: the accept thread writes it, so it must not wait.
const REFUSE_TIMEOUT: Duration = Duration::from_millis(100);
/// Requests served on one connection before it is closed (clients send one).
pub const MAX_REQUESTS_PER_CONN: usize = 64;
/// How often the idle server looks at `stop`: the accept loop polls so that
/// a stop from anywhere (SIGTERM, `sluice stop`) ends it without a wake-up.
const STOP_POLL: Duration = Duration::from_millis(50);

/// Binds `path` (mode 0600, stale socket removed) and serves it on a thread
/// until `state.stop` is set; the socket file is removed on exit.
pub fn spawn_control(path: &Path, state: Arc<DaemonState>) -> io::Result<JoinHandle<()>> {
    let listener = bind(path)?;
    listener.set_nonblocking(true)?;
    let path = path.to_path_buf();
    std::thread::Builder::new()
        .name("sluice-ctl".into())
        .spawn(move || serve(listener, path, state))
}

fn bind(path: &Path) -> io::Result<UnixListener> {
    match std::fs::symlink_metadata(path) {
        Ok(m) if m.file_type().is_socket() => {
            if UnixStream::connect(path).is_ok() {
                return Err(io::Error::new(
                    io::ErrorKind::AddrInUse,
                    format!(
                        "{}: another sluice is already listening there",
                        path.display()
                    ),
                ));
            }
            // Nobody answers: left over by a daemon that did not exit cleanly.
            std::fs::remove_file(path)?;
        }
        Ok(_) => {
            return Err(io::Error::new(
                io::ErrorKind::AlreadyExists,
                format!("{}: exists and is not a socket", path.display()),
            ))
        }
        Err(_) => {}
    }
    // Outside systemd nobody made the socket's directory (the unit's
    // `RuntimeDirectory=` does): create it root-only, as the socket is.
    if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
        if !dir.exists() {
            std::fs::DirBuilder::new()
                .recursive(true)
                .mode(0o700)
                .create(dir)
                .map_err(|e| io::Error::new(e.kind(), format!("{}: {e}", dir.display())))?;
        }
    }
    let l = UnixListener::bind(path)?;
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o600))?;
    Ok(l)
}

struct RemoveOnDrop(PathBuf);

impl Drop for RemoveOnDrop {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.0);
    }
}

fn serve(listener: UnixListener, path: PathBuf, state: Arc<DaemonState>) {
    let _cleanup = RemoveOnDrop(path);
    let slots: Arc<Slots> = state.clients.control.clone();
    while !state.stop.load(Ordering::SeqCst) {
        match listener.accept() {
            Ok((stream, _)) => {
                let st = state.clone();
                slots.serve(
                    "sluice-ctl-client",
                    stream,
                    |s| drop(refuse(s)),
                    move |s| drop(client(s, &st)),
                );
            }
            // WouldBlock (nothing to accept) or a transient error.
            Err(_) => std::thread::sleep(STOP_POLL),
        }
    }
}

/// uid 0, or the daemon's own uid (a daemon run by hand in a test).
fn peer_allowed(stream: &UnixStream) -> io::Result<bool> {
    let cred = rustix::net::sockopt::socket_peercred(stream)?;
    let uid = cred.uid.as_raw();
    Ok(uid == 0 || uid == rustix::process::geteuid().as_raw())
}

/// Over [`MAX_CLIENTS`]: one error line and close, without waiting.
fn refuse(stream: UnixStream) -> io::Result<()> {
    stream.set_nonblocking(false)?;
    let mut out = Deadlined::new(stream, REFUSE_TIMEOUT, REFUSE_TIMEOUT);
    send(
        &mut out,
        &Reply::Error {
            message: format!("busy: {MAX_CLIENTS} clients are being served, try again in a moment"),
        },
    )
}

fn client(stream: UnixStream, state: &DaemonState) -> io::Result<()> {
    stream.set_nonblocking(false)?;
    let mut out = Deadlined::new(stream.try_clone()?, CLIENT_TIMEOUT, CLIENT_TIMEOUT);
    if !peer_allowed(&stream)? {
        return send(
            &mut out,
            &Reply::Error {
                message: "permission denied: the control socket is for root only".into(),
            },
        );
    }
    let mut reader = BufReader::new(Deadlined::new(stream, CLIENT_TIMEOUT, CLIENT_TIMEOUT));
    for _ in 0..MAX_REQUESTS_PER_CONN {
        // Each request line is due within CLIENT_TIMEOUT of now, whatever
        // the client sends meanwhile.
        reader.get_mut().read_by = Instant::now() + CLIENT_TIMEOUT;
        let mut line = Vec::new();
        let n = (&mut reader)
            .take(MAX_REQUEST_BYTES as u64 + 1)
            .read_until(b'\n', &mut line)?;
        if n == 0 {
            return Ok(());
        }
        if line.len() > MAX_REQUEST_BYTES {
            return send(
                &mut out,
                &Reply::Error {
                    message: format!("request longer than {MAX_REQUEST_BYTES} bytes"),
                },
            );
        }
        let reply = match serde_json::from_slice::<Request>(&line) {
            Ok(req) => handle(req, state),
            Err(e) => Reply::Error {
                message: format!("bad request: {e}"),
            },
        };
        out.write_by = Instant::now() + CLIENT_TIMEOUT;
        send(&mut out, &reply)?;
        if matches!(reply, Reply::Stopping) {
            return Ok(());
        }
    }
    Ok(())
}

fn send(out: &mut impl Write, reply: &Reply) -> io::Result<()> {
    let mut text = serde_json::to_vec(reply).map_err(io::Error::other)?;
    text.push(b'\n');
    out.write_all(&text)
}

/// The answer to one request (the socket server's, and anyone's in-process).
pub fn handle(req: Request, state: &DaemonState) -> Reply {
    match req {
        Request::ShowQueues => Reply::Queues(snapshot::queues(state)),
        Request::ShowStates => Reply::States(snapshot::states(state)),
        Request::ShowRules => Reply::Rules(snapshot::rules(state)),
        Request::ShowInfo => Reply::Info(Box::new(snapshot::info(state))),
        Request::ShowHealth => Reply::Health(snapshot::health(state)),
        Request::Reload { file, strict } => {
            let path = file.map(PathBuf::from);
            match reload_strict(state, path.as_deref(), strict) {
                Ok(r) => Reply::Reloaded(r),
                Err(message) => Reply::Error { message },
            }
        }
        Request::Stop => {
            state.stop.store(true, Ordering::SeqCst);
            (state.wake)();
            Reply::Stopping
        }
    }
}

#[cfg(test)]
mod tests {
    use super::bind;
    use std::os::unix::fs::PermissionsExt;

    #[test]
    fn bind_creates_the_socket_directory_root_only() {
        let base = crate::testing::tmpdir("bind-dir");
        let sock = base.join("run/sluice/sluice.sock");
        let _l = bind(&sock).expect("bind in a directory that does not exist yet");
        let dir_mode = std::fs::metadata(sock.parent().unwrap())
            .unwrap()
            .permissions()
            .mode();
        assert_eq!(dir_mode & 0o777, 0o700);
        let sock_mode = std::fs::metadata(&sock).unwrap().permissions().mode();
        assert_eq!(sock_mode & 0o777, 0o600);
        std::fs::remove_dir_all(base).unwrap();
    }
}
