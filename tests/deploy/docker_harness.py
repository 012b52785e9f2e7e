"""A docker of the test's own, for the container test with docker (container_test.py REPO --engine=docker): Debian's
docker.io daemon, dockerd with a containerd of its own, started by the test and stopped at its end.

Nothing of this machine's own docker is read or changed. The daemon's data (its images, the build cache with the
compiler's cache mount, volumes) lives under one state directory ($CONVOY_DOCKER_STATE, default
/var/cache/convoy/docker), kept between runs as a cache as the tests' podman storage is; its sockets, pid files,
exec root and containerd state under /run/convoy-docker, removed at the end; its client's configuration there
too (DOCKER_CONFIG: no credential helper or context of this machine's is asked). The socket is
/run/convoy-docker/docker.sock, never /var/run/docker.sock.

The host's networking is left alone: dockerd runs with --iptables=false --ip6tables=false --bridge=none
--ip-forward=false --ip-masq=false --userland-proxy=false, so it makes no bridge, firewall rule or forwarding,
and the containers share the host's network (--network=host), their servers on 127.0.0.1 at ports picked free.
Before and after, the host's iptables and ip6tables rules, network links and IP forwarding are compared, and
the directories dockerd and containerd's shims make outside the run directory (/run/docker,
/run/containerd/s) are removed where the test made them.

The client is Debian's (docker.io's /usr/bin/docker, put first on the PATH ./convoy image gets, ahead of any other
docker client): Docker 20.10's, whose builds use the daemon's BuildKit (DOCKER_BUILDKIT=1), which the
Dockerfile's cache mount needs. A client from Docker 23 on needs its buildx plugin for that (Debian 13:
docker-buildx). Exit 77 (CTest: skipped), naming why, where not root, without dockerd, containerd, runc, the
client or debootstrap, with under 10 GB free, without the kernel's overlay file system, or where the daemon
does not start. A run killed before its cleanup leaves its daemon and containers: the next run stops that
daemon and removes what it had made.
"""

import fcntl
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

sys.dont_write_bytecode = True  # no __pycache__ in the source tree
sys.path.insert(0, str(Path(__file__).resolve().parent))
from podman_harness import Engine, skip, say  # noqa: E402

RUN_DIR = Path("/run/convoy-docker")
# Made outside the run directory by dockerd (its plugin directory) and by containerd's shims (their sockets).
HOST_DIRS = (Path("/run/docker/plugins"), Path("/run/docker"), Path("/run/containerd/s"), Path("/run/containerd"))


def process_of(pidfile: Path):
    """The pid in pidfile where that process runs and its command line names RUN_DIR (a test's daemon), else None."""
    try:
        pid = int(pidfile.read_text().strip())
        cmdline = Path(f"/proc/{pid}/cmdline").read_bytes().decode(errors="replace")
    except (OSError, ValueError):
        return None
    return pid if str(RUN_DIR) in cmdline else None


def end_process(pid: int, seconds: float) -> bool:
    """SIGTERM, then SIGKILL after `seconds`; True when the process is gone."""
    for sig, wait in ((signal.SIGTERM, seconds), (signal.SIGKILL, 10)):
        try:
            os.kill(pid, sig)
        except ProcessLookupError:
            return True
        deadline = time.monotonic() + wait
        while time.monotonic() < deadline:
            try:
                os.waitpid(pid, os.WNOHANG)  # reaps it where it is this process's child
            except ChildProcessError:
                pass
            if not Path(f"/proc/{pid}").exists() or "State:\tZ" in Path(f"/proc/{pid}/status").read_text():
                return True
            time.sleep(0.2)
    return False


class Docker(Engine):
    program = "docker"
    kinds = ("container", "volume", "image", "tag")
    bind = "127.0.0.1"

    def __init__(self, name: str):
        super().__init__(name)
        if os.geteuid() != 0:
            skip("needs root: docker's daemon and the image's base (debootstrap)")
        for tool in ("dockerd", "containerd", "containerd-shim-runc-v2", "runc", "debootstrap"):
            if shutil.which(tool) is None and not Path("/usr/sbin", tool).exists():
                skip(f"no {tool} on this machine (Debian: apt-get install docker.io debootstrap; ./convoy test "
                     "installs them)")
        self.executable = "/usr/bin/docker" if Path("/usr/bin/docker").exists() else shutil.which("docker")
        if self.executable is None:
            skip("no docker client (Debian 12: docker.io; Debian 13: docker-cli)")
        if "overlay" not in Path("/proc/filesystems").read_text().split():
            skip("the kernel has no overlay file system for docker's overlay2 storage (vfs would copy every layer "
                 "of the image's build)")
        self.state = Path(os.environ.get("CONVOY_DOCKER_STATE", "/var/cache/convoy/docker"))
        self.need_disk()
        self.state.mkdir(parents=True, exist_ok=True)
        self.lock = open(self.state / ".lock", "w")
        try:
            fcntl.flock(self.lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            skip(f"another test's docker daemon holds {self.state}")
        self.env = {**os.environ,
                    "DOCKER_HOST": f"unix://{RUN_DIR}/docker.sock",
                    "DOCKER_CONFIG": str(RUN_DIR / "client"),
                    "PATH": f"{Path(self.executable).parent}:{os.environ.get('PATH', '')}"}
        self.env.pop("DOCKER_CONTEXT", None)
        client = subprocess.run([self.executable, "--version"], capture_output=True, text=True).stdout
        major = int(client.split()[2].split(".")[0]) if client.startswith("Docker version ") else 0
        if major >= 23 and subprocess.run([self.executable, "buildx", "version"], env=self.env,
                                          capture_output=True).returncode != 0:
            skip(f"{self.executable} ({client.strip()}) builds with BuildKit only through its buildx plugin, "
                 "which is missing (Debian: apt-get install docker-buildx)")
        self.daemons = {}  # name -> Popen
        self.made_dirs = []
        self.ports = set()

    @staticmethod
    def host_state():
        """The host's iptables and ip6tables rules (without counters), network links, IP forwarding, and which of
        docker's default places exist (HOST_DIRS are stop()'s to remove)."""
        state = set()
        for tool in ("iptables-save", "ip6tables-save"):
            if shutil.which(tool):
                r = subprocess.run([tool], capture_output=True, text=True, timeout=60)
                state |= {f"{tool} {line.split(' [')[0]}" for line in r.stdout.splitlines()
                          if line and not line.startswith("#")}
        state |= {f"link {name}" for name in os.listdir("/sys/class/net")}
        for f in ("/proc/sys/net/ipv4/ip_forward", "/proc/sys/net/ipv6/conf/all/forwarding"):
            if Path(f).exists():
                state.add(f"{f}={Path(f).read_text().strip()}")
        for p in (Path("/var/run/docker.sock"), Path("/var/lib/docker"), Path("/etc/docker/key.json")):
            if p.exists():
                state.add(f"path {p}")
        return state

    def port(self, default: int) -> int:
        """A port free on 127.0.0.1 now (the containers share the host's network), none picked twice."""
        while True:
            with socket.socket() as s:
                s.bind(("127.0.0.1", 0))
                port = s.getsockname()[1]
            if port not in self.ports:
                self.ports.add(port)
                return port

    def network(self, name: str) -> str:
        """No network of the test's own: the host's (a bridge would need iptables rules on the host)."""
        return "host"

    def attach(self, net: str, alias=None) -> list:
        return ["--network=host"]

    def endpoint(self, name: str, port: int) -> str:
        return f"127.0.0.1:{port}"

    def remove(self, container: str, grace: int = 2, check=True):
        """docker rm -f kills at once (it has no stop timeout)."""
        return self("rm", "-f", container, check=check)

    def untag(self, tag: str):
        self("rmi", tag, check=False)

    def prune(self):
        """The unused images and the whole build cache, the compiler's cache mount with it."""
        self("image", "prune", "--all", "--force", check=False, timeout=900)
        self("builder", "prune", "--all", "--force", check=False, timeout=900)

    def listings(self):
        return (("container", ["ps", "-a", "--format", "{{.Names}}"]),
                ("volume", ["volume", "ls", "--format", "{{.Name}}"]))

    def start(self):
        """containerd, then dockerd on it, each with its own state; skips (77) where either does not start."""
        for name in ("dockerd", "containerd"):  # a killed run's
            pid = process_of(RUN_DIR / "pids" / name)
            if pid:
                say(f"stopping a killed run's {name} (pid {pid})")
                end_process(pid, 60)
        # HOST_DIRS absent now, or made by a killed run (its list in RUN_DIR): removed at the end where empty.
        made = RUN_DIR / "made-dirs"
        self.made_dirs = [d for d in HOST_DIRS if not d.exists()
                          or (made.exists() and str(d) in made.read_text().split())]
        # Where a killed run's containers still run (their shims name RUN_DIR), its containerd state stays for the
        # new containerd to take them over, and dockerd's to stop them; else the run directory starts empty.
        if not self.processes():
            self.unmount()
            shutil.rmtree(RUN_DIR, ignore_errors=True)
        (RUN_DIR / "client").mkdir(parents=True, exist_ok=True)
        (RUN_DIR / "pids").mkdir(exist_ok=True)
        made.write_text("".join(f"{d}\n" for d in self.made_dirs))
        data = self.state / "containerd"
        (RUN_DIR / "containerd.toml").write_text(
            "version = 2\n"
            f'root = "{data}"\n'
            f'state = "{RUN_DIR}/containerd"\n'
            'disabled_plugins = ["io.containerd.grpc.v1.cri"]\n'
            "[grpc]\n"
            f'  address = "{RUN_DIR}/containerd.sock"\n'
            "[ttrpc]\n"
            f'  address = "{RUN_DIR}/containerd.sock.ttrpc"\n'
            '[plugins."io.containerd.internal.v1.opt"]\n'
            f'  path = "{data}/opt"\n')
        # Its identity key where dockerd 20.10 writes one, not /etc/docker/key.json (a setting of the file only).
        (RUN_DIR / "daemon.json").write_text(json.dumps({"deprecated-key-path": f"{RUN_DIR}/key.json"}) + "\n")
        self.launch("containerd", ["containerd", "--config", f"{RUN_DIR}/containerd.toml"],
                    lambda: (RUN_DIR / "containerd.sock").exists())
        self.launch("dockerd", [
            "dockerd", "--config-file", f"{RUN_DIR}/daemon.json", "--data-root", f"{self.state}/data",
            "--exec-root", f"{RUN_DIR}/exec", "--pidfile", f"{RUN_DIR}/dockerd.pid",
            "-H", f"unix://{RUN_DIR}/docker.sock",
            "--containerd", f"{RUN_DIR}/containerd.sock", "--storage-driver", "overlay2",
            "--iptables=false", "--ip6tables=false", "--bridge=none", "--ip-forward=false", "--ip-masq=false",
            "--userland-proxy=false"],
            lambda: self("version", check=False, timeout=30).returncode == 0)
        info = self("info", "--format", "{{.ServerVersion}}, {{.Driver}}, cgroup v{{.CgroupVersion}}").stdout.strip()
        say(f"dockerd {info}: {RUN_DIR}/docker.sock, data under {self.state}")
        # What a killed run made in this daemon: every container and volume in it is a test's, and so is every
        # image tag under localhost/convoy-.
        left = self("ps", "-aq").stdout.split()
        volumes = self("volume", "ls", "-q").stdout.split()
        tags = [t for t in self("image", "ls", "--format", "{{.Repository}}:{{.Tag}}").stdout.split()
                if t.startswith("localhost/convoy-")]
        if left or volumes or tags:
            say(f"removing a killed run's {len(left)} containers, {len(volumes)} volumes and image tags {tags}")
            for c in left:
                self("rm", "-f", c, check=False)
            for v in volumes:
                self("volume", "rm", "-f", v, check=False)
            for t in tags:
                self("rmi", t, check=False)

    def launch(self, name: str, argv: list, ready):
        """Starts a daemon, its output in RUN_DIR/<name>.log, and waits until ready(); skips where it exits or is
        not ready within 60 s (the log's end in the reason)."""
        log = open(RUN_DIR / f"{name}.log", "w")
        p = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT,
                             start_new_session=True)  # a terminal's Ctrl-C reaches the test, which stops it
        self.daemons[name] = p
        (RUN_DIR / "pids" / name).write_text(f"{p.pid}\n")
        deadline = time.monotonic() + 60
        while not ready():
            if p.poll() is not None or time.monotonic() > deadline:
                how = f"exited {p.returncode}" if p.poll() is not None else "not ready in 60 s"
                tail = (RUN_DIR / f"{name}.log").read_text(errors="replace")[-1500:]
                self.stop()
                skip(f"{name} did not start ({how}):\n{tail}")
            time.sleep(0.3)

    @staticmethod
    def processes() -> list:
        """The processes whose command line names RUN_DIR (the daemons, containerd's shims), as 'process PID: ...'."""
        found = []
        for pid in filter(str.isdigit, os.listdir("/proc")):
            try:
                cmdline = Path(f"/proc/{pid}/cmdline").read_bytes().decode(errors="replace").replace("\0", " ")
            except OSError:
                continue
            if str(RUN_DIR) in cmdline and int(pid) != os.getpid():
                found.append(f"process {pid}: {cmdline[:120]}")
        return found

    def mounts(self) -> list:
        """What is mounted under RUN_DIR or the state directory, deepest first."""
        mounts = [line.split()[1] for line in Path("/proc/mounts").read_text().splitlines()]
        return sorted((m for m in mounts if m.startswith((f"{RUN_DIR}/", f"{self.state}/"))), reverse=True)

    def unmount(self):
        """Unmounts what the daemons left mounted, with none of them running: dockerd leaves its default network
        namespace's bind mount under RUN_DIR, and where it fails to start, its data root's bind mount."""
        for m in self.mounts():
            subprocess.run(["umount", m], capture_output=True)

    def stop(self) -> list:
        """Stops dockerd (its containers with it), then containerd; unmounts and removes RUN_DIR and the
        directories of HOST_DIRS the run made. What is left: processes, mounts."""
        left = []
        for name, seconds in (("dockerd", 60), ("containerd", 30)):
            p = self.daemons.pop(name, None)
            if p is not None and p.poll() is None and not end_process(p.pid, seconds):
                left.append(f"{name} (pid {p.pid})")
            if p is not None:
                p.wait(timeout=10)
        if left:
            return left
        left += self.processes()
        self.unmount()
        left += [f"mount {m}" for m in self.mounts()]
        if not left:
            shutil.rmtree(RUN_DIR, ignore_errors=True)
            for d in self.made_dirs:
                try:
                    d.rmdir()
                except FileNotFoundError:
                    pass
                except OSError as e:
                    left.append(f"directory {d} ({e.strerror})")
        return left
