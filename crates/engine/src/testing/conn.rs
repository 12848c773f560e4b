//! One TCP connection as frames, for the tests, the simulator and the
//! benches: one place builds a segment of a given connection.

use sluice_wire::build::{tcp_with, TcpSpec};
use std::net::Ipv4Addr;

/// One TCP connection as frames: `client:cport` on the LAN side,
/// `server:sport` on the WAN side, each segment's window field `window`.
#[derive(Clone, Copy, Debug)]
pub struct Conn {
    pub client: Ipv4Addr,
    pub cport: u16,
    pub server: Ipv4Addr,
    pub sport: u16,
    pub window: u16,
}

impl Conn {
    /// A connection from `client:cport` to the tests' server (the
    /// simulator's, [`super::netsim::SERVER`]) on port 443, each segment
    /// offering a 64 KiB window.
    pub fn to_server(client: Ipv4Addr, cport: u16) -> Conn {
        Conn {
            client,
            cport,
            server: super::netsim::SERVER,
            sport: 443,
            window: 65535,
        }
    }

    /// A segment from the client (`from_client`) or from the server, with
    /// `len` bytes of data.
    pub fn seg(
        &self,
        from_client: bool,
        seq: u32,
        ack: u32,
        flags: u8,
        opts: &[u8],
        len: usize,
    ) -> Vec<u8> {
        let spec = |sport, dport| TcpSpec {
            sport,
            dport,
            seq,
            ack,
            flags,
            window: self.window,
            options: opts,
            payload_len: len,
        };
        if from_client {
            tcp_with(self.client, self.server, &spec(self.cport, self.sport))
        } else {
            tcp_with(self.server, self.client, &spec(self.sport, self.cport))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use sluice_wire::{parse, IpInfo, L4};

    #[test]
    fn each_side_sends_from_its_own_end() {
        let c = Conn {
            client: Ipv4Addr::new(192, 168, 1, 10),
            cport: 40_000,
            server: Ipv4Addr::new(198, 51, 100, 1),
            sport: 443,
            window: 1000,
        };
        let ends = |f: Vec<u8>| match parse(&f).unwrap().ip {
            Some(IpInfo {
                src,
                dst,
                l4: L4::Tcp { sport, dport, .. },
                ..
            }) => (src, sport, dst, dport),
            other => panic!("not TCP: {other:?}"),
        };
        let (cl, sv) = (c.client.into(), c.server.into());
        assert_eq!(ends(c.seg(true, 1, 0, 0, &[], 10)), (cl, 40_000, sv, 443));
        assert_eq!(ends(c.seg(false, 1, 0, 0, &[], 0)), (sv, 443, cl, 40_000));
    }
}
