#!/usr/bin/env python3
"""Every include of convoy's sources goes down the room order that common/rooms.txt declares, every
room is a folder with its own build and its tests' folder, and every file opens its room's namespace.

Usage: include_rule.py [--repo DIR]

Reads the rooms, then every .cc and .h under the rooms' folders and checks each `#include "..."`:
a file may include its own room's files and those of a room of a lower level; a generated protobuf header
(`*.pb.h`) is proto/'s, level 0; an include of tests/ or of a room of the same or a higher level fails, as
does one of a file kept to a few includers ("only" lines). Each `namespace convoy...` a file opens must be
its top-level room's ("namespace" lines) or one inside it, or proto/'s (a generated message declared
ahead); a file that opens none (a macro table, a main) passes. Before the repository, the check is run on
planted files, one per way to break the rule, and must find each: a check that finds nothing there fails.
A room that holds sources must have its CMakeLists.txt and a tests/ folder of the same path.
Exit 0: no include breaks the rule and every room is whole; 1: some do (each named with its line); 2: bad usage or declaration.
"""
import argparse
import os
import re
import sys

INCLUDE = re.compile(r'\s*#\s*include\s+"([^"]+)"')
NAMESPACE = re.compile(r'\s*namespace\s+(convoy(?:::\w+)*)\s*\{')
SOURCE_ENDINGS = (".cc", ".h")


class Rooms:
    """common/rooms.txt: the rooms by level, and the files only some files may include."""

    def __init__(self, text, where="common/rooms.txt"):
        self.levels = {}  # folder/ -> level
        self.only = {}  # file -> the files that may include it
        self.namespaces = {}  # top-level folder/ -> its namespace
        for n, raw in enumerate(text.splitlines(), 1):
            line = raw.split("#", 1)[0].split()
            if not line:
                continue
            if line[0] == "only" and len(line) >= 3:
                self.only[line[1]] = set(line[2:])
            elif len(line) == 3 and line[0] == "namespace" and line[1].endswith("/"):
                self.namespaces[line[1]] = line[2]
            elif len(line) == 2 and line[0].isdigit() and line[1].endswith("/"):
                self.levels[line[1]] = int(line[0])
            else:
                raise ValueError(f"{where}:{n}: expected 'LEVEL FOLDER/', 'only FILE INCLUDER...' or "
                                 f"'namespace FOLDER/ NAME', "
                                 f"got {raw.strip()!r}")
        if not self.levels:
            raise ValueError(f"{where}: declares no room")

    def room(self, path):
        """The room (folder/) of `path`, or None when no room holds it."""
        best = None
        for folder in self.levels:
            if path.startswith(folder) and (best is None or len(folder) > len(best)):
                best = folder
        return best

    def breaks(self, path, target):
        """Why `path` may not include `target`, or None when it may."""
        if target.startswith("tests/"):
            return "a product file includes the tests' files"
        if target in self.only and path not in self.only[target]:
            return f"only {', '.join(sorted(self.only[target]))} may include it"
        if target.endswith(".pb.h"):
            target = "proto/" + target
        mine, theirs = self.room(path), self.room(target)
        if mine is None or theirs is None or mine == theirs:
            return None  # A library's header (absl/, torch/, ...) or the room's own file.
        if self.levels[theirs] >= self.levels[mine]:
            return (f"{mine} (level {self.levels[mine]}) includes {theirs} "
                    f"(level {self.levels[theirs]}): not a lower level")
        return None


    def namespace_breaks(self, path, opened):
        """Why `path` may not open namespace `opened`, or None when it may."""
        owner = max((f for f in self.namespaces if path.startswith(f)), key=len, default=None)
        if owner is None:
            return None
        mine = self.namespaces[owner]
        theirs = max((ns for ns in self.namespaces.values()
                      if opened == ns or opened.startswith(ns + "::")), key=len, default=None)
        if theirs == mine or (theirs is not None and theirs == self.namespaces.get("proto/")):
            return None
        return f"opens namespace {opened}: {owner}'s namespace is {mine}"


def scan(sources, pattern, judge):
    """(path, line number, match, why) for each line of `sources` ({path: text}) that `pattern` matches and
    `judge(path, match)` refuses, saying why."""
    found = []
    for path, text in sorted(sources.items()):
        for n, line in enumerate(text.splitlines(), 1):
            m = pattern.match(line)
            why = m and judge(path, m.group(1))
            if why:
                found.append((path, n, m.group(1), why))
    return found


def namespace_violations(rooms, sources):
    """Each namespace `sources` open outside their room's."""
    return scan(sources, NAMESPACE, rooms.namespace_breaks)


def violations(rooms, sources):
    """Each include of `sources` that breaks the room order."""
    return scan(sources, INCLUDE, rooms.breaks)


def self_test(rooms):
    """Files that break the rule each way, and one that keeps it: the check must tell them apart."""
    ordered = sorted(rooms.levels.items(), key=lambda kv: kv[1])
    low, high = ordered[0][0], ordered[-1][0]
    by_level = {}
    for folder, level in ordered:
        by_level.setdefault(level, []).append(folder)
    siblings = next((fs for fs in by_level.values() if len(fs) >= 2), None)
    planted = {
        f"{low}planted_up.cc": f'#include "{high}x.h"\n',
        f"{low}planted_tests.cc": '#include "tests/catch.h"\n',
    }
    if rooms.only:
        kept, _ = next(iter(rooms.only.items()))
        planted[f"{low}planted_only.cc"] = f'#include "{kept}"\n'
    if siblings:
        planted[f"{siblings[0]}planted_sibling.cc"] = f'#include "{siblings[1]}x.h"\n'
    fine = {f"{high}planted_fine.cc": f'#include "{low}x.h"\n#include "convoy/v1/x.pb.h"\n'
                                       '#include "absl/status/status.h"\n'}
    caught = {v[0] for v in violations(rooms, planted)}
    missed = sorted(set(planted) - caught)
    wrong = violations(rooms, fine)
    problems = [f"the check misses the planted {m}" for m in missed] + \
               [f"the check refuses the planted {w[0]}'s include of {w[2]}" for w in wrong]
    # Namespaces: a room opening the root's or a sibling's namespace, and one opening its own and proto/'s.
    rooms_ns = sorted((ns.count("::"), folder, ns) for folder, ns in rooms.namespaces.items()
                      if folder != "proto/")
    if len(rooms_ns) >= 3:
        (_, _, root), (_, folder, mine), (_, _, sibling) = rooms_ns[0], rooms_ns[-1], rooms_ns[-2]
        planted_ns = {f"{folder}planted_root_namespace.cc": f"namespace {root} {{\n}}\n",
                      f"{folder}planted_sibling_namespace.cc": f"namespace {sibling} {{\n}}\n"}
        fine_ns = {f"{folder}planted_fine_namespace.cc":
                   f"namespace {mine} {{\n}}\nnamespace {mine}::detail {{\n}}\n" +
                   (f"namespace {rooms.namespaces['proto/']} {{\n}}\n" if "proto/" in rooms.namespaces
                    else "")}
        caught = {v[0] for v in namespace_violations(rooms, planted_ns)}
        problems += [f"the check misses the planted {m}" for m in sorted(set(planted_ns) - caught)]
        problems += [f"the check refuses the planted {w[0]}'s namespace {w[2]}"
                     for w in namespace_violations(rooms, fine_ns)]
    else:
        problems.append("common/rooms.txt declares fewer than three rooms' namespaces")
    return problems


def product_sources(repo, rooms):
    """{path: text} of every .cc and .h under the rooms' top folders, as the tree holds them (no git needed:
    the Debian 13 root and the container builds have the files, not the repository)."""
    sources = {}
    for top in sorted({folder.split("/")[0] for folder in rooms.levels}):
        for folder, dirs, files in os.walk(os.path.join(repo, top)):
            dirs.sort()
            for name in files:
                if name.endswith(SOURCE_ENDINGS):
                    full = os.path.join(folder, name)
                    with open(full, encoding="utf-8", errors="replace") as f:
                        sources[os.path.relpath(full, repo)] = f.read()
    return sources


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repo", default=os.path.join(os.path.dirname(__file__), ".."))
    args = parser.parse_args()
    try:
        with open(os.path.join(args.repo, "common", "rooms.txt"), encoding="utf-8") as f:
            rooms = Rooms(f.read())
    except (OSError, ValueError) as e:
        print(f"include_rule: {e}", file=sys.stderr)
        return 2
    problems = self_test(rooms)
    for p in problems:
        print(f"FAIL: {p}")
    sources = product_sources(args.repo, rooms)
    unhoused = [f"{p} is in no room of common/rooms.txt"
                for p in sorted(sources) if rooms.room(p) is None]
    # Every room that holds sources is a folder with its own build (CMakeLists.txt) and tests' folder.
    for room in sorted(rooms.levels):
        if not any(rooms.room(p) == room for p in sources):
            continue
        for needed in (os.path.join(room, "CMakeLists.txt"), os.path.join("tests", room)):
            if not os.path.exists(os.path.join(args.repo, needed)):
                unhoused.append(f"{room} has no {needed}")
    found = violations(rooms, sources)
    misplaced = namespace_violations(rooms, sources)
    for problem in unhoused:
        print(f"FAIL: {problem}")
    for path, n, target, why in found:
        print(f"FAIL: {path}:{n} includes {target}: {why}")
    for path, n, _, why in misplaced:
        print(f"FAIL: {path}:{n} {why}")
    if problems or unhoused or found or misplaced:
        return 1
    print(f"ok: {len(sources)} sources in {len(rooms.levels)} rooms, every include goes down the order, "
          f"every file in its room's namespace")
    return 0


if __name__ == "__main__":
    sys.exit(main())
