#!/usr/bin/env bash
# Usage: package_install_test.sh SOURCE_DIR BUILD_DIR CPACK CMAKE
#
# The .deb as a user gets it, without installing anything into this system:
#   1. cpack builds it from the built tree into a scratch directory (what `make package`
#      does, minus the build, which ctest has done);
#   2. its control data: the conffile, the maintainer scripts, Depends computed by
#      dpkg-shlibdeps plus adduser; its files: every path docs/operations.md lists;
#   3. dpkg -x unpacks it into a scratch root; an out-of-tree plugin (tests/package/plugin) is
#      built with find_package(sandpool) against that root only;
#   4. the installed poold starts on the installed /etc/sandpool/poold.yaml, with only what
#      cannot hold outside a real install rewritten (listed at run_installed), plus a pool for
#      the new plugin; the installed poolctl runs a task through the installed example plugin
#      and one through the new plugin, then shuts poold down. Then the same for the tree
#      `cmake --install --prefix` makes, whose layout must be the .deb's;
#   5. lintian on the .deb: every tag it prints is explained in docs/operations.md's table of
#      lintian tags, and every tag explained there is still printed (so the table stays true).
# Exits 77 (skipped, with the reason) when dpkg-deb or lintian is missing: not a Debian host.
set -euo pipefail

src=$1
build=$2
cpack=$3
cmake=$4

for tool in dpkg-deb dpkg-shlibdeps lintian; do
  if ! command -v "$tool" >/dev/null; then
    echo "SKIPPED: $tool is not installed (Debian: scripts/deps.sh installs it)"
    exit 77
  fi
done

scratch=$(mktemp -d /tmp/sandpool-package.XXXXXX)
poold_pid=""
lintian_pid=""
cleanup() {
  if [ -n "$poold_pid" ] && kill -0 "$poold_pid" 2>/dev/null; then
    kill -KILL "$poold_pid" 2>/dev/null || true
    wait "$poold_pid" 2>/dev/null || true
  fi
  if [ -n "$lintian_pid" ]; then
    kill "$lintian_pid" 2>/dev/null || true
    wait "$lintian_pid" 2>/dev/null || true
  fi
  rm -rf "$scratch"
}
trap cleanup EXIT
fail() {
  echo "FAIL: $*"
  exit 1
}
step() { echo "--- $* ($(date +%T))"; }

# ---- 1. the package ------------------------------------------------------------------------
step "cpack"
"$cpack" -G DEB --config "$build/CPackConfig.cmake" -B "$scratch/cpack" >"$scratch/cpack.log" 2>&1 ||
  {
    cat "$scratch/cpack.log"
    fail "cpack failed"
  }
debs=("$scratch"/cpack/sandpool_*.deb)
[ ${#debs[@]} -eq 1 ] && [ -f "${debs[0]}" ] || fail "cpack made no single sandpool_*.deb: ${debs[*]}"
deb=${debs[0]}
echo "package: $(basename "$deb"), $(stat -c %s "$deb") bytes"

# lintian reads the .deb alone: run it beside the rest.
lintian --no-tag-display-limit "$deb" >"$scratch/lintian.out" 2>&1 &
lintian_pid=$!

# ---- 2. control data and contents ------------------------------------------------------------
step "control data"
dpkg-deb -e "$deb" "$scratch/control"
[ "$(cat "$scratch/control/conffiles")" = "/etc/sandpool/poold.yaml" ] ||
  fail "conffiles is not exactly /etc/sandpool/poold.yaml: $(cat "$scratch/control/conffiles")"
for script in postinst prerm postrm; do
  sh -n "$scratch/control/$script" || fail "$script is not valid sh"
done
grep -q 'adduser --system --group' "$scratch/control/postinst" || fail "postinst creates no user"
grep -q 'purge' "$scratch/control/postrm" || fail "postrm has no purge branch"
depends=$(dpkg-deb -f "$deb" Depends)
echo "Depends: $depends"
# dpkg-shlibdeps' share: the libraries poold, the worker host and the plugins link.
for lib in adduser libseccomp2 libsqlite3-0 libyaml-cpp0.7 libjemalloc2 liblua5.4-0 libpcre2-8-0 \
  libpython3.11 libsystemd0 libhiredis0.14; do
  [[ ", $depends," == *", $lib "* || ", $depends," == *", $lib,"* ]] ||
    fail "Depends lacks $lib: $depends"
done

dpkg-deb -c "$deb" | awk '{print $6}' | sed 's|^\./|/|' >"$scratch/contents"
for path in /usr/bin/poold /usr/bin/poolctl /usr/bin/sandpool-run \
  /usr/libexec/sandpool/sandpool-worker \
  /usr/lib/sandpool/plugins/libecho.so /usr/lib/sandpool/plugins/liblua.so \
  /usr/lib/sandpool/plugins/libregex.so /usr/lib/sandpool/plugins/libthumbnail.so \
  /usr/lib/sandpool/plugins/libpython.so /usr/share/sandpool/python/orders.py \
  /usr/include/sandpool/plugin.h /usr/share/cmake/sandpool/sandpoolConfig.cmake \
  /usr/share/cmake/sandpool/sandpoolTargets.cmake /usr/lib/systemd/system/sandpool.service \
  /etc/sandpool/poold.yaml /usr/share/man/man8/poold.8.gz /usr/share/man/man1/poolctl.1.gz \
  /usr/share/man/man1/sandpool-run.1.gz /usr/share/bash-completion/completions/poolctl \
  /usr/share/doc/sandpool/operations.md; do
  grep -qxF "$path" "$scratch/contents" || fail "the package lacks $path"
done

# ---- 3. unpacked, and a plugin built against it ---------------------------------------------
step "dpkg -x"
root=$scratch/root
dpkg -x "$deb" "$root"
# mktemp made $scratch 0700: the workers' user must reach the plugins below it.
chmod 755 "$scratch" "$root"

grep -qxF "ExecStart=/usr/bin/poold --config /etc/sandpool/poold.yaml" \
  "$root/usr/lib/systemd/system/sandpool.service" || fail "the unit's ExecStart names other paths"
if grep -n "/usr/local\|$build\|$src" "$root/usr/lib/systemd/system/sandpool.service" \
  "$root/etc/sandpool/poold.yaml"; then
  fail "the installed unit or config names a path outside the package (above)"
fi
zcat "$root/usr/share/man/man1/poolctl.1.gz" | grep -q '^\.SS poolctl submit$' ||
  fail "poolctl(1) has no section for submit"
bash -c "source '$root/usr/share/bash-completion/completions/poolctl'
  COMP_WORDS=(poolctl dlq re); COMP_CWORD=2; _poolctl; [ \"\${COMPREPLY[*]}\" = replay ]" ||
  fail "the completion does not complete 'poolctl dlq re' to replay"

step "out-of-tree plugin"
# Only the unpacked package: no package registry, no system prefix that could hold another
# sandpool.
"$cmake" -S "$src/tests/package/plugin" -B "$scratch/plugin-build" -DCMAKE_BUILD_TYPE=Release \
  -DCMAKE_PREFIX_PATH="$root/usr" -DCMAKE_FIND_USE_PACKAGE_REGISTRY=OFF \
  -DCMAKE_FIND_USE_SYSTEM_PACKAGE_REGISTRY=OFF -DCMAKE_FIND_USE_CMAKE_SYSTEM_PATH=OFF \
  >"$scratch/plugin.log" 2>&1 || {
  cat "$scratch/plugin.log"
  fail "configuring the out-of-tree plugin failed"
}
grep -qxF "sandpool_DIR:PATH=$root/usr/share/cmake/sandpool" "$scratch/plugin-build/CMakeCache.txt" ||
  fail "find_package(sandpool) found another sandpool: $(grep sandpool_DIR "$scratch/plugin-build/CMakeCache.txt")"
"$cmake" --build "$scratch/plugin-build" >>"$scratch/plugin.log" 2>&1 || {
  cat "$scratch/plugin.log"
  fail "building the out-of-tree plugin failed"
}
plugin=$scratch/plugin-build/libreverse.so
[ -f "$plugin" ] || fail "the plugin build made no libreverse.so"

# ---- 4. the installed poold on the installed config ----------------------------------------
# run_installed NAME USR CONFIG PLUGIN_REWRITE: starts USR/bin/poold on a copy of the installed
# CONFIG, runs a task through the installed echo and one through the out-of-tree plugin with
# USR/bin/poolctl, checks that the workers are USR's worker host, and shuts poold down.
#
# The copy's only changes, each because a scratch directory is not a real install: the socket
# and state dir (a temporary pair, not the unit's /run/sandpool and /var/lib/sandpool), the
# HTTP port (0, a free one: 9464 may be another poold's on a test machine), the workers' user
# (`sandpool`, which postinst creates and neither dpkg -x nor cmake --install does, becomes
# nobody), and with PLUGIN_REWRITE=1 the plugins' absolute paths (an unpacked .deb's are under
# the scratch root, not /usr).
run_installed() {
  local name=$1 usr=$2 installed=$3 plugin_rewrite=$4
  local dir=$scratch/$name
  local config=$dir/poold.yaml expected=4
  mkdir -p "$dir"
  local rewrite=(-e "s|path: /run/sandpool/poold.sock|path: $dir/poold.sock|"
    -e "s|state_dir: /var/lib/sandpool|state_dir: $dir/state|"
    -e "s|listen: 127.0.0.1:9464 |listen: 127.0.0.1:0    |"
    -e "s|user: sandpool  |user: nobody   |")
  if [ "$plugin_rewrite" = 1 ]; then
    rewrite+=(-e "s|^    plugin: /usr/lib/sandpool/plugins/|    plugin: $usr/lib/sandpool/plugins/|")
    expected=5
  fi
  sed "${rewrite[@]}" "$installed" >"$config"
  local changed
  changed=$(diff "$installed" "$config" | grep -c '^>' || true)
  [ "$changed" -eq "$expected" ] || {
    diff "$installed" "$config" || true
    fail "$name: expected exactly $expected rewritten lines, got $changed"
  }
  printf '  - name: reverse\n    plugin: %s\n    workers: {initial: 1}\n' "$plugin" >>"$config"
  local poolctl=(env -u SANDPOOL_SOCKET "$usr/bin/poolctl" --socket "$dir/poold.sock")
  "$usr/bin/poold" --check --config "$config" ||
    fail "$name: poold --check refuses the installed config"

  # No $SANDPOOL_WORKER: the installed poold must find the installed worker host by itself
  # (checked below on the workers' /proc/PID/exe).
  env -u SANDPOOL_WORKER "$usr/bin/poold" --config "$config" >"$dir/poold.log" 2>&1 &
  poold_pid=$!
  # Ready once its control socket answers (poold listens only after its pools run). Bounded
  # generously: a loaded 2-core machine starts the workers slowly.
  for _ in $(seq 1 600); do
    if ! kill -0 "$poold_pid" 2>/dev/null; then
      cat "$dir/poold.log"
      fail "$name: the installed poold exited during start-up"
    fi
    "${poolctl[@]}" status >/dev/null 2>&1 && break
    sleep 0.1
  done
  "${poolctl[@]}" status >/dev/null || {
    cat "$dir/poold.log"
    fail "$name: the installed poold did not answer status within 60 s"
  }

  local out
  out=$("${poolctl[@]}" submit --wait --wait-timeout 60s echo "from the package") ||
    fail "$name: the echo task did not complete: $out"
  [ "$out" = "from the package" ] || fail "$name: echo returned '$out'"
  out=$("${poolctl[@]}" submit --wait --wait-timeout 60s reverse "sandpool") ||
    fail "$name: the out-of-tree plugin's task did not complete: $out"
  [ "$out" = "loopdnas" ] || fail "$name: reverse returned '$out', not loopdnas"
  # The workers are this tree's worker host (found relative to poold), whatever else exists.
  local pids pid exe
  pids=$("${poolctl[@]}" --json workers | grep -oE '"pid": *[0-9]+' | grep -oE '[0-9]+$' || true)
  [ -n "$pids" ] || fail "$name: poolctl workers names no worker pid"
  for pid in $pids; do
    exe=$(readlink "/proc/$pid/exe") || fail "$name: cannot read /proc/$pid/exe"
    [ "$exe" = "$usr/libexec/sandpool/sandpool-worker" ] || fail "$name: worker $pid runs $exe"
  done
  echo "$name: echo and the out-of-tree reverse plugin ran through its poold and poolctl"

  "${poolctl[@]}" shutdown >/dev/null
  wait "$poold_pid" || {
    cat "$dir/poold.log"
    fail "$name: poold did not exit cleanly after shutdown"
  }
  poold_pid=""
}

step "the unpacked .deb"
run_installed deb "$root/usr" "$root/etc/sandpool/poold.yaml" 1

# The same through `cmake --install --prefix`, the way for other systems: the .deb's layout
# under the prefix (the configuration in prefix/etc), and paths that need no rewriting.
step "cmake --install --prefix"
prefix=$scratch/prefix
"$cmake" --install "$build" --prefix "$prefix" >"$scratch/install.log" 2>&1 || {
  cat "$scratch/install.log"
  fail "cmake --install --prefix failed"
}
chmod 755 "$prefix"
(cd "$root/usr" && find . ! -type d | sort) >"$scratch/deb.files"
(cd "$prefix" && find . ! -type d | sort) >"$scratch/prefix.files"
# The .deb's /usr holds the same files, but the configuration (/etc there).
diff "$scratch/deb.files" <(grep -v '^\./etc/' "$scratch/prefix.files") ||
  fail "cmake --install --prefix installs another layout than the .deb's /usr (above)"
grep -qxF "ExecStart=$prefix/bin/poold --config $prefix/etc/sandpool/poold.yaml" \
  "$prefix/lib/systemd/system/sandpool.service" || fail "the prefix's unit names other paths"
run_installed prefix "$prefix" "$prefix/etc/sandpool/poold.yaml" 0

# ---- 5. lintian ------------------------------------------------------------------------------
step "lintian"
# lintian exits 2 when it prints a tag of error level (--fail-on's default; judged below), 1
# when it failed to run.
lintian_rc=0
wait "$lintian_pid" || lintian_rc=$?
lintian_pid=""
[ "$lintian_rc" -ne 1 ] || {
  cat "$scratch/lintian.out"
  fail "lintian failed (exit $lintian_rc)"
}
# "E: sandpool: tag-name [details]" -> tag-name.
printed=$(grep -E '^[EWIPX]: sandpool' "$scratch/lintian.out" | awk '{print $3}' | sort -u || true)
# docs/operations.md, "Lintian": one table row per tag, "| `tag-name` | why |".
explained=$(sed -n '/^### What lintian says/,/^##/p' "$src/docs/operations.md" |
  grep -oE '^\| `[a-z0-9.+-]+`' | tr -d '|` ' | sort -u || true)
if grep -qE '^(E|W|I|P|X):' "$scratch/lintian.out" &&
  ! grep -qE '^[EWIPX]: sandpool' "$scratch/lintian.out"; then
  cat "$scratch/lintian.out"
  fail "lintian printed tags this script does not parse"
fi
unexplained=$(comm -23 <(echo "$printed") <(echo "$explained") | sed '/^$/d')
stale=$(comm -13 <(echo "$printed") <(echo "$explained") | sed '/^$/d')
echo "lintian tags: $(echo "$printed" | sed '/^$/d' | wc -l) ($(echo $printed))"
if [ -n "$unexplained" ]; then
  grep -E '^[EWIPX]: sandpool' "$scratch/lintian.out"
  fail "lintian tags not explained in docs/operations.md: $(echo $unexplained)"
fi
[ -z "$stale" ] || fail "docs/operations.md explains lintian tags it no longer prints: $(echo $stale)"
echo "PASS"
