"""The Relax engine's ahead-of-time C: a legalized Relax module as plain C functions and one
``tvmgen_default_run`` that calls them, for an MLF (``tvm_extension.mlf.layout``).

apache-tvm 0.27 has no AOT executor and gives every C function TVM's packed calling convention
(argument records, checks, a runtime).  Here each operator's PrimFunc is lowered by TVM's default
TIR pipeline without its packed API; its buffer parameters become raw data pointers, its
temporaries pointer parameters into the workspace and a failed check a returned status (the
kernel's own), all in ``tvm_internals.operators_c``, so TVM's C code generator prints ``int32_t tvmgen_default_fused_conv2d_relu(float* input,
float* param_0, float* out, float* pad_temp_ws)``: loops and the backend's calls, no runtime.  A
function with one reduction (a conv) computes it row by row with its padded input and its epilogue
(``_banded``), so its temporaries hold a band.  ``plan_arena`` places each intermediate tensor and
each call's temporaries in one static workspace by their lifetimes (the calls that use them), as
TVM's USMP does for the Relay engine: not Relax's ``StaticPlanBlockMemory`` storages, each as large
as the largest tensor it holds, except where sharing them plans a smaller workspace (and where a
tensor lies at an offset in one).  Weights are ``const`` arrays with exact
(hexadecimal) literals; the same module gives the same C.
"""
import dataclasses
import re
from pathlib import Path
from typing import Dict, List, Tuple

import tvm
from tvm import relax

from tvm_extension.mlf.arena import ALIGN, plan_arena
from tvm_extension.mlf.layout import c_name

from .backends import UserError
from .tvm_internals import c_literal, constant_int, constant_tensor, operators_c, relax_passes, tensor_bytes

C_TYPES = {"float32": "float", "float64": "double", "int8": "int8_t", "uint8": "uint8_t", "int16": "int16_t",
           "uint16": "uint16_t", "int32": "int32_t", "uint32": "uint32_t", "int64": "int64_t", "bool": "uint8_t"}


@dataclasses.dataclass
class AotC:
    """What ``tvm_extension.mlf.layout.write`` packages."""

    source: str  # operators, constants, workspace and tvmgen_<model>_run
    workspace_bytes: int
    constants_bytes: int
    functions: Dict[str, int]  # the operators' names: bytes of their temporaries (slots of the workspace)
    inputs: List[Tuple[str, str, Tuple[int, ...]]]  # (name, dtype, shape)
    outputs: List[Tuple[str, str, Tuple[int, ...]]]


def _view(pointer: str, value, var) -> str:
    """The C pointer of a reshape or a ``relax.memory.view`` of the tensor at ``pointer``: the same
    pointer, or for a view at a byte offset or of another type, the pointer moved and cast."""
    if value.op.name == "relax.reshape" or len(value.args) < 4:
        return pointer
    offset, dtype = value.args[3], str(var.ty.dtype)
    offset = 0 if isinstance(value.args[3], relax.Tuple) and not value.args[3].fields else constant_int(value.args[3])
    if offset is None or dtype not in C_TYPES:
        raise UserError(f"the AOT C cannot place a view of {value.args[0].name} at offset {value.args[3]} as {dtype}")
    if offset == 0 and dtype == str(value.args[0].ty.dtype):
        return pointer
    return f"({C_TYPES[dtype]}*)((uint8_t*)({pointer}) + {offset})"


def aot_c(mod, output_names: List[str], headers: List[Path] = (), model: str = "default") -> AotC:
    """The AOT C of a legalized Relax module (``LegalizeOps`` done, ``main`` its entry); ``headers``:
    what the operators' calls of a backend's C API include."""
    with tvm.target.Target("c"):
        mod = tvm.ir.transform.Sequential(relax_passes())(mod)
    prefix = f"tvmgen_{model}"
    operators, temporaries = operators_c(mod, prefix, headers)
    main = mod["main"]
    pointers, storage_bytes, storage_buffer, constants, calls, groups = {}, {}, {}, {}, [], {}
    buffers: List[List[int]] = []  # [size, first call, last call]: the tensors and the calls' temporaries
    storage_of: Dict[object, List[int]] = {}  # a tensor (or tuple) -> the buffers it lies in
    for p in main.params:
        pointers[p] = f"inputs->{c_name(p.name)}"

    def used(expr, call: int):
        for k in storage_of.get(expr, []):
            buffers[k][1], buffers[k][2] = min(buffers[k][1], call), max(buffers[k][2], call)

    def argument(expr):
        if isinstance(expr, relax.Var):
            return pointers[expr]
        if isinstance(constant_tensor(expr), tvm.runtime.Tensor):
            array = constant_tensor(expr).numpy()
            dtype = str(array.dtype)
            if dtype not in C_TYPES:
                raise UserError(f"a constant of type {dtype}: the AOT C has no type for it")
            key = (dtype, array.shape, array.tobytes())  # one C array however often it is passed
            if key not in constants:
                constants[key] = (f"{prefix}_constant_{len(constants)}", array)
            return f"({C_TYPES[dtype]}*){constants[key][0]}"
        raise UserError(f"the AOT C cannot pass {type(expr).__name__} to an operator")

    bindings = [b for block in main.body.blocks for b in block.bindings]
    for binding in bindings:
        var, value = binding.var, binding.value
        if isinstance(value, relax.Var):
            pointers[var], storage_of[var] = pointers[value], storage_of.get(value, [])
            continue
        if isinstance(value, relax.Tuple):  # several outputs: a tuple's pointers are its fields'
            pointers[var] = [argument(field) for field in value.fields]
            storage_of[var] = [k for field in value.fields for k in storage_of.get(field, [])]
            continue
        if isinstance(value, relax.TupleGetItem):
            pointers[var] = pointers[value.tuple_value][value.index]
            storage_of[var] = storage_of.get(value.tuple_value, [])
            continue
        op = value.op
        name = op.name if isinstance(op, tvm.ir.Op) else None
        if name == "relax.memory.alloc_storage":  # a buffer only if a tensor lies in it at an offset
            storage_bytes[var] = int(value.args[0].values[0])
        elif name == "relax.memory.alloc_tensor":
            dtype, offset = str(value.args[3].value), int(value.args[1].value)
            if dtype not in C_TYPES:
                raise UserError(f"a tensor of type {dtype}: the AOT C has no type for it")
            if offset == 0:  # a buffer of its own bytes and lifetime, as USMP plans the Relay engine's, in
                k = len(buffers)  # a group with its storage's others (planned apart and together)
                buffers.append([tensor_bytes(dtype, [int(d) for d in value.args[2].values]), len(calls), len(calls)])
                groups.setdefault(value.args[0], []).append(k)
            else:  # placed in its storage, the storage as one buffer
                if value.args[0] not in storage_buffer:
                    storage_buffer[value.args[0]] = len(buffers)
                    buffers.append([storage_bytes[value.args[0]], len(calls), len(calls)])
                k = storage_buffer[value.args[0]]
            pointers[var] = f"({C_TYPES[dtype]}*)({prefix}_workspace + @{k}+{offset}@)"
            storage_of[var] = [k]
        elif name in ("relax.reshape", "relax.memory.view"):  # the same bytes (a view: from its offset on)
            pointers[var], storage_of[var] = _view(pointers[value.args[0]], value, var), storage_of.get(value.args[0], [])
        elif isinstance(op, tvm.ir.GlobalVar):
            for a in value.args:
                used(a, len(calls))
            args = [argument(a) for a in value.args]
            for size in temporaries[op.name_hint]:  # live during this call only
                args.append(f"(void*)({prefix}_workspace + @{len(buffers)}+0@)")
                buffers.append([size, len(calls), len(calls)])
            calls.append((op.name_hint, args))
        else:
            raise UserError(f"the AOT C does not run {name or op}: only calls of compiled operators")
    returned = main.body.body
    used(returned, len(calls))  # copied to the outputs after the last call
    for field in getattr(returned, "fields", []):
        used(field, len(calls))
    offsets, arena = plan_arena([tuple(b) for b in buffers], [g for g in groups.values() if len(g) > 1])
    place = lambda text: re.sub(r"@(\d+)\+(\d+)@", lambda m: str(offsets[int(m[1])] + int(m[2])), text)
    calls = [(function, [place(a) for a in args]) for function, args in calls]
    returned = main.body.body
    result = pointers[returned] if isinstance(returned, relax.Var) else [argument(f) for f in returned.fields]
    results = [place(r) for r in (result if isinstance(result, list) else [result])]
    types = list(returned.ty.fields) if hasattr(returned.ty, "fields") else [returned.ty]
    if len(results) != len(output_names):
        raise UserError(f"the model has {len(output_names)} outputs but its Relax main returns {len(results)}")
    outputs = [(n, str(t.dtype), tuple(int(d) for d in t.shape)) for n, t in zip(output_names, types)]
    inputs = [(p.name, str(p.ty.dtype), tuple(int(d) for d in p.ty.shape)) for p in main.params]

    lines = [operators, "#include <string.h>", "", "void TVMAPISetLastError(const char* message);", "",
             f"static _Alignas({ALIGN}) uint8_t {prefix}_workspace[{max(arena, 1)}];", ""]
    constants_bytes = 0
    for name, array in constants.values():
        dtype = str(array.dtype)
        values = ", ".join(c_literal(v, dtype) for v in array.ravel())
        lines.append(f"static const {C_TYPES[dtype]} {name}[{max(array.size, 1)}] = {{{values}}};")
        constants_bytes += array.nbytes
    lines += ["", f'#include "{prefix}.h"', "", f"int32_t {prefix}_run(struct {prefix}_inputs* inputs, "
              f"struct {prefix}_outputs* outputs) {{"]
    if calls:
        lines.append("  int32_t status;")
    for function, args in calls:
        lines += [f"  if ((status = {prefix}_{function}({', '.join(args)})) != 0) {{",
                  f'    TVMAPISetLastError("{function}: a kernel refused its arguments (a non-zero status)");',
                  "    return status;", "  }"]
    for (name, dtype, shape), pointer in zip(outputs, results):
        lines.append(f"  memcpy(outputs->{c_name(name)}, {pointer}, {tensor_bytes(dtype, shape)});")
    lines += ["  return 0;", "}", ""]
    functions = {f"{prefix}_{name}": sum(sizes) for name, sizes in sorted(temporaries.items())}
    return AotC("\n".join(lines), arena, constants_bytes, functions, inputs, outputs)


