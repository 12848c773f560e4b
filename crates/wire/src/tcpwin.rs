//! Per-flow receive-window clamp: which window field to write into the
//! segments one side of a TCP connection sends, so that the other side keeps
//! no more than a target number of bytes in flight. Pure: the caller feeds
//! segments (or frames) of both directions and a target; nothing here reads a
//! clock or touches a queue.
//!
//! Vocabulary: the **receiver** is the side whose advertised window is
//! rewritten (for a download, the LAN client); the **sender** is its peer,
//! whose data the window holds back.
//!
//! # Principles
//!
//! - **Scale from the handshake only** (RFC 7323 §2.2): each side's shift is
//!   the window-scale option of its own SYN or SYN-ACK; scaling applies only
//!   when both carried the option, else the shift is 0. A shift above 14 is
//!   used as 14 (§2.3) and remembered ([`WindowClamp::window_scale_clamped`]).
//!   The window of a segment with SYN set is never scaled (§2.2).
//! - **Never more than the receiver offered**: the written field is at most
//!   the field the receiver sent, so sluice can only hold data back, never
//!   invite more than the receiver can buffer.
//! - **The right edge never moves left** (RFC 9293 §3.8.6: shrinking the
//!   window is "strongly discouraged"; a sender may already have sent up to
//!   it): the edge the sender has been shown, `ack + (field << shift)`, is
//!   remembered, and later segments advertise at least up to it. Fields are
//!   rounded up to the scale unit so the rule holds exactly. The one
//!   exception is the receiver itself moving its own edge left: the rule
//!   above wins, and the receiver's own value passes (sluice never makes it
//!   worse, and never re-opens what the receiver closed).
//! - **At least two segments** (2 · MSS, the MSS from the receiver's SYN, else
//!   RFC 9293 §3.7.1's default 536 / 1220): a receiver ACKs at least every
//!   second full segment (RFC 9293 §3.8.6.3), so a smaller window would stall
//!   the ACK clock on the delayed-ACK timer. Unless the receiver offered less.
//! - **Unknown means untouched**: a flow picked up mid-stream (no handshake
//!   seen, scale unknown), a half-open one (the sender's handshake not seen,
//!   so whether scaling applies is unknown) or one whose handshake options
//!   were malformed (what the peer concluded cannot be known) passes
//!   unmodified, with a [`PassReason`] for the caller to count.

use crate::tcp::{rewrite_window, Refused, Segment, TcpHeader};
use crate::{tcp_flags, Af, PacketInfo};

/// Send MSS assumed when a SYN carries no MSS option (RFC 9293 §3.7.1, MUST-15).
pub const DEFAULT_MSS_V4: u16 = 536;
/// Likewise for IPv6 (1280 − 60).
pub const DEFAULT_MSS_V6: u16 = 1220;
/// The largest MSS the floor is computed from: a 1500-byte MTU's (IPv4,
/// IPv6). A receiver announcing 65535 would otherwise lift the floor to
/// 128 KiB and opt out of the clamp.
pub const MAX_MSS_V4: u16 = 1460;
pub const MAX_MSS_V6: u16 = 1440;

/// What to do with a segment from the receiver.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Verdict {
    /// Forward as it is: the flow is controlled and the receiver's own
    /// window is already within the target (or the segment carries no
    /// window to speak of: RST, no ACK).
    Keep,
    /// Write this value into the window field (it differs from the one there).
    Rewrite(u16),
    /// Forward as it is: the flow cannot be controlled. Count it.
    Pass(PassReason),
}

/// Why a flow is not controlled.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum PassReason {
    /// No SYN or SYN-ACK seen from the receiver (flow picked up mid-stream):
    /// its window scale is unknown.
    NoHandshake,
    /// The receiver's handshake seen, the sender's not: whether scaling
    /// applies is unknown.
    HalfOpen,
    /// A handshake segment's options were malformed: what the peer made of
    /// them is unknown.
    BadOptions,
}

impl PassReason {
    /// Short name for counters and metrics labels.
    pub fn label(&self) -> &'static str {
        match self {
            PassReason::NoHandshake => "no_handshake",
            PassReason::HalfOpen => "half_open",
            PassReason::BadOptions => "bad_options",
        }
    }
}

/// `a` is before `b` in sequence space (wire's one comparison).
fn seq_lt(a: u32, b: u32) -> bool {
    crate::tcp::seq_after(b, a)
}

/// The window clamp state of one TCP connection (28 bytes).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct WindowClamp {
    default_mss: u16,
    /// MSS option of the receiver's SYN: the largest segment the sender sends.
    mss: Option<u16>,
    rcv_syn: bool,
    rcv_ws: Option<u8>,
    snd_syn: bool,
    snd_ws: bool,
    opaque: bool,
    ws_clamped: bool,
    /// Window field forwarded in the receiver's SYN (no ACK): it counts from
    /// the sender's ISS + 1, known once the sender's SYN-ACK passes.
    syn_window: Option<u16>,
    /// Rightmost edge the sender has been shown (sequence number).
    edge: Option<u32>,
}

impl WindowClamp {
    /// A connection of family `af` (which sets the default MSS), nothing seen yet.
    pub fn new(af: Af) -> Self {
        WindowClamp {
            default_mss: match af {
                Af::V4 => DEFAULT_MSS_V4,
                Af::V6 => DEFAULT_MSS_V6,
            },
            mss: None,
            rcv_syn: false,
            rcv_ws: None,
            snd_syn: false,
            snd_ws: false,
            opaque: false,
            ws_clamped: false,
            syn_window: None,
            edge: None,
        }
    }

    /// The receiver's window shift, once both handshake segments have been
    /// seen (0 when either side did not offer scaling).
    pub fn scale(&self) -> Option<u8> {
        (self.rcv_syn && self.snd_syn && !self.opaque).then(|| self.shift())
    }

    fn shift(&self) -> u8 {
        match (self.snd_ws, self.rcv_ws) {
            (true, Some(s)) => s,
            _ => 0,
        }
    }

    /// The rightmost edge (sequence number) the sender has been shown.
    pub fn right_edge(&self) -> Option<u32> {
        self.edge
    }

    /// The segment size the 2 · MSS floor is computed from: the
    /// receiver's, at most a 1500-byte MTU's.
    pub fn mss(&self) -> u16 {
        let max = if self.default_mss == DEFAULT_MSS_V4 {
            MAX_MSS_V4
        } else {
            MAX_MSS_V6
        };
        self.mss.unwrap_or(self.default_mss).min(max)
    }

    /// Either handshake offered a window-scale shift above 14 (used as 14).
    pub fn window_scale_clamped(&self) -> bool {
        self.ws_clamped
    }

    /// Learn from a segment the sender sent (its SYN or SYN-ACK; others
    /// carry nothing the clamp needs).
    pub fn on_sender(&mut self, seg: &Segment) {
        if seg.flags & tcp_flags::SYN == 0 || seg.flags & tcp_flags::RST != 0 {
            return;
        }
        if self.scale().is_some() {
            // Past the handshake a SYN changes nothing (a forged one would
            // move the edge and the shift).
            return;
        }
        if seg.options.error.is_some() {
            self.opaque = true;
            return;
        }
        self.snd_syn = true;
        self.snd_ws = seg.options.window_scale.is_some();
        self.ws_clamped |= seg.options.window_scale_clamped;
        if seg.flags & tcp_flags::ACK != 0 {
            // The receiver's SYN window counts from our ISS + 1.
            if let Some(w) = self.syn_window {
                self.advance_edge(seg.seq.wrapping_add(1).wrapping_add(u32::from(w)));
            }
        }
    }

    /// Decide the window field of a segment the receiver sent, for a target
    /// of `target` bytes in flight (`None`: no clamp wanted, only track).
    pub fn on_receiver(&mut self, seg: &Segment, target: Option<u32>) -> Verdict {
        if self.opaque {
            return Verdict::Pass(PassReason::BadOptions);
        }
        let f = seg.flags;
        if f & tcp_flags::RST != 0 {
            return Verdict::Keep;
        }
        // Past the handshake a SYN (retransmitted, or forged) keeps the
        // shift and MSS the handshake set.
        if f & tcp_flags::SYN != 0 && self.scale().is_none() {
            if seg.options.error.is_some() {
                self.opaque = true;
                return Verdict::Pass(PassReason::BadOptions);
            }
            self.rcv_syn = true;
            self.rcv_ws = seg.options.window_scale;
            self.ws_clamped |= seg.options.window_scale_clamped;
            self.mss = seg.options.mss;
        }
        if f & tcp_flags::SYN != 0 {
            // SYN windows are never scaled (RFC 7323 §2.2).
            let field = if f & tcp_flags::ACK != 0 {
                self.clamp(seg.ack, seg.window, 0, target)
            } else {
                // A retransmitted SYN offers at least what the first did.
                let prior = u32::from(self.syn_window.unwrap_or(0));
                let offered = u32::from(seg.window);
                let want = self.wanted(offered, target).max(prior).min(offered);
                let field = u16::try_from(want).unwrap_or(seg.window);
                self.syn_window = Some(self.syn_window.map_or(field, |p| p.max(field)));
                field
            };
            return verdict(field, seg.window);
        }
        if !self.rcv_syn {
            return Verdict::Pass(PassReason::NoHandshake);
        }
        if !self.snd_syn {
            return Verdict::Pass(PassReason::HalfOpen);
        }
        if f & tcp_flags::ACK == 0 {
            return Verdict::Keep;
        }
        let field = self.clamp(seg.ack, seg.window, self.shift(), target);
        verdict(field, seg.window)
    }

    /// Bytes the target asks for: at least 2 · MSS.
    fn wanted(&self, offered: u32, target: Option<u32>) -> u32 {
        match target {
            None => offered,
            Some(t) => t.max(2 * u32::from(self.mss())),
        }
    }

    /// The field for a segment acknowledging `ack` whose receiver offered
    /// `window << shift` bytes; records the edge it shows.
    fn clamp(&mut self, ack: u32, window: u16, shift: u8, target: Option<u32>) -> u16 {
        // 65535 << 14 < 2^30: no overflow.
        let offered = u32::from(window) << shift;
        let keep_edge = match self.edge {
            Some(e) if seq_lt(ack, e) => e.wrapping_sub(ack),
            _ => 0,
        };
        let want = self.wanted(offered, target).max(keep_edge).min(offered);
        // Round up to the scale unit: the edge shown is never short of `want`.
        let unit = (1u32 << shift) - 1;
        let field = ((want + unit) >> shift).min(u32::from(window));
        let field = u16::try_from(field).unwrap_or(window);
        self.advance_edge(ack.wrapping_add(u32::from(field) << shift));
        field
    }

    fn advance_edge(&mut self, e: u32) {
        self.edge = Some(match self.edge {
            Some(old) if seq_lt(e, old) => old,
            _ => e,
        });
    }

    /// [`WindowClamp::on_sender`] on a frame `parse` described in `info`.
    pub fn on_sender_frame(&mut self, frame: &[u8], info: &PacketInfo) -> Result<(), Refused> {
        let seg = TcpHeader::in_frame(frame, info)?.segment();
        self.on_sender(&seg);
        Ok(())
    }

    /// [`WindowClamp::on_receiver`] on a frame `parse` described in `info`,
    /// and the rewrite it asks for (window field and TCP checksum). A frame
    /// whose TCP header cannot be read is refused and left untouched; the
    /// clamp's state is unchanged then.
    pub fn on_receiver_frame(
        &mut self,
        frame: &mut [u8],
        info: &PacketInfo,
        target: Option<u32>,
    ) -> Result<Verdict, Refused> {
        let seg = TcpHeader::in_frame(frame, info)?.segment();
        let v = self.on_receiver(&seg, target);
        if let Verdict::Rewrite(w) = v {
            rewrite_window(frame, info, w)?;
        }
        Ok(v)
    }
}

fn verdict(field: u16, sent: u16) -> Verdict {
    if field == sent {
        Verdict::Keep
    } else {
        Verdict::Rewrite(field)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::tcp::{TcpOption, TcpOptions};
    use crate::tcp_flags::{ACK, RST, SYN};
    use proptest::prelude::*;

    fn opts(list: &[TcpOption<'_>]) -> TcpOptions {
        let mut b = Vec::new();
        for o in list {
            o.encode(&mut b);
        }
        TcpOptions::parse(&b)
    }

    fn seg(flags: u8, seq: u32, ack: u32, window: u16, options: TcpOptions) -> Segment {
        Segment {
            flags,
            seq,
            ack,
            window,
            payload_len: 0,
            options,
        }
    }

    const RCV_ISS: u32 = 1000;
    const SND_ISS: u32 = 0xffff_ff00; // wraps soon: sequence arithmetic must hold

    /// Handshake: receiver SYN (MSS 1460, WS `rs`, window 64240), sender
    /// SYN-ACK (WS `ss`). Returns the clamp and the ack number of a receiver
    /// that has received the whole SYN window: the SYN's edge then constrains
    /// nothing, so the tests below see the target alone.
    fn open(rs: Option<u8>, ss: Option<u8>) -> (WindowClamp, u32) {
        let mut c = WindowClamp::new(Af::V4);
        let mut ro = vec![TcpOption::Mss(1460)];
        ro.extend(rs.map(TcpOption::WindowScale));
        assert_eq!(
            c.on_receiver(&seg(SYN, RCV_ISS, 0, 64240, opts(&ro)), None),
            Verdict::Keep
        );
        let so: Vec<_> = ss.map(TcpOption::WindowScale).into_iter().collect();
        c.on_sender(&seg(SYN | ACK, SND_ISS, RCV_ISS + 1, 65535, opts(&so)));
        let first = SND_ISS.wrapping_add(1);
        assert_eq!(c.right_edge(), Some(first.wrapping_add(64240)));
        (c, first.wrapping_add(64240))
    }

    #[test]
    fn every_scale_factor_clamps_in_scaled_units() {
        for s in 0..=14u8 {
            let (mut c, ack) = open(Some(s), Some(7));
            assert_eq!(c.scale(), Some(s));
            // The receiver offers its whole buffer: field 65535 (<< s).
            let target = 20_000u32;
            let v = c.on_receiver(&seg(ACK, RCV_ISS + 1, ack, 65535, opts(&[])), Some(target));
            let expect = target.div_ceil(1 << s).min(65535) as u16;
            let shown = u32::from(expect) << s;
            if expect == 65535 {
                assert_eq!(v, Verdict::Keep, "shift {s}");
            } else {
                assert_eq!(v, Verdict::Rewrite(expect), "shift {s}");
            }
            assert!(shown >= target.min(65535 << s), "shift {s}");
            assert!(shown < target + (1 << s) || expect == 65535, "shift {s}");
            assert_eq!(c.right_edge(), Some(ack.wrapping_add(shown)));
        }
    }

    #[test]
    fn scaling_needs_both_sides() {
        let (c, _) = open(Some(7), None);
        assert_eq!(c.scale(), Some(0));
        let (c, _) = open(None, Some(7));
        assert_eq!(c.scale(), Some(0));
        let (mut c, ack) = open(Some(7), None);
        // Unscaled: a 20000-byte target is field 20000.
        assert_eq!(
            c.on_receiver(&seg(ACK, RCV_ISS + 1, ack, 65535, opts(&[])), Some(20_000)),
            Verdict::Rewrite(20_000)
        );
    }

    #[test]
    fn shift_above_14_is_14_and_flagged() {
        let (c, _) = open(Some(15), Some(200));
        assert_eq!(c.scale(), Some(14));
        assert!(c.window_scale_clamped());
        let (c, _) = open(Some(14), Some(14));
        assert!(!c.window_scale_clamped());
    }

    #[test]
    fn syn_window_is_clamped_unscaled_and_anchors_the_edge() {
        let mut c = WindowClamp::new(Af::V4);
        let o = opts(&[TcpOption::Mss(1460), TcpOption::WindowScale(7)]);
        // Target 4000 bytes: the SYN's (unscaled) field becomes 4000.
        assert_eq!(
            c.on_receiver(&seg(SYN, RCV_ISS, 0, 64240, o), Some(4000)),
            Verdict::Rewrite(4000)
        );
        assert_eq!(c.right_edge(), None, "no anchor before the SYN-ACK");
        // A retransmitted SYN with a smaller target still offers 4000.
        assert_eq!(
            c.on_receiver(&seg(SYN, RCV_ISS, 0, 64240, o), Some(100)),
            Verdict::Rewrite(4000)
        );
        let so = opts(&[TcpOption::WindowScale(7)]);
        c.on_sender(&seg(SYN | ACK, SND_ISS, RCV_ISS + 1, 65535, so));
        let ack = SND_ISS.wrapping_add(1);
        assert_eq!(c.right_edge(), Some(ack.wrapping_add(4000)));
        // The handshake's ACK, scaled by 128: at least 4000 bytes → field 32
        // (4096 bytes), not 4000 >> 7 = 31 (3968, a shrink).
        assert_eq!(
            c.on_receiver(&seg(ACK, RCV_ISS + 1, ack, 502, opts(&[])), Some(100)),
            Verdict::Rewrite(32)
        );
    }

    #[test]
    fn receiver_syn_ack_is_never_scaled() {
        // Upload direction: the receiver is the server and answers with a SYN-ACK.
        let mut c = WindowClamp::new(Af::V6);
        c.on_sender(&seg(SYN, 5, 0, 65535, opts(&[TcpOption::WindowScale(8)])));
        let o = opts(&[TcpOption::Mss(1440), TcpOption::WindowScale(9)]);
        assert_eq!(
            c.on_receiver(&seg(SYN | ACK, 77, 6, 65535, o), Some(10_000)),
            Verdict::Rewrite(10_000)
        );
        assert_eq!(c.right_edge(), Some(6 + 10_000));
        assert_eq!(c.scale(), Some(9));
        // Next ACK is scaled by 512: ceil(10000 / 512) = 20.
        assert_eq!(
            c.on_receiver(&seg(ACK, 78, 6, 1000, opts(&[])), Some(10_000)),
            Verdict::Rewrite(20)
        );
    }

    #[test]
    fn never_more_than_the_receiver_offered() {
        let (mut c, ack) = open(Some(2), Some(2));
        // Receiver offers 1000 << 2 = 4000 bytes; the target is larger.
        assert_eq!(
            c.on_receiver(&seg(ACK, 1, ack, 1000, opts(&[])), Some(1 << 20)),
            Verdict::Keep
        );
    }

    #[test]
    fn a_receivers_huge_mss_does_not_lift_the_floor() {
        let mut c = WindowClamp::new(Af::V4);
        let o = opts(&[TcpOption::Mss(65535), TcpOption::WindowScale(0)]);
        c.on_receiver(&seg(SYN, RCV_ISS, 0, 65535, o), None);
        assert_eq!(c.mss(), MAX_MSS_V4);
        let mut c6 = WindowClamp::new(Af::V6);
        c6.on_receiver(&seg(SYN, RCV_ISS, 0, 65535, o), None);
        assert_eq!(c6.mss(), MAX_MSS_V6);
    }

    #[test]
    fn past_the_handshake_a_syn_changes_neither_scale_nor_edge() {
        let (mut c, ack) = open(Some(7), Some(7));
        let edge = c.right_edge();
        let forged = opts(&[TcpOption::Mss(1), TcpOption::WindowScale(14)]);
        c.on_sender(&seg(
            SYN | ACK,
            ack.wrapping_sub(1 << 30),
            RCV_ISS + 1,
            65535,
            forged,
        ));
        c.on_receiver(&seg(SYN, RCV_ISS, 0, 65535, forged), Some(1));
        assert_eq!((c.scale(), c.mss(), c.right_edge()), (Some(7), 1460, edge));
    }

    #[test]
    fn floor_is_two_mss_unless_the_receiver_says_less() {
        let (mut c, ack) = open(Some(0), Some(0));
        assert_eq!(c.mss(), 1460);
        assert_eq!(
            c.on_receiver(&seg(ACK, 1, ack, 65535, opts(&[])), Some(1)),
            Verdict::Rewrite(2920)
        );
        // Receiver offers 1000 < 2 · MSS: its own value passes.
        let e = c.right_edge().unwrap();
        let ack2 = e.wrapping_sub(500);
        assert_eq!(
            c.on_receiver(&seg(ACK, 1, ack2, 1000, opts(&[])), Some(1)),
            Verdict::Keep
        );
        // Without an MSS option the RFC default counts (536 for IPv4).
        let mut d = WindowClamp::new(Af::V4);
        d.on_receiver(&seg(SYN, 0, 0, 65535, opts(&[])), None);
        d.on_sender(&seg(SYN | ACK, 0, 1, 65535, opts(&[])));
        assert_eq!(
            d.on_receiver(&seg(ACK, 1, 1 + 65535, 65535, opts(&[])), Some(0)),
            Verdict::Rewrite(1072)
        );
        assert_eq!(WindowClamp::new(Af::V6).mss(), 1220);
    }

    #[test]
    fn right_edge_holds_when_the_target_drops() {
        let (mut c, ack) = open(Some(0), Some(0));
        assert_eq!(
            c.on_receiver(&seg(ACK, 1, ack, 60000, opts(&[])), Some(50_000)),
            Verdict::Rewrite(50_000)
        );
        // Target falls to 10000 while 1000 bytes are acked: the edge shown
        // (ack + 50000) must stay, so the window is 49000, not 10000.
        let ack2 = ack.wrapping_add(1000);
        assert_eq!(
            c.on_receiver(&seg(ACK, 1, ack2, 60000, opts(&[])), Some(10_000)),
            Verdict::Rewrite(49_000)
        );
        // Once the data up to the edge is acked, the target applies.
        let ack3 = ack.wrapping_add(50_000);
        assert_eq!(
            c.on_receiver(&seg(ACK, 1, ack3, 60000, opts(&[])), Some(10_000)),
            Verdict::Rewrite(10_000)
        );
    }

    #[test]
    fn unknown_half_open_and_malformed_pass() {
        // Mid-stream: no handshake seen.
        let mut c = WindowClamp::new(Af::V4);
        assert_eq!(
            c.on_receiver(&seg(ACK, 1, 1, 100, opts(&[])), Some(1)),
            Verdict::Pass(PassReason::NoHandshake)
        );
        // Receiver's SYN only.
        c.on_receiver(&seg(SYN, 0, 0, 65535, opts(&[])), None);
        assert_eq!(
            c.on_receiver(&seg(ACK, 1, 1, 100, opts(&[])), Some(1)),
            Verdict::Pass(PassReason::HalfOpen)
        );
        assert_eq!(c.scale(), None);
        // Malformed options in the sender's SYN-ACK: the flow is given up.
        let bad = TcpOptions::parse(&[3, 1, 7]);
        assert!(bad.error.is_some());
        c.on_sender(&seg(SYN | ACK, 0, 1, 65535, bad));
        assert_eq!(
            c.on_receiver(&seg(ACK, 1, 1, 60000, opts(&[])), Some(1)),
            Verdict::Pass(PassReason::BadOptions)
        );
        // ... and in the receiver's SYN.
        let mut d = WindowClamp::new(Af::V4);
        assert_eq!(
            d.on_receiver(&seg(SYN, 0, 0, 65535, bad), Some(1)),
            Verdict::Pass(PassReason::BadOptions)
        );
        assert_eq!(PassReason::HalfOpen.label(), "half_open");
    }

    /// One per tracked connection: keep it small.
    #[test]
    fn state_is_small() {
        assert!(std::mem::size_of::<WindowClamp>() <= 32);
    }

    #[test]
    fn rst_and_ackless_segments_keep() {
        let (mut c, ack) = open(Some(3), Some(3));
        assert_eq!(
            c.on_receiver(&seg(RST, 1, 0, 0, opts(&[])), Some(1)),
            Verdict::Keep
        );
        assert_eq!(
            c.on_receiver(&seg(0, 1, ack, 60000, opts(&[])), Some(1)),
            Verdict::Keep
        );
    }

    /// One step of the receiver: how far its ack moves, how it sets its own
    /// window (as a byte offer that never shrinks its own edge unless
    /// `shrink`), and the target.
    #[derive(Clone, Debug)]
    struct Step {
        acked: u32,
        offer: u32,
        shrink: bool,
        target: Option<u32>,
    }

    fn step() -> impl Strategy<Value = Step> {
        (
            0u32..200_000,
            0u32..(65_535 << 14),
            prop::bool::weighted(0.1),
            prop::option::weighted(0.9, 0u32..3_000_000),
        )
            .prop_map(|(acked, offer, shrink, target)| Step {
                acked,
                offer,
                shrink,
                target,
            })
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(2000))]

        /// Under any sequence of ACKs, targets and receiver windows:
        /// the field written is ≤ the receiver's; the edge shown never moves
        /// left while the receiver's own edge does not; at least
        /// min(receiver's offer, 2 · MSS) is offered; and no more than
        /// needed (target, floor or edge, plus one scale unit).
        #[test]
        fn right_edge_is_monotone(
            rs in 0u8..=16,
            ss in prop::option::of(0u8..=14),
            mss in 1u16..=9000,
            steps in prop::collection::vec(step(), 1..60),
        ) {
            let mut c = WindowClamp::new(Af::V4);
            let ro = opts(&[TcpOption::Mss(mss), TcpOption::WindowScale(rs)]);
            c.on_receiver(&seg(SYN, RCV_ISS, 0, 65535, ro), None);
            let so: Vec<_> = ss.map(TcpOption::WindowScale).into_iter().collect();
            c.on_sender(&seg(SYN | ACK, SND_ISS, RCV_ISS + 1, 65535, opts(&so)));
            let shift = if ss.is_some() { rs.min(14) } else { 0 };
            prop_assert_eq!(c.scale(), Some(shift));

            let mut ack = SND_ISS.wrapping_add(1);
            let mut rcv_edge = ack.wrapping_add(65535); // receiver's SYN window
            let mut shown = c.right_edge().unwrap();
            prop_assert_eq!(shown, rcv_edge);
            let mut ever_shrank = false;
            for s in steps {
                // The receiver acks at most up to what the sender could send.
                let room = shown.wrapping_sub(ack);
                ack = ack.wrapping_add(s.acked.min(room));
                // Its own field: a byte offer rounded down to its unit, but
                // (unless shrinking) never short of its previous edge.
                let mut field = (s.offer >> shift).min(65535);
                let shrinking = s.shrink;
                if !shrinking {
                    let need = rcv_edge.wrapping_sub(ack);
                    field = field.max(need.div_ceil(1 << shift)).min(65535);
                }
                let field = field as u16;
                let offered = u32::from(field) << shift;
                let v = c.on_receiver(&seg(ACK, RCV_ISS + 1, ack, field, opts(&[])), s.target);
                let written = match v {
                    Verdict::Keep => field,
                    Verdict::Rewrite(w) => { prop_assert_ne!(w, field); w }
                    Verdict::Pass(r) => { prop_assert!(false, "pass {:?}", r); field }
                };
                prop_assert!(written <= field, "more than offered");
                let bytes = u32::from(written) << shift;
                let edge = ack.wrapping_add(bytes);
                // The edge shown holds wherever the receiver's own offer
                // reaches it — always, unless the receiver ever shrank.
                let reaches = !seq_lt(ack.wrapping_add(offered), shown);
                ever_shrank |= shrinking;
                prop_assert!(reaches || ever_shrank, "model: receiver fell short unasked");
                if reaches {
                    prop_assert!(!seq_lt(edge, shown), "edge moved left: {} < {}", edge, shown);
                }
                let floor = offered.min(2 * u32::from(mss.min(MAX_MSS_V4)));
                prop_assert!(bytes >= floor, "below the floor: {} < {}", bytes, floor);
                if let Some(t) = s.target {
                    let need = t.max(2 * u32::from(mss.min(MAX_MSS_V4))).max(shown.wrapping_sub(ack));
                    prop_assert!(bytes < need + (1 << shift) || written == field,
                        "clamp too loose: {} for {}", bytes, need);
                } else {
                    prop_assert_eq!(v, Verdict::Keep);
                }
                if !seq_lt(edge, shown) {
                    shown = edge;
                }
                rcv_edge = if seq_lt(rcv_edge, ack.wrapping_add(offered)) || shrinking {
                    ack.wrapping_add(offered)
                } else {
                    rcv_edge
                };
                prop_assert_eq!(c.right_edge(), Some(shown));
            }
        }
    }
}
