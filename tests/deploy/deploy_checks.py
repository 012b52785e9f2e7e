"""Shared pieces of the deploy tests: the flags a convoy binary accepts, and a small check recorder."""

import re
import subprocess
import sys
from pathlib import Path

# "    --batch_size (Minibatch size.); default: 32;" in Abseil's --help output.
_FLAG_LINE = re.compile(r"^\s+--([A-Za-z0-9_]+) \(")


def accepted_flags(binary: Path) -> set:
    """The flags `binary --help` lists (the binary's own flags, as Abseil prints them)."""
    result = subprocess.run([str(binary), "--help"], capture_output=True, text=True, timeout=60)
    text = result.stdout + result.stderr
    flags = {m.group(1) for line in text.splitlines() if (m := _FLAG_LINE.match(line))}
    if not flags:
        raise RuntimeError(f"{binary} --help listed no flags:\n{text[:2000]}")
    return flags


def flag_defaults(binary: Path) -> dict:
    """{flag: default} as `binary --help` prints them (string defaults without their quotes)."""
    result = subprocess.run([str(binary), "--help"], capture_output=True, text=True, timeout=60)
    defaults = {}
    # Abseil wraps an entry over several lines; each starts with "    --name (".
    for entry in re.split(r"\n(?=\s+--[A-Za-z0-9_]+ \()", result.stdout + result.stderr):
        m = _FLAG_LINE.match(entry)
        d = re.search(r"; default: (.*?);$", " ".join(entry.split())) if m else None
        if d:
            value = d.group(1)
            defaults[m.group(1)] = value[1:-1] if len(value) >= 2 and value[0] == value[-1] == '"' else value
    if not defaults:
        raise RuntimeError(f"{binary} --help printed no defaults")
    return defaults


def same_value(a: str, b: str) -> bool:
    """Flag values as equal: numerically where both are numbers (0.001 and 1e-3), else as text."""
    try:
        return float(a) == float(b)
    except ValueError:
        return a == b


def flag_name(arg: str):
    """'--name=value' or '--name' -> 'name'; anything else -> None."""
    m = re.match(r"^--([A-Za-z0-9_]+)(=|$)", arg)
    return m.group(1) if m else None


class Checks:
    """Records named checks; prints each failure and a summary."""

    def __init__(self, name: str):
        self.name = name
        self.passed = 0
        self.failures = []

    def check(self, ok: bool, what: str):
        if ok:
            self.passed += 1
        else:
            self.failures.append(what)
            print(f"FAIL: {what}")
        return ok

    def finish(self) -> int:
        print(f"{self.name}: {self.passed} checks passed, {len(self.failures)} failed")
        return 1 if self.failures else 0


def die(message: str):
    print(f"FAIL: {message}")
    sys.exit(1)
