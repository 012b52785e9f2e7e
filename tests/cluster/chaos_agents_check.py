#!/usr/bin/env python3
"""The invariants of the chaos run with production agents (chaos_agents_test.sh): convoy_agent processes
on a sharded convoy_ps, from each shard's --apply_log and each agent's --push_log (agent/client/push_log.h).

    chaos_agents_check.py PUSH_LOG... --apply_log=SHARD0_LOG --apply_log=SHARD1_LOG ...
                          --checkpoint_every=N [--agent_kill_window=SECONDS]

The apply logs are given in shard order. Checks, for every shard (chaos_check.py's checks of one server):
  * within each start versions rise by one, and no push is applied twice; the lineage of the final
    weights (the last start's updates, back through the checkpoints each start resumed from) holds no
    push twice, and the last start checkpointed its last version;
  * every answer an agent got is the server's record: an accepted push is the update that incarnation
    applied as that version, with the minibatches the agent pushed; a repeat is of a push the shard
    applied; versions never go backwards for a session within an incarnation;
  * a push computed on an earlier start's weights is applied or repeated when the answering start's
    lineage holds that version, and refused BASE_NOT_IN_LINEAGE only when it does not (lost weights);
  * every update applied outside the lineage was applied by a killed start after its last checkpoint
    (lost by design), at most 2 * N updates per restart of the shard.
And for every agent and shard, the fate of every minibatch the agent trained:
  * each push the agent made to the shard (known from an answer or from an apply) is applied in the
    lineage, lost by design (above), or refused with a reason (counted per reason);
  * a process that ended cleanly pushed every minibatch it trained, and ended in step;
  * a SIGKILLed process (one without an `end` record) may have trained minibatches it never pushed, or
    whose push got no answer and was never applied: at most those it trained in its last
    --agent_kill_window seconds (what an outage holds back: a partition of up to 6 s, the paced rejoin
    and its deadline);
  * no agent pushed a shard more minibatches than it trained.
Prints one table: starts per shard, minibatches trained and applied in the lineage per agent and shard,
lost by design with its bound, repeats, refusals by reason. Exits 1 on the first violation, naming it.
"""
import argparse
import collections
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import chaos_check  # noqa: E402
from chaos_check import fail, fields  # noqa: E402

chaos_check.PREFIX = "chaos_agents_check"


def read_push_log(path):
    """The processes of the agents in one push log, in order: each {agent, trained: [(time, count)],
    ended, in_step, answers: [(line number, fields)]}."""
    processes = []
    for number, line in enumerate(open(path), 1):
        if not line.strip():
            continue
        kind, f = fields(line, "push_log", f"{path}:{number}")
        if kind == "start":
            processes.append({"agent": f["agent"], "trained": [], "ended": False, "in_step": False,
                              "answers": [], "where": f"{path}:{number}"})
            continue
        if not processes:
            fail(f"{path}:{number}: a {kind} record before any start")
        process = processes[-1]
        if f.get("agent") != process["agent"]:
            fail(f"{path}:{number}: a record of agent {f.get('agent')} in a process of {process['agent']}")
        if process["ended"]:
            fail(f"{path}:{number}: a {kind} record after the process's end")
        if kind == "trained":
            count = int(f["minibatches"])
            previous = process["trained"][-1][1] if process["trained"] else 0
            if count != previous + 1:
                fail(f"{path}:{number}: minibatch {count} trained after {previous}")
            process["trained"].append((float(f["time"]), count))
        elif kind == "push":
            process["answers"].append((f"{path}:{number}", f))
        elif kind == "end":
            process["ended"] = True
            process["in_step"] = f["in_step"] == "1"
        else:
            fail(f"{path}:{number}: unknown record '{kind}'")
    return processes


def check_base(shard, f, where):
    """A push computed on another start's weights (its base_incarnation= and base_version=, where the log
    has them) is refused BASE_NOT_IN_LINEAGE exactly when the answering start's lineage does not hold
    that version: applied or repeated only on weights the shard still has, refused only on lost ones."""
    base = f.get("base_incarnation", "0")
    if base in ("0", f["incarnation"]) or f["repeated"] == "1":
        return
    start = shard["by_incarnation"].get(f["incarnation"])
    if start is None:
        fail(f"{where}: answered by incarnation {f['incarnation']}, which {shard['name']} never started")
    version = int(f["base_version"])
    index = shard["starts"].index(start)
    held = any(inc == base and low <= version <= high
               for inc, low, high in chaos_check.held_by(shard["starts"], index))
    refused_as_lost = f["reason"] == "REJECT_REASON_BASE_NOT_IN_LINEAGE"
    if held and refused_as_lost:
        fail(f"{where}: {shard['name']} refused a push on version {version} of incarnation {base} as not "
             f"in its lineage, though it holds that version")
    if not held and f["accepted"] == "1":
        fail(f"{where}: {shard['name']} applied a push on version {version} of incarnation {base}, "
             f"weights its lineage never had")


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("push_logs", nargs="+")
    parser.add_argument("--apply_log", action="append", required=True, help="one per shard, in order")
    parser.add_argument("--checkpoint_every", type=int, required=True)
    parser.add_argument("--agent_kill_window", type=float, default=20)
    args = parser.parse_args()

    # The shards: their starts, lineages, and every apply by push.
    shards = []
    for index, path in enumerate(args.apply_log):
        name = f"shard {index}"
        starts, by_incarnation = chaos_check.read_apply_log(path, f"{name}'s apply log")
        lineage, taken = chaos_check.lineage_of(starts, name)
        applies = collections.defaultdict(list)  # push -> [(start, version, minibatches)]
        for start in starts:
            for version, step in start["applies"].items():
                for push, minibatches in step:
                    applies[push].append((start, version, minibatches))
        in_lineage = {}
        for version, step in lineage.items():
            for push, minibatches in step:
                in_lineage[push] = minibatches
        lost = {}  # push -> minibatches, applied only by killed starts after their last checkpoint
        for push, where in applies.items():
            for start, version, minibatches in where:
                low, high = taken.get(start["incarnation"], (0, -1))
                if low < version <= high:
                    continue
                chaos_check.lost_by_design(start, version, starts[-1], f"{name}: push {push}")
                if push not in in_lineage:
                    lost[push] = minibatches
        lost_updates = sum(len(step) for s in starts for v, step in s["applies"].items()
                           if not taken.get(s["incarnation"], (0, -1))[0] < v <= taken.get(
                               s["incarnation"], (0, -1))[1])
        bound = 2 * args.checkpoint_every * (len(starts) - 1)
        if lost_updates > bound:
            fail(f"{name}: {lost_updates} updates applied after a killed start's last checkpoint, more "
                 f"than {bound} for {len(starts) - 1} restarts")
        shards.append({"name": name, "starts": starts, "by_incarnation": by_incarnation,
                       "applies": applies, "in_lineage": in_lineage, "lost": lost,
                       "lost_updates": lost_updates, "bound": bound, "final": starts[-1]["last"]})
        print(f"chaos_agents_check: {name}: {len(starts)} starts, "
              f"{sum(len(step) for s in starts for step in s['applies'].values())} updates applied in "
              f"{sum(len(s['applies']) for s in starts)} steps; within each start versions rise "
              f"by one and no push is applied twice; the final version {starts[-1]['last']} descends "
              f"through {len(taken)} starts with no push in its lineage twice")

    # The agents: every answer against the shard's record, and every minibatch's fate.
    processes = []
    for path in args.push_logs:
        processes.extend(read_push_log(path))
    if not processes:
        fail("the push logs have no process")
    agents = sorted({p["agent"] for p in processes})
    for agent in agents:
        mine = [p for p in processes if p["agent"] == agent]
        for p in mine[:-1]:
            if p["ended"]:
                fail(f"{p['where']}: agent {agent} ended cleanly and started again; only its last "
                     f"process may end")
        if not mine[-1]["ended"]:
            fail(f"agent {agent}'s last process did not end cleanly (no end record)")
        if not mine[-1]["in_step"]:
            fail(f"agent {agent} did not end in step with the parameter server")

    table = []
    repeats = 0
    refused_total = collections.Counter()
    for s, shard in enumerate(shards):
        versions = collections.defaultdict(list)
        for agent in agents:
            mine = [p for p in processes if p["agent"] == agent]
            pushes = {}  # push -> minibatches, every push known from an answer
            fates = {}  # push -> refusal reason, for those refused
            session_of = {}  # session -> process index
            for index, p in enumerate(mine):
                for where, f in p["answers"]:
                    if int(f["shard"]) != s:
                        continue
                    push = (f["agent"], f["session"], f["sequence"])
                    minibatches = int(f["minibatches"])
                    if pushes.setdefault(push, minibatches) != minibatches:
                        fail(f"{where}: push {push} answered with {minibatches} minibatches, before "
                             f"with {pushes[push]}")
                    if session_of.setdefault(f["session"], index) != index:
                        fail(f"{where}: session {f['session']} answered in two processes of {agent}")
                    applied = shard["applies"].get(push, [])
                    for _, _, m in applied:
                        if m != minibatches:
                            fail(f"{where}: push {push} of {minibatches} minibatches was applied with {m}")
                    repeats += f["repeated"] == "1"
                    check_base(shard, f, where)
                    if f["accepted"] != "1":
                        fates.setdefault(push, f["reason"])
                        continue
                    if f["repeated"] == "1":
                        if not applied:
                            fail(f"{where}: {shard['name']} answered {push} as a repeat, but never "
                                 f"applied it")
                        continue
                    start = shard["by_incarnation"].get(f["incarnation"])
                    version = int(f["version"])
                    if start is None or push not in chaos_check.pushes_of(
                            start["applies"].get(version, [])):
                        fail(f"{where}: {push} was answered as version {version} of incarnation "
                             f"{f['incarnation']} of {shard['name']}, which applied "
                             f"{start and start['applies'].get(version)}")
                    versions[(f["session"], f["incarnation"])].append(version)
            # Pushes the shard applied whose answer the agent never saw (its reply lost, then killed).
            unanswered = {push: where[0][2] for push, where in shard["applies"].items()
                          if push[0] == agent and push not in pushes}
            # Each pushed minibatch's fate.
            trained = sum(p["trained"][-1][1] if p["trained"] else 0 for p in mine)
            applied_in_lineage = lost_minibatches = 0
            refused = collections.Counter()
            for push, minibatches in list(pushes.items()) + list(unanswered.items()):
                if push in shard["in_lineage"]:
                    applied_in_lineage += minibatches
                elif push in shard["lost"]:
                    lost_minibatches += minibatches
                elif push in fates:
                    refused[fates[push]] += minibatches
                else:
                    fail(f"agent {agent}'s push {push} to {shard['name']} was answered accepted, but is "
                         f"neither in the lineage nor lost by design")
            # Per process: what it trained against what it pushed (sessions answered in it).
            unpushed_killed = bound_killed = 0
            for index, p in enumerate(mine):
                pushed = sum(m for push, m in pushes.items() if session_of[push[1]] == index)
                count = p["trained"][-1][1] if p["trained"] else 0
                if pushed > count:
                    fail(f"{p['where']}: agent {agent} pushed {shard['name']} {pushed} minibatches in this "
                         f"process, more than the {count} it trained")
                if p["ended"]:
                    if pushed != count:
                        fail(f"{p['where']}: agent {agent} trained {count} minibatches and ended cleanly, "
                             f"but {shard['name']} answered pushes of only {pushed}: "
                             f"{count - pushed} dropped")
                    continue
                unpushed_killed += count - pushed
                if p["trained"]:
                    end = p["trained"][-1][0]
                    bound_killed += sum(1 for t, _ in p["trained"] if t >= end - args.agent_kill_window)
            unpushed_killed -= sum(unanswered.values())  # Applied after all, answer unseen.
            if unpushed_killed < 0:
                fail(f"agent {agent} pushed {shard['name']} {-unpushed_killed} minibatches more than its "
                     f"killed processes trained")
            if unpushed_killed > bound_killed:
                fail(f"agent {agent}: {unpushed_killed} minibatches trained by killed processes never "
                     f"reached {shard['name']}, more than the {bound_killed} they trained in their last "
                     f"{args.agent_kill_window:g} s")
            if applied_in_lineage + lost_minibatches + sum(refused.values()) + unpushed_killed != trained:
                fail(f"agent {agent}, {shard['name']}: {trained} minibatches trained, but "
                     f"{applied_in_lineage} applied + {lost_minibatches} lost + {sum(refused.values())} "
                     f"refused + {unpushed_killed} unpushed")
            if applied_in_lineage == 0:
                fail(f"agent {agent}: nothing it trained is in the lineage of {shard['name']}")
            refused_total.update(refused)
            table.append((agent, shard["name"], len(mine), trained, applied_in_lineage, lost_minibatches,
                          dict(refused), unpushed_killed, bound_killed))
        for (session, incarnation), seen in versions.items():
            if seen != sorted(seen):
                fail(f"session {session} saw versions of {shard['name']} go backwards within incarnation "
                     f"{incarnation}")

    print("chaos_agents_check: every answer matches the shards' records; versions never went backwards "
          "within an incarnation; every agent ended in step")
    print("chaos_agents_check: shard    starts  final version  updates lost by design (bound)")
    for shard in shards:
        print(f"chaos_agents_check: {shard['name']:8} {len(shard['starts']):6}  {shard['final']:13}  "
              f"{shard['lost_updates']:>6} ({shard['bound']})")
    print("chaos_agents_check: agent    shard    processes  trained  in lineage  lost by design  refused  "
          "unpushed by a killed agent (bound)")
    for agent, shard, starts, trained, applied, lost, refused, unpushed, bound in table:
        refused_text = ", ".join(f"{n} {r}" for r, n in sorted(refused.items())) or "0"
        print(f"chaos_agents_check: {agent:8} {shard:8} {starts:9}  {trained:7}  {applied:10}  {lost:14}  "
              f"{refused_text:7}  {unpushed} ({bound})")
    print(f"chaos_agents_check: {repeats} answers were repeats of a push the shard had applied; refused "
          f"minibatches by reason: {dict(refused_total) or 'none'}")
    print("chaos_agents_check: ok: every minibatch trained is applied once in its shard's lineage, or "
          "accounted for above")


if __name__ == "__main__":
    main()
