#!/usr/bin/env bash
# Formats the tracked C++/CUDA files (git ls-files: *.hpp *.cpp *.cuh *.cu *.h *.cc) with the repository's .clang-format.
#   scripts/format.sh                  reformat them in place
#   scripts/format.sh --check          change nothing; list the files that are not formatted and exit 1 if there are any
#   scripts/format.sh [--check] PATH.. only the tracked files under these paths
#   CLANG_FORMAT=clang-format-18 scripts/format.sh   use that binary (default: clang-format, else clang-format-NN)
# The style was tuned with clang-format 14 (Debian 12's); another major version may lay out a few constructs differently,
# so compare --check results only between runs of the same version.
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
source "$ROOT/scripts/lib.sh"   # find_clang_tool
cd "$ROOT"

check=0
if [[ "${1:-}" == "--check" ]]; then
  check=1
  shift
fi
if [[ "${1:-}" == -* ]]; then
  echo "usage: scripts/format.sh [--check] [PATH...]" >&2
  exit 2
fi

CF="$(find_clang_tool clang-format CLANG_FORMAT)"
version="$("$CF" --version | sed -n 's/.*version \([0-9][0-9]*\).*/\1/p')"
if ! "$CF" --style=file --assume-filename=x.cpp --dump-config >/dev/null; then
  echo "scripts/format.sh: $CF cannot read .clang-format" >&2
  exit 2
fi
if [[ "$version" != 14 ]]; then
  echo "scripts/format.sh: note: $CF is version ${version:-?}; .clang-format was tuned with version 14" >&2
fi

files=()
while IFS= read -r -d '' f; do
  [[ -f "$f" ]] && files+=("$f")  # skip tracked files deleted in the work tree
done < <(git ls-files -z -- "${@:-.}" | grep -zE '\.(hpp|cpp|cuh|cu|h|cc)$' || true)
if [[ ${#files[@]} -eq 0 ]]; then
  echo "scripts/format.sh: no C++/CUDA files" >&2
  exit 0
fi

if [[ $check -eq 0 ]]; then
  printf '%s\0' "${files[@]}" | xargs -0 "$CF" -i --style=file
  echo "formatted ${#files[@]} files with $CF"
  exit 0
fi

# One clang-format run over all files; its "FILE:LINE:COL: error: code should be clang-formatted" lines name the files.
log="$(mktemp)"
trap 'rm -f "$log"' EXIT
rc=0
printf '%s\0' "${files[@]}" | xargs -0 "$CF" --dry-run --Werror --style=file >/dev/null 2>"$log" || rc=$?
mapfile -t bad < <(sed -n 's/^\(.*\):[0-9]*:[0-9]*: error: code should be clang-formatted.*/\1/p' "$log" | sort -u)
if [[ $rc -ne 0 && ${#bad[@]} -eq 0 ]]; then
  cat "$log" >&2
  echo "scripts/format.sh: $CF failed (exit $rc)" >&2
  exit 2
fi
if [[ ${#bad[@]} -gt 0 ]]; then
  echo "not formatted (${#bad[@]} of ${#files[@]} files; run scripts/format.sh, or '$CF --dry-run FILE' to see how):" >&2
  printf '  %s\n' "${bad[@]}" >&2
  exit 1
fi
echo "all ${#files[@]} files formatted ($CF)"
