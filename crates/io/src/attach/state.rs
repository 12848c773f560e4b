//! The state file of an attached interface: the [`Snapshot`] taken before
//! attaching, as text, so that `sluice on-exit --attach IF` restores IF
//! after a SIGKILL or a panic exactly as a clean stop would. Pure.
//!
//! # Principles
//! - Written before the first change and removed after the last undo: a
//!   file present means "IF may be attached"; absent, nothing to undo.
//! - One line per item, fields separated by spaces, attribute payloads in
//!   hex (`type=hex`): no escaping to get wrong. An unknown version or a
//!   malformed line is an error naming the line, never a guess.

use super::plan::Snapshot;
use crate::rtnl::{Addr, LinkInfo, Neigh, Route};

const HEADER: &str = "sluice-attach-state 1";

fn hex(d: &[u8]) -> String {
    d.iter().map(|b| format!("{b:02x}")).collect()
}

fn unhex(s: &str) -> Option<Vec<u8>> {
    if !s.len().is_multiple_of(2) {
        return None;
    }
    (0..s.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(s.get(i..i + 2)?, 16).ok())
        .collect()
}

fn attrs_text(a: &[(u16, Vec<u8>)]) -> String {
    a.iter().map(|(k, d)| format!(" {k}={}", hex(d))).collect()
}

fn parse_attrs<'a>(words: impl Iterator<Item = &'a str>) -> Option<Vec<(u16, Vec<u8>)>> {
    words
        .map(|w| {
            let (k, d) = w.split_once('=')?;
            Some((k.parse().ok()?, unhex(d)?))
        })
        .collect()
}

/// The snapshot as the state file's text.
pub fn to_text(s: &Snapshot) -> String {
    let l = &s.link;
    let mut t = format!("{HEADER}\n");
    t += &format!(
        "link {} {} {} {} {} {}\n",
        l.ifindex,
        l.flags,
        l.mtu,
        hex(&l.mac),
        l.master.unwrap_or(0),
        l.name
    );
    if let Some(m) = &s.master_name {
        t += &format!("master {m}\n");
    }
    if let Some(d) = s.ipv6_disabled {
        t += &format!("ipv6_disabled {}\n", d as u8);
    }
    for a in &s.addrs {
        t += &format!(
            "addr {} {} {} {} {}{}\n",
            a.family,
            a.prefixlen,
            a.flags,
            a.scope,
            a.ifindex,
            attrs_text(&a.attrs)
        );
    }
    for n in &s.neighs {
        t += &format!(
            "neigh {} {} {} {} {}{}\n",
            n.family,
            n.ifindex,
            n.state,
            n.flags,
            n.kind,
            attrs_text(&n.attrs)
        );
    }
    for r in &s.routes {
        t += &format!(
            "route {} {} {} {} {} {} {} {} {}{}\n",
            r.family,
            r.dst_len,
            r.src_len,
            r.tos,
            r.table,
            r.protocol,
            r.scope,
            r.kind,
            r.flags,
            attrs_text(&r.attrs)
        );
    }
    t
}

fn num<T: std::str::FromStr>(w: Option<&str>) -> Option<T> {
    w?.parse().ok()
}

fn parse_line(s: &mut Snapshot, line: &str) -> Option<()> {
    let mut w = line.split(' ');
    match w.next()? {
        "link" => {
            s.link = LinkInfo {
                ifindex: num(w.next())?,
                flags: num(w.next())?,
                mtu: num(w.next())?,
                mac: unhex(w.next()?)?,
                master: Some(num::<i32>(w.next())?).filter(|m| *m != 0),
                name: w.next()?.to_string(),
                ..LinkInfo::default()
            };
        }
        "master" => s.master_name = Some(w.next()?.to_string()),
        "ipv6_disabled" => s.ipv6_disabled = Some(num::<u8>(w.next())? != 0),
        "addr" => s.addrs.push(Addr {
            family: num(w.next())?,
            prefixlen: num(w.next())?,
            flags: num(w.next())?,
            scope: num(w.next())?,
            ifindex: num(w.next())?,
            attrs: parse_attrs(w)?,
        }),
        "neigh" => s.neighs.push(Neigh {
            family: num(w.next())?,
            ifindex: num(w.next())?,
            state: num(w.next())?,
            flags: num(w.next())?,
            kind: num(w.next())?,
            attrs: parse_attrs(w)?,
        }),
        "route" => s.routes.push(Route {
            family: num(w.next())?,
            dst_len: num(w.next())?,
            src_len: num(w.next())?,
            tos: num(w.next())?,
            table: num(w.next())?,
            protocol: num(w.next())?,
            scope: num(w.next())?,
            kind: num(w.next())?,
            flags: num(w.next())?,
            attrs: parse_attrs(w)?,
        }),
        _ => return None,
    }
    Some(())
}

/// The snapshot in a state file's text.
pub fn from_text(t: &str) -> Result<Snapshot, String> {
    let mut lines = t.lines();
    if lines.next() != Some(HEADER) {
        return Err(format!(
            "not a sluice attach state (first line is not `{HEADER}`)"
        ));
    }
    let mut s = Snapshot {
        link: LinkInfo::default(),
        master_name: None,
        addrs: Vec::new(),
        routes: Vec::new(),
        neighs: Vec::new(),
        ipv6_disabled: None,
    };
    for (n, line) in lines.enumerate().filter(|(_, l)| !l.is_empty()) {
        parse_line(&mut s, line).ok_or_else(|| format!("line {}: cannot read `{line}`", n + 2))?;
    }
    if s.link.name.is_empty() {
        return Err("no `link` line".into());
    }
    Ok(s)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn snap() -> Snapshot {
        Snapshot {
            link: LinkInfo {
                ifindex: 7,
                flags: 0x1003,
                name: "lan0".into(),
                master: Some(3),
                mtu: 1500,
                mac: vec![0x52, 0x54, 0, 1, 2, 3],
                ..LinkInfo::default()
            },
            master_name: Some("br-lan".into()),
            addrs: vec![Addr {
                family: 2,
                prefixlen: 24,
                flags: 0x80,
                scope: 0,
                ifindex: 7,
                attrs: vec![(2, vec![10, 0, 1, 1]), (3, b"lan0\0".to_vec())],
            }],
            routes: vec![Route {
                family: 10,
                dst_len: 0,
                src_len: 0,
                tos: 0,
                table: 254,
                protocol: 3,
                scope: 0,
                kind: 1,
                flags: 0,
                attrs: vec![(
                    5,
                    vec![0xfe, 0x80, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1],
                )],
            }],
            neighs: vec![Neigh {
                family: 2,
                ifindex: 7,
                state: 0x80,
                flags: 0,
                kind: 0,
                attrs: vec![(1, vec![10, 0, 1, 9]), (2, vec![2, 0, 0, 0, 0, 9])],
            }],
            ipv6_disabled: Some(false),
        }
    }

    #[test]
    fn a_snapshot_survives_its_text() {
        let s = snap();
        assert_eq!(from_text(&to_text(&s)), Ok(s));
        let mut bare = snap();
        bare.link.master = None;
        bare.master_name = None;
        bare.ipv6_disabled = None;
        bare.addrs.clear();
        bare.neighs.clear();
        assert_eq!(from_text(&to_text(&bare)), Ok(bare));
    }

    #[test]
    fn a_damaged_file_is_an_error_naming_the_line() {
        assert!(from_text("")
            .unwrap_err()
            .contains("not a sluice attach state"));
        let t = to_text(&snap()).replace("addr 2 24", "addr 2 x");
        let e = from_text(&t).unwrap_err();
        assert!(e.starts_with("line 5:"), "{e}");
        let t = to_text(&snap()) + "route 1 2=zz\n";
        assert!(from_text(&t).is_err());
        assert!(from_text(HEADER).unwrap_err().contains("no `link`"));
    }
}
