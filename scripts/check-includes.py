#!/usr/bin/env python3
"""The include check (docs/architecture.md, "The library map"): the tree keeps the map.

    scripts/check-includes.py [ROOT]    (ROOT: the source tree, default .)

Reads the allowed arrows from ONE place, the map table in ROOT/docs/architecture.md (its rows
`| `folder/` | `target`... | purpose | uses |`), and fails (exit 1, one line per violation)
when, for a folder X of the map:
- a file of X includes `<sandpool/Y/...>` for a library Y that X's row does not name;
- a quoted include of a file of X resolves into another folder's src/ (through the file's own
  folder, X/src or X's folder, or, since no include path of X reaches there, by its path:
  `"core/x.hpp"` while X has no core/x.hpp but pool/src/core/x.hpp exists);
- X's CMakeLists (those under X, not under another row's folder) link a library target of the
  map that X's row does not name, or do not link one it names (the map says exactly what each
  folder uses);
- X's CMakeLists give an include directory of another folder, or export (PUBLIC, INTERFACE)
  any include directory but X's own include/.
"""
import os
import re
import sys

ROW = re.compile(r"^\|\s*`([a-z_/-]+/)`\s*\|(.*)\|(.*)\|(.*)\|\s*$")
ANGLE = re.compile(r'^\s*#\s*include\s*<sandpool/([a-z_]+)/[^>]+>')
QUOTED = re.compile(r'^\s*#\s*include\s*"([^"]+)"')
SOURCE_EXT = (".hpp", ".cpp", ".h", ".c", ".cc", ".ipp")


def fail(msg):
    print(f"check-includes: {msg}")
    return 1


def read_map(root):
    """Returns {folder: (targets, uses)}; folder 'apps/poold', uses library folder names."""
    path = os.path.join(root, "docs", "architecture.md")
    rows = {}
    with open(path, encoding="utf-8") as f:
        for line in f:
            m = ROW.match(line)
            if not m:
                continue
            folder = m.group(1).rstrip("/")
            targets = re.findall(r"`([A-Za-z0-9_:-]+)`", m.group(2))
            uses = [u.strip().strip("`").rstrip("/") for u in m.group(4).split(",")]
            uses = [u for u in uses if u and u not in ("-", "—")]
            rows[folder] = (targets, uses)
    if not rows:
        sys.exit(fail(f"{path}: no library map (rows `| `folder/` | `target` | purpose | uses |`)"))
    return rows


def owner(rows, rel):
    """The row folder owning the path rel (the longest folder prefix), or None."""
    best = None
    for folder in rows:
        if rel == folder or rel.startswith(folder + "/"):
            if best is None or len(folder) > len(best):
                best = folder
    return best


def files_of(root, rows, folder):
    for dirpath, dirnames, filenames in os.walk(os.path.join(root, folder)):
        rel_dir = os.path.relpath(dirpath, root)
        dirnames[:] = [d for d in dirnames
                       if owner(rows, os.path.join(rel_dir, d)) == folder]
        for name in sorted(filenames):
            yield os.path.join(rel_dir, name)


def cmake_calls(text, command):
    for m in re.finditer(command + r"\s*\(([^)]*)\)", text, re.S):
        yield [t for t in re.sub(r"#[^\n]*", "", m.group(1)).split()]


def check_cmake(root, rows, folder, lib_targets, errors):
    targets, uses = rows[folder]
    own = set(targets)
    linked = set()
    for rel in files_of(root, rows, folder):
        if os.path.basename(rel) != "CMakeLists.txt":
            continue
        with open(os.path.join(root, rel), encoding="utf-8") as f:
            text = f.read()
        for args in cmake_calls(text, "target_link_libraries"):
            for tok in args[1:]:
                lib = lib_targets.get(tok)
                if lib is None or tok in own:
                    continue
                linked.add(lib)
                if lib not in uses:
                    errors.append(f"{rel}: {folder} links {tok} ({lib}/), but the map "
                                  f"(docs/architecture.md) gives {folder} no arrow to {lib}")
        for args in cmake_calls(text, "target_include_directories"):
            scope = None
            for tok in args[1:]:
                if tok in ("PUBLIC", "INTERFACE", "PRIVATE", "SYSTEM", "BEFORE", "AFTER"):
                    scope = tok if tok != "SYSTEM" else scope
                    continue
                m = re.search(r"\$\{(?:PROJECT|CMAKE)_SOURCE_DIR\}/([A-Za-z0-9_/.-]+)", tok)
                if m and owner(rows, m.group(1)) not in (folder, None):
                    errors.append(f"{rel}: {folder} takes the include directory {m.group(1)} "
                                  f"of {owner(rows, m.group(1))}/")
                if scope in ("PUBLIC", "INTERFACE") and not re.fullmatch(
                        r"(\$\{CMAKE_CURRENT_SOURCE_DIR\}/)?include|"
                        r"\$<BUILD_INTERFACE:\$\{CMAKE_CURRENT_SOURCE_DIR\}/include>|"
                        r"\$<INSTALL_INTERFACE:[^>]*>", tok):
                    errors.append(f"{rel}: {folder} exports {tok} ({scope}); a library "
                                  f"exports its include/ only")
    for lib in uses:
        if lib not in linked:
            errors.append(f"{folder}/CMakeLists.txt: the map gives {folder} an arrow to {lib}, "
                          f"but no CMakeLists of {folder} links {lib}'s target")


def check_sources(root, rows, folder, errors):
    uses = set(rows[folder][1])
    name = folder
    for rel in files_of(root, rows, folder):
        if not rel.endswith(SOURCE_EXT):
            continue
        with open(os.path.join(root, rel), encoding="utf-8", errors="replace") as f:
            lines = f.read().split("\n")
        for n, line in enumerate(lines, 1):
            m = ANGLE.match(line)
            if m:
                lib = m.group(1)
                if lib != os.path.basename(name) and lib in rows and lib not in uses:
                    errors.append(f"{rel}:{n}: {folder} includes <sandpool/{lib}/...>, but the "
                                  f"map (docs/architecture.md) gives {folder} no arrow to {lib}")
                continue
            m = QUOTED.match(line)
            if not m:
                continue
            inc = m.group(1)
            here = [os.path.join(os.path.dirname(rel), inc), os.path.join(folder, "src", inc),
                    os.path.join(folder, inc)]
            found = [p for p in here if os.path.exists(os.path.join(root, p))]
            if found:
                target = os.path.normpath(found[0])
                o = owner(rows, target)
                if o not in (folder, None):
                    errors.append(f"{rel}:{n}: {folder} includes \"{inc}\", which is "
                                  f"{target}, a file of {o}/")
                continue
            for other in rows:
                if other != folder and os.path.exists(os.path.join(root, other, "src", inc)):
                    errors.append(f"{rel}:{n}: {folder} includes \"{inc}\", a private header "
                                  f"of {other}/ ({other}/src/{inc})")


def main():
    root = sys.argv[1] if len(sys.argv) > 1 else "."
    rows = read_map(root)
    errors = []
    lib_targets = {}
    for folder, (targets, uses) in rows.items():
        if not os.path.isdir(os.path.join(root, folder)):
            errors.append(f"docs/architecture.md: the map names {folder}/, which is no folder")
        for t in targets:
            lib_targets[t] = folder
        for u in uses:
            if u not in rows:
                errors.append(f"docs/architecture.md: {folder} uses {u}, which the map lacks")
    for folder in rows:
        if os.path.isdir(os.path.join(root, folder)):
            check_cmake(root, rows, folder, lib_targets, errors)
            check_sources(root, rows, folder, errors)
    for e in errors:
        fail(e)
    if errors:
        return 1
    print(f"check-includes: {len(rows)} folders keep the map of docs/architecture.md")
    return 0


if __name__ == "__main__":
    sys.exit(main())
