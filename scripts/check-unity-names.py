#!/usr/bin/env python3
"""List namespace-scope constants defined in more than one source of one unity target.

Usage: scripts/check-unity-names.py [ROOT]

Every tree CI builds compiles each library, app and bench in unity batches (CMakeLists.txt,
SANDPOOL_UNITY_LIBS): the sources of one target are concatenated into a few translation
units, so a name a source keeps to itself (an anonymous namespace's or a `static` constant)
must differ from every other source's of that target; which batch a source lands in depends
on the source list, so a clash may hide until a file is added. A tree configured with
SANDPOOL_UNITY_LIBS=OFF never sees it (stop 45's CI failed on `kBatch` in three bench files).

It groups the *.cpp and *.c files by target folder (a library's folder, each of apps/'s,
bench/, each of tests/'s folders) and reads the constants declared at the start of a line
(namespace scope in this tree's style): `constexpr ... kName` or `const ... kName`. It
prints one line per clash, `clash  bench kBatch: cluster_soak.cpp memory.cpp`, then the
count. Exit status 0 when there is none, 1 when there is, 2 on a usage error.
"""

import collections
import os
import re
import sys

LIBRARY_DIRS = ("base", "ipc", "sandbox", "worker_host", "task", "units", "store", "control",
                "schedule", "pool", "config", "metrics", "http", "redis", "service", "bench")
PER_SUBFOLDER_DIRS = ("apps", "tests")  # each folder below is its own target (or targets)
# Not unity targets: each test plugin is a target of one file; fixtures are not built.
SKIPPED_PARTS = {"plugins", "fixture", "unity_fixture"}
# A qualified name (`const Script Submit::kScript = ...`, a class's static member defined out of
# line) is the class's, not the source's: two sources may each define their classes' own.
CONSTANT = re.compile(
    r"^(?:static\s+)?(?:inline\s+)?(?:constexpr|const)\s+[^=;(]*?(?<!:)\b(k[A-Z]\w*)\s*"
    r"(?:[{=\[]|$)")


def target_of(rel):
    parts = rel.split(os.sep)
    if SKIPPED_PARTS.intersection(parts[1:]):
        return None
    if parts[0] in LIBRARY_DIRS:
        return parts[0]
    if parts[0] in PER_SUBFOLDER_DIRS and len(parts) > 2:
        return os.path.join(parts[0], parts[1])
    return None


def main(argv):
    if len(argv) > 2:
        print(__doc__.split("\n\n")[1], file=sys.stderr)
        return 2
    root = argv[1] if len(argv) == 2 else "."
    names = collections.defaultdict(lambda: collections.defaultdict(set))
    for top in LIBRARY_DIRS + PER_SUBFOLDER_DIRS:
        for folder, dirs, files in os.walk(os.path.join(root, top)):
            dirs.sort()
            for f in sorted(files):
                if not f.endswith((".cpp", ".c")):
                    continue
                path = os.path.join(folder, f)
                target = target_of(os.path.relpath(path, root))
                if target is None:
                    continue
                with open(path, encoding="utf-8", errors="replace") as src:
                    for line in src:
                        m = CONSTANT.match(line)
                        if m:
                            names[target][m.group(1)].add(
                                os.path.relpath(path, os.path.join(root, target)))
    clashes = 0
    for target in sorted(names):
        for name in sorted(names[target]):
            files = names[target][name]
            if len(files) > 1:
                clashes += 1
                print(f"clash  {target} {name}: {' '.join(sorted(files))}")
    print(f"clashes: {clashes}")
    return 1 if clashes else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
