#!/usr/bin/env bash
# Random graphs through the whole system: bench/random_graphs.py writes COUNT
# graphs for SEED, a server and one worker of BACKEND run each as a job
# (BUDGET candidates), and the summary says, for every graph, whether the job
# succeeded, how many candidates verified, failed verification or failed to
# compile or run, and the first error of each kind. A candidate that runs
# and gives wrong numbers is a bug of the kernel that made it.
#   bench/random_jobs.sh BIN BACKEND [COUNT] [SEED]
# BIN: a build's bin folder, or a bundle made by ../shared/tools/bundle.sh
# (its `run` wrapper). Environment: BUDGET (8), JOB_SECONDS (120),
# OUT (/tmp/yirage-random), MAX_ELEMENTS and MAX_K (random_graphs.py's).
# Exit status 0 when every job succeeded and no candidate gave wrong numbers.
set -uo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
BIN=$(cd "${1:?usage: random_jobs.sh BIN BACKEND [COUNT] [SEED]}" && pwd)
BACKEND=${2:?backend}
COUNT=${3:-42}
SEED=${4:-1}
OUT=${OUT:-/tmp/yirage-random}
PY=/usr/bin/python3
[ -x "$PY" ] || PY=python3
rm -rf "$OUT" && mkdir -p "$OUT/graphs"
"$PY" "$ROOT/bench/random_graphs.py" "$OUT/graphs" --count "$COUNT" --seed "$SEED" \
  --max-elements "${MAX_ELEMENTS:-1048576}" --max-k "${MAX_K:-1024}"
if [ -x "$BIN/run" ]; then
  yy() { "$BIN/run" "$@"; }
  LIBDIR=$BIN/lib
else
  yy() { "$BIN/$1" "${@:2}"; }
  LIBDIR=$BIN
fi
yy yirage-server --listen 127.0.0.1:0 --worker-listen 127.0.0.1:0 --metrics-listen 127.0.0.1:0 \
  --db "$OUT/yirage.db" --local-workers none >"$OUT/server.log" 2>&1 &
SERVER=$!
WORKER=
trap 'kill $WORKER $SERVER 2>/dev/null; wait 2>/dev/null' EXIT
for _ in $(seq 100); do grep -q listening "$OUT/server.log" && break; sleep 0.1; done
C=$(grep -o 'client=[^ ]*' "$OUT/server.log" | cut -d= -f2)
W=$(grep -o 'worker=[^ ]*' "$OUT/server.log" | cut -d= -f2)
yy yirage-worker --scheduler "$W" --backend "$BACKEND" --backend-dir "$LIBDIR" >"$OUT/worker.log" 2>&1 &
WORKER=$!
for _ in $(seq 150); do
  yy yirage-client --server "$C" workers 2>/dev/null | grep -q "$BACKEND" && break
  sleep 0.2
done
for g in "$OUT"/graphs/*.json; do
  name=$(basename "$g" .json)
  if ! timeout "${JOB_SECONDS:-120}" bash -c "$(declare -f yy); BIN='$BIN'; yy yirage-client --server '$C' submit '$g' --backend '$BACKEND' --budget-candidates '${BUDGET:-8}' --wait" \
      >"$OUT/$name.submit.log" 2>&1; then
    echo "(submit of $name ended with an error; see $OUT/$name.submit.log)" >>"$OUT/notes.txt"
  fi
done
yy yirage-client --server "$C" list --json >"$OUT/jobs.json"
"$PY" - "$OUT" "$C" "$BIN" <<'PY'
import json, os, subprocess, sys
out, server, binpath = sys.argv[1:]
run = [os.path.join(binpath, "run"), "yirage-client"] if os.path.exists(os.path.join(binpath, "run")) \
    else [os.path.join(binpath, "yirage-client")]
jobs = json.load(open(os.path.join(out, "jobs.json"))).get("jobs", [])
by_graph = {}
for j in jobs:
    by_graph.setdefault(j.get("graph", ""), j)
graphs = sorted(f[:-5] for f in os.listdir(os.path.join(out, "graphs")) if f.endswith(".json"))
bad = 0
totals = {"jobs": 0, "succeeded": 0, "verified": 0, "wrong": 0, "error": 0, "other": 0}
print(f"{'graph':<40} {'state':<10} {'verified':>8} {'wrong':>6} {'error':>6} {'other':>6}  first failure")
for name in graphs:
    totals["jobs"] += 1
    j = by_graph.get(name)
    if j is None:
        bad += 1
        msg = open(os.path.join(out, name + ".submit.log")).read().strip().splitlines()
        print(f"{name:<40} {'REFUSED':<10} {'':>8} {'':>6} {'':>6} {'':>6}  {msg[-1][:150] if msg else ''}")
        continue
    state = j.get("state", "")
    totals["succeeded"] += state == "SUCCEEDED"
    cands = json.loads(subprocess.run(run + ["--server", server, "--json", "candidates", j["job_id"]],
                                      capture_output=True, text=True).stdout or "{}").get("candidates", [])
    counts = {"verified": 0, "wrong": 0, "error": 0, "other": 0}
    first = ""
    for c in cands:
        s = c.get("status", "")
        if s == "VERIFIED":
            counts["verified"] += 1
        elif s == "MISMATCH":
            counts["wrong"] += 1
            first = first or f"#{c.get('candidate_id')} wrong: {c.get('error', '')[:140]}"
        elif s == "ERROR":
            counts["error"] += 1
            first = first or f"#{c.get('candidate_id')} error: {c.get('error', '')[:140]}"
        else:
            counts["other"] += 1
    for k, v in counts.items():
        totals[k] += v
    if state != "SUCCEEDED" or counts["wrong"] > 0:
        bad += 1
        first = first or j.get("message", "")[:150]
    print(f"{name:<40} {state:<10} {counts['verified']:>8} {counts['wrong']:>6} {counts['error']:>6} "
          f"{counts['other']:>6}  {first}")
print(f"\n{totals['succeeded']} of {totals['jobs']} jobs succeeded; candidates: {totals['verified']} "
      f"verified, {totals['wrong']} wrong numbers, {totals['error']} errors, {totals['other']} other")
sys.exit(1 if bad else 0)
PY
