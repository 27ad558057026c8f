#!/usr/bin/env bash
# Runs the test suite (sets up .venv first): scripts/test.sh [pytest options]
source "$(dirname "${BASH_SOURCE[0]}")/env.sh" test
cd "$ROOT"
exec python -m pytest "$@"
