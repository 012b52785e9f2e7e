#!/usr/bin/env python3
"""deploy/slurm, checked without a cluster (the cluster run is slurm_test.sh).

    slurm_scripts_test.py REPO_ROOT BIN_DIR

The scripts parse (bash -n) and are executable; the batch script asks for --requeue and a warning signal; every
flag they pass to convoy_ps, convoy_agent and convoy_sim, and every flag docs/deploy.md hands them through
CONVOY_PS_FLAGS / CONVOY_AGENT_FLAGS, is one the binary accepts (its --help).
"""

import os
import re
import subprocess
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from deploy_checks import Checks, accepted_flags, die, flag_name  # noqa: E402


def array_flags(text: str, name: str):
    """The --flags of a bash array literal NAME=( ... )."""
    m = re.search(rf"^\s*{name}=\((.*?)^\s*\)", text, re.M | re.S)
    if m is None:
        return None
    return [f for f in (flag_name(w) for w in m.group(1).split()) if f]


def command_flags(text: str, binary: str):
    """The --flags on the (continued) line that runs "$CONVOY_BIN/<binary>"."""
    flags = []
    for m in re.finditer(rf'"\$CONVOY_BIN/{binary}"((?:[^\n]*\\\n)*[^\n]*)', text):
        flags += [f for f in (flag_name(w.strip('"')) for w in m.group(1).split()) if f]
    return flags


def main():
    if len(sys.argv) != 3:
        die(__doc__)
    repo, bindir = Path(sys.argv[1]), Path(sys.argv[2])
    t = Checks("slurm scripts")
    flags = {b: accepted_flags(bindir / b) for b in ("convoy_ps", "convoy_agent", "convoy_sim")}
    slurm = repo / "deploy" / "slurm"
    batch, task = slurm / "convoy.sbatch", slurm / "agent_task.sh"

    for script in (batch, task):
        t.check(os.access(script, os.X_OK), f"{script} is not executable")
        r = subprocess.run(["bash", "-n", str(script)], capture_output=True, text=True)
        t.check(r.returncode == 0, f"{script} does not parse: {r.stderr}")

    text = batch.read_text()
    sbatch = re.findall(r"^#SBATCH (\S+)", text, re.M)
    t.check("--requeue" in sbatch, "the batch script does not ask for --requeue")
    t.check(any(o.startswith("--signal=B:USR1@") for o in sbatch), "the batch script asks for no warning signal")
    t.check("trap 'on_signal USR1' USR1" in text and "trap 'on_signal TERM' TERM" in text,
            "the batch script does not trap USR1 and TERM")
    t.check("scontrol requeue" in text, "the batch script never requeues itself")

    checked = 0
    uses = [
        ("convoy_ps", array_flags(text, "PS_ARGS"), "PS_ARGS in convoy.sbatch"),
        ("convoy_agent", array_flags(task.read_text(), "AGENT_ARGS"), "AGENT_ARGS in agent_task.sh"),
        ("convoy_sim", command_flags(task.read_text(), "convoy_sim"), "convoy_sim in agent_task.sh"),
    ]
    t.check("--resume" in text and "resume" in (uses[0][1] or []), "the batch script does not start the PS with --resume")
    # Flags handed through the environment, in the docs and in the cluster test.
    sources = [repo / "docs" / "deploy.md", repo / "tests" / "deploy" / "slurm_test.sh"]
    for src in sources:
        if not src.exists():
            t.check(src.name != "deploy.md", f"{src} is missing")
            continue
        for var, binary in (("CONVOY_PS_FLAGS", "convoy_ps"), ("CONVOY_AGENT_FLAGS", "convoy_agent"),
                            ("PS_FLAGS", "convoy_ps"), ("AGENT_FLAGS", "convoy_agent")):
            for m in re.finditer(rf'(?<![A-Z_]){var}="([^"]*)"', src.read_text()):
                uses.append((binary, [f for f in (flag_name(w) for w in m.group(1).split()) if f],
                             f"{var} in {src.name}"))
    for binary, used, where in uses:
        if not t.check(used, f"found no flags in {where}"):
            continue
        for f in used:
            checked += 1
            t.check(f in flags[binary], f"{where}: {binary} does not accept --{f}")
    print(f"{checked} flag uses checked against the binaries' --help")
    return t.finish()


if __name__ == "__main__":
    sys.exit(main())
