#!/usr/bin/env bash
# Gathers YiRage's programs and backend libraries from a build's bin folder
# into DEST/bin and DEST/lib, with every shared library they load that a
# runtime image may lack (glibc, libstdc++ and GPU driver or toolkit libraries
# stay out: the base image or the host provides them), and the Python SDK's
# package into DEST/share/yirage/python, where `yirage-client roofline`
# finds its plotting module (it runs with python3 and matplotlib, where the
# image has them).
#   deploy/docker/collect.sh BUILD_BIN DEST
set -euo pipefail
[ $# -eq 2 ] || { echo "usage: $0 BUILD_BIN DEST" >&2; exit 2; }
src=$1 dest=$2
mkdir -p "$dest/bin" "$dest/lib"
skip='^(linux-vdso|ld-linux|libc|libm|libdl|libpthread|librt|libstdc\+\+|libgcc_s|libcuda|libnvidia|libnvrtc|libcudart|libcublas|libamdhip64|libze_loader)\.so'
files=()
for p in yirage-server yirage-worker yirage-client; do
  [ -e "$src/$p" ] && { cp "$src/$p" "$dest/bin/"; files+=("$src/$p"); }
done
for l in "$src"/libyirage_*.so; do
  case $l in *crashtest*) continue ;; esac
  cp "$l" "$dest/lib/"
  files+=("$l")
done
for f in "${files[@]}"; do
  LD_LIBRARY_PATH="$src" ldd "$f" | awk '$3 ~ /^\// {print $1, $3}' | while read -r name path; do
    [[ $name =~ $skip ]] && continue
    [ -e "$dest/lib/$name" ] || cp -L "$path" "$dest/lib/$name"
  done
done
sdk="$(dirname "$0")/../../client/python/yirage"
if [ -d "$sdk" ]; then
  mkdir -p "$dest/share/yirage/python/yirage"
  cp "$sdk"/*.py "$dest/share/yirage/python/yirage/"
fi
strip --strip-debug "$dest"/bin/* "$dest"/lib/*.so* 2>/dev/null || true
echo "collect: $(ls "$dest/bin" | wc -l) programs, $(ls "$dest/lib" | wc -l) libraries in $dest"
