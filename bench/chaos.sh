#!/usr/bin/env bash
# Chaos: jobs on one scheduler with simulated workers (yirage-load) and real
# CPU workers while real workers and the server are SIGKILLed at random and
# restarted. At the end every job must be finished (SUCCEEDED, or FAILED
# where its baseline's workers kept dying), each job's candidates all final
# (generated = evaluated + failed + skipped), no job lost, and the database
# must pass PRAGMA integrity_check.
#   bench/chaos.sh [BUILD_DIR] [SECONDS]   (defaults: build, 90)
# CHAOS_JOBS (100), CHAOS_REAL_WORKERS (2), CHAOS_SIM_WORKERS (8), CHAOS_SEED;
# a simulated worker spends 500 ms on a batch.
set -euo pipefail
cd "$(dirname "$0")/.."
BUILD=${1:-build}
SECONDS_OF_CHAOS=${2:-90}
JOBS=${CHAOS_JOBS:-100}
REAL=${CHAOS_REAL_WORKERS:-2}
SIM=${CHAOS_SIM_WORKERS:-8}
RANDOM=${CHAOS_SEED:-$$}
cmake --build "$BUILD" --target yirage-server yirage-worker yirage-load yirage_backend_cpu >/dev/null
dir=$(mktemp -d)
read -r client worker metrics < <(/usr/bin/python3 -c '
import socket
s = [socket.socket() for _ in range(3)]
for x in s: x.bind(("127.0.0.1", 0))
print(*[x.getsockname()[1] for x in s])')
server=0
start_server() {
  "$BUILD/bin/yirage-server" --listen "127.0.0.1:$client" --worker-listen "127.0.0.1:$worker" \
    --metrics-listen "127.0.0.1:$metrics" --db "$dir/chaos.db" --local-workers none \
    --lease-seconds 3 --batch-size 2 >>"$dir/server.log" 2>&1 &
  server=$!
  for _ in $(seq 100); do  # until the client port accepts
    (exec 3<>"/dev/tcp/127.0.0.1/$client") 2>/dev/null && return 0
    sleep 0.1
  done
  echo "chaos: the server did not start" >&2
  return 1
}
declare -a real
start_real() {
  "$BUILD/bin/yirage-worker" --scheduler "127.0.0.1:$worker" --backend cpu \
    --worker-id "real-$1" >>"$dir/worker-$1.log" 2>&1 &
  real[$1]=$!
}
cleanup() {
  for p in "${real[@]}" $server ${load:-}; do kill -9 "$p" 2>/dev/null || true; done
  wait 2>/dev/null || true
  rm -rf "$dir"
}
trap cleanup EXIT
start_server
for i in $(seq "$REAL"); do start_real "$i"; done
# Small budgets so that jobs finish within the chaos: 4 candidates each.
"$BUILD/bin/yirage-load" --client "127.0.0.1:$client" --worker "127.0.0.1:$worker" \
  --jobs "$JOBS" --workers "$SIM" --candidates 4 --work-ms 500 --timeout 900 \
  >"$dir/load.log" 2>&1 &
load=$!
kills_server=0 kills_worker=0
end=$((SECONDS + SECONDS_OF_CHAOS))
while ((SECONDS < end)) && kill -0 $load 2>/dev/null; do
  sleep $((2 + RANDOM % 5))
  if ((RANDOM % 3 == 0)); then
    kill -9 $server 2>/dev/null || true
    wait $server 2>/dev/null || true
    kills_server=$((kills_server + 1))
    start_server
  else
    i=$((1 + RANDOM % REAL))
    kill -9 "${real[$i]}" 2>/dev/null || true
    wait "${real[$i]}" 2>/dev/null || true
    kills_worker=$((kills_worker + 1))
    start_real "$i"
  fi
done
echo "chaos: $kills_server server and $kills_worker worker SIGKILLs in $SECONDS s"
# yirage-load returns once every job is finished; a job may end FAILED here
# (a baseline whose workers kept dying), which is not a loss.
wait $load || true
grep -v "^yirage-load: SubmitJob" "$dir/load.log" || true
# Every job final, every candidate final, the database sound.
q() { sqlite3 "$dir/chaos.db" "$1"; }
jobs_in_db=$(q "SELECT count(*) FROM jobs")
unfinished=$(q "SELECT count(*) FROM jobs WHERE state NOT IN (3, 4, 5)")
open_candidates=$(q "SELECT count(*) FROM candidates c JOIN jobs j USING (job_id) WHERE c.status IN (1, 2)")
integrity=$(q "PRAGMA integrity_check")
echo "chaos: $jobs_in_db jobs stored, $unfinished unfinished, $open_candidates candidates pending or leased, integrity_check $integrity"
[ "$jobs_in_db" -eq "$JOBS" ] && [ "$unfinished" -eq 0 ] && [ "$open_candidates" -eq 0 ] &&
  [ "$integrity" = ok ] || { echo "chaos: FAILED" >&2; exit 1; }
echo "chaos: ok"
