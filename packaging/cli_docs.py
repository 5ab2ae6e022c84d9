#!/usr/bin/env python3
"""Turns a sandpool program's own --help (CLI11's format) into its installed documentation.

  cli_docs.py man EXE NAME SECTION VERSION DOCDIR OUT.gz
      (DOCDIR: the documentation's directory relative to the install prefix)
      a man page: NAME and SYNOPSIS from the first lines of the help, OPTIONS and POSITIONALS
      from its sections, and for a program with subcommands (poolctl) a COMMANDS section with
      each subcommand's own --help, recursively (dlq list, dlq show, ...). Written gzip -9n
      (no name, no time stamp in the header), as Debian wants man pages.
  cli_docs.py bash-completion EXE NAME OUT
      a bash completion script: the subcommands at each level, each one's options, files
      after an option that takes a value.

The help is read from the built program at build time (CMake runs this script after linking
it), so the pages and the completion cannot drift from the options the program parses. The
help text is the program's own output, but it is still checked: a line that does not parse
stops the build instead of being guessed at.
"""

import gzip
import re
import subprocess
import sys

SECTION_RE = re.compile(r"^(\S.*):$")
# An entry: two spaces, its name (which has no run of two spaces), then its text, when it
# fits, after two or more spaces.
ENTRY_RE = re.compile(r"^  (\S(?:\S| (?! ))*)(?: {2,}(\S.*))?$")
CONTINUATION_RE = re.compile(r"^ {3,}(\S.*)$")
# An option's name part takes a value when it names a type after the flags
# ("--socket TEXT", "--workers UINT:INT in [1 - 1024]", "--init-read TEXT ...").
VALUE_TYPES = ("TEXT", "INT", "UINT", "FLOAT", "NUMBER", "ENUM")


def run_help(exe, words):
    out = subprocess.run(
        [exe, *words, "--help"], check=True, capture_output=True, text=True, timeout=60
    ).stdout
    if not out.strip():
        sys.exit(f"cli_docs: {exe} {' '.join(words)} --help printed nothing")
    return out


class Help:
    """One program's (or subcommand's) help: its one-line description, usage and sections."""

    def __init__(self, text, where):
        lines = text.rstrip("\n").split("\n")
        self.description = lines[0].strip()
        self.usage = ""
        self.sections = {}  # "Options" -> [(name, text)], in order
        self.prose = []  # lines of text at the margin that are not a heading (a footer)
        current = None
        for number, line in enumerate(lines[1:], start=2):
            if not line.strip():
                continue
            if line.startswith("Usage: "):
                self.usage = line[len("Usage: ") :].strip()
                continue
            m = SECTION_RE.match(line)
            if m:
                current = self.sections.setdefault(m.group(1), [])
                continue
            m = CONTINUATION_RE.match(line)
            if m and current:
                name, desc = current[-1]
                current[-1] = (name, f"{desc} {m.group(1)}".strip())
                continue
            m = ENTRY_RE.match(line)
            if m and current is not None:
                current.append((m.group(1), m.group(2) or ""))
                continue
            if not line[0].isspace():
                self.prose.append(line.strip())
                current = None
                continue
            sys.exit(f"cli_docs: {where} --help, line {number} does not parse: {line!r}")

    def subcommands(self):
        return [name for name, _ in self.sections.get("Subcommands", [])]

    def options(self):
        """[(flags, takes_value)] of every section of options (Options, and any option group)."""
        result = []
        for title, items in self.sections.items():
            if title in ("Positionals", "Subcommands"):
                continue
            result += self._options(items)
        return result

    @staticmethod
    def _options(items):
        result = []
        for name, _ in items:
            words = name.split()
            flags = [f for f in words[0].split(",") if f.startswith("-")]
            takes_value = any(w.split(":")[0] in VALUE_TYPES for w in words[1:])
            result.append((flags, takes_value))
        return result


def load_tree(exe, words=()):
    """The help of exe and, recursively, of each of its subcommands: (Help, {name: tree})."""
    where = " ".join([exe, *words])
    helps = Help(run_help(exe, list(words)), where)
    children = {}
    for sub in helps.subcommands():
        if not re.fullmatch(r"[a-z][a-z0-9-]*", sub):
            sys.exit(f"cli_docs: {where}: unexpected subcommand name {sub!r}")
        children[sub] = load_tree(exe, (*words, sub))
    return helps, children


# ---- man page ----------------------------------------------------------------------------


def roff(text):
    """text escaped for roff: backslashes, hyphens of options, and a leading . or '."""
    text = text.replace("\\", "\\e").replace("-", "\\-")
    if text.startswith((".", "'")):
        text = "\\&" + text
    return text


def entries(items):
    out = []
    for name, desc in items:
        out += [".TP", f".B {roff(name)}", roff(desc) if desc else "\\&"]
    return out


def command_sections(name, tree, words):
    helps, children = tree
    out = []
    for sub, (sub_help, sub_children) in children.items():
        path = [*words, sub]
        out += [f".SS {roff(' '.join([name, *path]))}", roff(sub_help.description)]
        if sub_help.usage:
            usage = re.sub(r"^\S+", name, sub_help.usage)
            out += [".PP", f".B {roff(usage)}"]
        for title, items in sub_help.sections.items():
            items = [i for i in items if i[0] != "-h,--help"]
            if title != "Subcommands" and items:
                out += [".PP", f"{roff(title)}:", ".RS"] + entries(items) + [".RE"]
        for line in sub_help.prose:
            out += [".PP", roff(line)]
        out += command_sections(name, (sub_help, sub_children), path)
    return out


def man_page(exe, name, section, version, docdir):
    tree = load_tree(exe)
    helps, children = tree
    summary = helps.description
    if summary.startswith(name + ":"):
        summary = summary[len(name) + 1 :].strip()
    usage = re.sub(r"^\S+", name, helps.usage) if helps.usage else name
    out = [
        f'.\\" Generated from `{name} --help` by packaging/cli_docs.py; do not edit.',
        f'.TH {name.upper()} {section} "" "sandpool {version}" "sandpool"',
        ".SH NAME",
        f"{roff(name)} \\- {roff(summary)}",
        ".SH SYNOPSIS",
        f".B {roff(usage)}",
        ".SH DESCRIPTION",
        roff(summary[:1].upper() + summary[1:]) + ".",
    ]
    for line in helps.prose:
        out += [".PP", roff(line)]
    for title, items in helps.sections.items():
        if title != "Subcommands" and items:
            out += [f".SH {roff(title.upper())}"] + entries(items)
    if children:
        out += [".SH COMMANDS"] + command_sections(name, tree, [])
    out += [
        ".SH SEE ALSO",
        f"The documentation installed in {roff(docdir)} under the install prefix "
        f"({roff('/usr/' + docdir)} from the Debian package): "
        "README.md, operations.md, configuration.md, poolctl.md.",
    ]
    return "\n".join(out) + "\n"


# ---- bash completion ---------------------------------------------------------------------


def completion(exe, name):
    tree = load_tree(exe)
    func = "_" + re.sub(r"[^A-Za-z0-9_]", "_", name)
    cases = []

    def walk(words, node):
        helps, children = node
        opts = [f for flags, _ in helps.options() for f in flags]
        valued = [f for flags, takes in helps.options() if takes for f in flags]
        key = " ".join(words)
        cases.append(
            f'    "{key}") subs="{" ".join(children)}"; opts="{" ".join(opts)}"; '
            f'valued="{" ".join(valued)}" ;;'
        )
        for sub, child in children.items():
            walk([*words, sub], child)

    walk([], tree)
    return f"""# bash completion for {name}: generated from `{name} --help` by packaging/cli_docs.py.
# {name}'s subcommands at each level, each one's options, and files after an option that
# takes a value.
{func}() {{
  local cur=${{COMP_WORDS[COMP_CWORD]}} prev=${{COMP_WORDS[COMP_CWORD-1]}}
  local path="" subs opts valued i word skip=0
  # The subcommand path typed so far: the words before the cursor that name a subcommand
  # of the path before them (an option's value is skipped).
  for ((i = 1; i < COMP_CWORD; i++)); do
    word=${{COMP_WORDS[i]}}
    if ((skip)); then skip=0; continue; fi
    {func}_level "$path"
    if [[ " $valued " == *" $word "* ]]; then skip=1; continue; fi
    if [[ " $subs " == *" $word "* ]]; then path="${{path:+$path }}$word"; fi
  done
  {func}_level "$path"
  if [[ " $valued " == *" $prev "* ]]; then
    COMPREPLY=($(compgen -f -- "$cur"))
    return
  fi
  if [[ $cur == -* ]]; then
    COMPREPLY=($(compgen -W "$opts" -- "$cur"))
  else
    COMPREPLY=($(compgen -W "$subs" -- "$cur"))
  fi
}}
{func}_level() {{
  case "$1" in
{chr(10).join(cases)}
    *) subs=""; opts=""; valued="" ;;
  esac
}}
complete -F {func} {name}
"""


def main(argv):
    if len(argv) == 8 and argv[1] == "man":
        _, _, exe, name, section, version, docdir, out = argv
        data = man_page(exe, name, section, version, docdir).encode()
        with open(out, "wb") as f:
            # mtime 0 and no file name: the same bytes on every build (Debian's gzip -9n).
            with gzip.GzipFile(filename="", mode="wb", fileobj=f, compresslevel=9, mtime=0) as z:
                z.write(data)
        return 0
    if len(argv) == 5 and argv[1] == "bash-completion":
        _, _, exe, name, out = argv
        with open(out, "w") as f:
            f.write(completion(exe, name))
        return 0
    sys.exit(__doc__)


if __name__ == "__main__":
    sys.exit(main(sys.argv))
