#!/usr/bin/env python3
"""Checks checkpoint directories file by file against their MANIFEST's sizes and SHA-256s.

    verify_checkpoints.py CKPT_DIR...   each a checkpoint (ckpt-*) or a directory of them

Prints one line per checkpoint; exits 1 naming the first that does not verify.
"""
import hashlib
import os
import re
import sys

REQUIRED = {"weights.pt", "target.pt", "optimizer.pt"}
FILE = re.compile(r'files\s*\{\s*name:\s*"([^"]+)"\s*size:\s*(\d+)\s*sha256:\s*"([0-9a-f]+)"\s*\}')


def verify(d):
    text = open(os.path.join(d, "MANIFEST")).read()
    files = FILE.findall(text)
    names = {f[0] for f in files}
    if not names >= REQUIRED:
        return f"lists {sorted(names)}, not all of {sorted(REQUIRED)}"
    for name, size, digest in files:
        data = open(os.path.join(d, name), "rb").read()
        if len(data) != int(size):
            return f"{name} has {len(data)} bytes, the manifest says {size}"
        if hashlib.sha256(data).hexdigest() != digest:
            return f"{name} does not match its SHA-256"
    return None


def main(argv):
    checkpoints = []
    for path in argv[1:]:
        if os.path.exists(os.path.join(path, "MANIFEST")):
            checkpoints.append(path)
        elif not os.path.isdir(path):
            print(f"verify_checkpoints: {path} is not a directory")
            return 1
        else:
            checkpoints += sorted(os.path.join(path, n) for n in os.listdir(path) if n.startswith("ckpt-"))
    if not checkpoints:
        print("verify_checkpoints: no checkpoint found in " + " ".join(argv[1:]))
        return 1
    for d in checkpoints:
        why = verify(d)
        if why:
            print(f"verify_checkpoints: {d}: {why}")
            return 1
    n = len(checkpoints)
    print(f"verify_checkpoints: {n} checkpoint{'s' if n != 1 else ''} match{'es' if n == 1 else ''} "
          f"{'its manifest' if n == 1 else 'their manifests'}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
