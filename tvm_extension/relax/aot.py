"""The Relax engine's ahead-of-time C: a legalized Relax module as plain C functions and one
``tvmgen_default_run`` that calls them, for an MLF (``tvm_extension.mlf.layout``).

apache-tvm 0.27 has no AOT executor and gives every C function TVM's packed calling convention
(argument records, checks, a runtime).  Here each operator's PrimFunc is lowered by the default
TIR passes up to, not including, ``MakePackedAPI``; its buffer parameters become raw data
pointers, its temporaries pointer parameters into the workspace and a failed check a returned
status, so TVM's C code generator prints ``int32_t tvmgen_default_fused_conv2d_relu(float* input,
float* param_0, float* out, float* pad_temp_ws)``: loops and the backend's calls, no runtime.  Relax's
``StaticPlanBlockMemory`` groups the intermediate tensors into storages; a function with one reduction
(a conv) computes it row by row with its padded input and its epilogue (``_banded``), so its temporaries
hold a band; ``plan_arena`` places the
storages and each call's temporaries in one static workspace by their lifetimes (the calls that use
them), as TVM's USMP does for the Relay engine.  Weights are ``const`` arrays with exact
(hexadecimal) literals; the same module gives the same C.
"""
import dataclasses
import math
import re
from pathlib import Path
from typing import Dict, List, Tuple

import numpy as np

import tvm
import tvm.s_tir  # registers the scheduled-TIR passes
import tvm_ffi
from tvm import relax, tirx

from tvm_extension.mlf.arena import ALIGN, plan_arena
from tvm_extension.mlf.layout import c_name

from .backends import UserError

C_TYPES = {"float32": "float", "float64": "double", "int8": "int8_t", "uint8": "uint8_t", "int16": "int16_t",
           "uint16": "uint16_t", "int32": "int32_t", "uint32": "uint32_t", "int64": "int64_t", "bool": "uint8_t"}


def relax_passes():
    """Legalized module -> fused PrimFuncs called from a main whose tensors live in planned storages."""
    t = relax.transform
    return [t.AnnotateTIROpPattern(), t.FoldConstant(), t.FuseOps(), t.FuseTIR(), t.DeadCodeElimination(),
            t.RewriteDataflowReshape(), t.ToNonDataflow(), t.RemovePurityChecking(), t.CallTIRRewrite(),
            t.StaticPlanBlockMemory(), t.LowerAllocTensor(), t.DeadCodeElimination()]


def tir_passes(target):
    """TVM's default CPU lowering (tvm/s_tir/pipeline.py) up to, not including, SplitHostDevice
    and MakePackedAPI (the passes for GPUs left out); vector loops made scalar, as the Relay
    engine's embedded options do (tir.disable_vectorize): C has no vector types."""
    s, t = tvm.s_tir.transform, tirx.transform
    return [t.BindTarget(target), s.CanonicalizeLoop(), s.LowerInitBlock(), s.PlanAndUpdateBufferAllocationLocation(),
            s.ConvertBlocksToOpaque(), s.CompactBufferAllocation(), s.LowerMatchBuffer(), s.StmtSimplify(),
            s.LowerOpaqueBlock(), t.FlattenBuffer(), t.BF16ComputeLegalize(), t.NarrowDataType(32), s.LoopPartition(),
            t.VectorizeLoop(False), t.StorageRewrite(), s.HoistIfThenElse(), t.UnrollLoop(),
            s.RenormalizeSplitPattern(), t.StmtSimplify(), t.RemoveNoOp(), s.RewriteUnsafeSelect(),
            t.CommonSubexprElim(), t.FP8ComputeLegalize(), t.VerifyMemory()]


def _bytes(dtype: str, shape) -> int:
    bits = tvm.runtime.DataType(str(dtype)).bits * tvm.runtime.DataType(str(dtype)).lanes
    return int(np.prod([int(d) for d in shape], dtype=np.int64)) * max(bits, 8) // 8


SCALAR_BYTES = 8  # temporaries this small stay C locals (the compiler keeps them in registers)


def _returned(check: tirx.AssertStmt) -> tirx.Stmt:
    """A failed check returned as a status instead of raised through TVM's runtime: a kernel's check
    (``status == 0``) returns the kernel's own non-zero status, as the Relay engine's MLF does (the
    call evaluated once); any other check -1, as TVM's AOT C does for its own."""
    condition = check.condition
    if isinstance(condition, tirx.EQ) and str(condition.a.ty.dtype) == "int32" and \
            isinstance(condition.b, tirx.IntImm) and condition.b.value == 0:
        status = tvm.ir.Var("status", tvm.ir.PrimType("int32"))
        return tirx.SeqStmt([tirx.Bind(status, condition.a), tirx.IfThenElse(status != 0, tirx.Return(status), None)])
    return tirx.IfThenElse(tirx.Not(condition), tirx.Return(tirx.const(-1, "int32")), None)


def _unpacked(func: tirx.PrimFunc) -> Tuple[tirx.PrimFunc, List[int]]:
    """``func`` with raw pointers for its buffer parameters and its temporaries as extra pointer
    parameters: (the function, the temporaries' sizes in bytes)."""
    pointers = {p: tvm.ir.Var(p.name, tirx.buffer_data_pointer_type(p)) for p in func.params if tirx.is_buffer_var(p)}
    buffer_data = tvm.ir.Op.get("tirx.buffer_data")

    def pointer(call):
        return pointers[call.args[0]] if call.op.same_as(buffer_data) and call.args[0] in pointers else call

    body = tvm_ffi.structural_map(func.body, (tvm.ir.Call, pointer))
    # A parameter's symbolic element offset (an address taken inside it: ``address_of(B[27, 0])``)
    # is 0: the AOT main passes each tensor's first element.
    offsets = {p.ty.elem_offset: tirx.const(0, p.ty.elem_offset.ty) for p in pointers
               if isinstance(p.ty.elem_offset, tvm.ir.Var)}
    if offsets:
        body = tvm_ffi.structural_map(body, (tvm.ir.Var, lambda v: offsets.get(v, v)))
    temporaries, sizes = [], []

    def hoisted(stmt):
        if stmt.buffer.scope() == "global" and _bytes(stmt.buffer.dtype, stmt.buffer.shape) <= SCALAR_BYTES:
            return stmt  # an accumulator: a C local, a register
        var = tvm.ir.Var(f"{stmt.buffer.name}_ws", tirx.buffer_data_pointer_type(stmt.buffer))
        temporaries.append(var)
        sizes.append(_bytes(stmt.buffer.dtype, stmt.buffer.shape))
        return tirx.DeclBuffer(stmt.buffer, data=var)

    body = tvm_ffi.structural_map(body, (tirx.AllocBuffer, hoisted))
    body = tirx.SeqStmt([tvm_ffi.structural_map(body, (tirx.AssertStmt, _returned)), tirx.Return(tirx.const(0, "int32"))])
    params = [pointers.get(p, p) for p in func.params] + temporaries
    return tirx.PrimFunc(params, body, tvm.ir.PrimType("int32"), func.attrs), sizes


def _banded(func: tirx.PrimFunc) -> tirx.PrimFunc:
    """A function with one reduction (a conv, a matmul) computed band by band: its epilogue inlined
    into one block, its producers (the padded input) and consumers (the epilogue) moved under the
    reduction's second loop (an output row of an NHWC conv), so their buffers hold a band, not the
    whole tensor.  The same arithmetic in the same order: only where temporaries live changes."""
    try:
        sch = tvm.s_tir.Schedule(func)
        blocks = sch.get_child_blocks(sch.get_sblock("root"))
    except Exception:  # pylint: disable=broad-except  (no blocks: a backend's program; nothing to band)
        return func
    name = lambda block: sch.get(block).name_hint
    reductions = [b for b in blocks if any(int(iv.iter_type) == 2 for iv in sch.get(b).iter_vars)]
    if len(reductions) != 1 or len(sch.get_loops(reductions[0])) < 2:
        return func
    # The epilogue (bias, requantization, clamp: a block per operator) inlined into one expression per
    # element: each element loaded and stored once, no temporaries (the int8 DS-CNN with TVM's kernels:
    # 14 % fewer instructions on the Cortex-M4).  The block writing the output stays.
    order = [name(b) for b in blocks]
    for block_name in order[order.index(name(reductions[0])) + 1:]:
        try:
            sch.compute_inline(sch.get_sblock(block_name))
        except Exception:  # pylint: disable=broad-except  (writes the output, or is not elementwise)
            pass
    blocks = sch.get_child_blocks(sch.get_sblock("root"))
    anchor = sch.get_loops(reductions[0])[1]
    index = [name(b) for b in blocks].index(name(reductions[0]))
    shape = lambda block: [int(d) for d in sch.get(block).writes[0].source.shape]
    banded = {name(reductions[0])}  # the blocks under the anchor: a block moves only when every block
    for consumer in blocks[index + 1:]:  # it reads from (a consumer) or that reads it (a producer) is there;
        # a consumer only as an epilogue (bias, requantization: the reduction's shape); not a pad after
        # it, which apache-tvm 0.27's reverse_compute_at would cut to the reduction's region (wrong C);
        # not a block that reads none of the band (a residual input's requantization): moved under
        # the row loop it would be computed whole at every row, and read before it was computed (wrong C)
        producers = {name(b) for b in sch.get_producers(consumer)}
        if not producers or not producers <= banded or shape(consumer) != shape(reductions[0]):
            break
        try:
            sch.reverse_compute_at(consumer, anchor)
        except Exception:  # pylint: disable=broad-except  (stays where it was, and so do the rest)
            break
        banded.add(name(consumer))
    for producer in reversed(blocks[:index]):
        if not {name(b) for b in sch.get_consumers(producer)} <= banded:
            break
        try:
            sch.compute_at(producer, anchor)
        except Exception:  # pylint: disable=broad-except
            break
        banded.add(name(producer))
    # The reduction accumulates in a local (a register), set to 0 before its loops, not in the
    # temporary through memory with a test of the first iteration at every multiply-add.
    reduction = reductions[0]
    spatial = sum(int(iv.iter_type) == 0 for iv in sch.get(reduction).iter_vars)
    loops = sch.get_loops(reduction)
    if len(loops) == len(sch.get(reduction).iter_vars) and 0 < spatial < len(loops):
        try:
            local = sch.cache_write(reduction, 0, "global")
            sch.reverse_compute_at(local, loops[spatial - 1])
            sch.decompose_reduction(reduction, loops[spatial])
        except Exception:  # pylint: disable=broad-except
            pass
    _relay_conv_order(sch, reduction)
    return sch.mod["main"]


SIMD_LANES = 4  # Relay's get_simd_32bit_lanes() for its "c" target (no AVX feature)


def _relay_conv_order(sch, reduction):
    """An NCHW conv (TOPI's ``conv2d_nchw`` block) summed in the order of the Relay engine's CPU
    kernel (x86 ``conv2d_NCHWc``, its fallback configuration: ``conv2d_avx_common``): the input
    channels split in blocks of ``ic_bn`` (the largest divisor of IC not above ``oc_bn``, the largest
    divisor of OC not above SIMD_LANES), the sum over (channel block, kh, kw, channel in block),
    not (channel, kh, kw): float addition is not associative, so the outputs differ by an ulp otherwise.
    A 1x1 kernel (``conv2d_avx_1x1``) sums the channels in order, as here."""
    block = sch.get(reduction)
    if block.name_hint not in ("conv2d_nchw", "conv2d_nchw_update") or len(block.iter_vars) != 7:  # decomposed: _update
        return
    extent = lambda i: int(block.iter_vars[i].dom.extent)
    oc, ic, kh, kw = extent(1), extent(4), extent(5), extent(6)
    oc_bn = next(bn for bn in range(SIMD_LANES, 0, -1) if oc % bn == 0)
    ic_bn = next(bn for bn in range(oc_bn, 0, -1) if ic % bn == 0)
    loops = sch.get_loops(reduction)
    if ic_bn == 1 or kh * kw == 1 or len(loops) < 3:
        return
    rc, ry, rx = loops[-3:]
    rc_outer, rc_inner = sch.split(rc, factors=[ic // ic_bn, ic_bn])
    sch.reorder(rc_outer, ry, rx, rc_inner)


def _operators_c(mod, prefix: str, headers: List[Path]) -> Tuple[str, Dict[str, List[int]]]:
    """C of every PrimFunc of ``mod`` (plain calling convention, named ``PREFIX_<name>``): (the C,
    {name: temporaries' bytes}).  The calls of a backend's C API see its ``headers``."""
    target = tvm.target.Target("c")
    funcs = {gv: _banded(f).with_attr("global_symbol", f"{prefix}_{gv.name_hint}") for gv, f in sorted(
             mod.functions.items(), key=lambda item: item[0].name_hint) if isinstance(f, tirx.PrimFunc)}
    lowered = tvm.ir.transform.Sequential(tir_passes(target))(tvm.IRModule(funcs))
    unpacked, temporaries = {}, {}
    for gv, func in sorted(lowered.functions.items(), key=lambda item: item[0].name_hint):
        unpacked[gv], temporaries[gv.name_hint] = _unpacked(func)
    finish = [tirx.transform.FP8StorageLegalize(), tirx.transform.BF16StorageLegalize(), tirx.transform.LowerIntrin()]
    done = tvm.ir.transform.Sequential(finish)(tvm.IRModule(unpacked))
    done, exact = _marked_floats(done)
    source = tvm.get_global_func("target.build.c")(done, target).inspect_source()
    source = _exact_floats(source, exact)
    declared = _declared(headers)
    defined = {f"{prefix}_{name}" for name in temporaries}
    return _plain(source, defined, declared, [h.name for h in headers]), temporaries


# TVM's C generator prints a float constant with 7 significant digits (std::scientific: float32
# with an ``f``, float64 without), which is not exact: a requantization scale would round differently
# from the Relay engine's.  Every float constant is replaced by a marker, a value that prints as a
# unique 7-digit text (7.000001e+37 and up: float32 spacing there is under the 1e31 step), and the
# marker's text by the exact hexadecimal constant after printing.  A decimal constant left in the C,
# or a marker not found, means TVM prints constants another way now: the compile stops (_exact_floats).
_MARKER = re.compile(r"7\.\d{6}e\+37f?")
_DECIMAL = re.compile(r"(?<![\w.])\d+\.\d+e[+-]\d+f?")
_FLOATS = ("float32", "float64")


def _marked_floats(mod):
    """(``mod`` with its float constants replaced by markers, {marker text: exact C})."""
    exact, markers = {}, {}

    def marked(imm):
        value, dtype = float(imm.value), str(imm.ty)
        if dtype not in _FLOATS or not math.isfinite(value):
            return imm
        key = (dtype, abs(value))
        if key not in markers:
            markers[key] = 7.0e37 + (len(markers) + 1) * 1e31
            if dtype == "float32":
                markers[key] = float(np.float32(markers[key]))
            text = f"{markers[key]:.6e}" + ("f" if dtype == "float32" else "")
            assert len(markers) < 10**6 and text not in exact and _MARKER.fullmatch(text), text
            exact[text] = _literal(abs(value), dtype)
        return tirx.FloatImm(dtype, math.copysign(markers[key], value))  # -0.0 keeps its sign

    functions = {gv: tvm_ffi.structural_map(f, (tirx.FloatImm, marked)) for gv, f in mod.functions.items()}
    return tvm.IRModule(functions), exact


def _exact_floats(source: str, exact: Dict[str, str]) -> str:
    """TVM's printed C with each marker replaced by its exact constant; stops the compile where the
    printing is not what ``_marked_floats`` expects, rather than leave C that computes something else."""
    found = set()

    def replaced(match):
        found.add(match.group(0))
        if match.group(0) not in exact:
            raise UserError(f"the C printer wrote {match.group(0)}, no constant of the model: apache-tvm "
                            f"{tvm.__version__} prints constants in a way this engine was not written for")
        return exact[match.group(0)]

    source = _MARKER.sub(replaced, source)
    left = _DECIMAL.search(source)
    if left or found != set(exact):
        what = f"a decimal constant ({left.group(0)})" if left else f"{len(set(exact) - found)} constants unprinted"
        raise UserError(f"the C printer left {what}: apache-tvm {tvm.__version__} prints float constants in a "
                        "way this engine was not written for")
    return source


def _declared(headers: List[Path]) -> set:
    """The functions ``headers`` declare (a name before ``(``, outside comments)."""
    code = lambda text: re.sub(r"/\*.*?\*/|//[^\n]*", " ", text, flags=re.S)
    return {name for h in headers for name in re.findall(r"\b(\w+)\s*\(", code(h.read_text()))}


_DECLARATION = re.compile(r'#ifdef __cplusplus\nextern "C"\n#endif\nTVM_DLL [\w\s\*]+?\b(\w+)\([^;{]*\);\n')


def _plain(source: str, defined, declared, headers: List[str]) -> str:
    """TVM's C without what only its runtime defines (its includes, library context and export
    macro).  Its declarations of functions defined elsewhere are dropped where the backend's
    ``headers`` declare them (``declared``; TVM's guess would contradict a ``const``), and otherwise
    kept as external (a backend's ``_linked`` wrappers, libm's ``nearbyintf``); the operators
    (``defined``) stay file-local."""
    def declaration(match):
        if match.group(1) in defined:
            return match.group(0)
        return "" if match.group(1) in declared else match.group(0).replace("TVM_DLL ", "")

    source = _DECLARATION.sub(declaration, source)
    kept = [line for line in source.splitlines()
            if not line.startswith(('#include "tvm/', "#define TVM_EXPORTS")) and "__tvm_ffi__library_ctx" not in line]
    return "\n".join(["#include <math.h>", "#include <stdbool.h>", "#include <stdint.h>",
                      *(f'#include "{h}"' for h in headers), "#define TVM_DLL static", *kept, ""])


def _literal(value, dtype: str) -> str:
    if dtype.startswith("float"):
        value = float(value)
        if math.isnan(value):
            return "NAN"
        if math.isinf(value):
            return "INFINITY" if value > 0 else "-INFINITY"
        return value.hex() + ("f" if dtype == "float32" else "")  # exact: hexadecimal floating constants (C99)
    return str(int(value))


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
    if isinstance(offset, relax.Tuple) and not offset.fields:  # no offset given
        offset = tirx.IntImm("int64", 0)
    if not isinstance(offset, tirx.IntImm) or dtype not in C_TYPES:
        raise UserError(f"the AOT C cannot place a view of {value.args[0].name} at offset {offset} as {dtype}")
    if int(offset.value) == 0 and dtype == str(value.args[0].ty.dtype):
        return pointer
    return f"({C_TYPES[dtype]}*)((uint8_t*)({pointer}) + {int(offset.value)})"


def aot_c(mod, output_names: List[str], headers: List[Path] = (), model: str = "default") -> AotC:
    """The AOT C of a legalized Relax module (``LegalizeOps`` done, ``main`` its entry); ``headers``:
    what the operators' calls of a backend's C API include."""
    with tvm.target.Target("c"):
        mod = tvm.ir.transform.Sequential(relax_passes())(mod)
    prefix = f"tvmgen_{model}"
    operators, temporaries = _operators_c(mod, prefix, headers)
    main = mod["main"]
    pointers, storages, constants, calls = {}, {}, {}, []
    buffers: List[List[int]] = []  # [size, first call, last call]: the storages, then the temporaries
    storage_of: Dict[object, List[int]] = {}  # a tensor (or tuple) -> the storages it lies in
    for p in main.params:
        pointers[p] = f"inputs->{c_name(p.name)}"

    def used(expr, call: int):
        for k in storage_of.get(expr, []):
            buffers[k][1], buffers[k][2] = min(buffers[k][1], call), max(buffers[k][2], call)

    def argument(expr):
        if isinstance(expr, relax.Var):
            return pointers[expr]
        if isinstance(expr, tvm.ir.GenericConst) and isinstance(expr.value, tvm.runtime.Tensor):
            array = expr.value.numpy()
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
        if name == "relax.memory.alloc_storage":  # placed once every lifetime is known (@k+offset@)
            storages[var] = len(buffers)
            buffers.append([int(value.args[0].values[0]), len(calls), len(calls)])
        elif name == "relax.memory.alloc_tensor":
            dtype = str(value.args[3].value)
            if dtype not in C_TYPES:
                raise UserError(f"a tensor of type {dtype}: the AOT C has no type for it")
            k = storages[value.args[0]]
            pointers[var] = f"({C_TYPES[dtype]}*)({prefix}_workspace + @{k}+{int(value.args[1].value)}@)"
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
    offsets, arena = plan_arena([tuple(b) for b in buffers])
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
        values = ", ".join(_literal(v, dtype) for v in array.ravel())
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
        lines.append(f"  memcpy(outputs->{c_name(name)}, {pointer}, {_bytes(dtype, shape)});")
    lines += ["  return 0;", "}", ""]
    functions = {f"{prefix}_{name}": sum(sizes) for name, sizes in sorted(temporaries.items())}
    return AotC("\n".join(lines), arena, constants_bytes, functions, inputs, outputs)


