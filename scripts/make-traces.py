#!/usr/bin/env python3
"""Writes the lab's shipped rate traces (examples/lab/traces/*.trace).

Each trace is modelled on public descriptions of a kind of link, drawn with
a fixed seed so the files are reproducible; rerun this script after changing
a model, and commit the files it writes. Rates are bits per second; the
lab's trace format is described in docs/lab.md ("Links that move").

    python3 scripts/make-traces.py [OUT_DIR]
"""
import math
import os
import random
import sys

LENGTH_S = 300


def rate(bps):
    """pf-style short rate text: 12.3M, 850k."""
    if bps >= 1e6:
        return f"{bps / 1e6:.2f}".rstrip("0").rstrip(".") + "M"
    return f"{bps / 1e3:.0f}k"


def write(path, header, steps, align=None):
    with open(path, "w") as f:
        for line in header.strip().splitlines():
            f.write(f"# {line}\n".replace("# \n", "#\n"))
        if align:
            f.write(f"align {align}\n")
        f.write("# time(s)  down     up\n")
        last = None
        for t, d, u in steps:
            cur = (rate(d), rate(u))
            if cur == last:
                continue
            last = cur
            f.write(f"{t:<10g} {cur[0]:<8} {cur[1]}\n")


def step():
    return [(0, 20e6, 4e6), (25, 8e6, 1.6e6), (50, 20e6, 4e6)]


def lte(rng):
    # Capacity as a log-normal AR(1) process sampled each second (fading and
    # the cell's other users), with deep fades of 1-3 s (tunnels, handovers)
    # about once a minute. Down 3-40 Mbit/s around 18, up 0.8-10 around 4.
    steps, x, fade = [], 0.0, 0
    for t in range(LENGTH_S):
        x = 0.8 * x + rng.gauss(0, 0.25)
        if fade == 0 and rng.random() < 1 / 60:
            fade = rng.randint(1, 3)
        k = math.exp(x) * (0.15 if fade else 1.0)
        fade = max(0, fade - 1)
        d = min(40e6, max(3e6, 18e6 * k))
        u = min(10e6, max(0.8e6, 4e6 * k * math.exp(rng.gauss(0, 0.1))))
        steps.append((t, d, u))
    return steps


def starlink(rng):
    # The satellite schedule changes every 15 s, at 12, 27, 42 and 57 s past
    # the minute: each slot gets a capacity level of its own, the change
    # itself a dip of a few hundred ms, and the level wanders ±10 % within
    # the slot. Down 20-100 Mbit/s, up 3-12.
    steps = []
    t = 0.0
    boundaries = [12 + 15 * i for i in range(LENGTH_S // 15 + 1)]
    level = (rng.uniform(30e6, 100e6), rng.uniform(4e6, 12e6))
    for b in [0] + boundaries:
        if b >= LENGTH_S:
            break
        if b > 0:
            steps.append((b, 2e6, 0.5e6))  # the reconfiguration's dip
            level = (rng.uniform(20e6, 100e6), rng.uniform(3e6, 12e6))
            t = b + 0.3
        nxt = min(next((x for x in boundaries if x > b), LENGTH_S), LENGTH_S)
        while t < nxt:
            w = rng.uniform(0.9, 1.1)
            steps.append((round(t, 1), min(100e6, level[0] * w), min(12e6, level[1] * w)))
            t = math.floor(t) + 1
    return steps


def docsis_evening(rng):
    # A cable segment at its busy hour, compressed into five minutes:
    # nominal 50/10 Mbit/s, the evening's load pulling the share a user gets
    # down to a third and back in slow waves, a few seconds-long dips when
    # the neighbours' bursts line up. Each second jitters ±5 %.
    steps = []
    for t in range(LENGTH_S):
        sag = 0.35 + 0.65 * (0.5 + 0.5 * math.cos(2 * math.pi * t / LENGTH_S))
        sag *= 1 - 0.15 * (0.5 + 0.5 * math.sin(2 * math.pi * t / 37))
        if rng.random() < 1 / 40:
            sag *= 0.5
        w = rng.uniform(0.95, 1.05)
        steps.append((t, 50e6 * sag * w, 10e6 * min(1.0, sag * 1.4) * w))
    return steps


def main():
    out = sys.argv[1] if len(sys.argv) > 1 else os.path.join(
        os.path.dirname(__file__), "..", "examples", "lab", "traces")
    os.makedirs(out, exist_ok=True)
    write(os.path.join(out, "step.trace"), """
A step down and back up, for the controller's step response: 20/4 Mbit/s,
8/1.6 from 25 s (15 s into rrul's load with the default phases), 20/4
again from 50 s. Written by scripts/make-traces.py.""", step())
    write(os.path.join(out, "lte.trace"), """
LTE on the move: capacity changes every second (fading, the cell's other
users; a log-normal AR(1) process), with deep fades of 1-3 s about once a
minute (tunnels, handovers). Down 3-40 Mbit/s, up 0.8-10 Mbit/s.
Written by scripts/make-traces.py (seed 1).""", lte(random.Random(1)))
    write(os.path.join(out, "starlink.trace"), """
Starlink: the satellite schedule is reconfigured every 15 s (at 12, 27, 42
and 57 s past the minute); each slot has its own capacity, the change is a
dip of 300 ms, and the rate wanders +-10 % within a slot.
Down 20-100 Mbit/s, up 3-12 Mbit/s. Written by scripts/make-traces.py (seed 2).
The schedule is the wall clock's: `align 15s` starts the run at a multiple
of 15 s of Unix time, so the changes at 12 + 15k s of the trace fall at 12,
27, 42 and 57 s past the minute, as Starlink's do.""",
          starlink(random.Random(2)), align="15s")
    write(os.path.join(out, "docsis-evening.trace"), """
DOCSIS at the busy hour, compressed into five minutes: nominal 50/10 Mbit/s,
the segment's evening load pulling a user's share down to about a third and
back in slow waves, with dips of a second when the neighbours' bursts line
up; every second jitters +-5 %. Written by scripts/make-traces.py (seed 3).""",
          docsis_evening(random.Random(3)))


if __name__ == "__main__":
    main()
