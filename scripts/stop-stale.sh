# Sourced by scripts/quickstart and the example run scripts (not run on its own).
#
# record_pid FILE PID: notes a process this run started, with its start time.
# stop_stale DIR: stops what a previous run left behind in DIR/*.pid. Only a pid whose start time
# still matches is ours: after a reboot or a container restart the number may belong to anything
# (a match on the command line would also hit an editor or ctest run from a folder named
# hookgate). Waits until each is gone, so its ports are free again; one that ignores SIGTERM for
# 10 s (a gateway draining a long shutdown_grace_ms) gets SIGKILL rather than being orphaned.

# pid_start PID: the process's start time in clock ticks since boot (field 22 of
# /proc/PID/stat, counted after the parenthesised name, which may hold spaces); empty when gone.
pid_start() {
  local stat
  stat=$(cat "/proc/$1/stat" 2>/dev/null) || return 0
  stat=${stat##*) }
  # shellcheck disable=SC2086  # word splitting is the point
  set -- $stat
  echo "${20:-}"
}

record_pid() {
  echo "$2 $(pid_start "$2")" >"$1"
}

stop_stale() {
  local pidfile pid start
  for pidfile in "$1"/*.pid; do
    [ -e "$pidfile" ] || continue
    pid='' start=''
    read -r pid start <"$pidfile" || true
    if [ -n "$pid" ] && [ -n "$start" ] && [ "$(pid_start "$pid")" = "$start" ]; then
      kill "$pid" 2>/dev/null || true
      for _ in $(seq 100); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
      if kill -0 "$pid" 2>/dev/null; then
        echo "stop_stale: process $pid ($pidfile) ignored SIGTERM for 10 s; sending SIGKILL" >&2
        kill -KILL "$pid" 2>/dev/null || true
        for _ in $(seq 50); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
      fi
    fi
    rm -f "$pidfile"
  done
}
