#!/usr/bin/env python3
"""The shape of convoy's code, measured: what docs/benchmarks.md ("The shape of the code") quotes.

Prints a table per measure and RESULT key=value lines:
  - the production files a run setting is written in (flag, struct field, RunConfig mapping, launcher);
  - the data members of Agent::Impl;
  - the longest functions of agent/, param_server/ and deploy/local/ (universal-ctags' end lines);
  - hand-written status early returns (`if (!s.ok()) return ...` in one statement);
  - the owners of the agent's sync state: classes that hold an outage state, a rejoin pacer or a
    backlog, or that call Rejoin/Reconnected on a session;
  - includes that point up: a lower room's file including a higher room's, or anything but the
    agent's composition root (agent.cc, convoy_agent.cc) including agent/agent.h;
  - agent settings outside a table: ABSL_FLAG definitions, written out, of AgentOptions' fields;
  - the places a setting's range is written (literal RealRange/IntRange/UintRange names);
  - the types that carry a push's answer (five or more of its fields);
  - functions over 80 lines in product code (bench/ and tests/ aside);
  - flags declared by hand (ABSL_FLAG written out, not generated from a settings table), bench/ aside,
    and the library files (no main()) that declare flags;
  - metric names written in product C++ as string literals, and those written more than once;
  - the places the agent's state is copied field by field: functions of agent/ and deploy/local/
    that name four or more of AgentStats' counters (env_steps, train_steps, episodes, epsilon, ...);
  - the formats of saved state (protobuf, the replay memory's own binary header, msgpack, LibTorch's
    archive); the replay memory's raw arrays, deflated under a protobuf header, are not one of their own;
  - lines of CMake and of ./convoy.
Usage: bench/code_shape.py [--repo DIR] [--longest N]
"""
import argparse
import json
import os
import re
import subprocess
import sys

PRODUCTION_DIRS = ["common", "param_server", "agent", "simulator_bridge", "deploy", "bench"]
SOURCE_ENDINGS = (".cc", ".h", ".py", ".sh", ".yaml", ".sbatch")
SETTINGS = ["n_step", "target_update_frequency", "batch_size", "gamma", "mirror_augmentation"]


def production_files(repo):
  out = subprocess.run(["git", "-C", repo, "ls-files", *PRODUCTION_DIRS], check=True,
                       capture_output=True, text=True).stdout.split()
  return [f for f in out if f.endswith(SOURCE_ENDINGS) and not f.startswith("bench/code_shape")
          and "_test" not in f]


def read(repo, path):
  with open(os.path.join(repo, path), encoding="utf-8", errors="replace") as f:
    return f.read()


def setting_files(repo, files):
  rows = {}
  for name in SETTINGS:
    pattern = re.compile(r"\b" + name + r"\b")
    rows[name] = sorted(f for f in files if pattern.search(read(repo, f)))
  return rows


def impl_members(repo):
  text = read(repo, "agent/agent.cc")
  start = text.find("class Agent::Impl")
  if start < 0:
    start = text.find("struct Agent::Impl")
  if start < 0:
    return []
  depth, i, body_start = 0, text.index("{", start), None
  body_start = i
  while i < len(text):
    if text[i] == "{":
      depth += 1
    elif text[i] == "}":
      depth -= 1
      if depth == 0:
        break
    i += 1
  body = text[body_start + 1:i]
  # Top-level statements only: drop nested bodies (member functions, lambdas).
  flat, depth = [], 0
  for ch in body:
    if ch == "{":
      depth += 1
      flat.append(";" if depth == 1 else "")
    elif ch == "}":
      depth -= 1
      continue
    elif depth == 0:
      flat.append(ch)
  members = []
  for stmt in "".join(flat).split(";"):
    stmt = re.sub(r"//[^\n]*", "", stmt).strip()
    m = re.search(r"\b([a-z][a-z0-9_]*_)\s*(=[^=].*|\{.*|\(.*\))?$", stmt, re.S)
    if m and "(" not in stmt.split(m.group(1))[0]:
      members.append(m.group(1))
  return members


def longest_functions(repo, files, dirs, count):
  sources = [f for f in files if f.endswith((".cc", ".h")) and f.split("/")[0] + "/" in dirs
             or any(f.startswith(d) for d in dirs) and f.endswith((".cc", ".h"))]
  out = subprocess.run(["ctags", "--output-format=json", "--fields=+ne", "--c++-kinds=f",
                        "--language-force=C++", "-f", "-", *sources], cwd=repo, check=True,
                       capture_output=True, text=True).stdout
  rows = []
  for line in out.splitlines():
    tag = json.loads(line)
    if "end" in tag and "line" in tag:
      scope = tag.get("scope", "")
      name = (scope + "::" if scope else "") + tag["name"]
      rows.append((tag["end"] - tag["line"] + 1, tag["path"], tag["line"], name))
  rows.sort(reverse=True)
  return rows[:count]


RETURN_PATTERNS = [
    # if (!s.ok()) return s;   if (!s.ok()) return s.status();
    re.compile(r"if \(!\s*[\w.\->()]+\.ok\(\)\)\s*(\{\s*)?return\s+[\w.\->]+(\.status\(\))?;"),
    # if (absl::Status s = ...; !s.ok()) return s;
    re.compile(r"if \([^;]*;\s*!\s*\w+\.ok\(\)\)\s*(\{\s*)?return\s+\w+;"),
]


def status_returns(repo, files):
  total, per_file = 0, {}
  for f in files:
    if not f.endswith((".cc", ".h")):
      continue
    text = re.sub(r"\s+", " ", read(repo, f))
    n = sum(len(p.findall(text)) for p in RETURN_PATTERNS)
    if n:
      per_file[f] = n
      total += n
  return total, per_file


def ctags(repo, sources, kinds):
  out = subprocess.run(["ctags", "--output-format=json", "--fields=+netK", "--c++-kinds=" + kinds,
                        "--language-force=C++", "-f", "-", *sources], cwd=repo, check=True,
                       capture_output=True, text=True).stdout
  return [json.loads(line) for line in out.splitlines()]


def cc_sources(files, prefix):
  return [f for f in files if f.startswith(prefix) and f.endswith((".cc", ".h"))]


SYNC_STATE_TYPES = re.compile(r"\b(SyncState|RejoinPacer|OutageBacklog|State)\b")
SYNC_CALLS = re.compile(r"(->|\.)\s*(Reconnected|Rejoin)\s*\(")


def sync_owners(repo, files):
  """Classes holding sync state, and classes deciding an outage's transitions by calls."""
  sources = cc_sources(files, "agent/")
  tags = ctags(repo, sources, "+fm")
  owners = {}
  for tag in tags:
    # A nested struct's members belong to the class it is nested in (ParameterServerSync::Shard
    # is ParameterServerSync's per-server state, not an owner of its own).
    scope = tag.get("scope", "").replace("convoy::", "").split("::")[0]
    if tag["kind"] == "member" and SYNC_STATE_TYPES.search(tag.get("typeref", "")):
      owners.setdefault(scope, set()).add("holds " + tag["typeref"].replace("typename:", ""))
  texts = {f: read(repo, f).splitlines() for f in sources}
  for tag in tags:
    if tag["kind"] != "function" or "end" not in tag:
      continue
    body = "\n".join(texts[tag["path"]][tag["line"]:tag["end"]])
    # A member function's owner is its class.
    scope = tag.get("scope", "").replace("convoy::", "").split("::")[0] or tag["path"]
    for m in SYNC_CALLS.finditer(body):
      owners.setdefault(scope, set()).add("calls " + m.group(2))
  # Option structs and the pacer's own options are not owners.
  return {k: v for k, v in owners.items() if not k.endswith("Options") and k}


def includes_up(repo, files):
  """The includes that break common/rooms.txt's room order (tests/include_rule.py, the suite's check)."""
  sys.path.insert(0, os.path.join(repo, "tests"))
  import include_rule  # pylint: disable=import-outside-toplevel
  rooms = include_rule.Rooms(read(repo, "common/rooms.txt"))
  sources = {f: read(repo, f) for f in files if f.endswith((".cc", ".h"))}
  return [(f, n, target) for f, n, target, _ in include_rule.violations(rooms, sources)]


def room_namespaces(repo, files):
  """The namespaces each top-level folder's sources open ({folder: {namespace}}): a room in the root `convoy`
  shares its names with every other room there."""
  opened = {}
  for f in files:
    if f.endswith((".cc", ".h")) and "/" in f and not f.startswith(("tests/", "proto/")):
      for m in re.finditer(r"^\s*namespace\s+(convoy(?:::\w+)?)\s*\{", read(repo, f), re.M):
        if m.group(1) != "convoy::v1":
          opened.setdefault(f.split("/")[0], set()).add(m.group(1))
  return opened


def agent_option_fields(repo, also=()):
  """AgentOptions' fields (and, with `also`, those of the named structs in the files given)."""
  wanted = [("agent/agent.h", "AgentOptions"), *also]
  names = set()
  for path, struct in wanted:
    if os.path.exists(os.path.join(repo, path)):
      names |= {t["name"] for t in ctags(repo, [path], "+m")
                if t["kind"] == "member" and t.get("scope", "").endswith(struct)}
  return names


def settings_outside_table(repo, files):
  fields = agent_option_fields(repo)
  rows = []
  for f in files:
    if not f.endswith(".cc"):
      continue
    for m in re.finditer(r"ABSL_FLAG\(\s*[^,]+,\s*(\w+)\s*,", read(repo, f)):
      if m.group(1) in fields:
        rows.append((f, m.group(1)))
  return rows


def range_places(repo, files):
  places = {}
  for f in files:
    if not f.endswith((".cc", ".h")):
      continue
    for m in re.finditer(r"\b(Real|Int|Uint)Range\(\s*\"(\w+)\"", read(repo, f)):
      places.setdefault(m.group(2), []).append(f)
  return places


ANSWER_FIELDS = {"accepted", "reason", "version", "staleness", "epsilon", "target_version",
                 "incarnation", "repeated", "step_pushes"}


def answer_types(repo, files):
  sources = [f for f in files if f.endswith((".cc", ".h"))]
  fields = {}
  for tag in ctags(repo, sources, "+m"):
    if tag["kind"] == "member" and tag["name"] in ANSWER_FIELDS:
      fields.setdefault(tag.get("scope", "").replace("convoy::", ""), set()).add(tag["name"])
  proto = subprocess.run(["git", "-C", repo, "ls-files", "proto"], check=True, capture_output=True,
                         text=True).stdout.split()
  for f in proto:
    for m in re.finditer(r"message (\w+) \{([^}]*)\}", read(repo, f)):
      # Fields kept only to read older files ([deprecated = true]) are not the type's.
      names = set(re.findall(r"\b(\w+) = \d+;", m.group(2)))
      fields[m.group(1) + " (proto)"] = names & ANSWER_FIELDS
  return sorted(k for k, v in fields.items() if len(v) >= 5)


def functions_over(repo, files, limit):
  sources = [f for f in files if f.endswith((".cc", ".h")) and not f.startswith("bench/")]
  rows = []
  for tag in ctags(repo, sources, "f"):
    if "end" in tag and tag["end"] - tag["line"] + 1 > limit:
      scope = tag.get("scope", "")
      rows.append((tag["end"] - tag["line"] + 1, tag["path"], tag["line"],
                   (scope + "::" if scope else "") + tag["name"]))
  return sorted(rows, reverse=True)


FLAG = re.compile(r"^\s*ABSL_FLAG\(\s*[^,]+,\s*(\w+)", re.M)


def flags_by_hand(repo, files):
  """ABSL_FLAG definitions written out (a settings table's macro generates the rest), bench/ aside;
  and the files without a main() that declare any."""
  sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "tests"))
  import flags_check  # pylint: disable=import-outside-toplevel
  rows, libraries = [], set()
  for f in files:
    if not f.endswith((".cc", ".h")) or f.startswith("bench/"):
      continue
    text = read(repo, f)
    # A line of a settings macro's definition is a table's, not a flag of its own; a line of any other
    # macro is a flag by hand (tests/flags_check.py's rule, read from this script's own tree so that
    # an older --repo is counted the same way).
    macros = flags_check.macro_lines(text.split("\n"))
    names = []
    for m in FLAG.finditer(text):
      macro = macros[text.count("\n", 0, m.start())]
      if f != flags_check.SETTINGS_TABLE and not (
          macro and flags_check.SETTINGS_MACRO.match(f"#define {macro}(")):
        names.append(m.group(1))
    rows += [(f, n) for n in names]
    if names and "int main(" not in text:
      libraries.add(f)
  return rows, sorted(libraries)


METRIC_LITERAL = re.compile(r'"(convoy_(?:ps|agent|sim)_[a-z0-9_]*[a-z0-9])"')


def metric_literals(repo, files):
  """Metric names written as string literals in product C++: name -> the files, once per literal."""
  places = {}
  for f in files:
    if f.endswith((".cc", ".h")) and not f.startswith("bench/"):
      for m in METRIC_LITERAL.finditer(read(repo, f)):
        places.setdefault(m.group(1), []).append(f)
  return places


def state_copies(repo, files):
  """Functions of agent/ and deploy/local/ that name four or more of AgentStats' fields: the places the
  agent's state is copied (or read) field by field."""
  fields = {t["name"] for t in ctags(repo, ["agent/agent_stats.h"], "+m")
            if t["kind"] == "member" and t.get("scope", "").endswith("AgentStats")} - {"time"}
  sources = [f for f in files if f.endswith(".cc") and f.startswith(("agent/", "deploy/local/"))]
  texts = {f: read(repo, f).splitlines() for f in sources}
  rows = []
  for tag in ctags(repo, sources, "f"):
    if "end" not in tag:
      continue
    body = "\n".join(texts[tag["path"]][tag["line"] - 1:tag["end"]])
    named = {f for f in fields if re.search(r"\.\s*" + f + r"\b", body)}
    if len(named) >= 4:
      rows.append((len(named), tag["path"], tag.get("scope", "").replace("convoy::", "") + "::" + tag["name"]))
  return sorted(rows, reverse=True)


SAVE_FORMATS = [
    ("protobuf messages",
     re.compile(r"SerializeToString|SerializeToOstream|SerializeToArray|AppendToString|TextFormat::Print")),
    # The hand-written header of options and counters (CONVOYRM format 2); format 3's header is protobuf.
    ("the replay memory's own binary (CONVOYRM)", re.compile(r"\bEncodeHeader\(|\bDecodeHeader\(")),
    ("msgpack", re.compile(r"msgpack::pack\b|msgpack::packer")),
    ("LibTorch's archive", re.compile(r"OutputArchive|torch::save\(")),
]


def saved_state_formats(repo, files):
  """The formats a checkpoint (the server's, the replay memory's, the agent's) is written in."""
  found = {}
  for f in files:
    if not f.endswith(".cc") or f.startswith("bench/") or not re.search(r"checkpoint|replay|agent", f):
      continue
    text = read(repo, f)
    for name, pattern in SAVE_FORMATS:
      if pattern.search(text):
        found.setdefault(name, []).append(f)
  return found


def line_count(repo, paths):
  return sum(read(repo, p).count("\n") for p in paths)


def main():
  parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
  parser.add_argument("--repo", default=os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
  parser.add_argument("--longest", type=int, default=5)
  args = parser.parse_args()
  files = production_files(args.repo)

  print("## Files a run setting is written in (production code)")
  for name, where in setting_files(args.repo, files).items():
    print(f"{name:28s} {len(where):3d}  {' '.join(where)}")
    print(f"RESULT setting_files_{name}={len(where)}")

  members = impl_members(args.repo)
  print(f"\n## Agent::Impl data members: {len(members)}")
  print(" ".join(members))
  print(f"RESULT agent_impl_members={len(members)}")

  dirs = sorted({os.path.dirname(f) + "/" for f in files if f.endswith((".cc", ".h"))})
  for d in dirs:
    print(f"\n## Longest functions of {d}")
    rows = longest_functions(args.repo, files, [d], args.longest)
    for lines, path, line, name in rows:
      print(f"{lines:4d}  {path}:{line}  {name}")
    key = d.strip("/").replace("/", "_")
    if rows:
      print(f"RESULT longest_function_{key}={rows[0][0]}")

  total, per_file = status_returns(args.repo, files)
  print(f"\n## Hand-written status early returns: {total}")
  for f, n in sorted(per_file.items(), key=lambda kv: -kv[1])[:8]:
    print(f"{n:4d}  {f}")
  print(f"RESULT status_early_returns={total}")

  owners = sync_owners(args.repo, files)
  print(f"\n## Owners of the agent's sync state: {len(owners)}")
  for name, why in sorted(owners.items()):
    print(f"  {name}: {', '.join(sorted(why))}")
  print(f"RESULT sync_state_owners={len(owners)}")

  up = includes_up(args.repo, files)
  print(f"\n## Includes that point up: {len(up)}")
  for f, n, target in up:
    print(f"  {f}:{n} -> {target}")
  print(f"RESULT includes_up={len(up)}")

  opened = room_namespaces(args.repo, files)
  shared = sorted(room for room, names in opened.items() if room != "common" and "convoy" in names)
  print(f"\n## Top-level rooms (common/ aside) with files in the root namespace `convoy`: {len(shared)}")
  for room in sorted(opened):
    print(f"  {room}/: {', '.join(sorted(opened[room]))}")
  print(f"RESULT rooms_in_root_namespace={len(shared)}")

  outside = settings_outside_table(args.repo, files)
  names = sorted({name for _, name in outside})
  print(f"\n## Agent settings written out as flags: {len(names)} settings, {len(outside)} flags")
  for name in names:
    print(f"  {name:28s} {' '.join(f for f, n in outside if n == name)}")
  print(f"RESULT settings_outside_table={len(names)}")
  print(f"RESULT setting_flags_outside_table={len(outside)}")

  places = range_places(args.repo, files)
  settings = agent_option_fields(args.repo, [("deploy/local/local_cluster.h", "LocalClusterOptions")])
  repeated = {k: v for k, v in places.items() if len(v) > 1 and k in settings}
  print(f"\n## Ranges of agent and launcher settings written more than once: {len(repeated)}")
  for name, where in sorted(repeated.items(), key=lambda kv: -len(kv[1])):
    print(f"  {name:28s} {len(where)}  {' '.join(where)}")
  print(f"RESULT ranges_written_twice={len(repeated)}")
  print(f"RESULT range_places_learning_rate={len(places.get('learning_rate', []))}")

  types = answer_types(args.repo, files)
  print(f"\n## Types that carry a push's answer: {len(types)}")
  print("  " + " ".join(types))
  print(f"RESULT push_answer_types={len(types)}")

  long_functions = functions_over(args.repo, files, 80)
  print(f"\n## Functions over 80 lines in product code (bench/ aside): {len(long_functions)}")
  for lines, path, line, name in long_functions:
    print(f"{lines:4d}  {path}:{line}  {name}")
  print(f"RESULT functions_over_80={len(long_functions)}")

  hand, libraries = flags_by_hand(args.repo, files)
  print(f"\n## Flags declared by hand (bench/ aside): {len(hand)}, in {len(libraries)} library files")
  for f in libraries:
    print(f"  library: {f}  {' '.join(n for g, n in hand if g == f)}")
  print(f"RESULT flags_by_hand={len(hand)}")
  print(f"RESULT flag_library_files={len(libraries)}")

  literals = metric_literals(args.repo, files)
  twice = {k: v for k, v in literals.items() if len(v) > 1}
  print(f"\n## Metric names as string literals in product C++: {len(literals)} names, "
        f"{sum(len(v) for v in literals.values())} literals; written more than once: {len(twice)}")
  for name, where in sorted(twice.items()):
    print(f"  {name:48s} {len(where)}  {' '.join(sorted(set(where)))}")
  print(f"RESULT metric_literals={sum(len(v) for v in literals.values())}")
  print(f"RESULT metric_names_written_twice={len(twice)}")

  copies = state_copies(args.repo, files)
  print(f"\n## Places the agent's state is copied field by field: {len(copies)}")
  for n, path, name in copies:
    print(f"{n:4d}  {path}  {name}")
  print(f"RESULT state_copy_places={len(copies)}")

  formats = saved_state_formats(args.repo, files)
  print(f"\n## Formats of saved state: {len(formats)}")
  for name, where in formats.items():
    print(f"  {name}: {' '.join(sorted(set(where)))}")
  print(f"RESULT saved_state_formats={len(formats)}")

  cmake = [f for f in subprocess.run(["git", "-C", args.repo, "ls-files"], check=True,
                                     capture_output=True, text=True).stdout.split()
           if f.endswith(("CMakeLists.txt", ".cmake"))]
  print(f"\n## Lines: CMake {line_count(args.repo, cmake)}, ./convoy "
        f"{line_count(args.repo, ['convoy'])}")
  print(f"RESULT cmake_lines={line_count(args.repo, cmake)}")
  print(f"RESULT convoy_script_lines={line_count(args.repo, ['convoy'])}")
  return 0


if __name__ == "__main__":
  sys.exit(main())
