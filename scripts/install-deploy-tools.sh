#!/usr/bin/env bash
# Installs the npm packages the Kubernetes manifest test
# (tests/deploy/check-kubernetes.sh) validates with, into
# ${BUILD_DIR:-build}/deploy-tools (or the folder given): kubernetes-models
# (Kubernetes OpenAPI validators, run by @kubernetes-models/validate) and
# js-yaml. Versions are pinned; a folder that has them is left as it is, so
# a warm machine pays nothing. Needs node and npm (Debian: nodejs, npm) and
# the npm registry once; validation then works offline.
#   scripts/install-deploy-tools.sh [DIR]
# Exit codes: 0 installed or present, 1 npm failed, 77 no node or npm here.
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
DIR=${1:-$ROOT/${BUILD_DIR:-build}/deploy-tools}
PACKAGES=(kubernetes-models@4.5.1 js-yaml@4.1.0)
if ! command -v node >/dev/null || ! command -v npm >/dev/null; then
  echo "install-deploy-tools: skipped: node and npm are not installed (Debian: nodejs npm)" >&2
  exit 77
fi
stamp="$DIR/.installed"
if [ -f "$stamp" ] && [ "$(cat "$stamp")" = "${PACKAGES[*]}" ] &&
    [ -d "$DIR/node_modules/kubernetes-models" ] && [ -d "$DIR/node_modules/js-yaml" ]; then
  echo "install-deploy-tools: ${PACKAGES[*]} present in $DIR"
  exit 0
fi
mkdir -p "$DIR"
[ -f "$DIR/package.json" ] || echo '{"name":"yirage-deploy-tools","private":true}' > "$DIR/package.json"
echo "install-deploy-tools: npm install ${PACKAGES[*]} into $DIR"
if ! npm install --prefix "$DIR" --no-audit --no-fund --loglevel=error "${PACKAGES[@]}" >&2; then
  echo "install-deploy-tools: npm install failed" >&2
  exit 1
fi
echo "${PACKAGES[*]}" > "$stamp"
