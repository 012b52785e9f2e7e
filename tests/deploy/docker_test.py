#!/usr/bin/env python3
"""deploy/docker/Dockerfile against ./convoy, without a Docker engine.

    docker_test.py REPO_ROOT BIN_DIR

The build stage installs what `./convoy packages` lists for its release and builds with `./convoy build`; the runtime
stage is a slim Debian that installs what deploy/docker/runtime-packages.sh finds the binaries load (run here on
the binaries just built: Debian packages apt knows, none of them a -dev package), carries the binaries where the
Kubernetes manifests run them and the map where the binaries look, and runs them as the manifests' user.
"""

import os
import re
import shlex
import subprocess
import sys
import tempfile
from pathlib import Path

sys.dont_write_bytecode = True  # no __pycache__ in the source tree
sys.path.insert(0, str(Path(__file__).resolve().parent))
from deploy_checks import Checks, die  # noqa: E402


def convoy_packages(repo: Path, release: str):
    """./convoy packages on a machine of the given Debian release (an os-release file naming it)."""
    with tempfile.NamedTemporaryFile("w", suffix="-os-release") as os_release:
        os_release.write(f"ID=debian\nVERSION_CODENAME={release}\n")
        os_release.flush()
        out = subprocess.run([str(repo.resolve() / "convoy"), "packages"], capture_output=True, text=True, check=True,
                             env={**os.environ, "CONVOY_OS_RELEASE": os_release.name})
    if not out.stdout.split():
        die(f"./convoy packages listed nothing for {release}")
    if out.stderr:
        die(f"./convoy packages warned for {release}: {out.stderr}")
    return out.stdout.split()


def instructions(dockerfile: Path):
    """(stage index, INSTRUCTION, arguments) with continuation lines joined and comments dropped."""
    out, stage, pending = [], -1, ""
    for raw in dockerfile.read_text().splitlines():
        line = raw.strip()
        if not pending and (not line or line.startswith("#")):
            continue
        if line.startswith("#"):
            continue
        if line.endswith("\\"):
            pending += line[:-1] + " "
            continue
        line, pending = pending + line, ""
        word, _, rest = line.partition(" ")
        word = word.upper()
        if word == "FROM":
            stage += 1
        out.append((stage, word, rest.strip()))
    return out


def apt_install_lists(run: str):
    """The package names of each `apt-get install ... <names>` in a RUN line (up to the next && or ;)."""
    lists = []
    for seg in re.split(r"&&|;|\|\|", run):
        words = shlex.split(seg)
        if "apt-get" in words and "install" in words:
            after = words[words.index("install") + 1:]
            lists.append([w for w in after if not w.startswith("-")])
    return lists


def main():
    if len(sys.argv) != 3:
        die(__doc__)
    repo, bindir = Path(sys.argv[1]), Path(sys.argv[2])
    t = Checks("docker")
    dockerfile = repo / "deploy" / "docker" / "Dockerfile"
    ins = instructions(dockerfile)
    froms = [(s, rest) for s, w, rest in ins if w == "FROM"]
    t.check(len(froms) == 2, f"expected two stages (build, runtime), found {len(froms)}")
    if len(froms) != 2:
        return t.finish()
    t.check(froms[0][1].endswith("AS build") and froms[1][1].endswith("AS runtime"), "stages are not build, runtime")
    # Both bases are arguments, the runtime's a slim Debian of the build's release by default.
    t.check(froms[0][1].startswith("${DEBIAN_IMAGE}") and froms[1][1].startswith("${RUNTIME_IMAGE}"),
            f"the stages' bases are not the arguments DEBIAN_IMAGE and RUNTIME_IMAGE: {froms}")
    t.check(any(w == "ARG" and rest == "RUNTIME_IMAGE=debian:bookworm-slim" for s, w, rest in ins),
            "the runtime stage's base is not debian:bookworm-slim by default")
    build_runs = [rest for s, w, rest in ins if s == 0 and w == "RUN"]
    runtime_runs = [rest for s, w, rest in ins if s == 1 and w == "RUN"]

    # The CUDA development base of the build stage.
    t.check(any("cuda-keyring" in r and "$CUDA_TOOLKIT" in r for r in build_runs),
            "the build stage does not install NVIDIA's CUDA toolkit")
    # The builder names the CUDA repository's keyring and the LibTorch: the file names no host.
    for arg in ("CUDA_TOOLKIT", "CUDA_KEYRING_URL", "LIBTORCH_URL"):
        t.check(any(w == "ARG" and rest == f"{arg}=" for s, w, rest in ins), f"{arg} does not default to empty")
    t.check(any("$CUDA_KEYRING_URL" in r and "exit 1" in r for r in build_runs),
            "CUDA_TOOLKIT without CUDA_KEYRING_URL does not fail the build")
    t.check(re.search(r"https?://", dockerfile.read_text()) is None, "the Dockerfile names a host")

    # Packages: ./convoy's own list for the base image's release, read from ./convoy itself in the build.
    release = "bookworm"
    t.check(any(w == "ARG" and rest == f"DEBIAN_IMAGE=debian:{release}" for s, w, rest in ins),
            f"the build stage's base is not debian:{release} by default")
    copies_convoy = [i for i, (s, w, rest) in enumerate(ins)
                     if s == 0 and w == "COPY" and rest == "convoy /src/convoy"]
    installs = [i for i, (s, w, rest) in enumerate(ins)
                if s == 0 and w == "RUN" and "apt-get install" in rest and "$(/src/convoy packages)" in rest]
    t.check(len(installs) == 1, "the build stage does not install $(/src/convoy packages) in one RUN")
    t.check(bool(copies_convoy) and bool(installs) and copies_convoy[0] < installs[0],
            "./convoy is not copied into the build stage before its packages are installed")
    t.check(not [lst for r in build_runs for lst in apt_install_lists(r) if "libtorch-dev" in lst],
            "the Dockerfile lists the build packages itself instead of asking ./convoy")
    wanted = convoy_packages(repo, release)
    t.check("libtorch-dev" in wanted and "clang-14" in wanted, f"./convoy packages for {release}: {wanted}")
    print(f"build packages: {len(wanted)} from ./convoy packages on {release}")

    # Build commands: the script's own build, into the directory the later steps copy from.
    convoy = (repo / "convoy").read_text()
    t.check(re.search(r"^build\(\) \{", convoy, re.M) is not None and 'BUILD_DIR="${CONVOY_BUILD_DIR:-' in convoy,
            "./convoy has no build() honouring CONVOY_BUILD_DIR")
    build_cmd = [r for r in build_runs if "./convoy build" in r]
    if t.check(len(build_cmd) == 1, "the build stage does not build with ./convoy build"):
        m = re.search(r"CONVOY_BUILD_DIR=(\S+) \./convoy build", build_cmd[0])
        t.check(m is not None, "the build stage does not set CONVOY_BUILD_DIR for ./convoy build")
        build_dir = m.group(1) if m else ""
        t.check(any(w == "WORKDIR" and build_dir.startswith(rest + "/") for s, w, rest in ins if s == 0),
                f"the build directory {build_dir} is not under the WORKDIR")
    t.check(not any(re.search(r"\bcmake (-S|-B|--build)", r) for r in build_runs),
            "the Dockerfile configures or builds with cmake itself, not through ./convoy build")

    # Only the image's binaries are built (the target convoy_image) and installed (the component image); the
    # manifests' commands find them in /usr/local/bin.
    build_run = build_cmd[0] if build_cmd else ""
    t.check("./convoy build --target convoy_image" in build_run, "the build stage builds more than convoy_image")
    t.check("cmake --install build --component image --prefix /out" in build_run,
            "the build stage does not install the component image into /out")
    deploy_cmake = (repo / "deploy" / "CMakeLists.txt").read_text()
    m = re.search(r"set\(convoy_image_binaries ([^)]*)\)", deploy_cmake)
    targets = m.group(1).split() if m else []
    t.check("install(TARGETS ${convoy_image_binaries} RUNTIME DESTINATION bin COMPONENT image)" in deploy_cmake
            and "add_dependencies(convoy_image ${convoy_image_binaries})" in deploy_cmake,
            "deploy/CMakeLists.txt does not install and build convoy_image_binaries as the image component")
    shipped = ["convoy_agent" if b == "convoy_agent_main" else b for b in targets]
    t.check({"convoy_ps", "convoy_agent", "convoy_sim", "convoy_status"} <= set(shipped), f"binaries shipped: {shipped}")
    cmake_text = "\n".join(cm.read_text() for cm in repo.rglob("CMakeLists.txt")
                           if not cm.relative_to(repo).parts[0].startswith("build"))
    for b in targets:
        t.check(re.search(rf"(add_executable\(|foreach\(binary .*){b}\b", cmake_text) is not None,
                f"the image ships the target {b}, which the CMake build does not define")
    copies = [rest for s, w, rest in ins if s == 1 and w == "COPY"]
    t.check("--from=build /out/bin/ /usr/local/bin/" in copies, "the runtime stage does not put the binaries in /usr/local/bin")
    manifests = "\n".join(p.read_text() for p in (repo / "deploy" / "kubernetes").rglob("*.yaml"))
    for cmd in set(re.findall(r"/usr/local/bin/(\w+)", manifests)):
        t.check(cmd in shipped, f"the manifests run /usr/local/bin/{cmd}, which the image lacks")
    # The map: the binaries look for share/convoy/maps/neighborhood beside their bin directory.
    t.check((repo / "simulator_bridge" / "maps" / "neighborhood" / "road_lines.txt").exists(), "no bundled map")
    t.check(re.search(r"install\(DIRECTORY \$\{PROJECT_SOURCE_DIR\}/simulator_bridge/maps/neighborhood "
                      r"DESTINATION share/convoy/maps\s+COMPONENT image\)", deploy_cmake) is not None
            and "--from=build /out/share/convoy/ /usr/local/share/convoy/" in copies,
            "the image does not carry the map to /usr/local/share/convoy/maps/neighborhood")
    # The user and the port the manifests expect.
    users = set(re.findall(r"runAsUser: (\d+)", manifests))
    groups = set(re.findall(r"runAsGroup: (\d+)", manifests))
    user = next((rest for s, w, rest in ins if s == 1 and w == "USER"), "")
    t.check(len(users) == 1 and len(groups) == 1 and user == f"{min(users)}:{min(groups)}",
            f"the image's USER {user} is not the manifests' runAsUser:runAsGroup {users}:{groups}")
    # The group USER names exists in the image, as the user does.
    uid, _, gid = user.partition(":")
    t.check(any(f"groupadd --system --gid {gid} convoy" in r and f"useradd --system --uid {uid} --gid convoy" in r
                for r in runtime_runs), f"the runtime stage does not make user {uid} in group {gid}")
    t.check(any(w == "EXPOSE" and rest == "50051" for s, w, rest in ins if s == 1), "the image does not expose 50051")

    # Runtime packages: derived from the binaries, none for building, all known to apt.
    t.check(any("runtime-packages.sh /out/bin/*" in r for r in build_runs), "runtime packages are not derived")
    t.check(any(r.startswith("/tmp/install-runtime.sh /tmp/packages.txt") for r in runtime_runs),
            "the runtime stage does not install the derived packages with install-runtime.sh")
    installer = (repo / "deploy" / "docker" / "install-runtime.sh").read_text()
    t.check('xargs -a "$listed" apt-get install -y --no-install-recommends' in installer
            and "dpkg --purge --force-depends" in installer,
            "install-runtime.sh does not install the listed packages and remove what the binaries do not load")
    t.check(any("ldd" in r and "not found" in r and "exit 1" in r for r in runtime_runs),
            "the runtime stage does not check that every binary's libraries resolve")
    t.check(not any(p in r for r in runtime_runs for p in ("build-essential", "-dev ", "cmake")),
            "the runtime stage installs build tools")
    r = subprocess.run([str(repo / "deploy" / "docker" / "runtime-packages.sh"), str(bindir / "convoy_ps"),
                        str(bindir / "convoy_agent")], capture_output=True, text=True, timeout=300)
    pkgs = r.stdout.split()
    if t.check(r.returncode == 0 and pkgs, f"runtime-packages.sh failed: {r.stderr[-1000:]}"):
        for must in ("libc6", "libstdc++6"):
            t.check(must in pkgs, f"runtime-packages.sh missed {must}")
        t.check(any(p.startswith("libtorch") for p in pkgs) or "not from a package" in r.stderr,
                "runtime-packages.sh found no LibTorch")
        t.check(not [p for p in pkgs if p.endswith("-dev")], f"runtime packages include -dev ones: {pkgs}")
        lists = subprocess.run(["apt-cache", "show", "--no-all-versions", "libc6"], capture_output=True, text=True)
        if lists.returncode != 0:
            print("apt has no package lists here (apt-get update): runtime packages not looked up")
        else:
            known = subprocess.run(["apt-cache", "show", "--no-all-versions", *pkgs], capture_output=True, text=True)
            t.check(known.returncode == 0, f"apt does not know some runtime packages: {known.stderr[-500:]}")
        print(f"runtime packages for these binaries: {len(pkgs)}")

    ignore = (repo / ".dockerignore").read_text().split()
    t.check({"build", "build-*", ".git"} <= set(ignore), ".dockerignore does not keep build trees and .git out")
    return t.finish()


if __name__ == "__main__":
    sys.exit(main())
