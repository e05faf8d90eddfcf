#!/usr/bin/env bash
# The main job, end to end: installs what is missing, builds, starts a
# yirage-server (SQLite database + a local CPU worker), optimizes an example
# graph, prints the result and the candidates, exports the best kernel, and
# stops the server.
#   scripts/quickstart.sh [GRAPH.json]   (default: examples/graphs/rms_norm_linear.json)
set -euo pipefail
cd "$(dirname "$0")/.."
GRAPH=${1:-examples/graphs/rms_norm_linear.json}
bash scripts/install-deps.sh
bash scripts/build.sh
BIN=${BUILD_DIR:-build}/bin
WORK=$(mktemp -d /tmp/yirage-quickstart.XXXXXX)
"$BIN/yirage-server" --listen 127.0.0.1:0 --worker-listen 127.0.0.1:0 \
  --metrics-listen 127.0.0.1:0 --db "$WORK/yirage.db" --local-workers auto \
  >"$WORK/server.log" 2>&1 &
SERVER_PID=$!
trap 'kill $SERVER_PID 2>/dev/null; wait $SERVER_PID 2>/dev/null || true' EXIT
for _ in $(seq 100); do
  grep -q "listening" "$WORK/server.log" && break
  sleep 0.1
done
ADDR=$(grep -o 'client=[^ ]*' "$WORK/server.log" | cut -d= -f2)
[ -n "$ADDR" ] || { cat "$WORK/server.log"; exit 1; }
echo "== yirage-server on $ADDR (database $WORK/yirage.db, log $WORK/server.log)"
CLIENT=("$BIN/yirage-client" --server "$ADDR")
echo "== workers"
sleep 1
"${CLIENT[@]}" workers
echo "== optimizing $GRAPH"
JOB=$("${CLIENT[@]}" submit "$GRAPH" --budget-candidates 24)
"${CLIENT[@]}" watch "$JOB"
echo "== candidates"
"${CLIENT[@]}" candidates "$JOB"
echo "== best kernel"
"${CLIENT[@]}" kernel "$JOB" --out "$WORK/kernel"
sleep 1  # the job gauges refresh every maintenance pass (0.5 s)
echo "== metrics (excerpt)"
curl -s "http://$(grep -o 'metrics=[^ ]*' "$WORK/server.log" | cut -d= -f2)/metrics" \
  | grep -E '^yirage_(jobs|candidates_evaluated_total|workers_connected)' || true
