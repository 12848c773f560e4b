#!/usr/bin/env python3
"""Sends hand-made Ethernet frames out of an interface (AF_PACKET, root).

Used by netns_e2e.rs to feed sluice bad input and encapsulated traffic.
    inject.py IFACE SRC_MAC DST_MAC SRC_IP DST_IP MODE COUNT
MODE: truncated | bad_ihl | bad_total_len | v6_ext_chain | fragments | flood
      | small
      (prints the number of frames sent; small: 60-byte UDP frames of one
      flow to port 9, paced at about 100 000 frames/s)
    | vlan | qinq | pppoe4 | pppoe6 | vlan_bulk | nonip
      (UDP to port 5060 — 9 for vlan_bulk — inside an 802.1Q tag, an
      802.1ad + 802.1Q pair, a PPPoE session carrying IPv4 or IPv6; nonip:
      a frame of the local experimental EtherType 0x88B5; each payload holds
      the marker SLUICE-MODE-; prints "frames bytes", the bytes being whole
      frames as sent, tags and PPPoE headers included)
    | spoof (UDP to DST_IP from COUNT distinct sources in 10.200.0.0/16)
    | arp_spoof (broadcast ARP requests for DST_IP from COUNT distinct
      senders in 10.201.0.0/16) | announce (COUNT gratuitous ARP requests,
      RFC 5227 announcements, for SRC_IP) — used by netns_learn.rs; print
      the number of frames sent
    inject.py capture IFACE SECONDS
      counts, for SECONDS, the frames seen on IFACE by marker; prints JSON
      {"MODE": frames, ...}
    inject.py tcp_spoof IFACE SRC_MAC DST_MAC SEED COUNT [FLAGS DST_IP]
      COUNT TCP segments with every flag combination in turn (all 256 of
      the flags byte) and random 5-tuples, one in four IPv6; with FLAGS
      (letters of FSRPAUEW, e.g. A or S) every segment carries those flags
      and goes to DST_IP, from random addresses of 100.64.0.0/10 and random
      ports. Seeded: the same SEED sends the same frames. Prints COUNT.
    inject.py listen PORT [SECONDS]
      accepts TCP connections on PORT (until killed, or for SECONDS),
      answering a line sent on each with "ok LINE"
    inject.py trickle unix:PATH|tcp:HOST:PORT COUNT SECONDS
      holds COUNT connections open at once, each sending the start of a
      request and then one space every 0.5 s for SECONDS; prints how many
      the server closed before SECONDS were up
    inject.py get HOST:PORT PATH TIMEOUT
      one HTTP/1.0 GET; prints "STATUS SECONDS" (STATUS 0: no answer)
    inject.py connect HOST PORT COUNT TIMEOUT
      opens COUNT fresh TCP connections to HOST:PORT one after another, each
      given TIMEOUT seconds to send "hello" and be answered "ok hello";
      prints "OK FAILED SECONDS" (SECONDS: the slowest attempt) and exits 1
      if any failed
"""
import json
import time
import random
import socket
import struct
import sys


def csum(b):
    if len(b) % 2:
        b += b"\0"
    s = sum(struct.unpack("!%dH" % (len(b) // 2), b))
    while s >> 16:
        s = (s & 0xFFFF) + (s >> 16)
    return (~s) & 0xFFFF


def mac(s):
    return bytes(int(x, 16) for x in s.split(":"))


def ipv4(src, dst, proto, payload, ihl=5, total=None, frag=0, ident=1):
    total = 20 + len(payload) if total is None else total
    h = struct.pack("!BBHHHBBH4s4s", 0x40 | ihl, 0, total, ident, frag, 64, proto, 0,
                    socket.inet_aton(src), socket.inet_aton(dst))
    h = h[:10] + struct.pack("!H", csum(h)) + h[12:]
    return h + payload


def udp(sport, dport, data):
    return struct.pack("!HHHH", sport, dport, 8 + len(data), 0) + data


def udp6(src, dst, sport, dport, data):
    """IPv6 + UDP with its (mandatory) checksum."""
    u = struct.pack("!HHHH", sport, dport, 8 + len(data), 0) + data
    s6, d6 = socket.inet_pton(socket.AF_INET6, src), socket.inet_pton(socket.AF_INET6, dst)
    c = csum(s6 + d6 + struct.pack("!IxxxB", len(u), 17) + u) or 0xFFFF
    u = u[:6] + struct.pack("!H", c) + u[8:]
    return struct.pack("!IHBB16s16s", 6 << 28, len(u), 17, 64, s6, d6) + u


def pppoe(ppp_proto, packet):
    """A PPPoE session frame's payload (RFC 2516): ver/type 0x11, code 0,
    session 0x1234, length = PPP protocol field + packet."""
    return struct.pack("!BBHHH", 0x11, 0, 0x1234, 2 + len(packet), ppp_proto) + packet


ENCAP = ("vlan", "qinq", "pppoe4", "pppoe6", "vlan_bulk", "nonip")


def encap(mode, i, smac, dmac, src, dst):
    # Payload lengths vary so the byte count checks each frame's own length.
    data = ("SLUICE-%s-%d-" % (mode, i)).encode() + b"p" * (i % 7 * 50)
    l2 = mac(dmac) + mac(smac)
    v4 = ipv4(src, dst, 17, udp(5000 + i % 4, 9 if mode == "vlan_bulk" else 5060, data))
    if mode in ("vlan", "vlan_bulk"):
        return l2 + struct.pack("!HH", 0x8100, 10) + b"\x08\x00" + v4
    if mode == "qinq":
        return l2 + struct.pack("!HHHH", 0x88A8, 100, 0x8100, 10) + b"\x08\x00" + v4
    if mode == "pppoe4":
        return l2 + b"\x88\x64" + pppoe(0x0021, v4)
    if mode == "nonip":
        return l2 + b"\x88\xb5" + data
    v6 = udp6("2001:db8::1", "2001:db8::2", 5000 + i % 4, 5060, data)
    return l2 + b"\x88\x64" + pppoe(0x0057, v6)


def capture(iface, seconds):
    s = socket.socket(socket.AF_PACKET, socket.SOCK_RAW, socket.htons(3))
    s.bind((iface, 0))
    s.settimeout(0.2)
    seen = {}
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        try:
            f = s.recv(65536)
        except socket.timeout:
            continue
        k = f.find(b"SLUICE-")
        if k >= 0:
            mode = f[k + 7:].split(b"-", 1)[0].decode()
            seen[mode] = seen.get(mode, 0) + 1
    print(json.dumps(seen))


def tcp4(src, dst, sport, dport, flags, seq, ack):
    """IPv4 + a TCP header with valid checksums (addresses as 4 bytes)."""
    h = struct.pack("!HHIIBBHHH", sport, dport, seq, ack, 5 << 4, flags, 65535, 0, 0)
    h = h[:16] + struct.pack("!H", csum(src + dst + struct.pack("!BBH", 0, 6, len(h)) + h)) + h[18:]
    ip = struct.pack("!BBHHHBBH4s4s", 0x45, 0, 20 + len(h), 1, 0, 64, 6, 0, src, dst)
    return ip[:10] + struct.pack("!H", csum(ip)) + ip[12:] + h


def tcp_spoof(iface, smac, dmac, seed, count, flags=None, dst=None):
    """The hostile floods of issue #12 (netns_flood.rs, netns_state.rs)."""
    s = socket.socket(socket.AF_PACKET, socket.SOCK_RAW)
    s.bind((iface, 0))
    rnd = random.Random(seed)
    l2 = mac(dmac) + mac(smac)
    bits = None if flags is None else sum(1 << "FSRPAUEW".index(c) for c in flags)
    for i in range(count):
        ports = rnd.getrandbits(32)
        sport, dport = ports >> 16, ports & 0xFFFF
        seq, ack = rnd.getrandbits(32), rnd.getrandbits(32)
        if bits is not None:
            v = rnd.getrandbits(22)
            src = bytes([100, 64 + (v >> 16), (v >> 8) & 255, v & 255])
            f = l2 + b"\x08\x00" + tcp4(src, socket.inet_aton(dst), sport, dport, bits, seq, ack)
        elif i % 4 == 3:
            seg = struct.pack("!HHIIBBHHH", sport, dport, seq, ack, 5 << 4, i & 0xFF, 65535, 0, 0)
            a, b = rnd.getrandbits(128).to_bytes(16, "big"), rnd.getrandbits(128).to_bytes(16, "big")
            f = l2 + b"\x86\xdd" + struct.pack("!IHBB16s16s", 6 << 28, len(seg), 6, 64, a, b) + seg
        else:
            a, b = rnd.getrandbits(32).to_bytes(4, "big"), rnd.getrandbits(32).to_bytes(4, "big")
            f = l2 + b"\x08\x00" + tcp4(a, b, sport, dport, i & 0xFF, seq, ack)
        f = f + b"\0" * max(0, 60 - len(f))
        while True:
            try:
                s.send(f)
                break
            except BlockingIOError:
                time.sleep(0.001)
            except OSError as e:
                if e.errno != 105:  # ENOBUFS: the veth's queue is full
                    raise
                time.sleep(0.001)
    print(count)


def listen(port, seconds=None):
    ls = socket.socket()
    ls.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    ls.bind(("0.0.0.0", port))
    ls.listen(1024)
    end = None if seconds is None else time.monotonic() + seconds
    while end is None or time.monotonic() < end:
        ls.settimeout(None if end is None else max(0.1, end - time.monotonic()))
        try:
            c, _ = ls.accept()
        except socket.timeout:
            break
        c.settimeout(5)
        try:
            line = c.makefile().readline().strip()
            if line:
                c.sendall(("ok %s\n" % line).encode())
        except OSError:
            pass
        c.close()


def connect(host, port, count, timeout):
    ok, slowest = 0, 0.0
    for _ in range(count):
        t0 = time.monotonic()
        try:
            c = socket.create_connection((host, port), timeout)
            c.settimeout(max(0.1, timeout - (time.monotonic() - t0)))
            c.sendall(b"hello\n")
            ok += c.makefile().readline().strip() == "ok hello"
            c.close()
        except OSError:
            pass
        slowest = max(slowest, time.monotonic() - t0)
    print(ok, count - ok, "%.3f" % slowest)
    sys.exit(0 if ok == count else 1)


def trickle(target, count, seconds):
    conns = []
    for _ in range(count):
        if target.startswith("unix:"):
            c = socket.socket(socket.AF_UNIX)
            c.connect(target[5:])
            c.send(b'{"cmd":')
        else:
            host, port = target[4:].rsplit(":", 1)
            c = socket.create_connection((host, int(port)), 2)
            c.send(b"GET /metrics HTTP/1.0\r\nX-Slow: ")
        c.setblocking(False)
        conns.append(c)
    closed = set()
    end = time.monotonic() + seconds
    while time.monotonic() < end and len(closed) < count:
        time.sleep(0.5)
        for k, c in enumerate(conns):
            if k in closed:
                continue
            try:
                if c.recv(4096) == b"":
                    closed.add(k)
                    continue
            except BlockingIOError:
                pass
            except OSError:
                closed.add(k)
                continue
            try:
                c.send(b" ")
            except OSError:
                closed.add(k)
    print(len(closed))


def get(target, path, timeout):
    host, port = target.rsplit(":", 1)
    t0 = time.monotonic()
    try:
        c = socket.create_connection((host, int(port)), timeout)
        c.settimeout(timeout)
        c.sendall(("GET %s HTTP/1.0\r\n\r\n" % path).encode())
        head = c.recv(64).decode(errors="replace")
        status = int(head.split()[1]) if head.startswith("HTTP/") else 0
    except (OSError, ValueError, IndexError):
        status = 0
    print(status, "%.3f" % (time.monotonic() - t0))


def main():
    if sys.argv[1] == "capture":
        capture(sys.argv[2], float(sys.argv[3]))
        return
    if sys.argv[1] == "tcp_spoof":
        a = sys.argv[2:]
        tcp_spoof(a[0], a[1], a[2], a[3], int(a[4]), *a[5:7])
        return
    if sys.argv[1] == "trickle":
        trickle(sys.argv[2], int(sys.argv[3]), float(sys.argv[4]))
        return
    if sys.argv[1] == "get":
        get(sys.argv[2], sys.argv[3], float(sys.argv[4]))
        return
    if sys.argv[1] == "listen":
        listen(int(sys.argv[2]), *[float(x) for x in sys.argv[3:4]])
        return
    if sys.argv[1] == "connect":
        connect(sys.argv[2], int(sys.argv[3]), int(sys.argv[4]), float(sys.argv[5]))
        return
    iface, smac, dmac, src, dst, mode, count = sys.argv[1:8]
    count = int(count)
    eth4 = mac(dmac) + mac(smac) + b"\x08\x00"
    eth6 = mac(dmac) + mac(smac) + b"\x86\xdd"
    s = socket.socket(socket.AF_PACKET, socket.SOCK_RAW)
    s.bind((iface, 0))
    rnd = random.Random(7)
    sent = 0
    if mode in ENCAP:
        total = 0
        for i in range(count):
            f = encap(mode, i, smac, dmac, src, dst)
            f = f + b"\0" * max(0, 60 - len(f))
            s.send(f)
            total += len(f)
        print(sent + count, total)
        return
    for i in range(count):
        if mode == "truncated":
            f = (eth4 + ipv4(src, dst, 17, udp(1000, 2000, b"x" * 40)))[: 14 + rnd.randrange(1, 27)]
        elif mode == "bad_ihl":
            f = eth4 + ipv4(src, dst, 17, udp(1000, 2000, b"x" * 40), ihl=3)
        elif mode == "bad_total_len":
            f = eth4 + ipv4(src, dst, 17, udp(1000, 2000, b"x" * 40), total=1400)
        elif mode == "v6_ext_chain":
            # 12 destination-options headers: longer than any chain sluice walks.
            n = 12
            chain = b"".join(struct.pack("!BB6s", 60 if k < n - 1 else 17, 0, b"\x01\x04\0\0\0\0")
                             for k in range(n))
            payload = chain + udp(1000, 2000, b"y" * 8)
            h = struct.pack("!IHBB16s16s", 6 << 28, len(payload), 60, 64,
                            socket.inet_pton(socket.AF_INET6, "2001:db8::1"),
                            socket.inet_pton(socket.AF_INET6, "2001:db8::2"))
            f = eth6 + h + payload
        elif mode == "fragments":
            data = udp(3000 + i % 100, 4000, b"z" * 64)
            first = ipv4(src, dst, 17, data[:24], frag=0x2000, ident=i)  # MF, offset 0
            later = ipv4(src, dst, 17, data[24:], frag=3, ident=i)       # offset 24 B
            s.send(eth4 + first)
            sent += 1
            f = eth4 + later
        elif mode == "small":
            f = eth4 + ipv4(src, dst, 17, udp(4242, 9, b"s" * 18))
            if i % 1000 == 999:
                time.sleep(0.01)
        elif mode == "spoof":
            f = eth4 + ipv4("10.200.%d.%d" % (i >> 8 & 255, i & 255), dst, 17,
                            udp(4000, 9, b"s" * 18))
        elif mode in ("arp_spoof", "announce"):
            sender = "10.201.%d.%d" % (i >> 8 & 255, i & 255) if mode == "arp_spoof" else src
            target = dst if mode == "arp_spoof" else src
            f = (b"\xff" * 6 + mac(smac) + b"\x08\x06"
                 + struct.pack("!HHBBH6s4s6s4s", 1, 0x0800, 6, 4, 1, mac(smac),
                               socket.inet_aton(sender), b"\0" * 6, socket.inet_aton(target)))
        elif mode == "flood":
            sport = rnd.randrange(1024, 65535)
            dport = rnd.randrange(1, 65535)
            f = eth4 + ipv4(src, dst, 17, udp(sport, dport, b"f" * 18))
        else:
            sys.exit("unknown mode " + mode)
        f = f + b"\0" * max(0, 60 - len(f)) if mode != "truncated" else f
        s.send(f)
        sent += 1
    print(sent)


if __name__ == "__main__":
    main()
