# Sourced by the other scripts with what to set up:
#   source scripts/env.sh demo   # .venv (Python 3.10) with requirements-demo.lock: the project's dependencies;
#                                # where no Python 3.10 is found, .venv-relax instead (the Relax engine)
#   source scripts/env.sh test   # the same .venv plus the rest of requirements.lock (test references, TensorFlow...),
#                                # and .venv-relax (the Relax engine, apache-tvm 0.27, with requirements-relax-test.lock);
#                                # where no Python 3.10 is found, .venv-relax alone (the Relay engine's tests skipped)
# then this project in editable mode.  Each step runs only when its input changed since it last ran there
# (a stamp file per step in the venv), and prints one line saying what it does.
# TVM_EXTENSION_VENV=DIR uses another venv.
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
VENV="${TVM_EXTENSION_VENV:-$ROOT/.venv}"
case "${1:-}" in
  demo) LOCK=requirements-demo.lock; PURPOSE="the demo" ;;
  test) LOCK=requirements.lock; PURPOSE="the tests" ;;
  *) echo "error: scripts/env.sh is sourced with 'demo' or 'test'" >&2; exit 2 ;;
esac

# find_python X.Y: that Python's interpreter (on PATH, or through pyenv), or nothing.
find_python() {
  # A pyenv shim may be on PATH without that version behind it: check that it runs.
  if "python$1" -c 'import sys' >/dev/null 2>&1; then command -v "python$1"; return; fi
  if command -v pyenv >/dev/null 2>&1; then
    local version
    for version in $(pyenv versions --bare 2>/dev/null | grep -E "^${1//./\\.}(\\.[0-9]+)?\$" | sort -V -r); do
      if [ -x "$(pyenv prefix "$version")/bin/python$1" ]; then echo "$(pyenv prefix "$version")/bin/python$1"; return; fi
    done
  fi
  local candidate
  for candidate in "${PYENV_ROOT:-$HOME/.pyenv}"/versions/"$1"*/bin/"python$1"; do
    if [ -x "$candidate" ]; then echo "$candidate"; return; fi
  done
}
find_python310() {
  find_python 3.10 | grep . && return
  echo "error: Python 3.10 is needed (TVM's hhb-tvm wheels exist only for 3.10): install it, e.g. 'pyenv install 3.10', or put python3.10 on PATH" >&2
  exit 1
}
# The Relax engine's Python: the newest of 3.13, 3.12, 3.11 found (apache-tvm installs on each), else 3.10;
# the interpreter itself (not a pyenv shim or a link to it), so that the environment is the same one
# however it was found.
find_relax_python() {
  local version python
  for version in 3.13 3.12 3.11; do python="$(find_python "$version")" && [ -n "$python" ] && break; done
  [ -n "$python" ] || python="$(find_python310)"
  "$python" -c 'import os, sys; print(os.path.realpath(sys.executable))' 2>/dev/null | grep . || echo "$python"
}

step() { echo "setup: $*" >&2; }
digest() { sha256sum < "$1" | cut -d' ' -f1; }
# stale NAME FILE: FILE changed since step NAME last ran in this venv.
stale() { [ "$(cat "$VENV/.installed-$1" 2>/dev/null)" != "$(digest "$2")" ]; }
done_step() { digest "$2" > "$VENV/.installed-$1"; }

# The Relay engine (hhb-tvm) exists only for Python 3.10; without one the demo runs on the Relax
# engine, and so do the tests (the Relay engine's are skipped, as pytest's header says).
RELAY_ENGINE=1
if [ ! -x "$VENV/bin/python" ] && [ -z "$(find_python 3.10)" ]; then
  RELAY_ENGINE=0
  TVM_EXTENSION_WITH_RELAX=1
  if [ "$1" = demo ]; then
    step "no Python 3.10 (the Relay engine's hhb-tvm needs it): the demo runs on the Relax engine (apache-tvm)"
  else
    step "no Python 3.10 (the Relay engine's hhb-tvm needs it): the tests run on the Relax engine alone (apache-tvm), the Relay engine's are skipped"
  fi
fi
if [ "$RELAY_ENGINE" = 1 ]; then
  if [ ! -x "$VENV/bin/python" ]; then
    PYTHON="$(find_python310)"
    step "creating the environment $VENV ($PYTHON)"
    "$PYTHON" -m venv "$VENV"
  fi
  PIP=("$VENV/bin/python" -m pip install --quiet --disable-pip-version-check)
  if stale "$1" "$ROOT/$LOCK"; then
    step "installing $(grep -c '^[^#]' "$ROOT/$LOCK") pinned packages for $PURPOSE ($LOCK)"
    "${PIP[@]}" -r "$ROOT/$LOCK"
    done_step "$1" "$ROOT/$LOCK"
  fi
  if stale project "$ROOT/pyproject.toml"; then
    step "installing this project (editable: $ROOT)"
    "${PIP[@]}" --no-deps -e "$ROOT"
    done_step project "$ROOT/pyproject.toml"
  fi
  # The four example backends, each a project of its own (uma_*/pyproject.toml), installed
  # together: tvmc finds them with no flag.
  BACKENDS=(uma_vanilla uma_qvanilla uma_strawberry uma_chocolate)
  BACKEND_PROJECTS="$(cd "$ROOT" && cat "${BACKENDS[@]/%//pyproject.toml}")"
  if stale backends <(echo "$BACKEND_PROJECTS"); then
    step "installing the example backends (editable: ${BACKENDS[*]})"
    "${PIP[@]}" --no-deps "${BACKENDS[@]/#/-e$ROOT/}"
    done_step backends <(echo "$BACKEND_PROJECTS")
  fi
fi
# The tests also run models on emulated Cortex-M boards (tests/test_board.py): the cross
# compiler, newlib and QEMU come from the system's packages (not for the demo); ccache keeps the
# objects of the kernel libraries every test's MLF build compiles again; Verilator and Yosys
# simulate and synthesize Chocolate's RTL (uma_chocolate/rtl).
if [ "$1" = test ] && ! { command -v arm-none-eabi-gcc && command -v qemu-system-arm && command -v ccache \
    && command -v verilator && command -v yosys \
    && [ -f "$(arm-none-eabi-gcc -print-file-name=rdimon.specs)" ]; } >/dev/null 2>&1; then
  APT_PACKAGES="gcc-arm-none-eabi libnewlib-arm-none-eabi qemu-system-arm ccache verilator yosys"
  if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null; then
    step "installing the Cortex-M cross compiler, QEMU, ccache, Verilator and Yosys (apt-get install $APT_PACKAGES)"
    { apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends \
        $APT_PACKAGES; } >/dev/null
  else
    step "warning: the board tests need a Cortex-M cross compiler and QEMU (and MLF builds use ccache), the RTL tests Verilator and Yosys: sudo apt-get install -y $APT_PACKAGES"
  fi
fi
# The Relax engine (tvm_extension/relax, docs/relax.md) runs on apache-tvm 0.27, whose package is
# named tvm like hhb-tvm's: an environment of its own, on the newest Python it finds, with this
# project and the example backends installed there too (editable, without the Relay engine's
# dependencies: their "tvm.backends" entry points register them at import tvm; its command is tvmc).
# tests/test_relax_engine.py runs it there.
RELAX_VENV="${TVM_EXTENSION_RELAX_VENV:-$ROOT/.venv-relax}"
RELAX_BACKENDS=(uma_vanilla uma_qvanilla uma_strawberry uma_chocolate)  # every example has a relax_patterns.py
# Made for the tests, and for the demo when TVM_EXTENSION_WITH_RELAX=1 (scripts/demo.sh --relax).
if [ "$1" = test ] || [ "${TVM_EXTENSION_WITH_RELAX:-}" = 1 ]; then
  RELAX_PYTHON="$(find_relax_python)"
  relax_input() {
    echo "$RELAX_PYTHON"
    cat "$ROOT/requirements-relax.lock" "$ROOT/pyproject.toml"
    for backend in "${RELAX_BACKENDS[@]}"; do cat "$ROOT/$backend/pyproject.toml"; done
    echo "$ROOT"
  }
  if [ ! -x "$RELAX_VENV/bin/python" ] || [ "$(cat "$RELAX_VENV/.installed-relax" 2>/dev/null)" != "$(digest <(relax_input))" ]; then
    step "setting up the Relax engine's environment $RELAX_VENV ($RELAX_PYTHON, requirements-relax.lock)"
    # Another Python than the one it was made with (a newer one installed since): made anew.
    if [ -x "$RELAX_VENV/bin/python" ] && ! grep -qx "$RELAX_PYTHON" "$RELAX_VENV/.python" 2>/dev/null; then
      rm -rf "$RELAX_VENV"
    fi
    if [ ! -x "$RELAX_VENV/bin/python" ]; then
      "$RELAX_PYTHON" -m venv "$RELAX_VENV"
      echo "$RELAX_PYTHON" > "$RELAX_VENV/.python"
    fi
    RELAX_PIP=("$RELAX_VENV/bin/python" -m pip install --quiet --disable-pip-version-check)
    "${RELAX_PIP[@]}" -r "$ROOT/requirements-relax.lock"
    "${RELAX_PIP[@]}" --no-deps "-e$ROOT" "${RELAX_BACKENDS[@]/#/-e$ROOT/}"
    digest <(relax_input) > "$RELAX_VENV/.installed-relax"
  fi
  # The suite's own packages there (pytest-xdist, hypothesis, ONNX Runtime): where no Python 3.10 is
  # found the suite runs in .venv-relax.  A stamp of their own: the demo does not need them.
  if [ "$1" = test ] && [ "$(cat "$RELAX_VENV/.installed-relax-test" 2>/dev/null)" != "$(digest "$ROOT/requirements-relax-test.lock")" ]; then
    step "installing the test suite's packages into $RELAX_VENV (requirements-relax-test.lock)"
    "$RELAX_VENV/bin/python" -m pip install --quiet --disable-pip-version-check -r "$ROOT/requirements-relax-test.lock"
    digest "$ROOT/requirements-relax-test.lock" > "$RELAX_VENV/.installed-relax-test"
  fi
fi
# Without the Relay engine (no Python 3.10), and for the demo's --relax, .venv-relax's tvmc and python come first.
if [ "$RELAY_ENGINE" = 0 ] || { [ "$1" = demo ] && [ "${TVM_EXTENSION_WITH_RELAX:-}" = 1 ]; }; then
  export PATH="$RELAX_VENV/bin:$PATH"
else export PATH="$VENV/bin:$PATH"; fi
