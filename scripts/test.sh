#!/usr/bin/env bash
# Runs the test suite (sets up .venv first), on every core (pytest-xdist), the 15 slowest tests listed at the end:
#   scripts/test.sh [--quick | --exhaustive | --tvm-versions] [pytest options]
# --quick: the inner loop's run (tests marked "quick": every framework module and example backend
# at least once, on the small example models).
# --exhaustive: also the tests marked "exhaustive" (each further scratchpad size, tile shape, network
# and backend pairing of what the default run tests once; the backend folders' too).
# --tvm-versions: the Relax engine on each apache-tvm release it claims (tests/test_relax_tvm_versions.py:
# .venv-relax's 0.27 and 0.26 in .venv-relax-0.26, made by scripts/tvm_versions.sh), outside the default run.
source "$(dirname "${BASH_SOURCE[0]}")/env.sh" test
cd "$ROOT"
ARGS=(-n auto --dist loadgroup --durations=15)
if [ "${1:-}" = --quick ]; then
  shift
  ARGS+=(-m quick)
elif [ "${1:-}" = --exhaustive ]; then
  shift
  ARGS+=(--exhaustive)
elif [ "${1:-}" = --tvm-versions ]; then
  shift
  source "$ROOT/scripts/tvm_versions.sh"
  ARGS+=(tests/test_relax_tvm_versions.py)
fi
exec python -m pytest "${ARGS[@]}" "$@"
