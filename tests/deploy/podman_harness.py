"""A container engine of the tests' own, for the container and `kube play` tests: Engine, what those tests ask of an
engine (run, inspect, logs, volumes, the image ./convoy image builds, the credentials, the cleanup), and Podman,
the one engine here; tests/deploy/docker_harness.py has the other, Docker, with a daemon of the test's own.

The podman's configuration, storage and networks live under one state directory ($CONVOY_PODMAN_STATE, default
/var/cache/convoy/podman), so nothing of this machine's own podman (its images, containers, networks,
configuration) is read or changed, and the base images and build layers stay there between runs as a cache.
Everything a test makes (containers, pods, networks, volumes, the image it tags) is recorded and removed by
cleanup(), also when the test fails or is stopped by SIGTERM, SIGINT or SIGHUP.

The configuration is what these hosts need: runc (crun refuses hybrid cgroups), ulimits no higher than this
process's hard limit (podman asks for nofile 1048576 by default), netavark with aardvark-dns for the networks'
name resolution, and no registry at all (images are built or imported, never pulled).
"""

import hashlib
import json
import os
import re
import resource
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

SKIP = 77  # CTest's SKIP_RETURN_CODE for the deploy tests
CACHE_GB = 20  # the most an engine's storage keeps between runs


def skip(why: str):
    print(f"SKIPPED: {why}", flush=True)
    sys.exit(SKIP)


def say(msg: str):
    print(f"[{time.strftime('%H:%M:%S')}] {msg}", flush=True)


class Failed(Exception):
    pass


def check(cond, msg):
    if not cond:
        raise Failed(msg)


def wait_for(what, fn, seconds, step=1.0):
    """fn() until it returns something true, at most `seconds`; its value, or Failed naming `what`."""
    deadline = time.monotonic() + seconds
    while True:
        value = fn()
        if value:
            return value
        if time.monotonic() > deadline:
            raise Failed(f"{what}: not within {seconds} s")
        time.sleep(step)


def manifest_of(ckpt_dir: Path):
    """(version, [(name, size, sha256)]) of a checkpoint's MANIFEST (protobuf text format)."""
    text = (ckpt_dir / "MANIFEST").read_text()
    version = int(re.search(r"^version: (\d+)$", text, re.M).group(1))
    files = re.findall(r'files \{\s*name: "([^"]+)"\s*size: (\d+)\s*sha256: "([0-9a-f]{64})"\s*\}', text)
    return version, [(n, int(s), h) for n, s, h in files]


def verify_checkpoint(ckpt_dir: Path):
    """The checkpoint's version, after checking every file its manifest lists against its size and SHA-256."""
    version, files = manifest_of(ckpt_dir)
    check(files, f"{ckpt_dir}/MANIFEST lists no files")
    for name, size, sha in files:
        data = (ckpt_dir / name).read_bytes()
        check(len(data) == size, f"{ckpt_dir}/{name}: {len(data)} bytes, the manifest says {size}")
        check(hashlib.sha256(data).hexdigest() == sha, f"{ckpt_dir}/{name} fails its SHA-256 check")
    return version


class Stopped(Exception):
    """SIGTERM, SIGINT or SIGHUP during a test: it fails, after the cleanup."""


class Engine:
    """What the container tests ask of an engine: a subclass names its program and environment (self.program,
    self.env, self.state: its storage) and how its containers reach each other (network, attach, endpoint, port,
    bind)."""
    program = ""
    executable = None  # the program's path, where not the one PATH finds
    kinds = ("container", "pod", "network", "volume", "image", "tag")

    def __init__(self, name: str):
        """name: the test's, used in what it makes (containers, networks, volumes, tags) and the run directory."""
        self.name = name
        self.made = {kind: [] for kind in self.kinds}
        self.host_before = None

    def need_disk(self, gb: int = 10):
        """Skips where the state directory's file system (or, on a fresh machine, its nearest existing parent's)
        has less than gb free: the image build needs that much."""
        existing = next(p for p in (self.state, *self.state.parents) if p.exists())
        free_gb = shutil.disk_usage(existing).free / 2**30
        if free_gb < gb:
            skip(f"only {free_gb:.0f} GB free for {self.state}; the image build needs {gb}")

    def host_state(self):
        """What of the host the engine must leave as it found it (a set; compared before and after)."""
        return set()

    def __call__(self, *args, check=True, timeout=600, capture=True, input_text=None, cwd=None):
        """The engine's program with ARGS in the tests' own configuration, run in `cwd` (default: the test's own);
        the CompletedProcess (text), raising on failure if check."""
        r = subprocess.run([self.executable or self.program, *args], env=self.env, capture_output=capture, text=True, timeout=timeout,
                           input=input_text, cwd=cwd)
        if check and r.returncode != 0:
            raise RuntimeError(f"{self.program} {' '.join(args)} exited {r.returncode}: {(r.stderr or '')[-2000:]}")
        return r

    def made_one(self, kind: str, name: str) -> str:
        self.made[kind].append(name)
        return name

    # How the test's containers reach each other: on a network of the test's own, each its own address and
    # name (Podman); or on the host's own network, loopback and ports picked free (Docker).
    bind = "0.0.0.0"  # where a server in a container listens

    def port(self, default: int) -> int:
        """The port a server in a container listens on."""
        return default

    def attach(self, net: str, alias=None) -> list:
        """The run options that put a container on `net` (as `alias` too, where given)."""
        opts = ["--network", net]
        return opts + ["--network-alias", alias] if alias else opts

    def endpoint(self, name: str, port: int) -> str:
        """host:port of the server in the container named (or aliased) `name`, as the others reach it."""
        return f"{name}:{port}"

    def volume(self, name: str, uid: int = 10001, gid: int = 10001) -> str:
        """A named volume owned by uid:gid (as a Kubernetes fsGroup would make it writable)."""
        self("volume", "rm", "-f", name, check=False)
        self("volume", "create", name)
        os.chown(self.volume_path(name), uid, gid)
        return self.made_one("volume", name)

    def volume_path(self, name: str) -> Path:
        return Path(self("volume", "inspect", "--format", "{{.Mountpoint}}", name).stdout.strip())

    def logs(self, container: str) -> str:
        r = self("logs", container, check=False)
        return (r.stdout or "") + (r.stderr or "")

    def inspect(self, container: str) -> dict:
        r = self("inspect", container, check=False)
        if r.returncode != 0:
            return {}
        data = json.loads(r.stdout)
        return data[0] if data else {}

    def remove(self, container: str, grace: int = 2, check=True):
        """Removes a container, stopping it first (SIGKILL after `grace` s) where it runs."""
        return self("rm", "-f", "-t", str(grace), container, check=check)

    def image_exists(self, image: str) -> bool:
        return self("image", "inspect", image, check=False).returncode == 0

    def untag(self, tag: str):
        self("untag", tag, tag, check=False)

    def wait_serving(self, container: str, seconds: float = 120):
        """Until convoy_ps in the container logs that it serves TLS with the token; Failed if it exits first."""
        def serving():
            log = self.logs(container)
            if "(TLS, bearer token)" in log:
                return True
            if self.inspect(container).get("State", {}).get("Running") is False:
                raise Failed(f"{container} exited:\n{log[-3000:]}")
            return False
        wait_for(f"{container} serving TLS with the token", serving, seconds)

    def prune(self):
        """Removes the storage's unused images (the cache starts over)."""
        self("image", "prune", "--all", "--force", check=False, timeout=900)

    def storage_bytes(self) -> int:
        used = subprocess.run(["du", "-sb", str(self.state)], capture_output=True, text=True)
        return int(used.stdout.split()[0]) if used.returncode == 0 else 0

    def ensure_image(self, repo: Path, tag: str) -> dict:
        """The image built by ./convoy image (the base made from this machine's apt sources where this storage has
        none), tagged `tag`; returns its build's RESULT figures. Under CTest the fixture `deploy: container image
        built` has built it once for the run as $CONVOY_TEST_IMAGE (podman's): then that image is tagged `tag`
        instead."""
        shared = os.environ.get("CONVOY_TEST_IMAGE")
        if shared and self.image_exists(shared):
            self("tag", shared, tag)
            self.made_one("tag", tag)
            size = int(self("image", "inspect", "--format", "{{.Size}}", shared).stdout.strip())
            say(f"the run's image {shared}, tagged {tag}")
            return {"image_megabytes": str(size // 1000000), "image_build_seconds": "(the fixture's)"}
        # The storage keeps build layers as a cache; past CACHE_GB it starts over (the base images and the
        # package layer are made again, from the tarball and the archive).
        if self.storage_bytes() > CACHE_GB * 2**30:
            say(f"the tests' {self.program} storage holds over {CACHE_GB} GB: removing its unused images")
            self.prune()
        say(f"./convoy image --tag={tag} ({self.program}, the tests' storage)")
        start = time.monotonic()
        # In a process group of its own, ended whole where the test stops (the engine's build with it).
        build = subprocess.Popen([str(repo / "convoy"), "image", f"--tag={tag}", f"--engine={self.program}"],
                                 env=self.env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                                 start_new_session=True)
        self.made_one("image", tag)
        try:
            out = build.communicate(timeout=3000)[0]
        except BaseException:
            os.killpg(build.pid, signal.SIGKILL)
            build.wait()
            raise
        if build.returncode != 0:
            raise RuntimeError(f"./convoy image exited {build.returncode}:\n{out[-6000:]}")
        figures = {}
        for line in out.splitlines():
            if line.startswith("RESULT "):
                figures.update(kv.split("=", 1) for kv in line.split()[1:])
        say(f"image {tag}: {figures} ({time.monotonic() - start:.0f} s)")
        return figures

    def write_credentials(self, image: str, directory: Path):
        """convoy_ps --write_credentials of the image into directory, the files given what a Kubernetes Secret
        volume with defaultMode 0440 and fsGroup 10001 gives: readable by group 10001, nobody else."""
        directory.mkdir(parents=True, exist_ok=True)
        self("run", "--rm", "--network=none", "--user=0:0", "-v", f"{directory}:/out", image,
             "/usr/local/bin/convoy_ps", "--write_credentials=/out", "--credentials_server_name=convoy-ps")
        for f in directory.iterdir():
            os.chown(f, 0, 10001)
            f.chmod(0o440)

    def start(self):
        """What the engine needs before the test's first command (Docker: its daemon)."""

    def stop(self) -> list:
        """Undoes start(); what it could not stop, as cleanup() names what is left."""
        return []

    def run_test(self, body, tmp: Path) -> int:
        """start(), body(); then, whatever happened (SIGTERM, SIGINT and SIGHUP included), removes what the test
        made and tmp, and stop(). The exit code: 0 when body returned and nothing was left behind; 1 otherwise
        (with the made containers' logs on failure)."""
        def stopped(signum, frame):
            raise Stopped(f"stopped by {signal.Signals(signum).name}")
        signals = (signal.SIGTERM, signal.SIGINT, signal.SIGHUP)
        for s in signals:
            signal.signal(s, stopped)
        code = 0
        try:
            if self.host_before is None:
                self.host_before = self.host_state()
            self.start()
            body()
            say("PASSED")
        except Failed as e:
            print(f"FAILED: {e}", flush=True)
            code = 1
        except Exception as e:  # the engine itself failing fails the test, after the cleanup
            print(f"FAILED: {type(e).__name__}: {e}", flush=True)
            code = 1
        finally:
            for s in signals:  # the cleanup runs to its end
                signal.signal(s, signal.SIG_IGN)
            if code:
                for c in self.made["container"]:
                    print(f"--- {c}:\n{self.logs(c)[-2500:]}")
            left = self.cleanup()
            shutil.rmtree(tmp, ignore_errors=True)
            if left:
                print(f"FAILED: left behind: {left}")
                code = 1
            else:
                say(f"removed every container, {'pod, network, ' if self.made.get('pod') is not None else ''}"
                    "volume and image tag it made")
        return code

    def listings(self):
        """(kind, the engine's arguments listing the names of that kind) for the kinds cleanup() checks."""
        return (("container", ["ps", "-a", "--format", "{{.Names}}"]),
                ("pod", ["pod", "ps", "--format", "{{.Name}}"]),
                ("volume", ["volume", "ls", "--format", "{{.Name}}"]),
                ("network", ["network", "ls", "--format", "{{.Name}}"]))

    def cleanup(self):
        """Removes what the test made, newest kind first, then stop(); then asserts none of it is left."""
        for c in self.made["container"]:
            self.remove(c, 5, check=False)
        for p in self.made.get("pod", []):
            self("pod", "rm", "-f", "-t", "5", p, check=False)
        for v in self.made["volume"]:
            self("volume", "rm", "-f", v, check=False)
        for n in self.made.get("network", []):
            self("network", "rm", "-f", n, check=False)
        for i in self.made["tag"]:
            self.untag(i)
        for i in self.made["image"]:
            self("rmi", "-f", i, check=False)
        left = []
        for kind, listing in self.listings():
            present = set(self(*listing, check=False).stdout.split())
            left += [f"{kind} {x}" for x in self.made[kind] if x in present]
        for i in self.made["image"] + self.made["tag"]:
            if self.image_exists(i):
                left.append(f"image {i}")
        left += self.stop()
        if self.host_before is not None:
            left += self.host_changes(self.host_before, self.host_state())
        return left

    @staticmethod
    def host_changes(before: set, after: set) -> list:
        """What the test changed on the host, of host_state(): what it added, and what of it is gone."""
        return [f"host {what}" for what in sorted(after - before)] + \
               [f"host {what}: gone" for what in sorted(before - after)]


class Podman(Engine):
    program = "podman"

    def __init__(self, name: str):
        super().__init__(name)
        if os.geteuid() != 0:
            skip("needs root: podman's bridge networks and the image's base (debootstrap)")
        # netavark sets up the bridge networks with iptables, which it does not depend on.
        for tool in ("podman", "runc", "debootstrap", "catatonit", "iptables"):
            if shutil.which(tool) is None and not Path("/usr/sbin", tool).exists():
                skip(f"no {tool} on this machine (Debian: apt-get install podman runc netavark aardvark-dns catatonit "
                     "iptables debootstrap; ./convoy test installs them)")
        if not Path("/usr/lib/podman/netavark").exists() and shutil.which("netavark") is None:
            skip("no netavark (Debian: apt-get install netavark aardvark-dns)")
        self.state = Path(os.environ.get("CONVOY_PODMAN_STATE", "/var/cache/convoy/podman"))
        self.need_disk()
        conf = self.state / "conf"
        conf.mkdir(parents=True, exist_ok=True)
        nofile = resource.getrlimit(resource.RLIMIT_NOFILE)[1]
        if nofile == resource.RLIM_INFINITY:
            nofile = 1048576
        run_root = Path("/run/convoy-podman")
        (conf / "containers.conf").write_text(
            "[containers]\n"
            f'default_ulimits = ["nofile={nofile}:{nofile}", "nproc=32768:32768"]\n'
            "[engine]\n"
            'runtime = "runc"\n'
            f'tmp_dir = "{run_root}/libpod"\n'
            "[network]\n"
            'network_backend = "netavark"\n'
            f'network_config_dir = "{self.state}/networks"\n')
        (conf / "storage.conf").write_text(
            "[storage]\n"
            'driver = "overlay"\n'
            f'graphroot = "{self.state}/storage"\n'
            f'runroot = "{run_root}/storage"\n')
        (conf / "registries.conf").write_text("unqualified-search-registries = []\n")
        # TMPDIR: where buildah keeps the Dockerfile's cache mounts (default /var/tmp), in the state directory.
        (self.state / "tmp").mkdir(exist_ok=True)
        self.env = {**os.environ,
                    "CONTAINERS_CONF": str(conf / "containers.conf"),
                    "CONTAINERS_STORAGE_CONF": str(conf / "storage.conf"),
                    "CONTAINERS_REGISTRIES_CONF": str(conf / "registries.conf"),
                    "TMPDIR": str(self.state / "tmp")}
        self.host_before = self.host_state()

    def host_state(self):
        """The host's iptables rules and chains podman's networking would add (none, for internal networks)."""
        if shutil.which("iptables-save") is None:
            return set()
        r = subprocess.run(["iptables-save"], capture_output=True, text=True, timeout=60)
        return {f"firewall rule {line}" for line in r.stdout.splitlines()
                if "NETAVARK" in line.upper() or "podman" in line}

    @staticmethod
    def host_changes(before: set, after: set) -> list:
        """The netavark and podman rules the test added."""
        return [f"host {what}" for what in sorted(after - before)]

    def network(self, name: str) -> str:
        """A bridge network of the test's own, internal (no route out, no NAT rule), with name resolution."""
        self("network", "rm", "-f", name, check=False)
        self("network", "create", "--internal", name)
        return self.made_one("network", name)

    def image_exists(self, image: str) -> bool:
        return self("image", "exists", image, check=False).returncode == 0

    def storage_bytes(self) -> int:
        used = subprocess.run(["du", "-sb", str(self.state / "storage")], capture_output=True, text=True)
        return int(used.stdout.split()[0]) if used.returncode == 0 else 0


def main(argv):
    """The CTest fixture around the container tests: `build REPO TAG` builds the run's image once (printing its
    RESULT line), `remove TAG` removes it at the end of the run."""
    if len(argv) == 3 and argv[0] == "build":
        p = Podman("image")
        figures = p.ensure_image(Path(argv[1]), argv[2])
        print("RESULT " + " ".join(f"{k}={v}" for k, v in figures.items()))
        return 0
    if len(argv) == 2 and argv[0] == "remove":
        p = Podman("image")
        p.made_one("image", argv[1])
        left = p.cleanup()
        print(f"left behind: {left}" if left else f"removed {argv[1]}")
        return 1 if left else 0
    print(main.__doc__)
    return 2


if __name__ == "__main__":
    sys.dont_write_bytecode = True
    sys.exit(main(sys.argv[1:]))
