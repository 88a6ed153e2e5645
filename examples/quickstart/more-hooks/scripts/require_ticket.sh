#!/bin/sh
# Body of _50_require_ticket.yaml. The gateway sends compact JSON on stdin; a grep is enough to
# find "ticket":"OPS-42". Kept in scripts/: an executable directly in a hooks directory would be
# loaded as a program hook (a co-process) of its own.
if grep -Eq '"ticket"[[:space:]]*:[[:space:]]*"[A-Z][A-Z0-9]*-[0-9]+"'; then
  exit 0
fi
echo "deploy of ${HOOKGATE_EVENT_SOURCE:-an unknown source} has no change ticket (data.ticket like OPS-42)" >&2
exit 1
