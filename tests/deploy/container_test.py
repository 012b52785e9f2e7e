#!/usr/bin/env python3
"""The container image, built and run: convoy_ps, two agents and a convoy_sim, each in its own container, with
podman (on a network of the test's own) or docker (on the host's network: a daemon of the test's own, started and
stopped by the test, makes no bridge or firewall rule).

    container_test.py REPO_ROOT [--engine=podman|docker]

The image is built by `./convoy image --engine=ENGINE` (the Debian base made from this machine's own apt sources
where the tests' storage has none; tests/deploy/podman_harness.py, docker_harness.py: what differs between the
engines is handled there). Every container runs as the image's user (uid 10001), with a read-only root
filesystem, every capability dropped and no new privileges; TLS and the bearer token are files mounted
read-only (mode 0440, group 10001: what a Kubernetes Secret volume with fsGroup gives). Checked:

  - each agent joined under its container's hostname (GetStatus, through convoy_status in a container), and the
    parameter server's version advances;
  - the agent on convoy_sim (the AirSim path between containers, --sim=airsim://<sim container>:41451, with
    docker airsim://127.0.0.1:<port>) drove: its log names that simulator and counts its steps;
  - SIGTERM to the server's container (podman stop, docker stop) drains and writes a final checkpoint, whose
    manifest's SHA-256 sums the test checks itself;
  - a new server container with --resume on the same volume continues from that version;
  - a container without the token is refused (UNAUTHENTICATED) and never joins.

Everything the test made (containers, network, volume, the image tag; with docker, its daemon) is removed, also
when it fails. Exit 77 (CTest: skipped), naming why, where the engine or the base image cannot be had.
"""

import os
import re
import sys
import tempfile
from pathlib import Path

sys.dont_write_bytecode = True  # no __pycache__ in the source tree
sys.path.insert(0, str(Path(__file__).resolve().parent))
from podman_harness import Podman, say, check, wait_for, verify_checkpoint  # noqa: E402

AUTH = "/etc/convoy/auth"
CKPT = "/var/lib/convoy/checkpoints"
CLIENT_AUTH = [f"--tls_ca={AUTH}/ca.crt", "--tls_server_name=convoy-ps", f"--auth_token_file={AUTH}/auth_token"]


class Run:
    def __init__(self, repo: Path, engine: str):
        self.repo = repo
        if engine == "docker":
            from docker_harness import Docker
            self.p = Docker("container")
        else:
            self.p = Podman("container")
        self.prefix = f"convoy-ct-{os.getpid()}"
        self.tag = f"localhost/{self.prefix}:cpu"
        self.tmp = Path(tempfile.mkdtemp(prefix="convoy-container-test-"))
        # Where the server and the simulator listen, and the address the others reach the server at.
        self.ps_port, self.sim_port = self.p.port(50051), self.p.port(41451)
        self.ps = self.p.endpoint("convoy-ps", self.ps_port)

    def name(self, what):
        return f"{self.prefix}-{what}"

    def hardened(self):
        """The security settings of every container: the image's user, read-only root, no capabilities."""
        return ["--read-only", "--cap-drop=all", "--security-opt=no-new-privileges", "--user=10001:10001"]

    def start(self, what, *args, volumes=(), hostname=None, alias=None):
        name = self.p.made_one("container", self.name(what))
        opts = ["run", "-d", "--name", name, *self.hardened(), *self.p.attach(self.net, alias),
                "-v", f"{self.auth}:{AUTH}:ro"]
        for v in volumes:
            opts += ["-v", v]
        # Each its own hostname, the one its agent joins under (docker's host network would give the host's).
        opts += ["--hostname", hostname or name]
        self.p(*opts, self.tag, *args)
        return name

    def status_table(self):
        """convoy_status's one table (shards, then agents), from a container on the network, or None."""
        r = self.p("run", "--rm", *self.hardened(), *self.p.attach(self.net), "-v", f"{self.auth}:{AUTH}:ro",
                   self.tag, "/usr/local/bin/convoy_status", f"--ps={self.ps}", *CLIENT_AUTH, check=False,
                   timeout=120)
        return r.stdout if r.returncode == 0 else None

    def version(self):
        table = self.status_table() or ""
        m = re.search(rf"^0\s+{re.escape(self.ps)}\s+(\d+)\s", table, re.M)
        return int(m.group(1)) if m else -1

    def ps_args(self):
        return ["/usr/local/bin/convoy_ps", f"--port={self.ps_port}", f"--bind={self.p.bind}",
                f"--tls_cert={AUTH}/tls.crt",
                f"--tls_key={AUTH}/tls.key", f"--auth_token_file={AUTH}/auth_token", "--model=compact",
                f"--checkpoint_dir={CKPT}", "--resume", "--checkpoint_every_updates=20",
                "--checkpoint_every_seconds=0", "--keep_checkpoints=3", "--batch_size=16", "--apex_num_agents=2",
                "--shutdown_grace_seconds=10"]

    def agent_args(self, index, sim, *extra):
        return ["/usr/local/bin/convoy_agent", f"--ps={self.ps}", f"--sim={sim}", f"--agent_id=agent-{index}",
                f"--agent_index={index}", f"--seed={index + 1}", *CLIENT_AUTH, "--torch_threads=1", "--min_replay_size=64",
                "--replay_memory_size=2000", "--report_seconds=2", "--max_minutes=4", *extra]

    def main(self):
        figures = self.p.ensure_image(self.repo, self.tag)
        self.net = self.p.network(self.name("net"))
        # The credentials, written by the image's convoy_ps, then given the Secret volume's mode and group.
        self.auth = self.tmp / "auth"
        self.p.write_credentials(self.tag, self.auth)
        volume = self.p.volume(self.name("checkpoints"))
        ckpt_host = self.p.volume_path(volume)

        say("convoy_ps, convoy_sim and two agents, each in a container")
        ps = self.start("ps", *self.ps_args(), volumes=[f"{volume}:{CKPT}"], hostname="convoy-ps", alias="convoy-ps")
        self.p.wait_serving(ps)
        sim = self.start("sim", "/usr/local/bin/convoy_sim", f"--port={self.sim_port}", f"--bind={self.p.bind}",
                         "--seed=2")
        sim_address = f"airsim://{self.p.endpoint(sim, self.sim_port)}"
        agents = [self.start("agent-0", *self.agent_args(0, "embedded")),
                  self.start("agent-1", *self.agent_args(1, sim_address))]
        hostnames = {f"agent-{i}": self.p.inspect(a)["Config"]["Hostname"] for i, a in enumerate(agents)}

        # Security as run: the image's user, no capabilities, a read-only root.
        for c in (ps, sim, *agents):
            st = self.p("exec", c, "cat", "/proc/1/status").stdout
            check(re.search(r"^Uid:\s+10001\s", st, re.M), f"{c} does not run as uid 10001:\n{st}")
            check(re.search(r"^Gid:\s+10001\s", st, re.M), f"{c} does not run as gid 10001")
            check(re.search(r"^CapEff:\s+0+$", st, re.M), f"{c} has capabilities: {re.findall('Cap.*', st)}")
            check(self.p.inspect(c)["HostConfig"]["ReadonlyRootfs"], f"{c}'s root filesystem is writable")
            w = self.p("exec", c, "sh", "-c", "touch /usr/local/bin/x", check=False)
            check(w.returncode != 0 and "Read-only file system" in w.stderr, f"{c} could write its root: {w.stderr}")

        # Joined under their hostnames; the version advances.
        def joined():
            table = self.status_table() or ""
            rows = {m.group(1): m.group(2) for m in re.finditer(r"^(agent-\d)\s+(\S+)\s", table, re.M)}
            return table if all(rows.get(a) == h for a, h in hostnames.items()) else None
        table = wait_for(f"both agents in GetStatus under their hostnames {hostnames}", joined, 180, 3)
        say(f"GetStatus:\n{table}")
        v_first = wait_for("a first applied push", lambda: self.version() > 0 and self.version(), 300, 3)
        v_later = wait_for("the version advancing", lambda: (v := self.version()) >= v_first + 20 and v, 300, 3)
        say(f"version {v_first} -> {v_later}")
        steps = wait_for("agent-1's steps on convoy_sim", lambda: [int(n) for n in re.findall(
            r"^\[agent-1\] .*?(\d+) steps,", self.p.logs(agents[1]), re.M) if int(n) > 0], 120, 3)
        log1 = self.p.logs(agents[1])
        check(re.search(rf" sim {re.escape(sim_address)}$", log1, re.M),
              f"agent-1 does not name its simulator {sim_address}:\n{log1[-2000:]}")
        check(re.search(r" sim embedded$", self.p.logs(agents[0]), re.M), "agent-0 does not name the embedded sim")
        say(f"agent-1 drove convoy_sim over {sim_address}: {steps[-1]} steps so far")

        # A container without the token: refused, never joins.
        stranger = self.start("stranger", "/usr/local/bin/convoy_agent", f"--ps={self.ps}", "--sim=embedded",
                              "--agent_id=stranger", f"--tls_ca={AUTH}/ca.crt", "--tls_server_name=convoy-ps",
                              "--max_minutes=1")
        refused = wait_for("the stranger refused", lambda: re.search(
            r"UNAUTHENTICATED|missing or wrong bearer token", self.p.logs(stranger)) is not None, 90, 2)
        check(refused and "stranger" not in (self.status_table() or ""), "the stranger appears in GetStatus")
        self.p.remove(stranger)
        say("a container without the token: refused (UNAUTHENTICATED), not in GetStatus")

        # SIGTERM to the server's container: drain, final checkpoint, verified here.
        for a in agents:
            self.p("stop", "-t", "30", a)
        self.p("stop", "-t", "60", ps)
        ps_log = self.p.logs(ps)
        check("final checkpoint" in ps_log, f"convoy_ps wrote no final checkpoint on SIGTERM:\n{ps_log[-3000:]}")
        exit_code = self.p.inspect(ps)["State"]["ExitCode"]
        check(exit_code == 0, f"convoy_ps exited {exit_code} on SIGTERM:\n{ps_log[-2000:]}")
        newest = sorted(d for d in ckpt_host.iterdir() if d.name.startswith("ckpt-"))[-1]
        v_final = verify_checkpoint(newest)
        check(v_final >= v_later, f"the final checkpoint is at version {v_final}, below the running {v_later}")
        say(f"SIGTERM: final checkpoint {newest.name} at version {v_final}, every file's SHA-256 verified")

        # A new server container on the same volume resumes from it.
        self.p("rm", ps)
        self.p.made["container"].remove(ps)
        ps2 = self.start("ps-2", *self.ps_args(), volumes=[f"{volume}:{CKPT}"], hostname="convoy-ps",
                         alias="convoy-ps")
        self.p.wait_serving(ps2)
        v_resumed = wait_for("the resumed version in GetStatus", lambda: self.version() >= 0 and self.version(), 60, 2)
        check(v_resumed == v_final, f"the new server is at version {v_resumed}, not the checkpoint's {v_final}")
        agent = self.start("agent-0b", *self.agent_args(0, "embedded"))
        v_on = wait_for("the resumed run advancing", lambda: (v := self.version()) > v_final and v, 300, 3)
        self.p("stop", "-t", "30", agent)
        say(f"--resume in a new container: version {v_resumed}, then {v_on} with an agent")
        print(f"RESULT engine={self.p.program} image_megabytes={figures.get('image_megabytes')} "
              f"image_build_seconds={figures.get('image_build_seconds')} version_final={v_final} "
              f"version_resumed={v_resumed}")


def main():
    engines = {"--engine=podman": "podman", "--engine=docker": "docker"}
    if len(sys.argv) not in (2, 3) or (len(sys.argv) == 3 and sys.argv[2] not in engines):
        print(__doc__)
        return 2
    run = Run(Path(sys.argv[1]).resolve(), engines.get(sys.argv[2] if len(sys.argv) == 3 else "", "podman"))
    return run.p.run_test(run.main, run.tmp)


if __name__ == "__main__":
    sys.exit(main())
