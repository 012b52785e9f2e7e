#!/usr/bin/env python3
"""convoy's locking, checked by the compiler: Clang's thread-safety analysis over every product source
that declares or takes an annotated lock, with the build's own flags (compile_commands.json).

    thread_safety_check.py CLANGXX BUILD_DIR SOURCE_DIR

Every ABSL_GUARDED_BY member must be touched with its lock held, every part's method that requires the
writer's lock (ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu)) called with it, every ABSL_LOCKS_EXCLUDED function
called without it, and locks declared in an order (ABSL_ACQUIRED_BEFORE / _AFTER) taken in that order
(-Wthread-safety-beta): any such warning fails. First it shows the check is live: a probe that breaks
each of those rules must draw a warning for each. Exit 0: clean; 1: a warning, or a probe not caught;
77: no clang (skipped).
"""
import concurrent.futures
import json
import os
import re
import shlex
import subprocess
import sys
import tempfile

# The product's folders (tests/ and bench/ aside). A source is checked, with every header it includes,
# when it or its own header (foo.cc's foo.h) carries a thread-safety annotation.
PRODUCT_DIRS = ["agent", "common", "deploy", "param_server", "simulator_bridge"]
ANNOTATION = re.compile(r"\bABSL_(PT_)?GUARDED_BY\b|\bABSL_(EXCLUSIVE|SHARED)_LOCKS_REQUIRED\b|"
                        r"\bABSL_LOCKS_EXCLUDED\b|\bABSL_ACQUIRED_(BEFORE|AFTER)\b")

# The parameter server's sources that take its locks: the list must keep every one of them, so that a
# rename cannot drop one from the check unnoticed.
REQUIRED = [
    "param_server/core/admission.cc",
    "param_server/core/agent_registry.cc",
    "param_server/core/apply_counters.cc",
    "param_server/core/apply_log.cc",
    "param_server/core/checkpoint_trigger.cc",
    "param_server/service/followed_pushes.cc",
    "param_server/service/health_service.cc",
    "param_server/core/parameter_server.cc",
    "param_server/service/pull_cache.cc",
    "param_server/service/pull_reactor.cc",
    "param_server/core/push_buffer_pool.cc",
    "param_server/core/push_queue.cc",
    "param_server/service/push_reactor.cc",
    "param_server/service/service.cc",
    "param_server/core/target_network.cc",
    "param_server/core/weight_store.cc",
]


def annotated_sources(root):
    """Every product .cc under root that carries, or whose own header carries, an annotation."""
    found = []
    for top in PRODUCT_DIRS:
        for folder, _, files in os.walk(os.path.join(root, top)):
            for name in files:
                if not name.endswith(".cc"):
                    continue
                source = os.path.join(folder, name)
                texts = [source, source[:-3] + ".h"]
                if any(os.path.exists(t) and ANNOTATION.search(open(t, encoding="utf-8").read())
                       for t in texts):
                    found.append(os.path.relpath(source, root))
    return sorted(found)

ANALYSIS = ["-fsyntax-only", "-Wthread-safety", "-Wthread-safety-beta", "-Werror=thread-safety",
            "-Werror=thread-safety-beta", "-Wno-unknown-warning-option"]

# Each rule broken once; every one must be reported.
PROBE = r"""
#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "param_server/core/server_part.h"

class Probe {
 public:
  void WrongOrder() {
    absl::MutexLock leaf(&leaf_);
    absl::MutexLock writer(&writer_);  // probe: order
  }
  void Unguarded() { ++count_; }  // probe: guarded
  void PartWithoutLock(convoy::ps::ServerPart& part) {
    part.Applied(writer_, convoy::ps::AppliedStep());  // probe: requires
  }
  void Excluded() ABSL_LOCKS_EXCLUDED(writer_) {}
  void ExcludedWhileHeld() {
    absl::MutexLock writer(&writer_);
    Excluded();  // probe: excluded
  }

 private:
  absl::Mutex writer_ ABSL_ACQUIRED_BEFORE(leaf_);
  absl::Mutex leaf_;
  int count_ ABSL_GUARDED_BY(writer_) = 0;
};
"""
PROBES = ["order", "guarded", "requires", "excluded"]


def flags_for(entry):
    """The build's include paths, defines and language flags for one source (no output, no -Werror of
    its own, no warnings set for another compiler)."""
    words = shlex.split(entry["command"]) if "command" in entry else list(entry["arguments"])
    while words and not words[0].startswith("-"):
        words.pop(0)  # The launcher and the compiler.
    flags, skip = [], False
    for word in words:
        if skip:
            skip = False
            continue
        if word in ("-o", "-c"):
            skip = word == "-o"
            continue
        if word == entry["file"] or word.startswith("-W") or word.startswith("-O"):
            continue
        flags.append(word)
    return flags


def run(clangxx, flags, source, cwd):
    result = subprocess.run([clangxx, *flags, *ANALYSIS, source], cwd=cwd, capture_output=True,
                            text=True)
    return result.returncode, result.stderr


def main():
    if len(sys.argv) != 4:
        sys.exit(__doc__)
    clangxx, build, root = sys.argv[1:]
    if not clangxx or not os.path.exists(clangxx):
        print("thread_safety_check: SKIP: no clang++ (Debian's clang package) to run the analysis")
        return 77
    entries = {os.path.relpath(e["file"], root): e
               for e in json.load(open(os.path.join(build, "compile_commands.json")))}
    sources = annotated_sources(root)
    dropped = [s for s in REQUIRED if s not in sources]
    if dropped:
        print(f"thread_safety_check: FAIL: {dropped} carry no annotation any more, or are gone")
        return 1
    missing = [s for s in sources if s not in entries]
    if missing:
        print(f"thread_safety_check: FAIL: {missing} not in {build}/compile_commands.json")
        return 1

    # The probe, with parameter_server.cc's flags: each broken rule must be reported.
    base = entries["param_server/core/parameter_server.cc"]
    with tempfile.NamedTemporaryFile("w", suffix=".cc", dir=build, delete=False) as probe:
        probe.write(PROBE)
    try:
        code, err = run(clangxx, flags_for(base), probe.name, base["directory"])
    finally:
        os.unlink(probe.name)
    lines = PROBE.splitlines()
    for name in PROBES:
        line = next(i for i, text in enumerate(lines, 1) if f"probe: {name}" in text)
        if f"{os.path.basename(probe.name)}:{line}:" not in err:
            print(f"thread_safety_check: FAIL: the analysis is not live: the probe's '{name}' rule "
                  f"(line {line}) drew no warning\n{err}")
            return 1
    print(f"thread_safety_check: the analysis is live: {clangxx} reports each of {PROBES} in a probe")

    with concurrent.futures.ThreadPoolExecutor(max_workers=os.cpu_count() or 2) as pool:
        results = list(pool.map(lambda s: (s, *run(clangxx, flags_for(entries[s]), entries[s]["file"],
                                                   entries[s]["directory"])), sources))
    failed = [(s, err) for s, code, err in results if code != 0]
    for source, err in failed:
        print(f"thread_safety_check: FAIL: {source}\n{err}")
    if failed:
        return 1
    print(f"thread_safety_check: {len(sources)} annotated sources ({', '.join(PRODUCT_DIRS)}) and the "
          f"headers they include pass Clang's thread-safety analysis, lock order included")
    return 0


if __name__ == "__main__":
    sys.exit(main())
