#!/usr/bin/env python3
"""Rewrites include lines to the library folders of issue 35 (docs/architecture.md).

    scripts/rewrite-includes.py [FILE...]   (no FILE: every tracked C/C++ source and header)

Run from the repository root. Idempotent: a line that already resolves is left alone, so it
can be rerun on a merged tree for the files other branches added.

- `#include <sandpool/REST>` where REST is not already `<lib>/...`: rewritten to
  `<sandpool/LIB/REST>` for the one library LIB with `LIB/include/sandpool/LIB/REST`
  (`<sandpool/status.hpp>` -> `<sandpool/base/status.hpp>`, `<sandpool/ops/tasks.hpp>` ->
  `<sandpool/control/ops/tasks.hpp>`). `<sandpool/plugin.h>`, the plugin ABI, stays.
- `#include "SUB/NAME"` for one of the old private folders SUB (core/, poold/, ...): left
  alone while `LIB/src/SUB/NAME` exists; rewritten to `<sandpool/LIB/NAME>` when the header
  moved to `LIB/include/sandpool/LIB/NAME`.

Then run clang-format -i on the files it names (it prints each file it changed): the include
blocks are re-sorted, nothing else moves.
"""
import os
import re
import subprocess
import sys

# The old private folder -> the library that owns it now.
SUB_LIB = {
    "retry": "store",
    "core": "pool",
    "supervision": "pool",
    "config": "config",
    "control": "control",
    "metrics": "metrics",
    "http": "http",
    "redis": "redis",
    "poold": "service",
    "schedule": "schedule",
}

ANGLE = re.compile(r'^(\s*#\s*include\s*)<sandpool/([^>]+)>(.*)$')
QUOTED = re.compile(r'^(\s*#\s*include\s*)"([a-z_]+)/([^"/]+)"(.*)$')


def libraries():
    return sorted(d for d in os.listdir(".")
                  if os.path.isdir(os.path.join(d, "include", "sandpool", d)))


def rewrite_line(line, libs):
    m = ANGLE.match(line)
    if m:
        head, rest, tail = m.groups()
        first = rest.split("/", 1)[0]
        if first in libs and os.path.exists(os.path.join(first, "include", "sandpool", rest)):
            return line
        found = [lib for lib in libs
                 if os.path.exists(os.path.join(lib, "include", "sandpool", lib, rest))]
        if len(found) > 1:
            sys.exit(f"<sandpool/{rest}> is ambiguous: {found}")
        if found:
            return f"{head}<sandpool/{found[0]}/{rest}>{tail}"
        return line
    m = QUOTED.match(line)
    if m:
        head, sub, name, tail = m.groups()
        lib = SUB_LIB.get(sub)
        if lib is None or os.path.exists(os.path.join(lib, "src", sub, name)):
            return line
        if os.path.exists(os.path.join(lib, "include", "sandpool", lib, name)):
            return f"{head}<sandpool/{lib}/{name}>{tail}"
    return line


def main():
    libs = libraries()
    files = sys.argv[1:]
    if not files:
        out = subprocess.run(["git", "ls-files", "*.hpp", "*.cpp", "*.h", "*.c"],
                             capture_output=True, text=True, check=True).stdout
        files = out.split()
    for path in files:
        with open(path, encoding="utf-8") as f:
            lines = f.read().split("\n")
        new = [rewrite_line(line, libs) for line in lines]
        if new != lines:
            with open(path, "w", encoding="utf-8") as f:
                f.write("\n".join(new))
            print(path)


if __name__ == "__main__":
    main()
