"""Compares an MLF's outputs with onnx.reference: check_output.py MODEL INPUT.npz OUTPUT.npz [MLF.tar]"""
import re
import sys
import tarfile

import numpy as np
from onnx.reference import ReferenceEvaluator

TOLERANCE = 1e-4  # float32, different summation order than the reference


def main(model, inputs, outputs, mlf=None):
    with np.load(inputs) as feeds, np.load(outputs) as got:
        reference = ReferenceEvaluator(model)
        expected = reference.run(None, dict(feeds))
        worst = max(float(np.max(np.abs(g - e))) for g, e in zip(got.values(), expected))
    if mlf:
        with tarfile.open(mlf) as archive:
            calls = sum(
                # calls, not declarations (whose first parameter is a type: "int8_t*")
                len(re.findall(r"\bvanilla_(?:depthwise_)?conv2dn(?:chw|hwc)\w*\((?![\w\s]*\*)",
                               archive.extractfile(m).read().decode()))
                for m in archive.getmembers() if m.name.startswith("./codegen/host/src/") and "_lib" in m.name
            )
        print(f"offloaded convolutions (vanilla_conv2d* calls): {calls}")
    print(f"max |{'MLF' if mlf else 'output'} - onnx.reference| = {worst:.3g} (tolerance {TOLERANCE})")
    return 0 if worst <= TOLERANCE else 1


if __name__ == "__main__":
    sys.exit(main(*sys.argv[1:]))
