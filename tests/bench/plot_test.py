#!/usr/bin/env python3
"""bench/plot.py: draws a CSV's series with axis labels and a legend, refuses a CSV without the named columns,
and says the plot was not drawn when matplotlib is missing.

    plot_test.py <repository root>

Exit status 0 when every check passed, 1 when one failed, 77 (skipped) when matplotlib is not installed, after
running the checks that need none.
"""

import os
import subprocess
import sys
import tempfile

CSV = """series,agents,wall_minutes,env_steps,mean_return
1 agent,1,1.0,500,3.5
1 agent,1,2.0,1000,7.25
2 agents,2,1.0,900,4.0
2 agents,2,2.0,1900,9.0
random,0,,,1.5
"""

ARGS = ["--series", "series", "--y", "mean_return=mean return", "--x", "wall_minutes=wall-clock minutes",
        "--x", "env_steps", "--hline", "random", "--title", "learning curves"]

failures = []


def check(condition, what):
    if not condition:
        failures.append(what)
        print(f"plot_test: FAIL: {what}", file=sys.stderr)


def run(script, csv_path, output, args, env=None):
    return subprocess.run([sys.executable, script, csv_path, "-o", output] + args, capture_output=True, text=True,
                          env=env, timeout=120)


def main():
    script = os.path.join(sys.argv[1], "bench", "plot.py")
    with tempfile.TemporaryDirectory() as tmp:
        csv_path = os.path.join(tmp, "curves.csv")
        with open(csv_path, "w") as f:
            f.write(CSV)

        # Without matplotlib (a package of that name that fails to import shadows it): exit 3, nothing drawn.
        fake = os.path.join(tmp, "fake")
        os.makedirs(os.path.join(fake, "matplotlib"))
        with open(os.path.join(fake, "matplotlib", "__init__.py"), "w") as f:
            f.write("raise ImportError('no matplotlib here')\n")
        env = dict(os.environ, PYTHONPATH=fake)
        missing = run(script, csv_path, os.path.join(tmp, "none.png"), ARGS, env)
        check(missing.returncode == 3, f"without matplotlib plot.py exited {missing.returncode}, not 3")
        check("not drawn" in missing.stderr and "python3-matplotlib" in missing.stderr,
              f"without matplotlib plot.py does not say the plot was not drawn: {missing.stderr!r}")
        check(not os.path.exists(os.path.join(tmp, "none.png")), "without matplotlib a file was written")

        try:
            import matplotlib  # noqa: F401
        except ImportError:
            print("plot_test: matplotlib is not installed (python3-matplotlib); drawing not checked")
            return 1 if failures else 77

        svg_path = os.path.join(tmp, "curves.svg")
        drawn = run(script, csv_path, svg_path, ARGS)
        check(drawn.returncode == 0, f"plot.py exited {drawn.returncode}: {drawn.stderr}")
        svg = open(svg_path).read() if os.path.exists(svg_path) else ""
        for text in ["mean return", "wall-clock minutes", "env steps", "1 agent", "2 agents", "random",
                     "learning curves", "mean return against wall-clock minutes"]:
            check(f">{text}<" in svg, f"the SVG has no text '{text}'")
        # Two panels, each with the random baseline in its legend.
        check(svg.count(">random<") == 2, f"'random' appears {svg.count('>random<')} times, not once per panel")
        # Tick labels of real axes: the steps axis reaches 1900, the return axis 9.
        check(">1000<" in svg or ">1250<" in svg or ">1500<" in svg, "the env-steps axis has no tick labels")

        png_path = os.path.join(tmp, "curves.png")
        drawn = run(script, csv_path, png_path, ARGS)
        check(drawn.returncode == 0, f"plot.py exited {drawn.returncode} drawing a PNG: {drawn.stderr}")
        with open(png_path, "rb") as f:
            check(f.read(8) == b"\x89PNG\r\n\x1a\n", "the PNG output is not a PNG")

        bad = run(script, csv_path, os.path.join(tmp, "bad.png"),
                  ["--series", "series", "--y", "no_such_column", "--x", "env_steps"])
        check(bad.returncode == 2, f"a missing column exited {bad.returncode}, not 2")
        check("'no_such_column'" in bad.stderr, f"a missing column is not named: {bad.stderr!r}")

        # An interval around the line, shaded: one filled polygon per series that has one; none without --band.
        band_csv = os.path.join(tmp, "band.csv")
        with open(band_csv, "w") as f:
            f.write("series,minutes,score,low,high\nvalidation,1,0.4,0.3,0.5\nvalidation,2,0.6,0.5,0.7\n"
                    "random,,0.02,0.01,0.03\nexpert,,0.96,0.93,0.99\n")
        band_args = ["--series", "series", "--y", "score=driving score", "--x", "minutes", "--hline", "random",
                     "--hline", "expert"]
        banded_svg = os.path.join(tmp, "band.svg")
        drawn = run(script, band_csv, banded_svg, band_args + ["--band", "low,high"])
        check(drawn.returncode == 0, f"plot.py --band exited {drawn.returncode}: {drawn.stderr}")
        svg = open(banded_svg).read() if os.path.exists(banded_svg) else ""
        check("PolyCollection" in svg, "--band drew no shaded interval")
        for text in ["driving score", "random", "expert", "validation"]:
            check(f">{text}<" in svg, f"the banded SVG has no text '{text}'")
        plain_svg = os.path.join(tmp, "plain.svg")
        drawn = run(script, band_csv, plain_svg, band_args)
        plain = open(plain_svg).read() if os.path.exists(plain_svg) else ""
        check(drawn.returncode == 0 and "PolyCollection" not in plain, "without --band an interval was shaded")
        bad = run(script, band_csv, os.path.join(tmp, "bad.png"), band_args + ["--band", "low"])
        check(bad.returncode == 2 and "LOW,HIGH" in bad.stderr,
              f"--band without two columns is not refused: {bad.returncode} {bad.stderr!r}")
        bad = run(script, band_csv, os.path.join(tmp, "bad.png"), band_args + ["--band", "low,no_high"])
        check(bad.returncode == 2 and "'no_high'" in bad.stderr,
              f"--band naming a missing column is not refused: {bad.returncode} {bad.stderr!r}")

        with open(csv_path, "a") as f:
            f.write("1 agent,1,3.0,lots,8.0\n")
        bad = run(script, csv_path, os.path.join(tmp, "bad.png"), ARGS)
        check(bad.returncode == 2 and "'lots'" in bad.stderr and "line 7" in bad.stderr,
              f"a non-numeric cell is not reported by line and value: {bad.returncode} {bad.stderr!r}")

    print(f"plot_test: {'failed' if failures else 'passed'}")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
