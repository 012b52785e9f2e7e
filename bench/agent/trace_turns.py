#!/usr/bin/env python3
"""Turns an evaluation trace took and missed, by direction.

Reads `convoy_eval --trace` CSVs and the road map, and for every pass through a junction zone (a corner or an
intersection, the trace's `place` column) says which way the car went: left, straight or right (its heading
changed by more than 0.5 rad, or not). For every episode that ended inside a zone it says which ways the roads
there would have taken it. A policy that turns one way only shows it here: every turn it passed goes the same
way, and the turns it missed go the other. Usage:

  python3 bench/agent/trace_turns.py TRACE.csv [TRACE.csv ...] [--map_dir simulator_bridge/maps/neighborhood]

Coordinates are AirSim's NED (x north, y east), so a heading that grows turns right.
"""

import argparse
import collections
import csv
import math
import sys
from pathlib import Path

# RoadMapOptions' defaults: metres = (centimetres - origin) / 100.
ORIGIN_CM = (12961.722656, 6660.329102)


def load_roads(map_dir):
    roads = []
    for line in (Path(map_dir) / "road_lines.txt").read_text().splitlines():
        if not line.strip():
            continue
        a, b = line.split("\t")
        (ax, ay), (bx, by) = ([float(v) for v in p.split(",")] for p in (a, b))
        roads.append(((ax - ORIGIN_CM[0]) / 100, (ay - ORIGIN_CM[1]) / 100,
                      (bx - ORIGIN_CM[0]) / 100, (by - ORIGIN_CM[1]) / 100))
    return roads


def wrap(angle):
    return (angle + math.pi) % (2 * math.pi) - math.pi


def ways_out(roads, x, y, heading, reach=15.0):
    """Which ways (left, straight, right) the roads that start near (x, y) lead, seen from `heading`."""
    hx, hy = math.cos(heading), math.sin(heading)
    ways = set()
    for ax, ay, bx, by in roads:
        for (px, py), (qx, qy) in (((ax, ay), (bx, by)), ((bx, by), (ax, ay))):
            if math.hypot(px - x, py - y) > reach:
                continue
            ux, uy = qx - px, qy - py
            n = math.hypot(ux, uy)
            ux, uy = ux / n, uy / n
            dot, cross = hx * ux + hy * uy, hx * uy - hy * ux
            if dot > 0.9:
                ways.add("straight")
            elif abs(dot) < 0.5:
                ways.add("right" if cross > 0 else "left")
    return "/".join(sorted(ways)) or "?"


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("traces", nargs="+")
    parser.add_argument("--map_dir", default=str(Path(__file__).resolve().parents[2] /
                                                 "simulator_bridge/maps/neighborhood"))
    args = parser.parse_args()
    roads = load_roads(args.map_dir)
    for path in args.traces:
        episodes = collections.defaultdict(list)
        with open(path, newline="") as f:
            for row in csv.DictReader(f):
                episodes[row["seed"]].append(row)
        passed, missed = collections.Counter(), collections.Counter()
        for rows in episodes.values():
            i = 0
            while i < len(rows):
                if rows[i]["place"] == "straight":
                    i += 1
                    continue
                j = i
                while j < len(rows) and rows[j]["place"] != "straight":
                    j += 1
                kind = rows[i]["place"]
                heading = float(rows[max(i - 1, 0)]["yaw"])
                if j < len(rows):
                    turned = wrap(float(rows[j]["yaw"]) - heading)
                    passed[(kind, "right" if turned > 0.5 else "left" if turned < -0.5 else "straight")] += 1
                elif rows[-1]["end"] != "time_limit":
                    last = rows[-1]
                    missed[(kind, ways_out(roads, float(last["x"]), float(last["y"]), heading),
                            last["end"])] += 1
                i = j
        print(f"{path}: {len(episodes)} episodes")
        print("  passed     place          went       count")
        for (kind, way), n in sorted(passed.items()):
            print(f"  {'':10} {kind:14} {way:10} {n:5}")
        print("  missed     place          roads lead          ended by          count")
        for (kind, ways, end), n in sorted(missed.items()):
            print(f"  {'':10} {kind:14} {ways:19} {end:17} {n:5}")
        total = collections.Counter()
        for (kind, way), n in passed.items():
            if way != "straight":
                total[way] += n
        print(f"RESULT turns_left={total['left']}")
        print(f"RESULT turns_right={total['right']}")
        print(f"RESULT missed_in_junctions={sum(missed.values())}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
