//! The client side of the control socket: one request line out, one reply
//! line back, both typed.

use crate::proto::{Reply, Request};
use std::io::{self, BufRead, BufReader, Read, Write};
use std::os::unix::net::UnixStream;
use std::path::{Path, PathBuf};
use std::time::Duration;

/// A reply larger than this is refused (a full state table of 100k states
/// is about 40 MB of JSON).
const MAX_REPLY_BYTES: u64 = 256 << 20;
/// Reload checks and builds a whole config; give it time.
const REPLY_TIMEOUT: Duration = Duration::from_secs(60);

/// Why a request got no reply. `Display` is meant for a person.
#[derive(Debug)]
pub enum ClientError {
    /// Nobody (or nobody we may talk to) listens on the socket.
    Connect(PathBuf, io::Error),
    /// The conversation broke off (timeout, reset).
    Io(PathBuf, io::Error),
    /// The daemon closed the connection without a reply.
    Closed(PathBuf),
    /// The reply is not a [`Reply`].
    BadReply(PathBuf, serde_json::Error),
}

impl std::fmt::Display for ClientError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            ClientError::Connect(p, e) => {
                let why = match e.kind() {
                    io::ErrorKind::NotFound => "no such socket".to_string(),
                    io::ErrorKind::PermissionDenied => "permission denied: run as root".to_string(),
                    io::ErrorKind::ConnectionRefused => {
                        "connection refused: stale socket".to_string()
                    }
                    _ => e.to_string(),
                };
                write!(
                    f,
                    "cannot connect to {}: is `sluice run` running? ({why})",
                    p.display()
                )
            }
            ClientError::Io(p, e) => write!(f, "{}: {e}", p.display()),
            ClientError::Closed(p) => {
                write!(f, "{}: the daemon closed the connection", p.display())
            }
            ClientError::BadReply(p, e) => write!(f, "{}: bad reply: {e}", p.display()),
        }
    }
}

impl std::error::Error for ClientError {}

/// Sends one request to the daemon listening on `socket` and returns its
/// reply (which may be [`Reply::Error`]: the daemon answered, and refused).
pub fn request(socket: &Path, req: &Request) -> Result<Reply, ClientError> {
    let stream = UnixStream::connect(socket).map_err(|e| ClientError::Connect(socket.into(), e))?;
    let io = |e: io::Error| ClientError::Io(socket.into(), e);
    stream.set_read_timeout(Some(REPLY_TIMEOUT)).map_err(io)?;
    let mut line = serde_json::to_vec(req).map_err(|e| ClientError::Io(socket.into(), e.into()))?;
    line.push(b'\n');
    (&stream).write_all(&line).map_err(io)?;
    let mut reply = Vec::new();
    BufReader::new((&stream).take(MAX_REPLY_BYTES))
        .read_until(b'\n', &mut reply)
        .map_err(io)?;
    if reply.is_empty() {
        return Err(ClientError::Closed(socket.into()));
    }
    serde_json::from_slice(&reply).map_err(|e| ClientError::BadReply(socket.into(), e))
}
