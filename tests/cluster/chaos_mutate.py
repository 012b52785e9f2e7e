#!/usr/bin/env python3
"""Copies of a chaos run's logs with one violation put in, to show that the checks catch it.

    chaos_mutate.py double_apply APPLY_LOG OUT   a push applied twice: the first apply of the newest start
                                                 that applied any is repeated as the next version, the
                                                 later versions of that start moved up by one
    chaos_mutate.py drop_minibatch PUSH_LOG OUT  a minibatch trained and never pushed: the last process
                                                 that ended cleanly trained one more than it pushed
"""
import sys

import log_records
from chaos_check import fields


def double_apply(lines):
    records = [fields(line, "apply_log", "the apply log") for line in lines if line.strip()]
    starts = [f["incarnation"] for kind, f in records if kind == "start"]
    for incarnation in reversed(starts):
        out, doubled = [], None
        for line in lines:
            if not line.strip():
                continue
            kind, f = fields(line, "apply_log", "the apply log")
            if kind in ("apply", "checkpoint") and f["incarnation"] == incarnation:
                version = int(f["version"])
                if doubled is None and kind == "apply":
                    doubled = version
                    out.append(line)
                    line = line.replace(f"version={version} ", f"version={version + 1} ", 1)
                elif doubled is not None and version > doubled:
                    line = line.replace(f"version={version}", f"version={version + 1}", 1)
            out.append(line)
        if doubled is not None:
            return out
    sys.exit("chaos_mutate: the apply log has no apply to double")


def drop_minibatch(lines):
    for index in range(len(lines) - 1, -1, -1):
        kind, f = fields(lines[index], "push_log", "the push log") if lines[index].strip() else ("", {})
        if kind == "end":
            count = int(f["minibatches"]) + 1
            trained = log_records.format_record(
                "push_log", "trained", {"agent": f["agent"], "minibatches": count, "time": f["time"]}) + "\n"
            ended = lines[index].replace(f"minibatches={f['minibatches']}", f"minibatches={count}", 1)
            return lines[:index] + [trained, ended] + lines[index + 1:]
    sys.exit("chaos_mutate: the push log has no process that ended cleanly")


def main():
    if len(sys.argv) != 4 or sys.argv[1] not in ("double_apply", "drop_minibatch"):
        sys.exit(__doc__)
    lines = open(sys.argv[2]).readlines()
    mutated = double_apply(lines) if sys.argv[1] == "double_apply" else drop_minibatch(lines)
    with open(sys.argv[3], "w") as out:
        out.writelines(mutated)


if __name__ == "__main__":
    main()
