"""Writes a deterministic random input for every input of an ONNX model: make_input.py MODEL OUT.npz"""
import sys

import numpy as np
import onnx
from onnx import helper


def random_inputs(model_path, seed=0):
    model = onnx.load(model_path)
    initialisers = {i.name for i in model.graph.initializer}
    rng = np.random.default_rng(seed)
    inputs = {}
    for value in model.graph.input:
        if value.name in initialisers:
            continue
        tensor = value.type.tensor_type
        shape = [d.dim_value for d in tensor.shape.dim]
        dtype = helper.tensor_dtype_to_np_dtype(tensor.elem_type)
        inputs[value.name] = rng.standard_normal(shape).astype(dtype)
    return inputs


if __name__ == "__main__":
    np.savez(sys.argv[2], **random_inputs(sys.argv[1]))
