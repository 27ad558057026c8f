"""What the Relax engine takes from apache-tvm beyond its Relax API, in one place: building TIR
(buffers, pointers, calls of a backend's C API, checked statuses), rewriting it (TVM's lowering
passes, buffer parameters made raw pointers, checks made returned statuses), scheduling it (banded
convs, Relay's summation order) and TVM's C printer's conventions (float constants, declarations).

Upstream is rewriting exactly these (docs/relax.md, "Upstream after 0.27": buffers as typed
variables, ``buffer_map`` removed, S-TIR, TIRx), so the rest of the engine and the backends'
``relax_patterns`` call this module instead of ``tvm.tirx``, and what a new TVM does differently
stops the compile with one line (``UserError``) rather than writing C that computes something else.
What the tested releases (``TESTED_VERSIONS``: 0.26 and 0.27) spell differently is settled here too,
each in one explicit branch: Relax's constants (``Constant``, ``constant_tensor``, ``constant_array``,
for the whole engine), TIR's string literal, a block region's buffer; and ``round`` is written
``nearbyint`` for the C target, which 0.26 lowers to ``roundf`` (``_ties_to_even``).
Imported while ``import tvm`` loads the backends' entry points: ``tvm.s_tir`` is imported where used.
"""
import math
import re
import sys
from pathlib import Path
from typing import Callable, Dict, Iterable, List, Mapping, Optional, Sequence, Tuple

import numpy as np
import tvm
import tvm_ffi
from tvm import relax, tirx

from .backends import UserError

# The apache-tvm releases the engine has been run on (the suite: tests/test_relax_*.py on 0.27; the
# zoo on both, outputs equal bit for bit: tests/test_relax_tvm_versions.py, scripts/test.sh --tvm-versions).
TESTED_VERSIONS = ("0.26.0", "0.27.0.post1")
_warned = []


def check_version(version: str = None, stream=sys.stderr) -> bool:
    """True on a tested apache-tvm; otherwise says so in one line (once per process)."""
    version = version or tvm.__version__
    if version in TESTED_VERSIONS:
        return True
    if not _warned:
        _warned.append(version)
        stream.write(f"warning: apache-tvm {version}: the Relax engine was tested with apache-tvm "
                     f"{', '.join(TESTED_VERSIONS)}; a compile this engine cannot vouch for stops with an error\n")
    return False


# --- What the tested releases spell differently -------------------------------------------------

# Relax's constant: ``tvm.ir.GenericConst`` holding its tensor in ``.value`` in 0.27; ``relax.Constant``
# holding it in ``.data`` in 0.26.  The engine and the backends use these three, never either spelling.
if hasattr(tvm.ir, "GenericConst"):  # 0.27
    Constant = tvm.ir.GenericConst
    _constant_tensor = lambda const: const.value
else:  # 0.26
    Constant = relax.Constant
    _constant_tensor = lambda const: const.data


def constant_tensor(expr):
    """The value of a Relax constant (a ``tvm.runtime.Tensor``), else None."""
    return _constant_tensor(expr) if isinstance(expr, Constant) else None


def constant_array(expr) -> Optional[np.ndarray]:
    """The value of a Relax constant tensor as a numpy array, else None."""
    tensor = constant_tensor(expr)
    return tensor.numpy() if isinstance(tensor, tvm.runtime.Tensor) else None


# TIR's string literal (an assertion's kind and message): ``tvm.ir.StringImm`` in 0.27, ``tirx.StringImm`` in 0.26.
_StringImm = tvm.ir.StringImm if hasattr(tvm.ir, "StringImm") else tirx.StringImm

# The buffer of a block's read or write region: ``.source`` in 0.27 (a ``tvm.ir.TensorRegion``), ``.buffer``
# in 0.26 (a ``tirx.BufferRegion``).
_region_buffer = lambda region: region.source if hasattr(region, "source") else region.buffer


# --- TIR for a backend's kernel_call -------------------------------------------------------------

Buffer, Expr, Stmt = tirx.Buffer, tvm.ir.Expr, tirx.Stmt


def pointer(buffer: Optional[Buffer]) -> Expr:
    """The data pointer of ``buffer`` (a C ``T*``); a null pointer for None (a left-out tensor)."""
    return tirx.reinterpret("handle", tirx.const(0, "uint64")) if buffer is None else buffer.data


def element_pointer(buffer: Buffer, indices: Sequence) -> Expr:
    """The address of ``buffer[indices]`` (``&B[i][j]``)."""
    return tirx.address_of(tirx.BufferLoad(buffer, list(indices)))


def temporary(shape: Sequence[int], dtype: str, name: str) -> Buffer:
    """A buffer the operator allocates (``with_temporaries``): a slot of the MLF's workspace."""
    return tirx.decl_buffer(tuple(shape), dtype, name)


def scratch(nbytes: int, name: str) -> Buffer:
    """``nbytes`` (at least 1) of int8 scratch memory for a kernel's work."""
    return temporary((max(int(nbytes), 1),), "int8", name)


def _argument(value):
    if isinstance(value, tirx.Buffer):
        return value.data
    if isinstance(value, bool) or not isinstance(value, (int, float, np.integer, np.floating)):
        return value
    return tirx.IntImm("int32", int(value)) if isinstance(value, (int, np.integer)) else \
        tirx.FloatImm("float32", float(value))


def c_call(name: str, *args) -> Expr:
    """A call of the C function ``name`` returning an int32 status; a buffer is passed as its
    pointer, a Python int as ``int32_t``, a float as ``float``."""
    return tirx.call_extern("int32", name, *map(_argument, args))


def call_arguments(call: Expr) -> Tuple[str, List]:
    """(the C name, the arguments) of a ``c_call``."""
    name, *args = call.args
    return name.value, list(args)


def with_temporaries(buffers: Iterable[Buffer], *stmts: Stmt) -> Stmt:
    """``stmts`` with ``buffers`` allocated around them."""
    return tirx.SeqStmt([*map(tirx.AllocBuffer, buffers), *stmts])


def copy_loops(extents: Mapping[str, int], dst: Buffer, dst_index: Callable, src: Buffer, src_index: Callable) -> Stmt:
    """``dst[dst_index(*v)] = src[src_index(*v)]`` in loops over ``v`` of ``extents`` (outermost first)."""
    loop_vars = [tirx.Var(name, "int32") for name in extents]
    body = tirx.BufferStore(dst, tirx.BufferLoad(src, src_index(*loop_vars)), dst_index(*loop_vars))
    for var, extent in reversed(list(zip(loop_vars, extents.values()))):
        body = tirx.For(var, 0, extent, tirx.ForKind.SERIAL, body)
    return body


def is_program(value) -> bool:
    """A whole program a backend built (a statement), not one call's status."""
    return isinstance(value, tirx.Stmt)


def checked(status: Expr, message: str) -> Stmt:
    """A check that ``status`` is 0: the operator fails with the kernel's own status otherwise
    (``_returned``: the AOT C returns it; the VM raises ``message``)."""
    # Positional: the constructor takes (condition, kind, message parts), whatever its docstring says.
    return tirx.AssertStmt(status == 0, _StringImm("RuntimeError"), [_StringImm(message)])


def checked_program(target: str, build: Callable[[Callable], Stmt]) -> Stmt:
    """The program ``build(extern)`` makes, where ``extern(name, *args)`` calls one C entry of the
    backend through its linked symbol (``<name>_linked``): after a non-zero status no further call
    is made, and the inference fails at the program's end.  (An assertion after each call would
    stop at once, but LLVM then unrolls every loop around the calls: minutes to compile a network
    of many tiles.)"""
    status = tirx.decl_buffer((1,), "int32", "status", scope="local")
    ok = tirx.BufferLoad(status, [0]) == 0
    extern = lambda name, *args: tirx.IfThenElse(
        ok, tirx.BufferStore(status, tirx.call_extern("int32", name + "_linked", *args), [0]), None)
    message = _StringImm(f"{target}: a call refused its arguments (a non-zero status; the calls after it "
                         "were skipped)")
    return tirx.SeqStmt([tirx.AllocBuffer(status), tirx.BufferStore(status, tirx.const(0, "int32"), [0]), build(extern),
                         tirx.AssertStmt(ok, _StringImm("RuntimeError"), [message])])


def constant_int(expr) -> Optional[int]:
    """The value of an integer constant (a TIR ``IntImm``), else None."""
    return int(expr.value) if isinstance(expr, tirx.IntImm) else None


# --- Lowering to plain C functions (tvm_extension.relax.aot) -------------------------------------

def relax_passes():
    """Legalized module -> fused PrimFuncs called from a main whose tensors live in planned storages."""
    t = relax.transform
    return [t.AnnotateTIROpPattern(), t.FoldConstant(), t.FuseOps(), t.FuseTIR(), t.DeadCodeElimination(),
            t.RewriteDataflowReshape(), t.ToNonDataflow(), t.RemovePurityChecking(), t.CallTIRRewrite(),
            t.StaticPlanBlockMemory(), t.LowerAllocTensor(), t.DeadCodeElimination()]


# The passes of TVM's pipeline that make its packed calling convention (the entry function's
# __tvm_ffi_main alias, argument records, a runtime): the operators here are plain C functions
# (``_unpacked``); the storage legalizations run after that.
_PACKED_API = ["tirx.AnnotateEntryFunc", "tirx.SplitHostDevice", "tirx.MakePackedAPI", "tirx.FP8StorageLegalize",
               "tirx.BF16StorageLegalize"]


def _lowered(mod, target):
    """``mod`` through TVM's default CPU pipeline, called by name, with the packed API left out and
    vector loops made scalar (tir.disable_vectorize, as the Relay engine's embedded options): C
    has no vector types."""
    import tvm.s_tir  # pylint: disable=import-outside-toplevel  (registers the pipeline)

    pipeline = tvm.tirx.get_tir_pipeline("s_tir")[0]
    outer = tvm.transform.PassContext.current()
    config = {**outer.config, "tirx.disable_vectorize": True}
    with tvm.transform.PassContext(opt_level=outer.opt_level, config=config,
                                   disabled_pass=[*outer.disabled_pass, *_PACKED_API]):
        return tvm.ir.transform.Sequential([tirx.transform.BindTarget(target), pipeline])(mod)


def tensor_bytes(dtype: str, shape) -> int:
    """Bytes of a tensor of ``dtype`` and ``shape`` (a bool takes a byte)."""
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
        if stmt.buffer.scope() == "global" and tensor_bytes(stmt.buffer.dtype, stmt.buffer.shape) <= SCALAR_BYTES:
            return stmt  # an accumulator: a C local, a register
        var = tvm.ir.Var(f"{stmt.buffer.name}_ws", tirx.buffer_data_pointer_type(stmt.buffer))
        temporaries.append(var)
        sizes.append(tensor_bytes(stmt.buffer.dtype, stmt.buffer.shape))
        return tirx.DeclBuffer(stmt.buffer, data=var)

    body = tvm_ffi.structural_map(body, (tirx.AllocBuffer, hoisted))
    body = tirx.SeqStmt([tvm_ffi.structural_map(body, (tirx.AssertStmt, _returned)), tirx.Return(tirx.const(0, "int32"))])
    params = [pointers.get(p, p) for p in func.params] + temporaries
    return tirx.PrimFunc(params, body, tvm.ir.PrimType("int32"), func.attrs), sizes


def _ties_to_even(func: tirx.PrimFunc) -> tirx.PrimFunc:
    """``func`` with TIR's ``round`` (a quantize's) written ``nearbyint``: halves to even, as LLVM's
    lowering of ``round`` computes on both releases and the C target's on 0.27 (``nearbyintf``);
    0.26's C target lowers ``round`` to ``roundf``, halves away from zero (other int8 outputs)."""
    round_op = tvm.ir.Op.get("tirx.round")
    even = lambda call: tirx.nearbyint(call.args[0]) if call.op.same_as(round_op) else call
    return func.with_body(tvm_ffi.structural_map(func.body, (tvm.ir.Call, even)))


def _banded(func: tirx.PrimFunc) -> tirx.PrimFunc:
    """A function with one reduction (a conv, a matmul) computed band by band: its epilogue inlined
    into one block, its producers (the padded input) and consumers (the epilogue) moved under the
    reduction's second loop (an output row of an NHWC conv), so their buffers hold a band, not the
    whole tensor.  The same arithmetic in the same order: only where temporaries live changes."""
    import tvm.s_tir  # pylint: disable=import-outside-toplevel

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
    shape = lambda block: [int(d) for d in _region_buffer(sch.get(block).writes[0]).shape]
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


def operators_c(mod, prefix: str, headers: List[Path]) -> Tuple[str, Dict[str, List[int]]]:
    """C of every PrimFunc of ``mod`` (plain calling convention, named ``PREFIX_<name>``): (the C,
    {name: temporaries' bytes}).  The calls of a backend's C API see its ``headers``."""
    target = tvm.target.Target("c")
    funcs = {gv: _banded(f).with_attr("global_symbol", f"{prefix}_{gv.name_hint}") for gv, f in sorted(
             mod.functions.items(), key=lambda item: item[0].name_hint) if isinstance(f, tirx.PrimFunc)}
    lowered = _lowered(tvm.IRModule(funcs), target)
    unpacked, temporaries = {}, {}
    for gv, func in sorted(lowered.functions.items(), key=lambda item: item[0].name_hint):
        unpacked[gv], temporaries[gv.name_hint] = _unpacked(_ties_to_even(func))
    finish = [tirx.transform.FP8StorageLegalize(), tirx.transform.BF16StorageLegalize(), tirx.transform.LowerIntrin()]
    done = tvm.ir.transform.Sequential(finish)(tvm.IRModule(unpacked))
    done, exact = _marked_floats(done)
    source = tvm.get_global_func("target.build.c")(done, target).inspect_source()
    source = _exact_floats(source, exact)
    declared = _declared(headers)
    defined = {f"{prefix}_{name}" for name in temporaries}
    plain = _plain(source, defined, declared, [h.name for h in headers])
    runtime = re.search(r"\b(TVMBackend\w*|TVMFFI\w*|__tvm\w*|DLTensor)", plain)
    if runtime:  # the unpacking above missed what a new TVM lowers another way
        raise UserError(f"the operators' C needs TVM's runtime ({runtime.group(1)}): apache-tvm {tvm.__version__} "
                        "lowers TIR in a way this engine was not written for")
    return plain, temporaries


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
            exact[text] = c_literal(abs(value), dtype)
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


def c_literal(value, dtype: str) -> str:
    """The exact C literal of a number of ``dtype``."""
    if dtype.startswith("float"):
        value = float(value)
        if math.isnan(value):
            return "NAN"
        if math.isinf(value):
            return "INFINITY" if value > 0 else "-INFINITY"
        return value.hex() + ("f" if dtype == "float32" else "")  # exact: hexadecimal floating constants (C99)
    return str(int(value))
