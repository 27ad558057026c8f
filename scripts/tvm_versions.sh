# Sourced by scripts/test.sh --tvm-versions after scripts/env.sh test: the Relax engine's environment on
# each other apache-tvm release it claims (TESTED_VERSIONS in tvm_extension/relax/tvm_internals.py;
# .venv-relax has 0.27): .venv-relax-0.26, made as env.sh makes .venv-relax (requirements-relax.lock but
# its apache-tvm, this project and the example backends editable), again only when its inputs changed.
# Exports TVM_VERSIONS_PYTHON (their Pythons, ':' between them) for tests/test_relax_tvm_versions.py.
OTHER_TVM_VERSIONS=(0.26.0)
TVM_VERSIONS_PYTHON=""
for TVM_VERSION in "${OTHER_TVM_VERSIONS[@]}"; do
  VERSION_VENV="$ROOT/.venv-relax-${TVM_VERSION%.*}"
  version_input() {  # .venv-relax's inputs (env.sh's relax_input), and the release
    echo "apache-tvm==$TVM_VERSION"
    relax_input
  }
  if [ ! -x "$VERSION_VENV/bin/python" ] || \
      [ "$(cat "$VERSION_VENV/.installed-relax" 2>/dev/null)" != "$(digest <(version_input))" ]; then
    step "setting up the Relax engine on apache-tvm $TVM_VERSION: $VERSION_VENV ($RELAX_PYTHON)"
    rm -rf "$VERSION_VENV"
    "$RELAX_PYTHON" -m venv "$VERSION_VENV"
    VERSION_PIP=("$VERSION_VENV/bin/python" -m pip install --quiet --disable-pip-version-check)
    "${VERSION_PIP[@]}" "apache-tvm==$TVM_VERSION" -r <(grep -v '^apache-tvm==' "$ROOT/requirements-relax.lock")
    "${VERSION_PIP[@]}" --no-deps "-e$ROOT" "${RELAX_BACKENDS[@]/#/-e$ROOT/}"
    digest <(version_input) > "$VERSION_VENV/.installed-relax"
  fi
  TVM_VERSIONS_PYTHON="${TVM_VERSIONS_PYTHON:+$TVM_VERSIONS_PYTHON:}$VERSION_VENV/bin/python"
done
export TVM_VERSIONS_PYTHON
