# Sourced by scripts/quickstart and the example run scripts (not run on its own).
# stop_stale DIR: stops what a previous run left behind in DIR/*.pid, but only a pid that is still
# one of ours (hookgate or one of the example Python programs): after a reboot or a SIGKILL the
# number may belong to something else. Waits until each is gone, so its ports are free again.
stop_stale() {
  local pidfile pid
  for pidfile in "$1"/*.pid; do
    [ -e "$pidfile" ] || continue
    pid=$(cat "$pidfile")
    if [ -n "$pid" ] && grep -qaE 'hookgate|receiver\.py|hec_receiver\.py|tap\.py|tail' "/proc/$pid/cmdline" 2>/dev/null; then
      kill "$pid" 2>/dev/null || true
      for _ in $(seq 50); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
    fi
    rm -f "$pidfile"
  done
}
