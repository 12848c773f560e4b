#!/usr/bin/env python3
"""Spoofed TCP segments and one real TCP exchange, for netns_state.rs.

    tcp_flood.py flood IFACE SRC_MAC DST_MAC DST_IP FLAGS COUNT SEED
        COUNT TCP segments with FLAGS (letters of FSRPAUEW, e.g. A or S) to
        DST_IP, each from a random address of 100.64.0.0/10 and random ports
        (seeded: the same run sends the same frames); prints COUNT.
    tcp_flood.py listen PORT SECONDS
        accepts TCP connections on PORT for SECONDS, answering each line
        with "ok LINE".
    tcp_flood.py connect IP PORT TIMEOUT
        connects, sends one line, waits for the answer; prints the answer
        and the time taken; exit status 1 on failure or timeout.
"""
import random
import socket
import struct
import sys
import time


def csum(b):
    if len(b) % 2:
        b += b"\0"
    s = sum(struct.unpack("!%dH" % (len(b) // 2), b))
    while s >> 16:
        s = (s & 0xFFFF) + (s >> 16)
    return (~s) & 0xFFFF


def mac(s):
    return bytes(int(x, 16) for x in s.split(":"))


def tcp_segment(src, dst, sport, dport, flags, seq, ack):
    bits = sum(1 << "FSRPAUEW".index(c) for c in flags)
    h = struct.pack("!HHIIBBHHH", sport, dport, seq, ack, 5 << 4, bits, 65535, 0, 0)
    pseudo = socket.inet_aton(src) + socket.inet_aton(dst) + struct.pack("!BBH", 0, 6, len(h))
    h = h[:16] + struct.pack("!H", csum(pseudo + h)) + h[18:]
    ip = struct.pack("!BBHHHBBH4s4s", 0x45, 0, 20 + len(h), 1, 0, 64, 6, 0,
                     socket.inet_aton(src), socket.inet_aton(dst))
    ip = ip[:10] + struct.pack("!H", csum(ip)) + ip[12:]
    return ip + h


def flood(iface, smac, dmac, dst, flags, count, seed):
    rnd = random.Random(seed)
    eth = mac(dmac) + mac(smac) + b"\x08\x00"
    s = socket.socket(socket.AF_PACKET, socket.SOCK_RAW)
    s.bind((iface, 0))
    for _ in range(count):
        v = rnd.getrandbits(22)
        src = "100.%d.%d.%d" % (64 + (v >> 16), (v >> 8) & 255, v & 255)
        seg = tcp_segment(src, dst, rnd.randrange(1024, 65536), rnd.randrange(1, 65536),
                          flags, rnd.getrandbits(32), rnd.getrandbits(32))
        f = eth + seg
        s.send(f + b"\0" * max(0, 60 - len(f)))
    print(count)


def listen(port, seconds):
    ls = socket.socket()
    ls.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    ls.bind(("0.0.0.0", port))
    ls.listen(16)
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        ls.settimeout(max(0.1, end - time.monotonic()))
        try:
            c, _ = ls.accept()
        except socket.timeout:
            break
        c.settimeout(5)
        try:
            line = c.makefile().readline().strip()
            c.sendall(("ok %s\n" % line).encode())
        except OSError:
            pass
        c.close()


def connect(ip, port, timeout):
    t0 = time.monotonic()
    try:
        c = socket.create_connection((ip, port), timeout=timeout)
        c.settimeout(max(0.1, timeout - (time.monotonic() - t0)))
        c.sendall(b"hello\n")
        answer = c.makefile().readline().strip()
        c.close()
    except OSError as e:
        print("failed after %.3f s: %s" % (time.monotonic() - t0, e))
        sys.exit(1)
    print("%s in %.3f s" % (answer, time.monotonic() - t0))
    sys.exit(0 if answer == "ok hello" else 1)


def main():
    mode = sys.argv[1]
    if mode == "flood":
        iface, smac, dmac, dst, flags, count, seed = sys.argv[2:9]
        flood(iface, smac, dmac, dst, flags, int(count), int(seed))
    elif mode == "listen":
        listen(int(sys.argv[2]), float(sys.argv[3]))
    elif mode == "connect":
        connect(sys.argv[2], int(sys.argv[3]), float(sys.argv[4]))
    else:
        sys.exit("unknown mode " + mode)


if __name__ == "__main__":
    main()
