#!/usr/bin/env python3
"""The shape of convoy's code, measured: what docs/benchmarks.md ("The shape of the code") quotes.

Prints a table per measure and RESULT key=value lines:
  - the production files a run setting is written in (flag, struct field, RunConfig mapping, launcher);
  - the data members of Agent::Impl;
  - the longest functions of agent/, param_server/ and deploy/local/ (universal-ctags' end lines);
  - hand-written status early returns (`if (!s.ok()) return ...` in one statement).
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

  for d in ["agent/", "param_server/", "deploy/local/"]:
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
  return 0


if __name__ == "__main__":
  sys.exit(main())
