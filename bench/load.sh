#!/usr/bin/env bash
# Load on one scheduler: starts yirage-server (a fresh database, no local
# workers) on free loopback ports and runs yirage-load against it:
# 1000 jobs submitted from 8 threads, then 64 simulated workers until every
# job is finished; prints submit latency, results stored per second, and
# that no job or result was lost. Arguments go to yirage-load (e.g.
# --jobs 200 --workers 16).   bench/load.sh [BUILD_DIR] [yirage-load flags]
# SERVER_LOG=FILE keeps the server's log there (default: removed with the
# run's temporary folder); SERVER_FLAGS adds flags to yirage-server's
# (e.g. "--confirm-winners=false --finalists 1").
set -euo pipefail
cd "$(dirname "$0")/.."
BUILD=${1:-build}
shift || true
cmake --build "$BUILD" --target yirage-server yirage-load >/dev/null
dir=$(mktemp -d)
read -r client worker metrics < <(/usr/bin/python3 -c '
import socket
s = [socket.socket() for _ in range(3)]
for x in s: x.bind(("127.0.0.1", 0))
print(*[x.getsockname()[1] for x in s])')
"$BUILD/bin/yirage-server" --listen "127.0.0.1:$client" --worker-listen "127.0.0.1:$worker" \
  --metrics-listen "127.0.0.1:$metrics" --db "$dir/load.db" --local-workers none ${SERVER_FLAGS:-} \
  >"${SERVER_LOG:-$dir/server.log}" 2>&1 &
server=$!
trap 'kill $server 2>/dev/null; wait $server 2>/dev/null; rm -rf "$dir"' EXIT
for _ in $(seq 100); do  # until the client port accepts
  (exec 3<>"/dev/tcp/127.0.0.1/$client") 2>/dev/null && break
  sleep 0.1
done
status=0
"$BUILD/bin/yirage-load" --client "127.0.0.1:$client" --worker "127.0.0.1:$worker" "$@" ||
  status=$?
echo "server RSS at the end: $(ps -o rss= -p $server) KiB"
sqlite3 "$dir/load.db" 'PRAGMA integrity_check;' | sed 's/^/integrity_check: /'
exit $status
