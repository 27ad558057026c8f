#!/usr/bin/env bash
# The main job on the embedded default: compile examples/models/cnn.onnx for the Vanilla
# accelerator with TVM's own tvmc, build the MLF with gcc, run it and check it.
#   scripts/demo.sh [MODEL.onnx] [OUT_DIR]
#   scripts/demo.sh --relax [MODEL.onnx] [OUT_DIR]   # the Relax engine (apache-tvm 0.27): its VM's library,
#                                                    # then its MLF, built with gcc and run
RELAX=0
if [ "${1:-}" = --relax ]; then RELAX=1; shift; fi
TVM_EXTENSION_WITH_RELAX=$RELAX source "$(dirname "${BASH_SOURCE[0]}")/env.sh" demo
MODEL="${1:-$ROOT/examples/models/cnn.onnx}"
OUT="${2:-$ROOT/out}"
mkdir -p "$OUT"
set -x
if [ "$RELAX" = 1 ]; then
  "$RELAX_VENV/bin/tvmc" compile "$MODEL" --target vanilla_accelerator -o "$OUT/model.so"
  python "$ROOT/examples/make_input.py" "$MODEL" "$OUT/input.npz"
  "$RELAX_VENV/bin/tvmc" run "$OUT/model.so" -i "$OUT/input.npz" -o "$OUT/output.npz"
  python "$ROOT/examples/check_output.py" "$MODEL" "$OUT/input.npz" "$OUT/output.npz"
  # The same model as embedded C: an MLF of the Relax engine's AOT C, built with gcc and run.
  "$RELAX_VENV/bin/tvmc" compile "$MODEL" --target vanilla_accelerator -f mlf -o "$OUT/model_relax.tar"
  python -m tvm_extension.mlf run "$OUT/model_relax.tar" -i "$OUT/input.npz" -o "$OUT/output_mlf.npz"
  python "$ROOT/examples/check_output.py" "$MODEL" "$OUT/input.npz" "$OUT/output_mlf.npz" "$OUT/model_relax.tar"
  exit
fi
tvmc compile --target vanilla_accelerator --experimental-tvm-extension "$ROOT/uma_vanilla" \
  "$MODEL" -f mlf -o "$OUT/model.tar"
python "$ROOT/examples/make_input.py" "$MODEL" "$OUT/input.npz"
python -m tvm_extension.mlf run "$OUT/model.tar" -i "$OUT/input.npz" -o "$OUT/output.npz"
python "$ROOT/examples/check_output.py" "$MODEL" "$OUT/input.npz" "$OUT/output.npz" "$OUT/model.tar"
