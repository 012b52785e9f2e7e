#!/usr/bin/env python3
"""deploy/slurm, checked without a cluster (the cluster run is slurm_test.sh).

    slurm_scripts_test.py REPO_ROOT BIN_DIR

The scripts parse (bash -n) and are executable; the batch script asks for --requeue and a warning signal; every
flag they pass to convoy_ps, convoy_agent and convoy_sim, and every flag docs/deploy.md hands them through
CONVOY_PS_FLAGS / CONVOY_AGENT_FLAGS, is one the binary accepts (its --help); against stand-ins for srun and
scontrol, the batch script lays out the steps for each job shape and starts the PS with TLS and a token (credentials
generated in the run directory) unless CONVOY_INSECURE=1.
"""

import os
import re
import subprocess
import sys
from pathlib import Path

sys.dont_write_bytecode = True  # no __pycache__ in the source tree
sys.path.insert(0, str(Path(__file__).resolve().parent))
from deploy_checks import Checks, accepted_flags, die, flag_name  # noqa: E402


def array_flags(text: str, name: str):
    """The --flags of the bash array literals NAME=( ... ) (every one, where branches set it differently) and of the
    one-line additions NAME+=( ... )."""
    found = list(re.finditer(rf"^\s*{name}=\((.*?)^\s*\)", text, re.M | re.S))
    if not found:
        return None
    found += re.finditer(rf"^\s*{name}\+=\(([^)\n]*)\)", text, re.M)
    return [f for m in found for f in (flag_name(w) for w in m.group(1).split()) if f]


def command_flags(text: str, binary: str):
    """The --flags on the (continued) line that runs "$CONVOY_BIN/<binary>"."""
    flags = []
    for m in re.finditer(rf'"\$CONVOY_BIN/{binary}"((?:[^\n]*\\\n)*[^\n]*)', text):
        flags += [f for f in (flag_name(w.strip('"')) for w in m.group(1).split()) if f]
    return flags


# Stand-ins for the Slurm commands the batch script calls, for checking its layout without a cluster: srun
# records its arguments (and the PS address the agents get); for the PS step it runs ps_task.sh once per task
# (SLURM_PROCID 0..CONVOY_PS_SHARDS-1) against a stand-in convoy_ps that records its flags and writes its port
# file, and runs until scancel signals its step.
STUBS = {
    "scontrol": """#!/bin/bash
case "$1 $2" in
  "show hostnames") tr ' ' '\\n' <<<"$STUB_HOSTS" ;;
  "show node") echo "NodeName=$3 NodeAddr=10.0.0.$((${3#n} + 1)) State=ALLOCATED" ;;
  *) echo "scontrol $*" >>"$STUB_DIR/calls" ;;
esac
""",
    "srun": """#!/bin/bash
echo "srun $*" >>"$STUB_DIR/calls"
args=("$@")
for ((k = 0; k < ${#args[@]}; k++)); do
  case "${args[k]}" in
    */ps_task.sh)
      for ((i = 0; i < ${CONVOY_PS_SHARDS:-1}; i++)); do
        SLURM_PROCID=$i bash "${args[k]}" "${args[@]:k+1}" || exit 8
      done
      for i in $(seq 100); do [ -e "$STUB_DIR/stop-ps" ] && exit 0; sleep 0.1; done; exit 9 ;;
  esac
done
echo "agents see CONVOY_PS_ADDRESS=$CONVOY_PS_ADDRESS" >>"$STUB_DIR/calls"
""",
    "squeue": """#!/bin/bash
printf '%s\\n' "$SLURM_JOB_ID.0 convoy_ps" "$SLURM_JOB_ID.1 convoy_agents"
""",
    "scancel": """#!/bin/bash
echo "scancel $*" >>"$STUB_DIR/calls"
[ "${@: -1}" = "$SLURM_JOB_ID.0" ] && touch "$STUB_DIR/stop-ps"
exit 0
""",
}

LAYOUTS = [
    # (what, environment, the PS step's srun options, the agents' srun options)
    ("one node, 2 tasks", {"SLURM_JOB_NODELIST": "n0", "STUB_HOSTS": "n0", "SLURM_TASKS_PER_NODE": "2",
                           "SLURM_NTASKS": "2"},
     "--nodes=1 --ntasks=1 --relative=0 --overlap", "--nodes=1 --ntasks=2 --relative=0"),
    ("3 nodes x 4 tasks", {"SLURM_JOB_NODELIST": "n[0-2]", "STUB_HOSTS": "n0 n1 n2",
                           "SLURM_TASKS_PER_NODE": "4(x3)", "SLURM_NTASKS": "12"},
     "--nodes=1 --ntasks=1 --relative=0 --job-name", "--nodes=2 --ntasks=8 --relative=1"),
    ("uneven tasks", {"SLURM_JOB_NODELIST": "n[0-2]", "STUB_HOSTS": "n0 n1 n2",
                      "SLURM_TASKS_PER_NODE": "2,3(x2)", "SLURM_NTASKS": "8"},
     "--nodes=1 --ntasks=1 --relative=0 --job-name", "--nodes=2 --ntasks=6 --relative=1"),
    ("heterogeneous", {"SLURM_HET_SIZE": "2", "SLURM_JOB_NODELIST": "n[0-2]", "STUB_HOSTS": "n0",
                       "SLURM_JOB_NODELIST_HET_GROUP_0": "n0", "SLURM_NTASKS_HET_GROUP_1": "8"},
     "--het-group=0 --ntasks=1", "--het-group=1 --ntasks=8"),
    # Slurm 24 (Debian 13) sets no SLURM_NTASKS_HET_GROUP_1 for --nodes with --ntasks-per-node.
    ("heterogeneous, Slurm 24", {"SLURM_HET_SIZE": "2", "SLURM_JOB_NODELIST": "n[0-2]", "STUB_HOSTS": "n0",
                                 "SLURM_JOB_NODELIST_HET_GROUP_0": "n0",
                                 "SLURM_TASKS_PER_NODE_HET_GROUP_1": "2,3"},
     "--het-group=0 --ntasks=1", "--het-group=1 --ntasks=5"),
    ("one node, plaintext", {"SLURM_JOB_NODELIST": "n0", "STUB_HOSTS": "n0", "SLURM_TASKS_PER_NODE": "2",
                             "SLURM_NTASKS": "2", "CONVOY_INSECURE": "1"},
     "--nodes=1 --ntasks=1 --relative=0 --overlap", "--nodes=1 --ntasks=2 --relative=0"),
    ("one node, token from the environment", {"SLURM_JOB_NODELIST": "n0", "STUB_HOSTS": "n0",
                                              "SLURM_TASKS_PER_NODE": "2", "SLURM_NTASKS": "2",
                                              "CONVOY_AUTH_TOKEN": "layout-test-token"},
     "--nodes=1 --ntasks=1 --relative=0 --overlap", "--nodes=1 --ntasks=2 --relative=0"),
    ("3 nodes, 3 PS shards on the first", {"SLURM_JOB_NODELIST": "n[0-2]", "STUB_HOSTS": "n0 n1 n2",
                                           "SLURM_TASKS_PER_NODE": "1(x3)", "SLURM_NTASKS": "3",
                                           "CONVOY_PS_SHARDS": "3"},
     "--nodes=1 --ntasks=3 --relative=0 --overcommit", "--nodes=2 --ntasks=2 --relative=1"),
    ("heterogeneous, 2 PS shards", {"SLURM_HET_SIZE": "2", "SLURM_JOB_NODELIST": "n[0-2]", "STUB_HOSTS": "n0",
                                    "SLURM_JOB_NODELIST_HET_GROUP_0": "n0", "SLURM_NTASKS_HET_GROUP_1": "4",
                                    "CONVOY_PS_SHARDS": "2"},
     "--het-group=0 --ntasks=2 --overcommit", "--het-group=1 --ntasks=4"),
]


def check_layouts(repo: Path, t: Checks):
    """Runs the batch script against the stand-ins for each layout and checks the steps it starts."""
    import tempfile

    for what, env_extra, ps_opts, agent_opts in LAYOUTS:
        with tempfile.TemporaryDirectory() as d:
            d = Path(d)
            (d / "bin").mkdir()
            for name, text in STUBS.items():
                (d / "bin" / name).write_text(text)
                (d / "bin" / name).chmod(0o755)
            fake_bin = d / "convoy-bin"
            fake_bin.mkdir()
            for b in ("convoy_ps", "convoy_agent"):
                (fake_bin / b).write_text(
                    f'#!/bin/bash\necho "{b} $*" >>"$STUB_DIR/calls"\n'
                    'for a in "$@"; do case "$a" in --port_file=*) echo 43210 >"${a#--port_file=}" ;; esac; done\n')
                (fake_bin / b).chmod(0o755)
            env = {k: v for k, v in os.environ.items() if not k.startswith("SLURM_")}
            env.update(env_extra)
            env.update({"PATH": f"{d / 'bin'}:{os.environ['PATH']}", "STUB_DIR": str(d), "SLURM_JOB_ID": "7",
                        "CONVOY_HOME": str(repo), "CONVOY_BIN": str(fake_bin), "CONVOY_RUN_DIR": str(d / "run")})
            r = subprocess.run(["bash", str(repo / "deploy" / "slurm" / "convoy.sbatch")], env=env,
                               capture_output=True, text=True, timeout=60)
            calls = (d / "calls").read_text() if (d / "calls").exists() else ""
            runs = [line for line in calls.splitlines() if line.startswith("srun ")]
            ps = [line for line in runs if "--job-name=convoy_ps" in line]
            agents = [line for line in runs if "agent_task.sh" in line]
            t.check(r.returncode == 0, f"layout {what}: the batch script exited {r.returncode}: {r.stderr[-800:]}")
            t.check(len(ps) == 1 and f"srun {ps_opts}" in ps[0], f"layout {what}: PS step {ps} lacks {ps_opts}")
            t.check(len(agents) == 1 and f"srun {agent_opts}" in agents[0],
                    f"layout {what}: agent step {agents} lacks {agent_opts}")
            t.check("agents see CONVOY_PS_ADDRESS=10.0.0.1:43210" in calls,
                    f"layout {what}: the agents do not get the PS's NodeAddr and published port: {calls}")
            t.check("scancel --signal=TERM 7.0" in calls, f"layout {what}: convoy_ps is not stopped with SIGTERM")
            # Each PS task: a shard of its own, with its own port file and checkpoints; one shard: the old names.
            shards = int(env_extra.get("CONVOY_PS_SHARDS", "1"))
            servers = [line for line in calls.splitlines() if line.startswith("convoy_ps --") and "--port_file" in line]
            t.check(len(servers) == shards, f"layout {what}: {len(servers)} convoy_ps tasks, not {shards}: {servers}")
            for i, line in enumerate(servers):
                if shards == 1:
                    expected = [f"--port_file={d}/run/ps.port", f"--checkpoint_dir={d}/run/checkpoints "]
                else:
                    expected = [f"--num_shards={shards} --shard_index={i}", f"--port_file={d}/run/ps-{i}.port",
                                f"--checkpoint_dir={d}/run/checkpoints/shard-{i} "]
                for e in expected:
                    t.check(e in line + " ", f"layout {what}: PS task {i} lacks {e}: {line}")
            address = ",".join(["10.0.0.1:43210"] * shards)
            t.check(f"agents see CONVOY_PS_ADDRESS={address}\n" in calls,
                    f"layout {what}: the agents do not get every shard's address {address}: {calls}")
            # Security: TLS and a token with credentials generated in the run directory, unless CONVOY_INSECURE=1.
            auth = d / "run" / "auth"
            if env_extra.get("CONVOY_INSECURE") == "1":
                t.check(ps and "--insecure" in ps[0] and "--tls_cert" not in ps[0],
                        f"layout {what}: the PS is not started plaintext with --insecure: {ps}")
                t.check("--write_credentials" not in calls, f"layout {what}: credentials written for plaintext")
            else:
                t.check(f"convoy_ps --write_credentials={auth} --credentials_server_name=convoy-ps" in calls,
                        f"layout {what}: no credentials written to {auth}: {calls}")
                t.check(ps and f"--tls_cert={auth}/tls.crt --tls_key={auth}/tls.key" in ps[0]
                        and "--insecure" not in ps[0], f"layout {what}: the PS is not started with TLS: {ps}")
                from_env = "CONVOY_AUTH_TOKEN" in env_extra
                t.check(bool(ps) and (f"--auth_token_file={auth}/auth_token" in ps[0]) != from_env,
                        f"layout {what}: the PS's token source is wrong (CONVOY_AUTH_TOKEN set: {from_env}): {ps}")
                t.check("layout-test-token" not in r.stderr + calls, f"layout {what}: the token was logged")


def main():
    if len(sys.argv) != 3:
        die(__doc__)
    repo, bindir = Path(sys.argv[1]), Path(sys.argv[2])
    t = Checks("slurm scripts")
    flags = {b: accepted_flags(bindir / b) for b in ("convoy_ps", "convoy_agent", "convoy_sim")}
    slurm = repo / "deploy" / "slurm"
    batch, task, ps_task = slurm / "convoy.sbatch", slurm / "agent_task.sh", slurm / "ps_task.sh"

    for script in (batch, task, ps_task):
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
        ("convoy_ps", array_flags(text, "PS_SECURITY"), "PS_SECURITY in convoy.sbatch"),
        ("convoy_agent", array_flags(task.read_text(), "AGENT_SECURITY"), "AGENT_SECURITY in agent_task.sh"),
        ("convoy_sim", command_flags(task.read_text(), "convoy_sim"), "convoy_sim in agent_task.sh"),
        ("convoy_ps", command_flags(ps_task.read_text(), "convoy_ps"), "convoy_ps in ps_task.sh"),
    ]
    t.check("--resume" in text and "resume" in (uses[0][1] or []), "the batch script does not start the PS with --resume")
    t.check({"resume", "replay_checkpoint_dir"} <= set(uses[1][1] or []),
            "agent_task.sh does not start the agents with --replay_checkpoint_dir and --resume")
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
    check_layouts(repo, t)
    return t.finish()


if __name__ == "__main__":
    sys.exit(main())
