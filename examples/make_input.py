"""Writes a deterministic random input for every input of an ONNX model: make_input.py MODEL OUT.npz"""
import sys

import numpy as np

from tvm_extension.testing import random_inputs

if __name__ == "__main__":
    np.savez(sys.argv[2], **random_inputs(sys.argv[1]))
