# Sourced by the other scripts: makes .venv (Python 3.10) with the pinned packages and
# this project installed in editable mode.  Re-installs only when the pins change.
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
VENV="${TVM_EXTENSION_VENV:-$ROOT/.venv}"

find_python310() {
  # A pyenv shim may be on PATH without a 3.10 behind it: check that it runs.
  if python3.10 -c 'import sys' >/dev/null 2>&1; then command -v python3.10; return; fi
  if command -v pyenv >/dev/null 2>&1; then
    local version
    for version in $(pyenv versions --bare 2>/dev/null | grep -E '^3\.10(\.[0-9]+)?$' | sort -V -r); do
      if [ -x "$(pyenv prefix "$version")/bin/python3.10" ]; then echo "$(pyenv prefix "$version")/bin/python3.10"; return; fi
    done
  fi
  local candidate
  for candidate in "${PYENV_ROOT:-$HOME/.pyenv}"/versions/3.10*/bin/python3.10; do
    if [ -x "$candidate" ]; then echo "$candidate"; return; fi
  done
  echo "error: Python 3.10 is needed (TVM's hhb-tvm wheels exist only for 3.10): install it, e.g. 'pyenv install 3.10', or put python3.10 on PATH" >&2
  exit 1
}

if [ ! -x "$VENV/bin/python" ]; then
  "$(find_python310)" -m venv "$VENV"
fi
STAMP="$VENV/.installed"
WANT="$(cat "$ROOT/requirements.lock" "$ROOT/pyproject.toml" | sha256sum | cut -d' ' -f1)"
if [ "$(cat "$STAMP" 2>/dev/null)" != "$WANT" ]; then
  "$VENV/bin/python" -m pip install --quiet --disable-pip-version-check -r "$ROOT/requirements.lock"
  "$VENV/bin/python" -m pip install --quiet --disable-pip-version-check --no-deps -e "$ROOT"
  echo "$WANT" > "$STAMP"
fi
export PATH="$VENV/bin:$PATH"
