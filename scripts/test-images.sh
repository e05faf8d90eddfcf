#!/usr/bin/env bash
# The images, end to end: builds yirage-server and yirage-worker-cpu with
# deploy/docker/build-images.sh, starts a server container and a CPU worker
# container on the host's network (free loopback ports), submits a graph
# with this build's yirage-client and waits for it to succeed.
#   scripts/test-images.sh BUILD_BIN
# Building the images compiles the project inside them (minutes on two
# cores), so the test runs only when YIRAGE_TEST_IMAGES=1; otherwise, or
# where no container builder works, it says why and exits 77 (skipped).
# MAKE_DEBIAN_BASE=1 makes the Debian base with debootstrap where no
# registry serves one (see build-images.sh). Where a CUDA toolkit is
# installed (CUDA_TOOLKIT, else /usr/local/cuda) it also builds
# yirage-worker-cuda on bases made from that toolkit and checks, without a
# GPU, that the worker's probe loads NVRTC and cuBLASLt from the image and
# says "no device" (exit 3), and that the image has the CUDA headers NVRTC
# compiles candidates with.
set -euo pipefail
cd "$(dirname "$0")/.."
bin=${1:-build/bin}
if [ "${YIRAGE_TEST_IMAGES:-0}" != 1 ]; then
  echo "test-images: skipped: set YIRAGE_TEST_IMAGES=1 to build and run the images (minutes)"
  exit 77
fi
command -v podman >/dev/null || { echo "test-images: skipped: podman is not installed"; exit 77; }
TAG=test-$$
export TAG
status=0
toolkit=${CUDA_TOOLKIT:-/usr/local/cuda}
targets=(server worker-cpu)
if [ -f "$toolkit/include/cuda_fp16.h" ]; then
  targets+=(worker-cuda)
else
  echo "test-images: no CUDA toolkit at $toolkit: yirage-worker-cuda is not built"
fi
CUDA_TOOLKIT=$toolkit bash deploy/docker/build-images.sh "${targets[@]}" || status=$?
[ $status -eq 0 ] || { echo "test-images: the images did not build (exit $status)"; exit $status; }
rt=(); command -v runc >/dev/null && rt=(--runtime runc)
run=(podman run "${rt[@]}" --ulimit nofile=4096:4096 --ulimit nproc=32768:32768 --rm -d --network host)
read -r client worker metrics < <(/usr/bin/python3 -c '
import socket
s = [socket.socket() for _ in range(3)]
for x in s: x.bind(("127.0.0.1", 0))
print(*[x.getsockname()[1] for x in s])')
server_id=$("${run[@]}" "yirage-server:$TAG" --listen "127.0.0.1:$client" \
  --worker-listen "127.0.0.1:$worker" --metrics-listen "127.0.0.1:$metrics" \
  --db /var/lib/yirage/yirage.db --local-workers none)
worker_id=""
cleanup() {
  [ -n "$worker_id" ] && podman rm -f "$worker_id" >/dev/null 2>&1
  podman rm -f "$server_id" >/dev/null 2>&1
  podman rmi -f "yirage-server:$TAG" "yirage-worker-cpu:$TAG" "yirage-worker-cuda:$TAG" \
    "localhost/yirage-cuda-devel:$TAG" "localhost/yirage-cuda-runtime:$TAG" >/dev/null 2>&1 || true
}
trap cleanup EXIT
worker_id=$("${run[@]}" "yirage-worker-cpu:$TAG" --scheduler "127.0.0.1:$worker")
for _ in $(seq 100); do
  (exec 3<>"/dev/tcp/127.0.0.1/$client") 2>/dev/null && break
  sleep 0.2
done
out=$("$bin/yirage-client" --server "127.0.0.1:$client" --timeout 300 submit \
  examples/graphs/rms_norm_linear.json --budget-candidates 4 --wait --json) || {
  echo "test-images: the job did not finish"; podman logs "$server_id" | tail -20
  podman logs "$worker_id" | tail -20; exit 1; }
echo "$out" | grep -q '"state": *"SUCCEEDED"' || {
  echo "test-images: the job did not succeed: $out"; exit 1; }
echo "test-images: a job ran through yirage-server:$TAG and yirage-worker-cpu:$TAG and SUCCEEDED"
[[ " ${targets[*]} " == *" worker-cuda "* ]] || exit 0
# No GPU is given to the container: the probe must say so (exit 3) after
# loading NVRTC and cuBLASLt from the image.
probe_status=0
probe=$(podman run "${rt[@]}" --ulimit nofile=4096:4096 --ulimit nproc=32768:32768 --rm \
  "yirage-worker-cuda:$TAG" --probe) || probe_status=$?
echo "test-images: yirage-worker-cuda --probe (exit $probe_status): $probe"
[ $probe_status -eq 3 ] || { echo "test-images: expected exit 3 (no device)"; exit 1; }
for key in nvrtc_version cublaslt_version; do
  echo "$probe" | grep -q "\"$key\":\"[0-9]" || { echo "test-images: the probe has no $key"; exit 1; }
done
podman run "${rt[@]}" --ulimit nofile=4096:4096 --ulimit nproc=32768:32768 --rm \
  --entrypoint /bin/sh "yirage-worker-cuda:$TAG" -c \
  'test -f /usr/local/cuda/include/cuda_fp16.h && test -f /usr/local/cuda/include/cuda_bf16.h' ||
  { echo "test-images: yirage-worker-cuda lacks the CUDA headers"; exit 1; }
echo "test-images: yirage-worker-cuda:$TAG loads NVRTC and cuBLASLt and says no device"
