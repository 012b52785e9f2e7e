#!/usr/bin/env python3
"""The invariants of a chaos run (chaos_test.sh), from convoy_ps's --apply_log and the agents' --push_log.

    chaos_check.py APPLY_LOG PUSH_LOG... --lineage=OUT --checkpoint_every=N --kills=K

Checks, printing what it counted:
  * within each start of the server (incarnation) versions go up by one from the version it resumed at
    (the "apply" lines of one version are one optimizer step's pushes, together, in the order it summed
    them), and no push (agent, session, sequence) is applied twice;
  * the lineage the final weights descend from: the last start's updates, then those of the start that
    wrote the checkpoint it resumed from, back to version 0; each resume point is a checkpoint some
    earlier start wrote; no push appears twice in it;
  * every push an agent saw accepted is the update the server applied as that version in that
    incarnation, and is in the lineage, unless that incarnation was killed and applied it after the last
    checkpoint the lineage took from it (lost by design: counted, and at most 2 * N per kill);
  * the last start wrote a checkpoint of its last version (the one the replay compares with).
Writes the lineage to OUT, one line per version in version order: "session sequence minibatches" for
each push of its step, in the order the step summed them. Exits 1 on the first violation, naming it.

The functions above main() are shared with chaos_agents_check.py (the run with convoy_agent on shards).
"""
import argparse
import collections
import sys

import log_records

PREFIX = "chaos_check"


def fields(line, log, where):
    """The kind and fields of a record of `log` (common/support/log_records.txt), or a failure naming `where`."""
    try:
        return log_records.parse(log, line)
    except ValueError as e:
        fail(f"{where}: {e}")


def fail(message):
    print(f"{PREFIX}: FAIL: {message}")
    sys.exit(1)


def pushes_of(step):
    """The pushes of one step, [(push, minibatches)], without their minibatches."""
    return [push for push, _ in step]


def read_apply_log(path, name="apply log"):
    """The server's starts, in order: incarnation, resumed version, applies by version (each version's
    step: [(push, minibatches)] in summation order), checkpoints. Fails when versions do not rise by one
    within a start, a step's lines are not together, or a start applied a push twice."""
    starts = []
    by_incarnation = {}
    previous = None  # The last line's (kind, incarnation, version).
    for number, line in enumerate(open(path), 1):
        if not line.strip():
            continue
        kind, f = fields(line, "apply_log", f"{name} line {number}")
        if kind == "start":
            start = {"incarnation": f["incarnation"], "from": int(f["version"]), "applies": {},
                     "checkpoints": set(), "last": int(f["version"]), "writer": f.get("resumed_from")}
            if f["incarnation"] in by_incarnation:
                fail(f"{name} line {number}: incarnation {f['incarnation']} started twice")
            starts.append(start)
            by_incarnation[f["incarnation"]] = start
            previous = None
            continue
        start = by_incarnation.get(f["incarnation"])
        if start is None:
            fail(f"{name} line {number}: {kind} of incarnation {f['incarnation']} before its start")
        version = int(f["version"])
        if kind == "apply":
            same_step = previous == ("apply", f["incarnation"], version)
            if not same_step and version != start["last"] + 1:
                fail(f"{name} line {number}: incarnation {f['incarnation']} applied version {version} "
                     f"after {start['last']}")
            start["last"] = version
            push = (f["agent"], f["session"], f["sequence"])
            start["applies"].setdefault(version, []).append((push, int(f.get("minibatches", 1))))
        elif kind == "checkpoint":
            if version > start["last"]:
                fail(f"{name} line {number}: a checkpoint of version {version} ahead of the updates")
            start["checkpoints"].add(version)
        else:
            fail(f"{name} line {number}: unknown record '{kind}'")
        previous = (kind, f["incarnation"], version)
    if not starts:
        fail(f"the {name} has no start")
    for start in starts:
        pushes = [push for step in start["applies"].values() for push in pushes_of(step)]
        twice = [p for p, n in collections.Counter(pushes).items() if n > 1]
        if twice:
            fail(f"{name}: incarnation {start['incarnation']} applied {twice[0]} more than once")
    return starts, by_incarnation


def writer_of(starts, index):
    """The index of the earlier start that wrote the checkpoint start `index` resumed from, or None: the
    newest that logged a checkpoint of that version, else (killed between the durable write and its
    "checkpoint" line) the one its start line names, if it reached that version."""
    start = starts[index]
    writers = [i for i in range(index) if start["from"] in starts[i]["checkpoints"]]
    if not writers:
        writers = [i for i in range(index) if starts[i]["incarnation"] == start["writer"]
                   and starts[i]["last"] >= start["from"]]
    return writers[-1] if writers else None


def held_by(starts, index):
    """What start `index` knows of earlier starts' weights when it starts: [(incarnation, low, high)], the
    versions low..high of each start its checkpoint descends from, and the version each start resumed at
    that resumed from a version of those (the server's starts journal). A push computed on one of these is
    of its lineage; on any other version of an earlier start, it is not."""
    segments = []
    version, i = starts[index]["from"], index
    while version > 0:
        w = writer_of(starts, i)
        if w is None:
            break
        segments.append((starts[w]["incarnation"], starts[w]["from"], version))
        version, i = starts[w]["from"], w
    named = {incarnation for incarnation, _, _ in segments} | {starts[index]["incarnation"]}
    for j in range(index):
        start = starts[j]
        if start["incarnation"] in named or start["writer"] is None:
            continue
        if any(inc == start["writer"] and low <= start["from"] <= high for inc, low, high in segments):
            segments.append((start["incarnation"], start["from"], start["from"]))
    return segments


def lineage_of(starts, name="the server"):
    """The lineage of the last start's last version: {version: step}, each step [(push, minibatches)] in
    summation order, and {incarnation: (low, high)}, the versions (low, high] each start contributed. Fails when the last start did not checkpoint its last
    version, a start resumed at a checkpoint no earlier start wrote, or a push is in the lineage twice."""
    last = starts[-1]
    if last["last"] not in last["checkpoints"]:
        fail(f"the last start of {name} did not checkpoint its last version {last['last']}")
    segments = []
    index, upto = len(starts) - 1, last["last"]
    while True:
        start = starts[index]
        segments.append((start, start["from"], upto))
        if start["from"] == 0:
            break
        writer = writer_of(starts, index)
        if writer is None:
            fail(f"{name}: incarnation {start['incarnation']} resumed at version {start['from']}, "
                 f"a checkpoint no earlier start wrote")
        index, upto = writer, start["from"]
    lineage = {}
    for start, low, high in segments:
        for version in range(low + 1, high + 1):
            lineage[version] = start["applies"][version]
    if sorted(lineage) != list(range(1, last["last"] + 1)):
        fail(f"the lineage of {name} does not cover every version from 1 to the last")
    twice = [p for p, n in collections.Counter(push for step in lineage.values()
                                              for push in pushes_of(step)).items() if n > 1]
    if twice:
        fail(f"push {twice[0]} is applied twice in the lineage of the final weights of {name}")
    taken = {start["incarnation"]: (low, high) for start, low, high in segments}
    return lineage, taken


def lost_by_design(start, version, last, where):
    """Fails unless `version` of `start`, an update not in the lineage, was applied by a killed start after
    the last checkpoint it wrote."""
    if start is last or start["checkpoints"] and version <= max(start["checkpoints"]):
        fail(f"{where}: version {version} of incarnation {start['incarnation']} is not in the lineage, "
             f"though its incarnation checkpointed past it")


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("apply_log")
    parser.add_argument("push_logs", nargs="+")
    parser.add_argument("--lineage", required=True)
    parser.add_argument("--checkpoint_every", type=int, required=True)
    parser.add_argument("--kills", type=int, required=True)
    args = parser.parse_args()

    starts, by_incarnation = read_apply_log(args.apply_log)
    applied = sum(len(step) for s in starts for step in s["applies"].values())
    steps = sum(len(s["applies"]) for s in starts)
    print(f"chaos_check: {len(starts)} starts of the server, {applied} updates applied in all in {steps} "
          f"steps; within each start versions rise by one and no push is applied twice")

    lineage, taken = lineage_of(starts)
    last = starts[-1]
    print(f"chaos_check: the final version {last['last']} descends through {len(taken)} starts; "
          f"no push is in its lineage twice")

    # What the agents saw accepted.
    seen = lost = repeated = 0
    refused = collections.Counter()
    lost_by_incarnation = collections.Counter()
    versions_by_agent = collections.defaultdict(list)
    for path in args.push_logs:
        for number, line in enumerate(open(path), 1):
            if not line.strip():
                continue
            kind, f = fields(line, "push_log", f"{path}:{number}")
            if kind != "push":
                continue
            repeated += f["repeated"] == "1"
            if f["accepted"] != "1":
                refused[f["reason"]] += 1
                continue
            seen += 1
            push = (f["agent"], f["session"], f["sequence"])
            start = by_incarnation.get(f["incarnation"])
            version = int(f["version"])
            if start is None or push not in pushes_of(start["applies"].get(version, [])):
                fail(f"{path}:{number}: {push} was answered as version {version} of incarnation "
                     f"{f['incarnation']}, which applied {start and start['applies'].get(version)}")
            versions_by_agent[(f["session"], f["incarnation"])].append(version)
            low, high = taken.get(f["incarnation"], (0, -1))
            if low < version <= high:
                continue  # In the lineage.
            lost_by_design(start, version, last, f"{path}:{number}: accepted push {push}")
            lost += 1
            lost_by_incarnation[f["incarnation"]] += 1
    for (session, incarnation), versions in versions_by_agent.items():
        if versions != sorted(versions):
            fail(f"session {session} saw versions go backwards within incarnation {incarnation}")
    bound = 2 * args.checkpoint_every * max(args.kills, 1)
    print(f"chaos_check: {seen} pushes the agents saw accepted: {seen - lost} in the lineage, {lost} "
          f"applied by a killed server after its last checkpoint (lost by design; bound {bound} for "
          f"{args.kills} kills); versions never went backwards for any session within an incarnation")
    print(f"chaos_check: {repeated} answers were a repeat of a push the server had applied (its reply "
          f"lost); refused: {dict(refused) or 'none'}")
    if lost > bound:
        fail(f"{lost} accepted pushes lost, more than {bound}")
    if seen == 0:
        fail("the agents saw no push accepted")

    with open(args.lineage, "w") as out:
        for version in range(1, last["last"] + 1):
            out.write(" ".join(f"{session} {sequence} {minibatches}"
                               for (_, session, sequence), minibatches in lineage[version]) + "\n")


if __name__ == "__main__":
    main()
