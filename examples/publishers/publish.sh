#!/bin/sh
# Publishing from a shell script: `hookgate publish` speaks the wire format for you.
# Usage: [HOOKGATE=path/to/hookgate] publish.sh [ENDPOINT]
# Without HOOKGATE: `hookgate` on PATH, else the quickstart's build (build/release/hookgate).
set -eu
ENDPOINT=${1:-tcp://127.0.0.1:5556}
if [ -z "${HOOKGATE:-}" ]; then
  HOOKGATE=hookgate
  if ! command -v hookgate >/dev/null 2>&1; then
    HOOKGATE="$(cd "$(dirname "$0")/../.." && pwd)/build/release/hookgate"
  fi
fi
"$HOOKGATE" publish --endpoint "$ENDPOINT" --type user.created --source shell-example \
  --data '{"user":"ann","plan":"pro"}'
