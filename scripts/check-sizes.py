#!/usr/bin/env python3
"""List sandpool's product C++ files over a line limit and functions over another.

Usage: scripts/check-sizes.py [--max-file-lines N] [--max-function-lines N] [ROOT]

Scans the product folders (the library folders of docs/architecture.md and apps/; never tests,
bench, fuzz, plugins or third-party code) for *.cpp, *.cc, *.hpp and *.h files and prints
one line per finding:

    file  metrics/src/metrics/http_server.cpp 923
    func  http/src/http/dashboard.cpp:108 Dashboard::install 351

then the counts. Exit status: 0 when nothing is over a limit, 1 when something is, 2 on a
usage error. A file's size is its physical line count; a function's is the number of lines
from the first line of its signature to the line of its closing brace, both included.

How functions are found (a heuristic that is right on this tree, not a C++ parser):
comments, string and character literals (raw strings included) and preprocessor lines are
blanked first, then braces are matched. A `{` at declaration scope (file, namespace, class
or `extern "C"` level, outside parentheses) opens a function body when the text since the
previous `;`, `{` or `}` at that scope, its head, has a parameter list and no `=` outside
brackets (an `operator=` excepted); a constructor's member-initializer list
(`: a_{x}, b_(y)`) is skipped to reach the body. A head naming `namespace`, `class`,
`struct`, `union` or `enum` (after any `template <...>`) opens a scope whose members are
scanned in turn. Any other `{` there (a braced initializer of a variable) is skipped whole.
What it does not handle: a function whose head is produced by a macro, a `{` or `}` that a
macro hides or unbalances, a lambda or a function-local class counted apart from the
function around it (they count towards it), and a lambda assigned to a variable at
namespace scope (not counted at all).
"""

import argparse
import os
import re
import sys

PRODUCT_DIRS = ("base", "ipc", "sandbox", "worker_host", "task", "units", "store", "control",
                "schedule", "pool", "config", "metrics", "http", "redis", "service", "apps")
SOURCE_SUFFIXES = (".cpp", ".cc", ".hpp", ".h")
EXCLUDED_PARTS = {"tests", "test", "bench", "fuzz", "third_party", "third-party", "external"}


def blank_non_code(text):
    """Returns text with comments, literals and preprocessor lines replaced by spaces.

    Newlines are kept, so offsets and line numbers stay those of the original.
    """
    out = list(text)
    i, n = 0, len(text)
    at_line_start = True

    def blank(start, end):
        for k in range(start, end):
            if out[k] != "\n":
                out[k] = " "

    while i < n:
        c = text[i]
        if c == "\n":
            at_line_start = True
            i += 1
            continue
        if at_line_start and c in " \t":
            i += 1
            continue
        if at_line_start and c == "#":
            end = i
            while end < n:
                nl = text.find("\n", end)
                if nl < 0:
                    end = n
                    break
                if text[nl - 1] == "\\":
                    end = nl + 1
                    continue
                end = nl
                break
            blank(i, end)
            i = end
            continue
        at_line_start = False
        if text.startswith("//", i):
            end = text.find("\n", i)
            end = n if end < 0 else end
            blank(i, end)
            i = end
        elif text.startswith("/*", i):
            end = text.find("*/", i + 2)
            end = n if end < 0 else end + 2
            blank(i, end)
            i = end
        elif c == "R" and text.startswith('R"', i) and (i == 0 or not _ident_char(text[i - 1])):
            open_paren = text.find("(", i + 2)
            delim = text[i + 2 : open_paren]
            close = text.find(")" + delim + '"', open_paren)
            end = n if close < 0 else close + len(delim) + 2
            blank(i, end)
            i = end
        elif c in "\"'":
            if c == "'" and i > 0 and text[i - 1].isalnum():  # digit separator: 1'000
                i += 1
                continue
            end = i + 1
            while end < n and text[end] != c and text[end] != "\n":
                end += 2 if text[end] == "\\" else 1
            blank(i, end + 1)
            i = end + 1
        else:
            i += 1
    return "".join(out)


def _ident_char(c):
    return c.isalnum() or c == "_"


def _strip_template_prefix(head):
    """Removes leading `template <...>` clauses (angle brackets matched)."""
    while True:
        m = re.match(r"\s*template\s*<", head)
        if not m:
            return head
        depth, k = 1, m.end()
        while k < len(head) and depth:
            depth += {"<": 1, ">": -1}.get(head[k], 0)
            k += 1
        head = head[k:]


def _has_top_level_assign(head):
    """Returns true iff head has an `=` outside (), [], {} and <> that is not part of an
    operator name or a comparison."""
    depth = 0
    for k, c in enumerate(head):
        if c in "([{<":
            depth += 1
        elif c in ")]}>":
            depth = max(0, depth - 1)
        elif c == "=" and depth == 0:
            before = head[:k].rstrip()
            if before.endswith("operator") or head[k + 1 : k + 2] == "=":
                continue
            if before[-1:] in "!<>=+-*/%&|^":
                continue
            return True
    return False


def _function_name(head):
    """Returns the qualified name before the parameter list of a function head."""
    head = _strip_template_prefix(head)
    m = re.search(r"(operator\s*(?:\(\)|[^\s(]+)|[~\w:]+)\s*\(", head)
    return m.group(1).strip() if m else "?"


class Scanner:
    def __init__(self, code):
        self.code = code
        self.line_starts = [0]
        for k, c in enumerate(code):
            if c == "\n":
                self.line_starts.append(k + 1)

    def line_of(self, offset):
        lo, hi = 0, len(self.line_starts) - 1
        while lo < hi:
            mid = (lo + hi + 1) // 2
            if self.line_starts[mid] <= offset:
                lo = mid
            else:
                hi = mid - 1
        return lo + 1

    def matching_close(self, open_offset):
        """Returns the offset of the bracket closing the one at open_offset."""
        pairs = {"{": "}", "(": ")", "[": "]"}
        stack = [pairs[self.code[open_offset]]]
        k = open_offset + 1
        while k < len(self.code) and stack:
            c = self.code[k]
            if c in pairs:
                stack.append(pairs[c])
            elif c in ")]}":
                stack.pop()
            k += 1
        return k - 1

    def functions(self, start=0, end=None):
        """Yields (name, first_line, last_line) for each function defined in [start, end)."""
        end = len(self.code) if end is None else end
        head_start = start
        k = start
        while k < end:
            c = self.code[k]
            if c in "([":
                k = self.matching_close(k) + 1
                continue
            if c in ";}":
                head_start = k + 1
            elif c == ":" and self.code[k - 1 : k + 2].find("::") < 0:
                # An access specifier (`public:`) ends a head as `;` does.
                if re.fullmatch(r"\s*(public|private|protected)\s*", self.code[head_start:k]):
                    head_start = k + 1
            elif c == "{":
                head = self.code[head_start:k]
                close = self.matching_close(k)
                kind = self.classify(head)
                if kind == "scope":
                    yield from self.functions(k + 1, close)
                elif kind == "function":
                    body = self.body_open(head_start, k)
                    if body != k:
                        close = self.matching_close(body)
                    first = head_start + (len(head) - len(head.lstrip()))
                    yield (_function_name(self.code[head_start:body]), self.line_of(first),
                           self.line_of(close))
                k = close + 1
                head_start = k
                continue
            k += 1

    @staticmethod
    def classify(head):
        bare = _strip_template_prefix(head).strip()
        if re.match(r"(inline\s+)?namespace\b", bare) or re.match(r"extern\s*$", bare):
            return "scope"
        if "(" not in bare or _has_top_level_assign(bare):
            if re.match(r"((typedef|friend)\s+)?(class|struct|union|enum)\b", bare):
                return "scope"
            return "other"
        if re.match(r"(class|struct|union|enum)\b", bare) and not re.search(r"\)\s*$", bare):
            return "scope"
        return "function"

    def body_open(self, head_start, first_brace):
        """Returns the offset of a function's body `{`, past a member-initializer list."""
        head = self.code[head_start:first_brace]
        close_params = head.rfind(")")
        tail = head[close_params + 1 :]
        m = re.search(r"(?<!:):(?!:)", tail)
        if close_params < 0 or not m:
            return first_brace
        # Inside a member-initializer list: skip `name{...}` and `name(...)` items.
        k = first_brace
        while True:
            k = self.matching_close(k) + 1
            while k < len(self.code) and self.code[k] in " \t\n":
                k += 1
            if k >= len(self.code) or self.code[k] != ",":
                break
            k += 1
            while k < len(self.code) and self.code[k] not in "({":
                k += 1
        while k < len(self.code) and self.code[k] != "{":
            k += 1
        return k


def product_files(root):
    for top in PRODUCT_DIRS:
        for dirpath, dirnames, filenames in os.walk(os.path.join(root, top)):
            dirnames[:] = sorted(d for d in dirnames if d not in EXCLUDED_PARTS)
            for name in sorted(filenames):
                if name.endswith(SOURCE_SUFFIXES):
                    yield os.path.join(dirpath, name)


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--max-file-lines", type=int, default=600)
    parser.add_argument("--max-function-lines", type=int, default=80)
    parser.add_argument("root", nargs="?",
                        default=os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    args = parser.parse_args()

    big_files, big_functions = [], []
    for path in product_files(args.root):
        with open(path, encoding="utf-8", errors="replace") as f:
            text = f.read()
        rel = os.path.relpath(path, args.root)
        lines = text.count("\n") + (0 if text.endswith("\n") or not text else 1)
        if lines > args.max_file_lines:
            big_files.append((lines, rel))
        for name, first, last in Scanner(blank_non_code(text)).functions():
            length = last - first + 1
            if length > args.max_function_lines:
                big_functions.append((length, rel, first, name))

    for lines, rel in sorted(big_files, reverse=True):
        print(f"file  {rel} {lines}")
    for length, rel, first, name in sorted(big_functions, reverse=True):
        print(f"func  {rel}:{first} {name} {length}")
    print(f"files over {args.max_file_lines} lines: {len(big_files)}; "
          f"functions over {args.max_function_lines} lines: {len(big_functions)}")
    return 1 if big_files or big_functions else 0


if __name__ == "__main__":
    sys.exit(main())
