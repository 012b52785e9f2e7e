#!/usr/bin/env python3
"""Every command-line flag of convoy comes from a settings table, and a name several binaries take has one type.

Usage: flags_check.py [--repo DIR]

Reads every .cc and .h of the repository but bench/ (whose benchmarks keep their own flags) and the build
folders (build*/), and fails on:
  - a flag declared by hand: an ABSL_FLAG( or ABSL_DECLARE_FLAG( that is not inside the definition of a
    settings macro (`#define CONVOY_..._SETTING...(...)`: a table, or the macro a table's rows become flags
    through) or common/support/settings_table.h;
  - a table row `X(type, name, ...)` of a setting common/settings/process_settings.h declares (seed, model,
    resume, port, ...) written with a type of its own instead of through CONVOY_PROCESS_SETTING, which
    gives every binary's row of that name the one type.
Each is named with its file and line. Before the repository, the check is run on planted files, one per way
to break the rule, and must find each: a check that finds nothing there fails.
Exit 0: every flag comes from a table; 1: some do not; 2: bad usage.
"""
import argparse
import os
import re
import sys

FLAG = re.compile(r"\bABSL_(?:DECLARE_)?FLAG\s*\(")
SETTINGS_MACRO = re.compile(r"\s*#\s*define\s+(CONVOY_\w*SETTING\w*)\s*\(")
ANY_MACRO = re.compile(r"\s*#\s*define\s+(\w+)")
ROW = re.compile(r"\bX\(\s*([^,()]+(?:<[^()]*>)?)\s*,\s*(\w+)\s*,")
PROCESS_TYPE = re.compile(r"#\s*define\s+CONVOY_PROCESS_SETTING_TYPE_(\w+)\s")
PROCESS_SETTINGS = "common/settings/process_settings.h"
SETTINGS_TABLE = "common/support/settings_table.h"
SKIPPED_TOP = ("bench", "runs")


def code_only(text):
    """`text` with its comments and string literals blanked (newlines kept, so lines keep their numbers)."""
    out, i, n = [], 0, len(text)
    while i < n:
        c = text[i]
        if text.startswith("//", i):
            j = text.find("\n", i)
            j = n if j < 0 else j
            out.append(" " * (j - i))
            i = j
        elif text.startswith("/*", i):
            j = text.find("*/", i + 2)
            j = n if j < 0 else j + 2
            out.append("".join(ch if ch == "\n" else " " for ch in text[i:j]))
            i = j
        elif text.startswith('R"', i) and (i == 0 or not (text[i - 1].isalnum() or text[i - 1] == "_")):
            delimiter = text[i + 2:text.find("(", i)]
            j = text.find(")" + delimiter + '"', i)
            j = n if j < 0 else j + len(delimiter) + 2
            out.append("".join(ch if ch == "\n" else " " for ch in text[i:j]))
            i = j
        elif c == '"' or (c == "'" and i > 0 and not text[i - 1].isalnum()):
            j = i + 1
            while j < n and text[j] != c:
                j += 2 if text[j] == "\\" else 1
            out.append(c + " " * (min(j, n) - i - 1) + (c if j < n else ""))
            i = j + 1
        else:
            out.append(c)
            i += 1
    return "".join(out)


def macro_lines(lines):
    """For each line, the name of the macro whose definition holds it, or None."""
    names, current = [], None
    for line in lines:
        if current is None:
            m = ANY_MACRO.match(line)
            if m:
                current = m.group(1)
        names.append(current)
        if current is not None and not line.rstrip().endswith("\\"):
            current = None
    return names


def violations(sources, process_names):
    """(path, line number, why) for each hand flag and each row of a process setting with a type of its own."""
    found = []
    for path, text in sorted(sources.items()):
        lines = code_only(text).split("\n")
        macros = macro_lines(lines)
        for n, (line, macro) in enumerate(zip(lines, macros), 1):
            in_table = macro is not None and SETTINGS_MACRO.match(f"#define {macro}(") is not None
            if FLAG.search(line) and not in_table and path != SETTINGS_TABLE:
                found.append((path, n, "a flag declared outside a settings table: write it as a row "
                                       "of the binary's CONVOY_..._SETTINGS(X) table"))
            if in_table and path != PROCESS_SETTINGS:
                for row in ROW.finditer(line):
                    if row.group(2) in process_names:
                        found.append((path, n, f"--{row.group(2)} is a setting several binaries take "
                                               f"({PROCESS_SETTINGS}): write its row as "
                                               f"CONVOY_PROCESS_SETTING(X, {row.group(2)}, ...), "
                                               "not with a type of its own"))
    return found


PLANTED = {
    "agent/hand_flag.cc": 'ABSL_FLAG(int, hand, 1, "A flag by hand.");\n',
    "agent/declared_flag.h": "ABSL_DECLARE_FLAG(int, hand);\n",
    "agent/other_macro.h": "#define CONVOY_HAND_FLAG() \\\n  ABSL_FLAG(int, hand, 1, \"In a macro, not a table.\");\n",
    "agent/typed_row.cc": ('#define CONVOY_PLANTED_SETTINGS(X) \\\n'
                           '  X(int, seed, 1, "A seed of its own type.")\n'),
}
PLANTED_CLEAN = {
    "agent/table.cc": ('// ABSL_FLAG(int, in_a_comment, 1, "");\n'
                       'const char* kText = "ABSL_FLAG(int, in_a_string, 1, \\"\\")";\n'
                       'const char* kRaw = R"x(ABSL_FLAG(int, raw, 1, "");)x";\n'
                       '#define CONVOY_PLANTED_SETTINGS(X) \\\n'
                       '  CONVOY_PROCESS_SETTING(X, seed, 1, "A seed.") \\\n'
                       '  X(int, planted, 1, "A row.")\n'
                       'CONVOY_PLANTED_SETTINGS(CONVOY_SETTING_FLAG)\n'
                       '#define CONVOY_PLANTED_SETTING_FLAG(type, name, def, help) \\\n'
                       '  ABSL_FLAG(type, name, def, help);\n'),
}


def self_test():
    """Whether the check finds every planted break and nothing in the planted clean file."""
    found = violations(PLANTED, {"seed"})
    missed = sorted(set(PLANTED) - {path for path, _, _ in found})
    wrong = violations(PLANTED_CLEAN, {"seed"})
    for path in missed:
        print(f"flags_check.py: the check misses the planted break {path}", file=sys.stderr)
    for path, n, why in wrong:
        print(f"flags_check.py: the check refuses the planted table {path}:{n}: {why}", file=sys.stderr)
    return not missed and not wrong


def read_sources(repo):
    sources = {}
    for root, dirs, files in os.walk(repo):
        rel_root = os.path.relpath(root, repo)
        top = rel_root == "."
        dirs[:] = sorted(d for d in dirs if not d.startswith((".", "build"))
                         and not (top and d in SKIPPED_TOP))
        for name in files:
            if name.endswith((".cc", ".h")):
                path = os.path.normpath(os.path.join(rel_root, name)).replace(os.sep, "/")
                with open(os.path.join(root, name), encoding="utf-8", errors="replace") as f:
                    sources[path] = f.read()
    return sources


def main(argv):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repo", default=os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    args = parser.parse_args(argv[1:])
    if not self_test():
        return 1
    sources = read_sources(args.repo)
    if PROCESS_SETTINGS not in sources:
        print(f"flags_check.py: no {PROCESS_SETTINGS} under {args.repo}", file=sys.stderr)
        return 2
    process_names = set(PROCESS_TYPE.findall(sources[PROCESS_SETTINGS]))
    found = violations(sources, process_names)
    for path, n, why in found:
        print(f"{path}:{n}: {why}", file=sys.stderr)
    tables = sum(1 for text in sources.values() for line in text.split("\n")
                 if re.match(r"\s*#\s*define\s+CONVOY_\w*SETTINGS\s*\(X\)", line))
    print(f"{len(sources)} sources, {tables} settings tables, {len(process_names)} settings several "
          f"binaries take: {len(found)} flags or rows outside the rule")
    return 1 if found else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
