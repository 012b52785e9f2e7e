#!/usr/bin/env python3
"""Line plots of a benchmark's CSV series, with matplotlib (Debian's python3-matplotlib).

    plot.py learning_curves.csv -o learning_curves.png --series series \\
        --y "mean_return=mean return" --x "wall_minutes=wall-clock minutes" --x "env_steps=env steps" \\
        --hline random --y_from_zero --title "convoy_bench_learn"
    plot.py learning_curve.csv -o learning_curve.png --series series --y "driving_score=driving score" \\
        --band driving_score_ci_low,driving_score_ci_high --x minutes --hline random --hline expert

The CSV has a header row. Rows are grouped into series by the --series column (in the order their names first
appear; without --series all rows are one series) and drawn as lines of --y against each --x, one panel per --x,
side by side with a shared y axis, each with its axis labels, a grid and a legend. A series named by --hline is
drawn as a dashed horizontal line at its (mean) --y value across every panel; its rows need no x values. Rows
whose x or y cell is empty are left out of that panel. A column is given as NAME or NAME=LABEL; the label
defaults to the name with underscores as spaces. --band LOW,HIGH names two columns of an interval around --y (a
confidence interval), shaded about each line where both cells are there. With --y_from_zero the y axis reaches 0. The output format
follows the extension of -o (png, svg, pdf); an SVG keeps its text as text.

Exit status: 0 when drawn; 2 for bad arguments or a CSV that lacks a named column or has a non-numeric cell;
3 when matplotlib is not installed (nothing is drawn, and the message says so).
"""

import argparse
import csv
import sys

EXIT_USAGE = 2
EXIT_NO_MATPLOTLIB = 3
# The reference lines' colours, in --hline order: the first grey, as a lone baseline always was.
HLINE_COLOURS = ["grey", "tab:green", "tab:red", "tab:purple", "tab:brown"]


class PlotError(Exception):
    """A problem with the arguments or the CSV, reported as one line."""


def column(spec):
    """NAME or NAME=LABEL as (name, label)."""
    name, _, label = spec.partition("=")
    if not name:
        raise argparse.ArgumentTypeError(f"empty column name in '{spec}'")
    return name, label or name.replace("_", " ")


def band(spec):
    """LOW,HIGH as (low, high) column names."""
    low, comma, high = spec.partition(",")
    if not comma or not low or not high or "," in high:
        raise argparse.ArgumentTypeError(f"--band takes LOW,HIGH (two column names), not '{spec}'")
    return low, high


def parse_args(argv):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("csv", help="input CSV with a header row")
    parser.add_argument("-o", "--output", required=True, help="output image (.png, .svg, .pdf)")
    parser.add_argument("--x", type=column, action="append", required=True,
                        help="x column, NAME[=LABEL]; repeat for more panels")
    parser.add_argument("--y", type=column, required=True, help="y column, NAME[=LABEL]")
    parser.add_argument("--series", help="column whose value names each row's series")
    parser.add_argument("--hline", action="append", default=[],
                        help="series drawn as a horizontal reference line; repeatable")
    parser.add_argument("--band", type=band, help="LOW,HIGH: columns of an interval around y, shaded")
    parser.add_argument("--title", default="", help="title above the panels")
    parser.add_argument("--y_from_zero", action="store_true", help="the y axis includes 0")
    return parser.parse_args(argv)


def number(cell, name, line):
    """A cell as a float, or None when empty."""
    if cell is None or cell.strip() == "":
        return None
    try:
        return float(cell)
    except ValueError:
        raise PlotError(f"line {line}: column '{name}' holds '{cell}', not a number") from None


def read_series(path, args):
    """{series name: list of rows (dicts of column to cell)}, in the order the names first appear."""
    try:
        with open(path, newline="") as f:
            reader = csv.DictReader(f)
            header = reader.fieldnames or []
            needed = [name for name, _ in args.x] + [args.y[0]] + ([args.series] if args.series else [])
            needed += list(args.band or ())
            missing = [name for name in needed if name not in header]
            if missing:
                raise PlotError(f"{path}: no column {', '.join(repr(m) for m in missing)} "
                                f"(the header has {', '.join(header) or 'nothing'})")
            series = {}
            for row in reader:
                name = row[args.series] if args.series else ""
                series.setdefault(name, []).append((reader.line_num, row))
            return series
    except OSError as e:
        raise PlotError(f"cannot read {path}: {e.strerror}") from None


def draw(args, series, plt):
    panels = len(args.x)
    fig, axes = plt.subplots(1, panels, figsize=(6.4 * panels, 4.8), sharey=True, squeeze=False)
    y_name, y_label = args.y
    for axis, (x_name, x_label) in zip(axes[0], args.x):
        for name, rows in series.items():
            if name in args.hline:
                continue
            points, band_points = [], []
            for line, row in rows:
                x, y = number(row[x_name], x_name, line), number(row[y_name], y_name, line)
                if x is not None and y is not None:
                    points.append((x, y))
                    if args.band:
                        low = number(row[args.band[0]], args.band[0], line)
                        high = number(row[args.band[1]], args.band[1], line)
                        if low is not None and high is not None:
                            band_points.append((x, low, high))
            if points:
                drawn = axis.plot([p[0] for p in points], [p[1] for p in points], marker="o",
                                  markersize=3, label=name or None)
                if band_points:
                    axis.fill_between([p[0] for p in band_points], [p[1] for p in band_points],
                                      [p[2] for p in band_points], color=drawn[0].get_color(),
                                      alpha=0.2, linewidth=0)
        for name in args.hline:
            values = [v for v in (number(row[y_name], y_name, line) for line, row in series.get(name, []))
                      if v is not None]
            if not values:
                raise PlotError(f"--hline {name}: no row of series '{name}' has a {y_name}")
            axis.axhline(sum(values) / len(values), linestyle="--",
                         color=HLINE_COLOURS[args.hline.index(name) % len(HLINE_COLOURS)], label=name)
        axis.set_xlabel(x_label)
        axis.set_title(f"{y_label} against {x_label}")
        axis.grid(True, alpha=0.3)
        if axis.get_legend_handles_labels()[0]:
            axis.legend()
    axes[0][0].set_ylabel(y_label)
    if args.y_from_zero:
        low, high = axes[0][0].get_ylim()
        axes[0][0].set_ylim(min(low, 0.0), max(high, 0.0))
    if args.title:
        fig.suptitle(args.title)
    fig.tight_layout()
    fig.savefig(args.output)
    plt.close(fig)


def main(argv):
    args = parse_args(argv)
    try:
        import matplotlib
        matplotlib.use("Agg")
        matplotlib.rcParams["svg.fonttype"] = "none"
        import matplotlib.pyplot as plt
    except ImportError as e:
        print(f"plot.py: matplotlib is not installed ({e}); Debian: apt-get install python3-matplotlib. "
              f"{args.output} was not drawn.", file=sys.stderr)
        return EXIT_NO_MATPLOTLIB
    try:
        draw(args, read_series(args.csv, args), plt)
    except PlotError as e:
        print(f"plot.py: {e}", file=sys.stderr)
        return EXIT_USAGE
    except (OSError, ValueError) as e:
        print(f"plot.py: cannot write {args.output}: {e}", file=sys.stderr)
        return EXIT_USAGE
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
