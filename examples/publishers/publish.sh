#!/bin/sh
# Publishing from a shell script: `hookgate publish` speaks the wire format for you.
# Usage: publish.sh [ENDPOINT]
set -eu
ENDPOINT=${1:-tcp://127.0.0.1:5556}
HOOKGATE=${HOOKGATE:-hookgate}
"$HOOKGATE" publish --endpoint "$ENDPOINT" --type user.created --source shell-example \
  --data '{"user":"ann","plan":"pro"}'
