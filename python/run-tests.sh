#!/usr/bin/env bash
# Builds the specdec Python package in a fresh virtual environment and runs its tests.
#
#   python/run-tests.sh [DIR] [pytest args...]
#
# DIR (default /tmp) holds the environment, DIR/specdec-pyenv, made afresh each run with its build
# tree (DIR/specdec-pyenv/build: every run is a clean build) and the wheel it builds and installs
# (DIR/specdec-pyenv/dist/specdec-<version>-<tag>.whl; the tests run on that installed wheel). PYTHON picks the
# interpreter (default python3, >= 3.10); CMAKE_BUILD_PARALLEL_LEVEL the build's jobs; CXX the
# compiler of the C++ parity test. Exits with pytest's status; prints "SKIPPED: ..." and exits 0
# only when pip cannot reach the package index at all (nanobind, scikit-build-core, numpy, pytest
# and hypothesis come from it). Any other failure is a failure.
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
root=$(dirname "$here")
base=${1:-/tmp}
[[ $# -gt 0 ]] && shift
python=${PYTHON:-python3}
venv="$base/specdec-pyenv"
start=$(date +%s)

if ! "$python" -c 'import sys; sys.exit(sys.version_info < (3, 10))' 2>/dev/null; then
  echo "FAILED: $python is not CPython >= 3.10" >&2
  exit 1
fi
mkdir -p "$base"
"$python" -m venv --clear "$venv"
pip=("$venv/bin/python" -m pip --disable-pip-version-check)

# Can pip reach the index? One small download, no retries, short timeout. nanobind is on PyPI, so
# "from versions: none" or a connection error means the index cannot be reached; anything else fails.
probe=$(mktemp -d)
if ! out=$("${pip[@]}" download --no-deps --retries 0 --timeout 15 -d "$probe" nanobind 2>&1); then
  rm -rf "$probe"
  if grep -qiE "from versions: none|connection|network is unreachable|name resolution|timed out|proxy" <<<"$out"; then
    echo "SKIPPED: pip cannot reach the package index to fetch the build dependencies (nanobind, scikit-build-core, numpy, pytest, hypothesis):"
    echo "$out" | tail -n 2
    exit 0
  fi
  echo "FAILED: pip download nanobind:" >&2
  echo "$out" >&2
  exit 1
fi
rm -rf "$probe"

echo "== installing build and test dependencies"
"${pip[@]}" install -q nanobind scikit-build-core numpy pytest hypothesis
echo "== building the specdec wheel from $root/python, installing it"
rm -rf "$venv/dist"
"${pip[@]}" wheel -q --no-build-isolation --no-deps -Cbuild-dir="$venv/build" -w "$venv/dist" "$root/python"
wheel=("$venv"/dist/specdec-*.whl)
echo "   ${wheel[0]##*/}"
"${pip[@]}" install -q --no-deps "${wheel[0]}"
built=$(date +%s)
echo "== pytest tests/python"
cd "$base"
status=0
"$venv/bin/python" -m pytest -q "$root/tests/python" "$@" || status=$?
end=$(date +%s)
echo "python tests: build $((built - start)) s, tests $((end - built)) s, exit status $status"
exit $status
