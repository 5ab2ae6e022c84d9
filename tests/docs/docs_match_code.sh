#!/bin/sh
# Usage: docs_match_code.sh SOURCE_DIR BIN_DIR
#
# The docs name every config key, poolctl command and control operation the code has, and
# name none it lacks. What exists is asked of the code itself:
#   - config keys: the real `poold --check`, whose "unknown key (expected one of: ...)" error
#     lists the keys of each mapping; a key whose value, given a mapping (or a list of one),
#     draws that error again is a section and is walked in turn;
#   - poolctl commands: the real `poolctl --help` and `poolctl dlq --help`;
#   - control operations and the rights each needs: the table the server and poold dispatch
#     by (<sandpool/control/control_ops.hpp>), printed by the control_op_names program.
# Documented means: a row of the key tables under "## service" / "## pools" of
# docs/configuration.md (`socket.path`, `allow[].user`, `limits.memory`), a command row or
# synopsis under "## Commands" of docs/poolctl.md, a row of the table under "### Operations"
# of docs/protocol.md with its rights column. Prints every difference and exits 1 if there
# is one.
set -u
src=$1
bin=$2
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
status=0

# compare WHAT CODE_LIST DOC_LIST: both sorted, one name a line.
compare() {
  comm -23 "$2" "$3" | sed "s/^/$1 not documented: /"
  comm -13 "$2" "$3" | sed "s/^/$1 documented but not in the code: /"
  if ! cmp -s "$2" "$3"; then status=1; fi
  if [ ! -s "$2" ]; then
    echo "$1: found none in the code (the probe is broken)"
    status=1
  fi
}

# The lines of FILE from the heading matching START to the next heading of the same or a
# higher level (a `# ...` line inside a fenced code block is no heading).
section() {
  awk -v start="$2" '
    /^```/ { fenced = !fenced }
    !fenced && $0 ~ "^" start "$" { on = 1; level = index($0, " "); next }
    on && !fenced && /^#+ / && index($0, " ") <= level { on = 0 }
    on' "$1"
}

# --- Control operations -------------------------------------------------------------------
# "NAME RIGHTS" lines on both sides: a row names one op or several (`drain` / `resume`).
"$bin/control_op_names" | sort -u >"$tmp/ops.code"
section "$src/docs/protocol.md" "### Operations" |
  grep -E '^\| `[a-z_]+`.*\| (admin|read) \|$' |
  awk -F'|' '{
    rights = $(NF - 1); gsub(/ /, "", rights)
    n = split($2, w, "`")
    for (i = 2; i <= n; i += 2) print w[i] " " rights
  }' | sort -u >"$tmp/ops.doc"
compare "control operation" "$tmp/ops.code" "$tmp/ops.doc"

# --- poolctl commands ---------------------------------------------------------------------
subcommands() {
  "$bin/poolctl" "$@" --help | awk '/^Subcommands:/ { on = 1; next } on && NF { print $1 }'
}
{
  subcommands | grep -vx dlq
  subcommands dlq | sed 's/^/dlq /'
} | sort -u >"$tmp/cmds.code"
section "$src/docs/poolctl.md" "## Commands" |
  awk '
    /^\| `/ { span = $0; sub(/^\| `/, "", span); sub(/`.*/, "", span); table = 1 }
    /^`/ { span = $0; sub(/^`/, "", span); sub(/`.*/, "", span); table = 0 }
    !/^(\| )?`/ { next }
    span !~ /^[a-z]/ || (!table && span !~ / /) { next }
    { n = split(span, w, " "); print (w[1] == "dlq" && n > 1) ? w[1] " " w[2] : w[1] }
  ' | sort -u >"$tmp/cmds.doc"
compare "poolctl command" "$tmp/cmds.code" "$tmp/cmds.doc"

# --- Config keys --------------------------------------------------------------------------
# A YAML document (flow style) with `zz_probe: 1` at PATH (keys joined by '.', a list
# element written `key[]`). pools[] entries carry the two required keys so that the only
# complaint is the probe.
probe_yaml() {
  printf '%s\n' "$1" | awk '
    {
      n = split($0, k, ".")
      inner = "{zz_probe: 1}"
      for (i = n; i >= 1; i--) {
        if (k[i] == "") continue
        name = k[i]
        if (sub(/\[\]$/, "", name)) {
          inner = "[{" (name == "pools" ? "name: p, plugin: p.so, " : "") substr(inner, 2) "]"
        }
        inner = "{" name ": " inner "}"
      }
      print inner
    }'
}

# The keys poold expects at PATH ("" for the top), one a line; nothing if PATH is no mapping.
keys_at() {
  probe_yaml "$1" >"$tmp/probe.yaml"
  want=$(printf '%s' "$1" | sed 's/\[\]/[0]/g')
  want=${want:+$want.}zz_probe
  "$bin/poold" --check --config "$tmp/probe.yaml" 2>&1 |
    grep -F " $want: unknown key (expected one of: " |
    sed 's/.*(expected one of: \(.*\))$/\1/' | tr ',' '\n' | sed 's/^ *//' | grep .
}

# Walks the sections from PATH, printing every key path below it (sections included).
walk() {
  keys_at "$1" >"$tmp/keys.$2"
  while read -r key; do
    path=${1:+$1.}$key
    echo "$path"
    if [ -n "$(keys_at "$path")" ]; then
      walk "$path" "$(($2 + 1))"
    elif [ -n "$(keys_at "$path[]")" ]; then
      echo "$path[]"
      walk "$path[]" "$(($2 + 1))"
    fi
  done <"$tmp/keys.$2"
}

walk "" 0 >"$tmp/keys.all"
# Relative to service / pools[], as the tables write them; the two roots themselves and
# list markers (`allow[]`, documented as `allow`) are not rows of their own.
sed -n -e 's/^service\.//p' -e 's/^pools\[\]\.//p' -e 's/^schedules\[\]\./schedules:/p' \
  "$tmp/keys.all" | grep -v '\[\]$' |
  sed 's/\[\]//g' | sort -u >"$tmp/keys.code"
if ! grep -qx 'service' "$tmp/keys.all" || ! grep -qx 'pools\[\]' "$tmp/keys.all"; then
  echo "config: poold --check did not list service and pools[] (the probe is broken)"
  status=1
fi
grep -v -e '^service' -e '^pools' -e '^schedules' "$tmp/keys.all" |
  sed 's/^/config key outside service, pools and schedules: /'
# The schedules' rows are relative to one entry of schedules:, written schedules:KEY here so
# that a pool's key never documents a schedule's.
{
  section "$src/docs/configuration.md" "## service"
  section "$src/docs/configuration.md" "## pools"
  section "$src/docs/configuration.md" "## schedules" | sed 's/^| `/| `schedules:/'
} | grep -o '^| `[^`]*`' | sed 's/^| `//; s/`$//' | sort -u >"$tmp/keys.doc"
# A section may be documented by its leaves only: drop code sections no row names.
while read -r key; do
  if grep -q "^$key\." "$tmp/keys.code" && ! grep -qx "$key" "$tmp/keys.doc"; then
    continue
  fi
  echo "$key"
done <"$tmp/keys.code" | sort -u >"$tmp/keys.code.rows"
sed 's/\[\]//g' "$tmp/keys.doc" | sort -u >"$tmp/keys.doc.rows"
compare "config key" "$tmp/keys.code.rows" "$tmp/keys.doc.rows"

exit $status
