#!/usr/bin/env bash
# The Kubernetes manifests (deploy/kubernetes): renders the base, the shared
# GPU worker and every overlay with `kubectl kustomize` (any error fails),
# runs the GPU launcher (gpu-workers.sh) against a stand-in worker, and
# validates every rendered object against the Kubernetes OpenAPI schema
# (validate-k8s.js, with the npm packages of scripts/install-deploy-tools.sh,
# installed on first use).
#   tests/deploy/check-kubernetes.sh [BUILD_DIR]
# Exit codes: 0 passed, 1 failed, 77 skipped (no kubectl, or no node/npm for
# the schema part; the message says which).
set -uo pipefail
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
BUILD=${1:-$ROOT/build}
K8S=$ROOT/deploy/kubernetes
TOOLS=$BUILD/deploy-tools
OUT=$(mktemp -d)
trap 'rm -rf "$OUT"' EXIT
fail=0

if ! command -v kubectl >/dev/null; then
  echo "check-kubernetes: skipped: kubectl is not installed (Debian: kubernetes-client;" \
    "scripts/install-deps.sh installs it)"
  exit 77
fi
echo "check-kubernetes: $(kubectl version --client 2>/dev/null | head -n 2 | tr '\n' ' ')"

# 1. Every kustomization renders.
dirs=(base gpu-worker)
for d in "$K8S"/overlays/*/; do dirs+=("overlays/$(basename "$d")"); done
rendered=()
for d in "${dirs[@]}"; do
  out="$OUT/$(echo "$d" | tr / _).yaml"
  # kubectl 1.2x prints kustomize's deprecation warnings as "# Warning"
  # comments; errors go to stderr with a non-zero exit.
  if ! kubectl kustomize "$K8S/$d" >"$out" 2>"$OUT/err"; then
    echo "FAIL kubectl kustomize $d:"
    sed 's/^/  /' "$OUT/err"
    fail=1
    continue
  fi
  if ! grep -q '^kind: ' "$out"; then
    echo "FAIL kubectl kustomize $d: no objects"
    fail=1
    continue
  fi
  echo "ok   kubectl kustomize $d: $(grep -c '^kind: ' "$out") objects"
  rendered+=("$out")
done

# 2. The GPU launcher: counts the devices through --probe --device N, starts
# one worker a device with the arguments given, and on SIGTERM lets every
# worker drain before it exits 0.
mkdir -p "$OUT/bin"
cat >"$OUT/bin/yirage-worker" <<'WORKER'
#!/bin/sh
device=0; probe=0; prev=
for a in "$@"; do
  [ "$prev" = --device ] && device=$a
  [ "$a" = --probe ] && probe=1
  prev=$a
done
if [ "$probe" = 1 ]; then [ "$device" -lt 3 ] && exit 0; exit 3; fi
echo "start $device $*" >>"$LAUNCH_LOG"
trap 'sleep 0.3; echo "drained $device" >>"$LAUNCH_LOG"; exit 0' TERM
while :; do sleep 0.05; done
WORKER
chmod +x "$OUT/bin/yirage-worker"
export LAUNCH_LOG=$OUT/launch.log
PATH="$OUT/bin:$PATH" YIRAGE_BACKEND=cuda sh "$K8S/gpu-worker/gpu-workers.sh" --scheduler=s:1 \
  >"$OUT/launch.out" 2>&1 &
launcher=$!
for _ in $(seq 100); do
  [ "$(grep -c '^start' "$LAUNCH_LOG" 2>/dev/null)" = 3 ] && break
  sleep 0.05
done
kill -TERM "$launcher"
wait "$launcher"
rc=$?
starts=$(grep -c "^start [012] --backend cuda --backend-dir /opt/yirage/lib --device [012] --scheduler=s:1$" \
  "$LAUNCH_LOG" 2>/dev/null)
drains=$(grep -c '^drained' "$LAUNCH_LOG" 2>/dev/null)
if [ "$rc" = 0 ] && [ "$starts" = 3 ] && [ "$drains" = 3 ]; then
  echo "ok   gpu-workers.sh: 3 devices, 3 workers, all drained on SIGTERM"
else
  echo "FAIL gpu-workers.sh: exit $rc, $starts workers started, $drains drained (want 0, 3, 3):"
  sed 's/^/  /' "$OUT/launch.out" "$LAUNCH_LOG" 2>/dev/null
  fail=1
fi

# 3. Every rendered object against the schema.
if ! command -v node >/dev/null || ! command -v npm >/dev/null; then
  echo "check-kubernetes: schema validation skipped: node and npm are not installed" \
    "(Debian: nodejs npm; scripts/install-deps.sh installs them)"
  [ "$fail" = 0 ] && exit 77
  exit 1
fi
if ! bash "$ROOT/scripts/install-deploy-tools.sh" "$TOOLS" >"$OUT/npm.log" 2>&1; then
  echo "FAIL scripts/install-deploy-tools.sh $TOOLS:"
  sed 's/^/  /' "$OUT/npm.log"
  exit 1
fi
if ((${#rendered[@]})); then
  if ! YIRAGE_DEPLOY_TOOLS=$TOOLS node "$ROOT/tests/deploy/validate-k8s.js" "${rendered[@]}" \
      | sed "s|$OUT/||"; then
    fail=1
  fi
fi
# The validator itself must refuse bad objects: a value of the wrong type,
# and a misspelt field.
cat >"$OUT/bad.yaml" <<'BAD'
apiVersion: apps/v1
kind: Deployment
metadata:
  name: wrong-type
spec:
  replicas: "two"
  selector: {}
  template:
    spec:
      containers:
      - name: c
        readinessProbe:
          grpc:
            port: "50051"
---
apiVersion: apps/v1
kind: Deployment
metadata:
  name: unknown-field
spec:
  selector: {}
  template:
    spec:
      containers:
      - name: c
        readinesProbe:
          grpc:
            port: 50051
BAD
YIRAGE_DEPLOY_TOOLS=$TOOLS node "$ROOT/tests/deploy/validate-k8s.js" "$OUT/bad.yaml" \
  >"$OUT/bad.out" 2>&1
if grep -q '^2 objects, 2 invalid$' "$OUT/bad.out" &&
    grep -q 'readinesProbe: unknown field' "$OUT/bad.out"; then
  echo "ok   validate-k8s.js refuses a wrong type and an unknown field"
else
  echo "FAIL validate-k8s.js accepted an invalid object:"
  sed 's/^/  /' "$OUT/bad.out"
  fail=1
fi

[ "$fail" = 0 ] && echo "check-kubernetes: passed" || echo "check-kubernetes: FAILED"
exit "$fail"
