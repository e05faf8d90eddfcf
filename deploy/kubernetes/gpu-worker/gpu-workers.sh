#!/bin/sh
# One yirage-worker per GPU this container can see (the GPU overlays'
# DaemonSets run it: the pod gets the node's GPUs from the device plugin).
# Counts them with `yirage-worker --probe --device N` for N = 0, 1, ... until
# one finds no device, then runs `yirage-worker --device N` for each, each
# restarted when it exits with an error (at once after a lost device, code 4;
# never after "no device", code 3). SIGTERM goes to every worker, each drains
# (--drain-seconds) and the script exits when all have.
# Environment: YIRAGE_BACKEND (cuda, hip, level_zero), YIRAGE_BACKEND_DIR
# (default /opt/yirage/lib), YIRAGE_MAX_DEVICES (default 64); arguments are
# passed to every worker.
set -u
backend=${YIRAGE_BACKEND:?set YIRAGE_BACKEND}
backend_dir=${YIRAGE_BACKEND_DIR:-/opt/yirage/lib}
max=${YIRAGE_MAX_DEVICES:-64}

n=0
while [ "$n" -lt "$max" ] &&
  yirage-worker --backend "$backend" --backend-dir "$backend_dir" --probe --device "$n" \
    >/dev/null 2>&1; do
  n=$((n + 1))
done
if [ "$n" -eq 0 ]; then
  echo "gpu-workers: no $backend device in this container; the worker says why:" >&2
  exec yirage-worker --backend "$backend" --backend-dir "$backend_dir" --device 0 "$@"
fi
echo "gpu-workers: $n $backend device(s): one worker each"

run_one() {
  device=$1
  shift
  child=
  trap 'if [ -n "$child" ]; then kill -TERM "$child" 2>/dev/null; wait "$child"; fi; exit 0' TERM INT
  while :; do
    # The worker itself in the background (not a function: a subshell's pid
    # would take the signal instead of the worker).
    yirage-worker --backend "$backend" --backend-dir "$backend_dir" --device "$device" "$@" &
    child=$!
    wait "$child"
    rc=$?
    child=
    case $rc in
      0) exit 0 ;;
      3) echo "gpu-workers: device $device: no device; not restarting it" >&2; exit 3 ;;
      4) delay=0 ;;
      *) delay=2 ;;
    esac
    echo "gpu-workers: device $device: worker exited with code $rc; restarting" >&2
    sleep "$delay"
  done
}

pids=
i=0
while [ "$i" -lt "$n" ]; do
  run_one "$i" "$@" &
  pids="$pids $!"
  i=$((i + 1))
done
# shellcheck disable=SC2154
trap 'for p in $pids; do kill -TERM "$p" 2>/dev/null; done' TERM INT
# The first wait returns when a signal arrives (the trap forwards it) or
# when every worker is done; the second waits for the drains.
wait
wait
