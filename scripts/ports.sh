# Sourced by scripts/quickstart and the example run scripts (not run on its own); needs $PYTHON.
#
# use_ports VARIABLE:DEFAULT...: exports each VARIABLE as a TCP port on 127.0.0.1. A port you set
# is used as it is; a default port another program holds (9464 is also OpenTelemetry's
# Prometheus exporter's, 8787 RStudio Server's) is swapped for a free one, and the swap is said.
port_for() {  # VARIABLE DEFAULT
  if [ -n "${!1:-}" ]; then echo "${!1}"; return; fi
  "$PYTHON" - "$2" <<'PY'
import socket, sys
wanted = int(sys.argv[1])
s = socket.socket()
s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)  # a connection in TIME_WAIT is no owner
try:
    s.bind(("127.0.0.1", wanted))
    print(wanted)
except OSError:
    s.close()
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    print(s.getsockname()[1])
PY
}
use_ports() {  # VARIABLE:DEFAULT...
  local spec name default port
  for spec in "$@"; do
    name=${spec%%:*} default=${spec#*:}
    port=$(port_for "$name" "$default")
    [ "$port" = "$default" ] || [ -n "${!name:-}" ] ||
      echo "== port $default is taken by another program; using $port ($name)"
    export "$name=$port"
  done
}
