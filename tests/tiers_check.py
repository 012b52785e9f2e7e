#!/usr/bin/env python3
"""Every test of a build carries exactly one tier label (tests/CMakeLists.txt, CONVOY_TEST_TIERS).

Usage: tiers_check.py CTEST BUILD_DIR TIER...

Reads ctest's own listing of BUILD_DIR (`ctest -N --show-only=json-v1`), so the Catch2 binaries' tests are
counted as CTest will run them. Fails naming every test with no tier or with two, and a listing that has
none of some tier (a tier no test is in is a tier `./convoy test` would run nothing of).
"""
import collections
import json
import subprocess
import sys


def main(argv):
    if len(argv) < 4:
        print(__doc__, file=sys.stderr)
        return 2
    ctest, build_dir, tiers = argv[1], argv[2], argv[3:]
    listing = subprocess.run([ctest, "-N", "--show-only=json-v1"], cwd=build_dir, check=True,
                             capture_output=True, text=True).stdout
    tests = json.loads(listing)["tests"]
    per_tier = collections.Counter()
    wrong = []
    for test in tests:
        labels = []
        for prop in test.get("properties", []):
            if prop["name"] == "LABELS":
                labels = prop["value"]
        in_tiers = [label for label in labels if label in tiers]
        if len(in_tiers) != 1:
            wrong.append(f"{test['name']}: labels {labels or 'none'}")
        else:
            per_tier[in_tiers[0]] += 1
    print(f"{len(tests)} tests: " + ", ".join(f"{per_tier[t]} {t}" for t in tiers))
    for line in wrong:
        print(f"not in exactly one of the tiers {tiers}: {line}", file=sys.stderr)
    empty = [t for t in tiers if per_tier[t] == 0]
    if empty:
        print(f"no test is in the tier(s) {empty}", file=sys.stderr)
    return 1 if wrong or empty else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
