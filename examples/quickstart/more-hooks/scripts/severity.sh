#!/bin/sh
# Body of _60_severity.yaml: prints the event with "severity" added as its first attribute.
# HOOKGATE_EVENT_TYPE, HOOKGATE_EVENT_ID and HOOKGATE_EVENT_SOURCE are in the environment.
event=$(cat)
case $event in
  *'"severity"'*) exit 0 ;;  # already there (or mentioned somewhere): leave the event alone
esac
case $HOOKGATE_EVENT_TYPE in
  *.failure | *.failed) severity=warning ;;
  *) severity=info ;;
esac
# The event is one JSON object: drop its opening brace and put the new attribute first.
printf '{"severity":"%s",%s\n' "$severity" "${event#?}"
