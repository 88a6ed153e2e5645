#!/bin/sh
# Publishing from a shell script: `hookgate publish` speaks the wire format for you.
# Usage: [HOOKGATE=path/to/hookgate] publish.sh [ENDPOINT]
# Without HOOKGATE: `hookgate` on PATH, else the quickstart's build (build/release/hookgate),
# else a build by hand (build/hookgate).
set -eu
ENDPOINT=${1:-tcp://127.0.0.1:5556}
if [ -z "${HOOKGATE:-}" ]; then
  HOOKGATE=hookgate
  if ! command -v hookgate >/dev/null 2>&1; then
    root="$(cd "$(dirname "$0")/../.." && pwd)"
    for candidate in "$root/build/release/hookgate" "$root/build/hookgate"; do
      if [ -x "$candidate" ]; then HOOKGATE=$candidate; break; fi
    done
  fi
fi
if ! command -v "$HOOKGATE" >/dev/null 2>&1; then
  echo "publish.sh: no hookgate binary found; build one (README) or set HOOKGATE=path/to/hookgate" >&2
  exit 127
fi
"$HOOKGATE" publish --endpoint "$ENDPOINT" --type user.created --source shell-example \
  --data '{"user":"ann","plan":"pro"}'
