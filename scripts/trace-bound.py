#!/usr/bin/env python3
"""The best a rate controller can do on a lab trace: a bound for #16's goals.

A controller that reads the link from the delay its traffic shows learns of a
change at least a round trip late: a packet has to cross the queue and its
answer come back before the delay can be read, and a download's senders need
another round trip to follow a new rate. This script plays a trace
(examples/lab/traces/*.trace, the lab's format: `TIME DOWN UP` lines, `#`
comments, `align P`) against an *oracle* that knows the link's exact rate and
the modem's exact queue, LAG milliseconds late, and sends at that rate less
what drains the queue it saw within 100 ms. The modem is a fluid FIFO of 1000
full frames; every moment's added delay is the sojourn a bit sent then would
meet (the queue ahead of it at the rates to come). The figure is the 99th
percentile of the up and down sojourns added, over the loaded 10-70 s of
`rrul` with the default phases: what the lab's ping p99 minus the idle RTT
would be for that oracle.

No real controller does as well as the oracle at its lag: it reads a noisy
signal, through windows and ticks. So the oracle's figure at a realistic lag
is a floor under what any in-band controller (sluice's, cake-autorate's) can
reach on that trace.

    python3 scripts/trace-bound.py [TRACE ...]
    python3 scripts/trace-bound.py --reconfig 15,12,0.1,0.4 starlink

`--reconfig EVERY,AT,LEAD,HOLD` (seconds) adds autorate's `reconfig`
windows (docs/autorate.md): from LEAD before each moment AT + k * EVERY of
the trace's clock to HOLD after it the oracle sends at `min`, 90 % of the
trace's lowest rate, as the shipped configurations' autorate does. (What a
packet then waits in sluice's own queue, FQ-CoDel's round of the flows, is
not modelled: only the modem's queue.)
"""
import argparse
import os
import re

FRAME = 1514
BUFFER_BYTES = 1000 * FRAME
DRAIN_S = 0.1
LOADED = (10_000, 70_000)  # ms: rrul's load with the default phases
UNITS = {"": 1, "k": 1e3, "m": 1e6, "g": 1e9}


def rate(text):
    m = re.fullmatch(r"([\d.]+)([kKmMgG]?)(bit|b|bps)?", text)
    if not m:
        raise ValueError(f"not a rate: {text}")
    return float(m.group(1)) * UNITS[m.group(2).lower()]


def load(path):
    steps = []
    for line in open(path):
        f = line.split("#")[0].split()
        if len(f) == 3:
            steps.append((float(f[0]), rate(f[1]), rate(f[2])))
    return steps


def per_ms(steps, col, length_ms):
    out, i, cur = [], 0, steps[0][col]
    for t in range(length_ms):
        while i < len(steps) and steps[i][0] * 1000 <= t:
            cur = steps[i][col]
            i += 1
        out.append(cur)
    return out


def windows(length_ms, reconfig):
    if not reconfig:
        return [False] * length_ms
    every, at, lead, hold = (int(x * 1000) for x in reconfig)
    return [((t - at) % every) < hold or ((t - at) % every) >= every - lead
            for t in range(length_ms)]


def play(cap, lag_ms, quiet):
    """Sojourns (ms) in the modem of bits sent at each loaded ms, and the
    share of the link used over the loaded span."""
    n = len(cap)
    floor = 0.9 * min(cap)
    queue, queues = 0.0, []
    arrived, departed = [0.0] * n, [0.0] * n
    a = d = used = offered = 0.0
    for t in range(n):
        seen = queues[t - lag_ms] if t >= lag_ms else 0.0
        send = floor / 8000 if quiet[t] else max(
            0.0, cap[max(0, t - lag_ms)] / 8000 - seen / (DRAIN_S * 1000))
        a += send
        out = min(queue + send, cap[t] / 8000)
        queue = min(BUFFER_BYTES, queue + send - out)
        d += out
        queues.append(queue)
        arrived[t], departed[t] = a, d
        if LOADED[0] <= t < LOADED[1]:
            used += out * 8000
            offered += cap[t]
    sojourn, j = [], 0
    for t in range(*LOADED):
        j = max(j, t)
        while j < n - 1 and departed[j] + 1e-9 < arrived[t]:
            j += 1
        sojourn.append(j - t)
    return sojourn, used / offered


def p99(v):
    v = sorted(v)
    return v[min(len(v) - 1, len(v) * 99 // 100)]


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("traces", nargs="*",
                    default=["step", "lte", "starlink", "docsis-evening"])
    ap.add_argument("--lags", default="20/40,40/80,80/150",
                    help="up/down lags in ms, comma-separated")
    ap.add_argument("--reconfig", help="EVERY,AT,LEAD,HOLD in seconds")
    args = ap.parse_args()
    reconfig = [float(x) for x in args.reconfig.split(",")] if args.reconfig else None
    here = os.path.join(os.path.dirname(__file__), "..", "examples", "lab", "traces")
    length = LOADED[1] + 10_000
    quiet = windows(length, reconfig)
    print("| trace | lag up / down | added p99 (up, down) | utilisation down / up |")
    print("|---|---|---|---|")
    for name in args.traces:
        path = name if os.path.exists(name) else os.path.join(here, name + ".trace")
        steps = load(path)
        down, up = per_ms(steps, 1, length), per_ms(steps, 2, length)
        for lags in args.lags.split(","):
            lu, ld = (int(x) for x in lags.split("/"))
            su, uu = play(up, lu, quiet)
            sd, ud = play(down, ld, quiet)
            both = [x + y for x, y in zip(su, sd)]
            print(f"| {os.path.basename(path)} | {lu} / {ld} ms | {p99(both)} ms "
                  f"({p99(su)}, {p99(sd)}) | {ud:.0%} / {uu:.0%} |")


if __name__ == "__main__":
    main()
