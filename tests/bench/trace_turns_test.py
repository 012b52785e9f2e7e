#!/usr/bin/env python3
"""bench/agent/trace_turns.py on a trace over an L-shaped road: one episode takes the corner (a right turn), one
drives straight on past it and leaves the centre line, and the script says so."""

import subprocess
import sys
import tempfile
from pathlib import Path

ORIGIN_CM = (12961.722656, 6660.329102)
HEADER = "seed,step,x,y,yaw,speed,distance_to_center_m,place,action,q_0,q_1,q_2,q_3,q_4,reward,end"


def cm(x, y):
    return f"{x * 100 + ORIGIN_CM[0]:.3f},{y * 100 + ORIGIN_CM[1]:.3f}"


def row(seed, step, x, y, yaw, place, end=""):
    return f"{seed},{step},{x},{y},{yaw},9,0,{place},2,1,1,2,1,1,1,{end}"


def main():
    script = Path(sys.argv[1]) / "bench/agent/trace_turns.py"
    with tempfile.TemporaryDirectory() as tmp:
        tmp = Path(tmp)
        # North along x to (100, 0), then east along y: a corner at (100, 0) that turns right.
        (tmp / "road_lines.txt").write_text(f"{cm(0, 0)}\t{cm(100, 0)}\n{cm(100, 0)}\t{cm(100, 100)}\n")
        rows = [HEADER]
        # Episode 1 turns: heading 0 before the zone, pi/2 after it.
        rows += [row(1, 1, 80, 0, 0.0, "straight"), row(1, 2, 95, 0, 0.3, "corner"),
                 row(1, 3, 100, 5, 1.2, "corner"), row(1, 4, 100, 20, 1.5708, "straight"),
                 row(1, 5, 100, 30, 1.5708, "straight", "time_limit")]
        # Episode 2 drives on north and ends in the zone.
        rows += [row(2, 1, 80, 0, 0.0, "straight"), row(2, 2, 95, 0, 0.0, "corner"),
                 row(2, 3, 103, 0, 0.0, "corner", "off_center_line")]
        (tmp / "trace.csv").write_text("\n".join(rows) + "\n")
        out = subprocess.run([sys.executable, str(script), str(tmp / "trace.csv"), f"--map_dir={tmp}"],
                             capture_output=True, text=True, check=False)
        if out.returncode != 0:
            print(out.stdout, out.stderr)
            return 1
        lines = [line.split() for line in out.stdout.splitlines()]
        expected = [["corner", "right", "1"], ["corner", "right", "off_center_line", "1"],
                    ["RESULT", "turns_right=1"], ["RESULT", "turns_left=0"],
                    ["RESULT", "missed_in_junctions=1"], ["2", "episodes"]]
        for want in expected:
            if not any(line[-len(want):] == want or line == want for line in lines):
                print(f"FAIL: no line ending {' '.join(want)} in:\n{out.stdout}")
                return 1
    print("PASS")
    return 0


if __name__ == "__main__":
    sys.exit(main())
