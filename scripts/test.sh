#!/usr/bin/env bash
# Runs the test suite (sets up .venv first), on every core (pytest-xdist), the 15 slowest tests listed at the end:
#   scripts/test.sh [--quick] [pytest options]
# --quick: the inner loop's run (tests marked "quick": every framework module and example backend
# at least once, on the small example models).
source "$(dirname "${BASH_SOURCE[0]}")/env.sh" test
cd "$ROOT"
ARGS=(-n auto --dist loadgroup --durations=15)
if [ "${1:-}" = --quick ]; then
  shift
  ARGS+=(-m quick)
fi
exec python -m pytest "${ARGS[@]}" "$@"
