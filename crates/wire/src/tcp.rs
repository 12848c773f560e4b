//! The TCP header beyond ports and flags: sequence numbers, window, options
//! (RFC 9293 §3.1–§3.2, RFC 7323 window scale and timestamps, RFC 2018 SACK),
//! and in-place rewrites of its 16-bit fields (window, MSS) with the
//! incremental checksum update of RFC 1624.
//!
//! # Principles
//!
//! - **One data-offset check.** [`header_len`] is the only place that decides
//!   whether a data offset is valid; `parse` and [`TcpHeader::new`] both use
//!   it, so a frame `parse` accepted is a frame whose header can be viewed.
//! - **Options are walked, never guessed.** The list is kind/length/value
//!   (RFC 9293 §3.2): EOL ends it, NOP is one byte, every other kind has a
//!   length byte ≥ 2 that covers kind and length. The walk moves forward at
//!   least one byte per step, so it ends within the 40 option bytes.
//! - **The first malformed option ends the walk** — a length of 0 or 1, an
//!   option running past the header, or a known kind with a length its RFC
//!   does not allow. Nothing after it can be located for certain, and a
//!   middlebox that guesses may disagree with the endpoint
//!   (RFC 9293 §3.2: a TCP "MUST be prepared to handle an illegal option
//!   length"). The error is an explicit outcome ([`OptionError`]), never a panic.
//! - **Window scale above 14** is used as 14 and flagged (RFC 7323 §2.3).
//! - **Rewrites change exactly four bytes**: the field and the checksum, with
//!   RFC 1624 eqn. 3 (so the pseudo-header need not be known). On any refusal
//!   the frame is untouched. Fragments are refused: a middlebox that sees only
//!   part of a segment should not edit it.

use crate::checksum::{checksum_update_at, finish, pseudo_header_sum, sum_words};
use crate::{proto, Frag, Layer, PacketInfo, WireError, L4};
use std::fmt;

/// Fixed part of the TCP header.
pub const TCP_MIN_HEADER: usize = 20;
/// Largest window-scale shift (RFC 7323 §2.3): 2^14 · 65535 < 2^30, half the
/// sequence space.
pub const MAX_WINDOW_SCALE: u8 = 14;

/// Option kinds sluice understands (IANA "TCP Option Kind Numbers").
/// `a` comes after `b` in sequence space (RFC 1982 §3.2, RFC 9293 §3.4):
/// the distance forward from `b` to `a` is below 2^31; at exactly 2^31
/// neither is after the other.
pub fn seq_after(a: u32, b: u32) -> bool {
    let d = a.wrapping_sub(b);
    d != 0 && d < 1 << 31
}

pub mod opt_kind {
    pub const EOL: u8 = 0;
    pub const NOP: u8 = 1;
    pub const MSS: u8 = 2;
    pub const WINDOW_SCALE: u8 = 3;
    pub const SACK_PERMITTED: u8 = 4;
    pub const SACK: u8 = 5;
    pub const TIMESTAMPS: u8 = 8;
    /// TCP-MD5 signature (RFC 2385) and TCP-AO (RFC 5925): they sign the
    /// header, so a segment carrying either is never rewritten.
    pub const MD5: u8 = 19;
    pub const AO: u8 = 29;
}

/// Byte offsets inside the TCP header.
const OFF_SEQ: usize = 4;
const OFF_ACK: usize = 8;
const OFF_WINDOW: usize = 14;
const OFF_CHECKSUM: usize = 16;
/// SACK blocks an option can carry: 40 option bytes hold 2 + 4·8.
pub const MAX_SACK_BLOCKS: usize = 4;
/// MSS options [`rewrite_mss`] lowers in one segment (40 bytes of options
/// hold at most ten).
const MAX_MSS_OPTIONS: usize = 10;

/// Length of the TCP header at the start of `seg` (the segment as bounded by
/// the IP length): data offset 5..=15 words and no longer than `seg`.
pub(crate) fn header_len(seg: &[u8]) -> Result<usize, WireError> {
    let h = seg
        .get(..TCP_MIN_HEADER)
        .ok_or(WireError::Truncated(Layer::Tcp))?;
    let data_off = h[12] >> 4;
    let hdr_len = usize::from(data_off) * 4;
    if hdr_len < TCP_MIN_HEADER || hdr_len > seg.len() {
        return Err(WireError::BadTcpOffset(data_off));
    }
    Ok(hdr_len)
}

fn be16_at(b: &[u8], at: usize) -> u16 {
    match b.get(at..at + 2) {
        Some(s) => u16::from_be_bytes([s[0], s[1]]),
        None => 0,
    }
}

fn be32_at(b: &[u8], at: usize) -> u32 {
    match b.get(at..at + 4) {
        Some(s) => u32::from_be_bytes([s[0], s[1], s[2], s[3]]),
        None => 0,
    }
}

/// One TCP option, as found. Values are as sent (a window scale may exceed 14
/// here; [`TcpOptions::window_scale`] is the clamped one).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum TcpOption<'a> {
    /// Maximum segment size (kind 2, length 4).
    Mss(u16),
    /// Window scale shift (kind 3, length 3), unclamped.
    WindowScale(u8),
    /// SACK permitted (kind 4, length 2).
    SackPermitted,
    /// SACK blocks (kind 5, length 2 + 8·n, n = 1..=4).
    Sack(SackBlocks<'a>),
    /// Timestamps (kind 8, length 10).
    Timestamps { tsval: u32, tsecr: u32 },
    /// A well-framed option of a kind sluice does not interpret.
    Unknown { kind: u8, data: &'a [u8] },
}

impl TcpOption<'_> {
    /// Append the option's wire form to `out` (for tests and builders).
    pub fn encode(&self, out: &mut Vec<u8>) {
        match *self {
            TcpOption::Mss(v) => {
                out.extend_from_slice(&[opt_kind::MSS, 4]);
                out.extend_from_slice(&v.to_be_bytes());
            }
            TcpOption::WindowScale(s) => out.extend_from_slice(&[opt_kind::WINDOW_SCALE, 3, s]),
            TcpOption::SackPermitted => out.extend_from_slice(&[opt_kind::SACK_PERMITTED, 2]),
            TcpOption::Sack(b) => {
                out.extend_from_slice(&[opt_kind::SACK, (2 + b.0.len()) as u8]);
                out.extend_from_slice(b.0);
            }
            TcpOption::Timestamps { tsval, tsecr } => {
                out.extend_from_slice(&[opt_kind::TIMESTAMPS, 10]);
                out.extend_from_slice(&tsval.to_be_bytes());
                out.extend_from_slice(&tsecr.to_be_bytes());
            }
            TcpOption::Unknown { kind, data } => {
                out.extend_from_slice(&[kind, (2 + data.len()) as u8]);
                out.extend_from_slice(data);
            }
        }
    }
}

/// The blocks of a SACK option: 1 to 4 (left edge, right edge) pairs.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SackBlocks<'a>(&'a [u8]);

impl<'a> SackBlocks<'a> {
    /// Blocks from their wire bytes; `None` unless 1..=4 whole blocks.
    pub fn new(bytes: &'a [u8]) -> Option<Self> {
        let n = bytes.len() / 8;
        (bytes.len().is_multiple_of(8) && (1..=MAX_SACK_BLOCKS).contains(&n))
            .then_some(SackBlocks(bytes))
    }

    /// Number of blocks.
    pub fn len(&self) -> usize {
        self.0.len() / 8
    }

    /// Never true for blocks that came from [`SackBlocks::new`] or a parse.
    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    /// The (left edge, right edge) pairs in the order sent (RFC 2018 §3).
    pub fn iter(&self) -> impl Iterator<Item = (u32, u32)> + 'a {
        self.0
            .chunks_exact(8)
            .map(|c| (be32_at(c, 0), be32_at(c, 4)))
    }
}

/// Why the option walk stopped early. `at` is the option's offset from the
/// start of the option bytes (0..40), `kind` its kind byte.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum OptionError {
    /// A length byte of 0 or 1: the option cannot be skipped.
    BadLength { at: u8, kind: u8, len: u8 },
    /// The length byte is missing, or the option runs past the header.
    Truncated { at: u8, kind: u8 },
    /// A kind sluice knows, with a length its specification does not allow
    /// (MSS ≠ 4, window scale ≠ 3, SACK-permitted ≠ 2, SACK ≠ 10/18/26/34,
    /// timestamps ≠ 10).
    WrongLength { at: u8, kind: u8, len: u8 },
}

impl fmt::Display for OptionError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match *self {
            OptionError::BadLength { at, kind, len } => write!(
                f,
                "TCP option kind {kind} at option byte {at} has length {len} (minimum 2)"
            ),
            OptionError::Truncated { at, kind } => write!(
                f,
                "TCP option kind {kind} at option byte {at} runs past the header"
            ),
            OptionError::WrongLength { at, kind, len } => write!(
                f,
                "TCP option kind {kind} at option byte {at} has length {len}, \
                 not one its RFC allows"
            ),
        }
    }
}

impl std::error::Error for OptionError {}

/// Iterator over the options of a TCP header ([`TcpHeader::options`], or
/// [`Options::new`] over raw option bytes). NOPs are skipped, EOL ends the
/// list; an error is yielded once and ends the iteration.
#[derive(Clone, Debug)]
pub struct Options<'a> {
    bytes: &'a [u8],
    pos: usize,
    done: bool,
}

impl<'a> Options<'a> {
    /// Walk `bytes` (the bytes between the fixed header and the data offset).
    pub fn new(bytes: &'a [u8]) -> Self {
        Options {
            bytes,
            pos: 0,
            done: false,
        }
    }

    fn fail(&mut self, e: OptionError) -> Option<Result<TcpOption<'a>, OptionError>> {
        self.done = true;
        Some(Err(e))
    }
}

impl<'a> Iterator for Options<'a> {
    type Item = Result<TcpOption<'a>, OptionError>;

    fn next(&mut self) -> Option<Self::Item> {
        // Each turn either returns or moves `pos` forward by at least one.
        while !self.done {
            let at = self.pos;
            let Some(&kind) = self.bytes.get(at) else {
                self.done = true;
                return None;
            };
            match kind {
                opt_kind::EOL => {
                    self.done = true;
                    return None;
                }
                opt_kind::NOP => {
                    self.pos += 1;
                    continue;
                }
                _ => {}
            }
            let at8 = u8::try_from(at).unwrap_or(u8::MAX);
            let Some(&len) = self.bytes.get(at + 1) else {
                return self.fail(OptionError::Truncated { at: at8, kind });
            };
            if len < 2 {
                return self.fail(OptionError::BadLength { at: at8, kind, len });
            }
            let end = at + usize::from(len);
            let Some(body) = self.bytes.get(at + 2..end) else {
                return self.fail(OptionError::Truncated { at: at8, kind });
            };
            self.pos = end;
            let wrong = OptionError::WrongLength { at: at8, kind, len };
            let opt = match kind {
                opt_kind::MSS => match body {
                    [a, b] => TcpOption::Mss(u16::from_be_bytes([*a, *b])),
                    _ => return self.fail(wrong),
                },
                opt_kind::WINDOW_SCALE => match body {
                    [s] => TcpOption::WindowScale(*s),
                    _ => return self.fail(wrong),
                },
                opt_kind::SACK_PERMITTED => match body {
                    [] => TcpOption::SackPermitted,
                    _ => return self.fail(wrong),
                },
                opt_kind::SACK => match SackBlocks::new(body) {
                    Some(b) => TcpOption::Sack(b),
                    None => return self.fail(wrong),
                },
                opt_kind::TIMESTAMPS => match body.len() {
                    8 => TcpOption::Timestamps {
                        tsval: be32_at(body, 0),
                        tsecr: be32_at(body, 4),
                    },
                    _ => return self.fail(wrong),
                },
                _ => TcpOption::Unknown { kind, data: body },
            };
            return Some(Ok(opt));
        }
        None
    }
}

impl std::iter::FusedIterator for Options<'_> {}

/// What a header's options say, gathered in one walk. When an option occurs
/// twice, the later one counts.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct TcpOptions {
    pub mss: Option<u16>,
    /// The window-scale shift offered, clamped to [`MAX_WINDOW_SCALE`].
    pub window_scale: Option<u8>,
    /// The shift offered was above 14 and is used as 14 (RFC 7323 §2.3).
    pub window_scale_clamped: bool,
    pub sack_permitted: bool,
    sack: [(u32, u32); MAX_SACK_BLOCKS],
    sack_len: u8,
    /// (TSval, TSecr).
    pub timestamps: Option<(u32, u32)>,
    /// Well-framed options of kinds sluice does not interpret.
    pub unknown: u8,
    /// The largest MSS option's value: a SYN may carry several, and stacks
    /// take the last, so a clamp lowers every one above its limit.
    pub mss_max: Option<u16>,
    /// A TCP-MD5 signature (kind 19, RFC 2385) or TCP-AO MAC (kind 29,
    /// RFC 5925) covers the header: rewriting any field breaks it.
    pub authenticated: bool,
    /// The malformed option that ended the walk; nothing after it was read.
    pub error: Option<OptionError>,
}

impl TcpOptions {
    /// Gather the options in `bytes` (raw option bytes).
    pub fn parse(bytes: &[u8]) -> Self {
        let mut o = TcpOptions::default();
        for item in Options::new(bytes) {
            match item {
                Ok(TcpOption::Mss(v)) => {
                    o.mss = Some(v);
                    o.mss_max = o.mss_max.max(Some(v));
                }
                Ok(TcpOption::WindowScale(s)) => {
                    o.window_scale = Some(s.min(MAX_WINDOW_SCALE));
                    o.window_scale_clamped = s > MAX_WINDOW_SCALE;
                }
                Ok(TcpOption::SackPermitted) => o.sack_permitted = true,
                Ok(TcpOption::Sack(b)) => {
                    o.sack_len = 0;
                    for (slot, blk) in o.sack.iter_mut().zip(b.iter()) {
                        *slot = blk;
                        o.sack_len += 1;
                    }
                }
                Ok(TcpOption::Timestamps { tsval, tsecr }) => o.timestamps = Some((tsval, tsecr)),
                Ok(TcpOption::Unknown { kind, .. }) => {
                    o.unknown = o.unknown.saturating_add(1);
                    o.authenticated |= kind == opt_kind::MD5 || kind == opt_kind::AO;
                }
                Err(e) => o.error = Some(e),
            }
        }
        o
    }

    /// SACK blocks of the segment (empty when it carries none).
    pub fn sack_blocks(&self) -> &[(u32, u32)] {
        &self.sack[..usize::from(self.sack_len).min(MAX_SACK_BLOCKS)]
    }

    /// Every option was well formed and of a kind sluice interprets.
    pub fn fully_understood(&self) -> bool {
        self.error.is_none() && self.unknown == 0
    }
}

/// Why a TCP header could not be read or rewritten. The frame is untouched.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Refused {
    /// Not an IP frame.
    NotIp,
    /// IP, but not TCP (or a TCP header `parse` did not describe).
    NotTcp,
    /// A fragment of a larger datagram (first or later).
    Fragment,
    /// The frame is shorter than the header its `PacketInfo` describes
    /// (a `PacketInfo` of another frame, or a frame cut since).
    Truncated,
    /// Data offset below 5 words or past the segment.
    BadDataOffset(u8),
    /// [`rewrite_mss`]: the options carry no MSS.
    NoMss,
    /// [`rewrite_mss`]: the options are malformed before an MSS was found.
    BadOptions(OptionError),
    /// A signature covers the segment (TCP-MD5, TCP-AO, IPv6 AH): any
    /// rewrite would make the receiver drop it.
    Authenticated,
}

impl Refused {
    /// Short name for counters and metrics labels.
    pub fn label(&self) -> &'static str {
        match self {
            Refused::NotIp => "not_ip",
            Refused::NotTcp => "not_tcp",
            Refused::Fragment => "fragment",
            Refused::Truncated => "truncated",
            Refused::BadDataOffset(_) => "bad_data_offset",
            Refused::NoMss => "no_mss",
            Refused::BadOptions(_) => "bad_options",
            Refused::Authenticated => "authenticated",
        }
    }
}

impl fmt::Display for Refused {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Refused::NotIp => write!(f, "not an IP frame"),
            Refused::NotTcp => write!(f, "not a TCP segment"),
            Refused::Fragment => write!(f, "an IP fragment (only whole segments are edited)"),
            Refused::Truncated => write!(f, "the frame ends inside the TCP header"),
            Refused::BadDataOffset(v) => {
                write!(
                    f,
                    "bad TCP data offset {v} (5..=15 words within the segment)"
                )
            }
            Refused::NoMss => write!(f, "no MSS option"),
            Refused::BadOptions(e) => write!(f, "malformed TCP options: {e}"),
            Refused::Authenticated => {
                write!(
                    f,
                    "a signature covers the segment (TCP-MD5, TCP-AO or IPv6 AH)"
                )
            }
        }
    }
}

impl std::error::Error for Refused {}

/// A checked view of a TCP header (options included) and the length of the
/// payload behind it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct TcpHeader<'a> {
    hdr: &'a [u8],
    payload_len: usize,
}

impl<'a> TcpHeader<'a> {
    /// View the header at the start of `seg`, the TCP segment as bounded by
    /// the IP length (not the frame: Ethernet padding is not payload).
    pub fn new(seg: &'a [u8]) -> Result<Self, WireError> {
        let n = header_len(seg)?;
        Ok(TcpHeader {
            hdr: seg.get(..n).unwrap_or(&[]),
            payload_len: seg.len() - n,
        })
    }

    /// The TCP header of a frame `parse` described in `info`.
    pub fn in_frame(frame: &'a [u8], info: &PacketInfo) -> Result<Self, Refused> {
        let (start, end) = segment_bounds(frame.len(), info)?;
        let seg = frame.get(start..end).ok_or(Refused::Truncated)?;
        TcpHeader::new(seg).map_err(|e| match e {
            WireError::BadTcpOffset(v) => Refused::BadDataOffset(v),
            _ => Refused::Truncated,
        })
    }

    pub fn sport(&self) -> u16 {
        be16_at(self.hdr, 0)
    }
    pub fn dport(&self) -> u16 {
        be16_at(self.hdr, 2)
    }
    pub fn seq(&self) -> u32 {
        be32_at(self.hdr, OFF_SEQ)
    }
    pub fn ack(&self) -> u32 {
        be32_at(self.hdr, OFF_ACK)
    }
    /// Header length in bytes (data offset · 4).
    pub fn header_len(&self) -> usize {
        self.hdr.len()
    }
    /// The flag byte (see [`crate::tcp_flags`]).
    pub fn flags(&self) -> u8 {
        self.hdr.get(13).copied().unwrap_or(0)
    }
    /// The window field as sent (unscaled).
    pub fn window(&self) -> u16 {
        be16_at(self.hdr, OFF_WINDOW)
    }
    pub fn checksum(&self) -> u16 {
        be16_at(self.hdr, OFF_CHECKSUM)
    }
    pub fn payload_len(&self) -> usize {
        self.payload_len
    }
    /// The raw option bytes (between the fixed header and the data offset).
    pub fn option_bytes(&self) -> &'a [u8] {
        self.hdr.get(TCP_MIN_HEADER..).unwrap_or(&[])
    }
    /// Walk the options one by one.
    pub fn options(&self) -> Options<'a> {
        Options::new(self.option_bytes())
    }
    /// The compact description window control and RTT estimation work from.
    pub fn segment(&self) -> Segment {
        Segment {
            flags: self.flags(),
            seq: self.seq(),
            ack: self.ack(),
            window: self.window(),
            payload_len: u32::try_from(self.payload_len).unwrap_or(u32::MAX),
            options: TcpOptions::parse(self.option_bytes()),
        }
    }
}

/// One TCP segment as the per-flow logic sees it: what [`TcpHeader::segment`]
/// returns, or built by hand in tests.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Segment {
    pub flags: u8,
    pub seq: u32,
    pub ack: u32,
    /// Window field as sent (unscaled).
    pub window: u16,
    pub payload_len: u32,
    pub options: TcpOptions,
}

/// `[start, end)` of the TCP segment of a parsed frame: from the L4 offset to
/// the end of the IP datagram.
fn segment_bounds(frame_len: usize, info: &PacketInfo) -> Result<(usize, usize), Refused> {
    let ip = info.ip.as_ref().ok_or(Refused::NotIp)?;
    if ip.frag != Frag::None {
        return Err(Refused::Fragment);
    }
    if ip.proto != proto::TCP || !matches!(ip.l4, L4::Tcp { .. }) {
        return Err(Refused::NotTcp);
    }
    let end = info.l3_offset.saturating_add(usize::from(ip.ip_len));
    if ip.l4_offset > end || end > frame_len {
        return Err(Refused::Truncated);
    }
    Ok((ip.l4_offset, end))
}

/// Overwrite the 16 bits at `field` (offset in the TCP header) with `new` and
/// update the checksum. The caller has checked both fields lie inside the
/// header at `l4`.
fn put_u16(frame: &mut [u8], l4: usize, field: usize, new: u16) -> Result<u16, Refused> {
    let at = l4 + field;
    let old = be16_at(frame, at);
    let sum_at = l4 + OFF_CHECKSUM;
    let sum = be16_at(frame, sum_at);
    let new_sum = checksum_update_at(sum, field, old, new);
    frame
        .get_mut(at..at + 2)
        .ok_or(Refused::Truncated)?
        .copy_from_slice(&new.to_be_bytes());
    frame
        .get_mut(sum_at..sum_at + 2)
        .ok_or(Refused::Truncated)?
        .copy_from_slice(&new_sum.to_be_bytes());
    Ok(old)
}

/// Set the TCP window field of a frame `parse` described in `info` to
/// `window` (the raw field: the caller applies the window scale) and update the
/// TCP checksum incrementally. Returns the old field. IPv4 and IPv6, behind any
/// encapsulation `parse` peels (802.1Q, QinQ, PPPoE). On refusal the frame is
/// unchanged.
pub fn rewrite_window(frame: &mut [u8], info: &PacketInfo, window: u16) -> Result<u16, Refused> {
    let l4 = {
        let h = TcpHeader::in_frame(frame, info)?;
        refuse_signed(&h, info)?;
        if h.window() == window {
            return Ok(window);
        }
        info.ip.as_ref().map_or(0, |ip| ip.l4_offset)
    };
    put_u16(frame, l4, OFF_WINDOW, window)
}

/// A segment a signature covers (TCP-MD5 or TCP-AO option, IPv6 AH) is
/// refused for any rewrite: the receiver would drop it.
fn refuse_signed(h: &TcpHeader<'_>, info: &PacketInfo) -> Result<(), Refused> {
    let ah = info.ip.as_ref().is_some_and(|ip| ip.authenticated);
    let signed = Options::new(h.option_bytes()).any(|o| {
        matches!(o, Ok(TcpOption::Unknown { kind, .. }) if kind == opt_kind::MD5 || kind == opt_kind::AO)
    });
    if ah || signed {
        return Err(Refused::Authenticated);
    }
    Ok(())
}

/// Lower every MSS option of a frame `parse` described in `info` that
/// announces more than `mss` to `mss` (typically on a SYN, to clamp it;
/// stacks take the last of several, so all are clamped and none raised) and
/// update the checksum. Returns the largest old value. Options may sit at
/// odd offsets. On refusal the frame is unchanged.
pub fn rewrite_mss(frame: &mut [u8], info: &PacketInfo, mss: u16) -> Result<u16, Refused> {
    let (l4, fields, largest) = {
        let h = TcpHeader::in_frame(frame, info)?;
        let mut it = Options::new(h.option_bytes());
        let mut fields = [0usize; MAX_MSS_OPTIONS];
        let (mut n, mut largest) = (0, None);
        // Bounded: the walk advances at least a byte per option.
        while let Some(item) = it.next() {
            match item {
                Ok(TcpOption::Mss(v)) => {
                    largest = largest.max(Some(v));
                    // An MSS option is exactly 4 bytes and the walk stopped right after it.
                    if v > mss && n < MAX_MSS_OPTIONS {
                        fields[n] = TCP_MIN_HEADER + it.pos - 2;
                        n += 1;
                    }
                }
                Ok(_) => {}
                Err(e) => return Err(Refused::BadOptions(e)),
            }
        }
        let largest = largest.ok_or(Refused::NoMss)?;
        refuse_signed(&h, info)?;
        let l4 = info.ip.as_ref().map_or(0, |ip| ip.l4_offset);
        (l4, fields, largest)
    };
    for &field in fields.iter().filter(|f| **f != 0) {
        put_u16(frame, l4, field, mss)?;
    }
    Ok(largest)
}

/// The TCP checksum a frame `parse` described in `info` should carry, computed
/// from scratch over the pseudo-header and the whole segment (the checksum
/// field counted as zero). For IPv6 the pseudo-header uses the header's
/// destination; a segment behind a Routing header would need the final one
/// (RFC 8200 §8.1), which this does not look for.
pub fn tcp_checksum(frame: &[u8], info: &PacketInfo) -> Result<u16, Refused> {
    let (start, end) = segment_bounds(frame.len(), info)?;
    let ip = info.ip.as_ref().ok_or(Refused::NotIp)?;
    let seg = frame.get(start..end).ok_or(Refused::Truncated)?;
    let len = u32::try_from(seg.len()).unwrap_or(u32::MAX);
    let acc = pseudo_header_sum(ip.src, ip.dst, proto::TCP, len);
    let before = seg.get(..OFF_CHECKSUM).ok_or(Refused::Truncated)?;
    let after = seg.get(OFF_CHECKSUM + 2..).ok_or(Refused::Truncated)?;
    Ok(finish(sum_words(sum_words(acc, before), after)))
}

#[cfg(test)]
mod tests;
