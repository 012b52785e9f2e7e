#!/usr/bin/env python3
"""chaos_agents_check.py and chaos_mutate.py on small hand-written logs: a run that keeps every invariant
passes and prints its accounting; each kind of violation fails, naming it."""
import os
import subprocess
import sys
import tempfile
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))

# Shard 0: its first start applies pushes 1-3 of session s1, checkpoints version 2 and is killed; the
# second resumes at 2 (push 3 of s1 is lost by design) and applies the second process's first push.
SHARD0 = """\
start incarnation=11 version=0
apply incarnation=11 version=1 agent=a session=s1 sequence=1 minibatches=4 staleness=0
apply incarnation=11 version=2 agent=a session=s1 sequence=2 minibatches=4 staleness=0
checkpoint incarnation=11 version=2
apply incarnation=11 version=3 agent=a session=s1 sequence=3 minibatches=4 staleness=0
start incarnation=12 version=2
apply incarnation=12 version=3 agent=a session=s2 sequence=1 minibatches=2 staleness=0
checkpoint incarnation=12 version=3
"""
# Shard 1: never killed; applies everything.
SHARD1 = """\
start incarnation=21 version=0
apply incarnation=21 version=1 agent=a session=t1 sequence=1 minibatches=4 staleness=0
apply incarnation=21 version=2 agent=a session=t1 sequence=2 minibatches=4 staleness=0
apply incarnation=21 version=3 agent=a session=t1 sequence=3 minibatches=4 staleness=0
apply incarnation=21 version=4 agent=a session=t2 sequence=1 minibatches=2 staleness=0
apply incarnation=21 version=5 agent=a session=t2 sequence=2 minibatches=1 staleness=0
checkpoint incarnation=21 version=5
"""


def push(session, sequence, shard, minibatches, incarnation, version, accepted=1, repeated=0,
         reason="REJECT_REASON_UNSPECIFIED"):
    return (f"push agent=a session={session} sequence={sequence} accepted={accepted} repeated={repeated} "
            f"reason={reason} incarnation={incarnation} version={version} shard={shard} "
            f"minibatches={minibatches}\n")


def trained(first, last, time=100.0):
    return "".join(f"trained agent=a minibatches={n} time={time + n:.3f}\n" for n in range(first, last + 1))


# The first process trains 14 minibatches, pushes 12 (3 pushes of 4 to each shard) and is SIGKILLed with 2
# not pushed; the second trains 3 and ends in step, one of its pushes refused by shard 0.
PUSHES = ("start agent=a pid=1 time=100.000\n" + trained(1, 4) + push("s1", 1, 0, 4, 11, 1) +
          push("t1", 1, 1, 4, 21, 1) + trained(5, 8) + push("s1", 2, 0, 4, 11, 2) +
          push("t1", 2, 1, 4, 21, 2) + trained(9, 12) + push("s1", 3, 0, 4, 11, 3) +
          push("t1", 3, 1, 4, 21, 3, repeated=1) + trained(13, 14) +
          "start agent=a pid=2 time=200.000\n" + trained(1, 2, 200) + push("s2", 1, 0, 2, 12, 3) +
          push("t2", 1, 1, 2, 21, 4) + trained(3, 3, 200) +
          push("s2", 2, 0, 1, 12, 3, accepted=0, reason="REJECT_REASON_WRONG_INCARNATION") +
          push("t2", 2, 1, 1, 21, 5) + "end agent=a in_step=1 minibatches=3 time=205.000\n")


class ChaosAgentsCheckTest(unittest.TestCase):
    def setUp(self):
        self.dir = tempfile.TemporaryDirectory()
        self.addCleanup(self.dir.cleanup)

    def write(self, name, text):
        path = os.path.join(self.dir.name, name)
        with open(path, "w") as f:
            f.write(text)
        return path

    def check(self, shard0=SHARD0, shard1=SHARD1, pushes=PUSHES, window=20):
        result = subprocess.run(
            [sys.executable, os.path.join(HERE, "chaos_agents_check.py"), self.write("pushes.log", pushes),
             "--apply_log=" + self.write("apply-0.log", shard0), "--apply_log=" + self.write("apply-1.log", shard1),
             "--checkpoint_every=2", f"--agent_kill_window={window}"], capture_output=True, text=True)
        return result.returncode, result.stdout

    def mutate(self, how, text):
        out = os.path.join(self.dir.name, "mutated")
        subprocess.run([sys.executable, os.path.join(HERE, "chaos_mutate.py"), how, self.write("in", text), out],
                       check=True)
        with open(out) as f:
            return f.read()

    def test_a_run_that_keeps_every_invariant_passes_and_accounts_for_every_minibatch(self):
        rc, out = self.check()
        self.assertEqual(rc, 0, out)
        # Shard 0: 10 in the lineage, 4 lost by design, 1 refused, 2 never pushed by the killed process
        # (bound: the 14 it trained in its last 20 s).
        self.assertRegex(out, r"a +shard 0 +2 +17 +10 +4 +1 REJECT_REASON_WRONG_INCARNATION +2 \(14\)")
        self.assertRegex(out, r"a +shard 1 +2 +17 +15 +0 +0 +2 \(14\)")
        self.assertIn("shard 0       2              3       1 (4)", out)

    def test_a_push_applied_twice_fails(self):
        rc, out = self.check(shard1=self.mutate("double_apply", SHARD1))
        self.assertEqual(rc, 1, out)
        self.assertIn("more than once", out)

    def test_a_minibatch_trained_and_never_pushed_fails(self):
        rc, out = self.check(pushes=self.mutate("drop_minibatch", PUSHES))
        self.assertEqual(rc, 1, out)
        self.assertIn("1 dropped", out)

    def test_an_accepted_push_the_shard_did_not_apply_as_that_version_fails(self):
        rc, out = self.check(pushes=PUSHES.replace("incarnation=21 version=4", "incarnation=21 version=3"))
        self.assertEqual(rc, 1, out)
        self.assertIn("was answered as version 3", out)

    def test_an_apply_outside_the_lineage_before_a_checkpoint_of_its_start_fails(self):
        rc, out = self.check(shard0=SHARD0.replace("start incarnation=12 version=2",
                                                   "checkpoint incarnation=11 version=3\n"
                                                   "start incarnation=12 version=2"))
        self.assertEqual(rc, 1, out)
        self.assertIn("checkpointed past it", out)

    def test_an_agent_that_does_not_end_in_step_fails(self):
        rc, out = self.check(pushes=PUSHES.replace("in_step=1", "in_step=0"))
        self.assertEqual(rc, 1, out)
        self.assertIn("did not end in step", out)

    def test_a_killed_agent_may_lose_only_what_it_trained_in_its_last_window(self):
        rc, out = self.check(window=1.5)
        self.assertEqual(rc, 0, out)
        rc, out = self.check(window=0.5)
        self.assertEqual(rc, 1, out)
        self.assertIn("more than the 1 they trained in their last 0.5 s", out)

    def test_a_push_on_a_version_the_lineage_holds_refused_as_lost_fails(self):
        # Shard 0's second start resumed at version 2 of the first: a push computed on version 3 of the
        # first (lost with it) may be refused as not in the lineage; one on version 2 (held) may not.
        lost = PUSHES.replace("reason=REJECT_REASON_WRONG_INCARNATION incarnation=12 version=3 shard=0",
                              "reason=REJECT_REASON_BASE_NOT_IN_LINEAGE incarnation=12 version=3 shard=0 "
                              "base_incarnation=11 base_version=3")
        rc, out = self.check(pushes=lost)
        self.assertEqual(rc, 0, out)
        self.assertIn("1 REJECT_REASON_BASE_NOT_IN_LINEAGE", out)
        rc, out = self.check(pushes=lost.replace("base_version=3", "base_version=2"))
        self.assertEqual(rc, 1, out)
        self.assertIn("as not in its lineage, though it holds that version", out)

    def test_versions_going_backwards_within_an_incarnation_fail(self):
        swapped = PUSHES.replace("incarnation=21 version=5", "incarnation=21 version=X").replace(
            "incarnation=21 version=4", "incarnation=21 version=5").replace(
            "incarnation=21 version=X", "incarnation=21 version=4")
        shard1 = SHARD1.replace("session=t2 sequence=1", "session=t2 sequence=Y").replace(
            "session=t2 sequence=2 minibatches=1", "session=t2 sequence=1 minibatches=2").replace(
            "session=t2 sequence=Y minibatches=2", "session=t2 sequence=2 minibatches=1")
        rc, out = self.check(shard1=shard1, pushes=swapped)
        self.assertEqual(rc, 1, out)
        self.assertIn("go backwards", out)


# One server whose second and third versions are steps that combined the pushes of two agents.
BATCHED = """\
start incarnation=31 version=0
apply incarnation=31 version=1 agent=a session=s1 sequence=1 minibatches=4 staleness=0
apply incarnation=31 version=2 agent=b session=u1 sequence=1 minibatches=2 staleness=0
apply incarnation=31 version=2 agent=a session=s1 sequence=2 minibatches=4 staleness=0
apply incarnation=31 version=3 agent=a session=s1 sequence=3 minibatches=4 staleness=1
apply incarnation=31 version=3 agent=b session=u1 sequence=2 minibatches=2 staleness=0
checkpoint incarnation=31 version=3
"""


class LogRecordsTest(unittest.TestCase):
    """The records are read as common/support/log_records.txt declares them (the C++ writers' declaration too)."""
    setUp, write, check = ChaosAgentsCheckTest.setUp, ChaosAgentsCheckTest.write, ChaosAgentsCheckTest.check

    def test_a_record_the_declaration_does_not_know_fails_naming_it(self):
        code, out = self.check(pushes=PUSHES.replace("trained agent=a minibatches=1 ", "trainee agent=a minibatches=1 ", 1))
        self.assertEqual(code, 1, out)
        self.assertIn("pushes.log:2: unknown record 'trainee'", out)

    def test_a_record_without_a_declared_key_fails_naming_it(self):
        code, out = self.check(shard1=SHARD1.replace(" staleness=0", "", 1))
        self.assertEqual(code, 1, out)
        self.assertIn("apply record lacks staleness", out)

    def test_the_declaration_names_the_keys_the_checkers_read(self):
        sys.path.insert(0, HERE)
        import log_records
        self.assertEqual([k for k, _ in log_records.keys("apply_log", "apply")],
                         ["incarnation", "version", "agent", "session", "sequence", "minibatches", "staleness"])
        self.assertIn(("base_version", True), log_records.keys("push_log", "push"))
        self.assertEqual(log_records.format_record("push_log", "trained", {"time": "1.0", "agent": "a", "minibatches": 2}),
                         "trained agent=a minibatches=2 time=1.0")


class ApplyLogStepsTest(unittest.TestCase):
    """chaos_check.py's reading of the apply log when steps combine pushes (--max_pushes_per_step)."""

    def read(self, text):
        sys.path.insert(0, HERE)
        import chaos_check
        with tempfile.NamedTemporaryFile("w", suffix=".log", delete=False) as f:
            f.write(text)
        self.addCleanup(os.unlink, f.name)
        return chaos_check, chaos_check.read_apply_log(f.name)

    def test_a_version_is_a_step_of_several_pushes_in_summation_order(self):
        chaos_check, (starts, _) = self.read(BATCHED)
        self.assertEqual(starts[0]["last"], 3)
        self.assertEqual(starts[0]["applies"][2], [(("b", "u1", "1"), 2), (("a", "s1", "2"), 4)])
        lineage, taken = chaos_check.lineage_of(starts)
        self.assertEqual([len(lineage[v]) for v in (1, 2, 3)], [1, 2, 2])
        self.assertEqual(taken, {"31": (0, 3)})

    def test_the_lines_of_a_step_apart_fail(self):
        apart = BATCHED.replace(
            "apply incarnation=31 version=2 agent=a session=s1 sequence=2 minibatches=4 staleness=0\n"
            "apply incarnation=31 version=3 agent=a session=s1 sequence=3 minibatches=4 staleness=1\n",
            "apply incarnation=31 version=3 agent=a session=s1 sequence=3 minibatches=4 staleness=1\n"
            "apply incarnation=31 version=2 agent=a session=s1 sequence=2 minibatches=4 staleness=0\n")
        result = subprocess.run([sys.executable, "-c",
                                 "import sys; sys.path.insert(0, sys.argv[1]); import chaos_check; "
                                 "chaos_check.read_apply_log(sys.argv[2])",
                                 HERE, self.write_log(apart)], capture_output=True, text=True)
        self.assertEqual(result.returncode, 1, result.stdout)
        self.assertIn("applied version 2 after 3", result.stdout)

    def test_a_push_twice_in_one_step_fails(self):
        twice = BATCHED.replace("agent=b session=u1 sequence=1", "agent=a session=s1 sequence=2")
        result = subprocess.run([sys.executable, "-c",
                                 "import sys; sys.path.insert(0, sys.argv[1]); import chaos_check; "
                                 "chaos_check.read_apply_log(sys.argv[2])",
                                 HERE, self.write_log(twice)], capture_output=True, text=True)
        self.assertEqual(result.returncode, 1, result.stdout)
        self.assertIn("more than once", result.stdout)

    def write_log(self, text):
        with tempfile.NamedTemporaryFile("w", suffix=".log", delete=False) as f:
            f.write(text)
        self.addCleanup(os.unlink, f.name)
        return f.name


if __name__ == "__main__":
    unittest.main()
