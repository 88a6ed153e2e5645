# Sourced by the walkthroughs (scripts/quickstart, examples/*/run): builds what a walkthrough runs
# and sets `kind` to the build it runs from. A person gets the release build; CI passes
# HOOKGATE_DEMO_BUILD=test to run them on the sanitizer build the tests just made (seconds, not a
# second full build).
demo_build() {  # NAME [TARGET...]
  local name=$1
  shift
  kind=${HOOKGATE_DEMO_BUILD:-release}
  case "$kind" in
    release | test) ;;
    *) echo "$name: HOOKGATE_DEMO_BUILD must be release or test" >&2; exit 2 ;;
  esac
  bash scripts/build "$kind" "$@"
}
