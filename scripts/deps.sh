#!/usr/bin/env bash
# Installs the Debian packages sandpool builds, tests and benchmarks with.
# Idempotent: quiet and quick when everything is already present.
set -euo pipefail

packages=(
  build-essential cmake ninja-build pkg-config clang-14 libclang-rt-14-dev clang-format
  libboost-dev libcereal-dev libseccomp-dev libspdlog-dev catch2 libyaml-cpp-dev
  libcli11-dev libsqlite3-dev sqlite3 nlohmann-json3-dev libcpp-httplib-dev libsystemd-dev
  libhiredis-dev redis-server liblua5.4-dev libpcre2-dev libjpeg62-turbo-dev libpng-dev
  libwebp-dev libjemalloc-dev libpython3.11-dev python3-pytest python3-setuptools python3-venv
  python3-wheel  # setuptools builds the Python client's wheel with it (pip --no-build-isolation)
  chromium       # the dashboard's browser test (tests/browser/), headless over the DevTools pipe
  stress-ng      # scripts/flake-hunt.sh's CPU hog
  lintian        # the package test's check of the .deb (tests/package/); `make package` needs
                 # dpkg-shlibdeps too, from dpkg-dev (build-essential brings it)
)
# The browser test's driver runs on Node.js: Debian's, unless a node is installed already
# (another distribution of it would conflict with Debian's package).
command -v node >/dev/null 2>&1 || packages+=(nodejs)

missing=()
for p in "${packages[@]}"; do
  if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'install ok installed'; then
    missing+=("$p")
  fi
done
[ ${#missing[@]} -eq 0 ] && exit 0

echo "deps: installing ${missing[*]}"
sudo_cmd=()
[ "$(id -u)" -ne 0 ] && sudo_cmd=(sudo)
export DEBIAN_FRONTEND=noninteractive
# A fresh machine may have no package lists yet.
"${sudo_cmd[@]}" apt-get update -q >/dev/null || echo "deps: apt-get update failed; trying the cached lists" >&2
"${sudo_cmd[@]}" apt-get -o DPkg::Lock::Timeout=600 install -y -q --no-install-recommends "${missing[@]}" >/dev/null
echo "deps: done"
