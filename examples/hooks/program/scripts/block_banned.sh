#!/bin/sh
# One-shot veto hook body (see ../_50_block_banned.yaml): the event JSON arrives on stdin.
# Exit 1 (listed in veto_exit_codes) vetoes with stderr as the reason; exit 0 lets it through.
# A grep over the JSON text is enough for a demo; it matches a "user" key at any depth.
if grep -Eq '"user"[[:space:]]*:[[:space:]]*"mallory"'; then
  echo "user mallory is banned" >&2
  exit 1
fi
exit 0
