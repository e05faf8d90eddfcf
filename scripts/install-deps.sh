#!/usr/bin/env bash
# Installs the Debian 12 packages YiRage needs to build and test. Idempotent:
# packages already present are skipped, so a warm machine pays nothing.
# libamdhip64-dev (HIP 5.2 headers, ~83 MB with its runtime) and libze-dev/libze1
# (Level Zero headers and loader) let the HIP and Level Zero backends build;
# without them CMake skips those backends. clang and libclang-rt-14-dev build
# the libFuzzer targets (scripts/fuzz.sh). In a checkout (not an image build,
# which copies this script alone) it also installs what the Kubernetes
# manifest test needs: kubectl (kubernetes-client) and node/npm where they
# are missing, then the npm validators (scripts/install-deploy-tools.sh).
# python3-yaml (also only in a checkout) lets tests/deploy/run_manifests_test.py
# read the rendered manifests.
#   scripts/install-deps.sh [--bench]
# python3-grpcio, python3-protobuf, python3-setuptools, python3-venv and
# python3-numpy: the Python SDK (client/python) and its test (tests/python);
# python3-matplotlib: its roofline plots (`yirage-client roofline` too).
# prometheus ships promtool, which checks the server's /metrics text in the
# integration tests (they skip that check without it).
# --bench also installs python3-torch (PyTorch 1.13, CPU), which
# bench/cpu_bench.sh times against; it is large, so tests and CI go without.
set -euo pipefail
PKGS=(build-essential cmake pkg-config git
      libgrpc++-dev libprotobuf-dev protobuf-compiler protobuf-compiler-grpc
      libabsl-dev libsqlite3-dev sqlite3 prometheus-cpp-dev libgtest-dev libgmock-dev
      libcli11-dev libyaml-cpp-dev nlohmann-json3-dev libspdlog-dev libfmt-dev libomp-dev curl python3
      clang-format openssl clang libclang-rt-14-dev
      libopenblas0-pthread prometheus
      python3-grpcio python3-protobuf python3-setuptools python3-venv python3-numpy
      python3-matplotlib
      libamdhip64-dev libze-dev libze1)
if [ "${1:-}" = "--bench" ]; then PKGS+=(python3-torch); fi
HERE=$(cd "$(dirname "$0")" && pwd)
DEPLOY_TOOLS=0
if [ -f "$HERE/install-deploy-tools.sh" ]; then
  DEPLOY_TOOLS=1
  PKGS+=(python3-yaml)
  # Only where missing: another kubectl or node (a cloud SDK's, NodeSource's)
  # would conflict with Debian's packages.
  command -v kubectl >/dev/null || PKGS+=(kubernetes-client)
  command -v node >/dev/null || PKGS+=(nodejs)
  command -v npm >/dev/null || PKGS+=(npm)
fi
missing=()
for p in "${PKGS[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if ((${#missing[@]})); then
  echo "install-deps: installing ${missing[*]}"
  SUDO=""; [ "$(id -u)" -ne 0 ] && SUDO=sudo
  export DEBIAN_FRONTEND=noninteractive
  $SUDO apt-get update -qq
  $SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
else
  echo "install-deps: all packages present"
fi
if [ "$DEPLOY_TOOLS" = 1 ]; then
  bash "$HERE/install-deploy-tools.sh" || echo "install-deps: the npm validators are not installed" \
    "(tests/deploy/check-kubernetes.sh installs them or skips)"
fi
