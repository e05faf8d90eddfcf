#!/usr/bin/env bash
# Checks that every C++ source of the repository (*.h, *.cc) is formatted by
# .clang-format; prints the files that are not and exits 1. Run
# `clang-format -i FILE` to fix one.
set -euo pipefail
cd "$(dirname "$0")/.."
if ! command -v clang-format >/dev/null; then
  echo "check-format: clang-format not found (scripts/install-deps.sh installs it)" >&2
  exit 2
fi
if git rev-parse --is-inside-work-tree >/dev/null 2>&1; then
  mapfile -t files < <(git ls-files '*.h' '*.cc')
else
  mapfile -t files < <(find . -path ./build -prune -o \( -name '*.h' -o -name '*.cc' \) -print)
fi
bad=()
for f in "${files[@]}"; do
  [ -f "$f" ] || continue
  if ! clang-format --dry-run -Werror "$f" >/dev/null 2>&1; then bad+=("$f"); fi
done
if ((${#bad[@]})); then
  echo "check-format: ${#bad[@]} file(s) differ from clang-format ($(clang-format --version)):"
  printf '  %s\n' "${bad[@]}"
  exit 1
fi
echo "check-format: ${#files[@]} files formatted"
