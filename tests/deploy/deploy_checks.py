"""Shared pieces of the deploy tests: the flags a convoy binary accepts, and a small check recorder."""

import re
import subprocess
import sys
from pathlib import Path

# "    --batch_size (Minibatch size.); default: 32;" in Abseil's --help output.
_FLAG_LINE = re.compile(r"^\s+--([A-Za-z0-9_]+) \(")


def _help_entries(binary: Path) -> dict:
    """{flag: its --help entry on one line}, for the binary's own flags as Abseil prints them (an entry wraps
    over several lines, each entry's first starting "    --name (")."""
    result = subprocess.run([str(binary), "--help"], capture_output=True, text=True, timeout=60)
    text = result.stdout + result.stderr
    entries = {m.group(1): " ".join(entry.split())
               for entry in re.split(r"\n(?=\s+--[A-Za-z0-9_]+ \()", text) if (m := _FLAG_LINE.match(entry))}
    if not entries:
        raise RuntimeError(f"{binary} --help listed no flags:\n{text[:2000]}")
    return entries


def accepted_flags(binary: Path) -> set:
    """The flags `binary --help` lists (the binary's own flags, as Abseil prints them)."""
    return set(_help_entries(binary))


def run_settings(convoy_agent: Path) -> tuple:
    """The run settings, as convoy_agent's --help marks them: the flags whose help says "A run setting" (the
    rows of common/settings/run_settings.h's table, and the model, learning rate and epsilon schedule beside it), which
    the parameter server owns and the agents adopt."""
    return tuple(sorted(flag for flag, entry in _help_entries(convoy_agent).items() if "A run setting" in entry))


def flag_defaults(binary: Path) -> dict:
    """{flag: default} as `binary --help` prints them (string defaults without their quotes)."""
    defaults = {}
    for flag, entry in _help_entries(binary).items():
        if d := re.search(r"; default: (.*?);$", entry):
            value = d.group(1)
            defaults[flag] = value[1:-1] if len(value) >= 2 and value[0] == value[-1] == '"' else value
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
