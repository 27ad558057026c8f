#!/usr/bin/env bash
# The main job on the embedded default: compile examples/models/cnn.onnx for the Vanilla
# accelerator with tvmc (the mission's command), build the MLF with gcc, run it and check it.
#   scripts/demo.sh [MODEL.onnx] [OUT_DIR]           # the Relay engine (hhb-tvm, TVM 0.16's own tvmc) where a
#                                                    # Python 3.10 is found, else the Relax engine
#   scripts/demo.sh --relax [MODEL.onnx] [OUT_DIR]   # the Relax engine (apache-tvm 0.27): the same MLF
#                                                    # commands, then its VM's library
if [ "${1:-}" = --relax ]; then TVM_EXTENSION_WITH_RELAX=1; shift; fi
source "$(dirname "${BASH_SOURCE[0]}")/env.sh" demo
MODEL="${1:-$ROOT/examples/models/cnn.onnx}"
OUT="${2:-$ROOT/out}"
mkdir -p "$OUT"
set -x
tvmc compile --target vanilla_accelerator --experimental-tvm-extension "$ROOT/uma_vanilla" \
  "$MODEL" -f mlf -o "$OUT/model.tar"
python "$ROOT/examples/make_input.py" "$MODEL" "$OUT/input.npz"
python -m tvm_extension.mlf run "$OUT/model.tar" -i "$OUT/input.npz" -o "$OUT/output.npz"
python "$ROOT/examples/check_output.py" "$MODEL" "$OUT/input.npz" "$OUT/output.npz" "$OUT/model.tar"
if [ "${TVM_EXTENSION_WITH_RELAX:-}" = 1 ]; then
  # The same model for the Relax VM: a shared library, run by tvmc
  tvmc compile "$MODEL" --target vanilla_accelerator -o "$OUT/model.so"
  tvmc run "$OUT/model.so" -i "$OUT/input.npz" -o "$OUT/output_vm.npz"
  python "$ROOT/examples/check_output.py" "$MODEL" "$OUT/input.npz" "$OUT/output_vm.npz"
fi
