#!/usr/bin/env bash
# Builds the YiRage images from deploy/docker/Dockerfile with podman, buildah
# or docker (the first that works here), tagged yirage-server,
# yirage-worker-cpu and yirage-worker-cuda at the version of this checkout.
#   deploy/docker/build-images.sh [TARGET...]   (default: all three)
# Environment: DEBIAN_IMAGE, CUDA_DEVEL_IMAGE, CUDA_RUNTIME_IMAGE (base
# images; see the Dockerfile), TAG (default: git describe), MAKE_DEBIAN_BASE=1
# (where no Debian 12 image can be pulled: make one with debootstrap from the
# Debian archive and import it as localhost/debian:12; needs root),
# CUDA_TOOLKIT=DIR (where NVIDIA's CUDA images cannot be pulled: make the
# CUDA bases from the toolkit installed in DIR, e.g. /usr/local/cuda, with
# deploy/docker/cuda-toolkit.Dockerfile, tagged localhost/yirage-cuda-devel
# and localhost/yirage-cuda-runtime).
# Exit codes: 0 built, 1 a build failed, 77 no working container builder.
set -euo pipefail
cd "$(dirname "$0")/../.."
targets=("$@")
[ ${#targets[@]} -eq 0 ] && targets=(server worker-cpu worker-cuda)
TAG=${TAG:-$(git describe --tags --always --dirty 2>/dev/null || echo dev)}

# podman and buildah need a runtime that works on this host's cgroups: crun
# refuses hybrid cgroup v1/v2 hosts, runc does not; some sandboxes refuse
# the runtimes' default resource limits, so they are set explicitly.
builder=()
if command -v podman >/dev/null; then
  rt=(); command -v runc >/dev/null && rt=(--runtime runc)
  nofile=$(ulimit -Hn); [ "$nofile" = unlimited ] || [ "$nofile" -gt 65536 ] && nofile=65536
  limits=(--ulimit "nofile=$nofile:$nofile" --ulimit nproc=32768:32768)
  builder=(podman build "${rt[@]}" "${limits[@]}")
elif command -v docker >/dev/null && docker info >/dev/null 2>&1; then
  builder=(docker build)
elif command -v buildah >/dev/null; then
  builder=(buildah bud)
else
  echo "build-images: skipped: no container builder here (podman, docker or buildah)"
  exit 77
fi

if [ "${MAKE_DEBIAN_BASE:-0}" = 1 ] && [ "${builder[0]}" = podman ] &&
    ! podman image exists localhost/debian:12; then
  command -v debootstrap >/dev/null || { echo "build-images: MAKE_DEBIAN_BASE needs debootstrap"; exit 77; }
  root=$(mktemp -d)
  trap 'rm -rf "$root"' EXIT
  debootstrap --variant=minbase bookworm "$root" http://deb.debian.org/debian >/dev/null
  tar -C "$root" -c . | podman import - localhost/debian:12 >/dev/null
  DEBIAN_IMAGE=localhost/debian:12
fi

if [ -n "${CUDA_TOOLKIT:-}" ] && [[ " ${targets[*]} " == *" worker-cuda "* ]]; then
  [ -f "$CUDA_TOOLKIT/include/cuda_fp16.h" ] ||
    { echo "build-images: CUDA_TOOLKIT=$CUDA_TOOLKIT has no include/cuda_fp16.h" >&2; exit 2; }
  base_args=()
  [ -n "${DEBIAN_IMAGE:-}" ] && base_args=(--build-arg "DEBIAN_IMAGE=$DEBIAN_IMAGE")
  for stage in devel runtime; do
    echo "build-images: localhost/yirage-cuda-$stage:$TAG from $CUDA_TOOLKIT"
    "${builder[@]}" "${base_args[@]}" --target "$stage" -t "localhost/yirage-cuda-$stage:$TAG" \
      -f "$PWD/deploy/docker/cuda-toolkit.Dockerfile" "$(readlink -f "$CUDA_TOOLKIT")" ||
      { echo "build-images: the CUDA $stage base failed" >&2; exit 1; }
  done
  CUDA_DEVEL_IMAGE=localhost/yirage-cuda-devel:$TAG
  CUDA_RUNTIME_IMAGE=localhost/yirage-cuda-runtime:$TAG
fi

args=(--build-arg "VERSION=$TAG")
for v in DEBIAN_IMAGE CUDA_DEVEL_IMAGE CUDA_RUNTIME_IMAGE; do
  [ -n "${!v:-}" ] && args+=(--build-arg "$v=${!v}")
done
status=0
for t in "${targets[@]}"; do
  case $t in
    server) name=yirage-server ;;
    worker-cpu) name=yirage-worker-cpu ;;
    worker-cuda) name=yirage-worker-cuda ;;
    *) echo "build-images: unknown target $t (server, worker-cpu, worker-cuda)" >&2; exit 2 ;;
  esac
  echo "build-images: $name:$TAG"
  if ! "${builder[@]}" "${args[@]}" --target "$t" -t "$name:$TAG" -f deploy/docker/Dockerfile .; then
    echo "build-images: $name failed" >&2
    status=1
  fi
done
exit $status
