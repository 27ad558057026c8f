"""A quantized conv decomposed onto Chocolate's matrix core, with ``tir.Schedule``.

The layer is written as a GEMM over its im2col view (TE), then scheduled:

    A[m, k]  = im2col(input)[m, k]       rows m = output pixels, depth k = (ky, kx, c)
    B[k, n]  = weights[k, n]             n = output channels
    C[m, n]  = sum_k A[m, k] * B[k, n]   int32 accumulators
    out[m, n] = output_stage(C[m, n])

* ``split`` m, n, k by the core's tile (tile_m, tile_n, tile_k; the GEMM is padded to whole
  tiles: the DMA fills A past the image with the input zero point and B past the weights
  with 0, so padding never changes a result) and ``reorder`` them: tiles of C outside, the
  depth loop inside, so each accumulator tile stays in the core while it is summed;
* ``set_scope`` puts A, B and C in the scratchpad's partitions (a memory scope per partition
  size, registered once with TVM's memory info), ``compute_at`` places A's and B's tiles under the depth loop, and
  ``reverse_compute_at`` the output stage under the C tile;
* ``decompose_reduction`` splits off the accumulator's zeroing, and ``tensorize`` maps it and
  the tile's multiply-accumulate onto the core's intrinsics (``chocolate_zero``,
  ``chocolate_matmul``, registered per tile shape);
* the tile copies (``blockize`` then a body of our own, as ``InjectCopyIntrin`` did) become
  DMA calls, and the output stage the core's store.

What is left is ordinary TIR: the loops around the core calls, which later passes see and
``tvmc -vv`` prints.
"""
import dataclasses
from typing import Dict, List, Tuple

import tvm
from tvm import te

from tvm_extension.kit.scopes import scratchpad_scope
from tvm_extension.kit.tiling import positions_read

try:  # hhb-tvm: the Relay engine schedules the layer here
    from tvm import tir
    from tvm.script import tir as T

    from tvm_extension.kit.calls import status_checked
except ImportError:  # apache-tvm (the Relax engine): only the planner is used; program.py builds the TIR
    from tvm import tirx as tir
    from tvm.script import tirx as T

SUFFIX = {"int8": "_s8", "float32": "_f32"}  # the C entries taking host tensors of that type
CALL = "_call"  # the generated C calls each entry through its packing function (chocolate.h)
OPERAND_BYTES = {"int8": 1, "float32": 4}
READ, WRITE = 1, 2


@dataclasses.dataclass(frozen=True)
class Core:
    """The chip, from the target attributes."""

    tile_m: int
    tile_n: int
    tile_k: int
    spad_bytes: int
    dma_bytes_per_cycle: int
    dma_setup_cycles: int

    def tile_bytes(self, dtype: str) -> Dict[str, int]:
        """Bytes of one A, B and accumulator tile (operand tiles rounded up to words)."""
        size = OPERAND_BYTES[dtype]
        return {"a": -(-self.tile_m * self.tile_k * size // 4) * 4, "b": -(-self.tile_k * self.tile_n * size // 4) * 4,
                "acc": 4 * self.tile_m * self.tile_n}

    def begin_args(self):
        return [self.spad_bytes, self.tile_m, self.tile_n, self.tile_k, self.dma_bytes_per_cycle,
                self.dma_setup_cycles]


@dataclasses.dataclass(frozen=True)
class ConvLayer:
    """An NHWC conv (batch 1) with its output stage, as the core sees it."""

    ih: int
    iw: int
    ic: int
    oh: int
    ow: int
    oc: int
    kh: int
    kw: int
    stride_h: int
    stride_w: int
    pad_top: int
    pad_left: int
    input_zp: int = 0  # int8's output stage
    output_zp: int = 0
    act_min: int = -128
    act_max: int = 127
    dtype: str = "int8"
    lo: float = -float("inf")  # float's clamp
    hi: float = float("inf")

    @classmethod
    def from_attrs(cls, attrs) -> "ConvLayer":
        """From the function attribute the Relay pass wrote (strings, integers)."""
        values = {}
        for field in dataclasses.fields(cls):
            if field.name in attrs:
                values[field.name] = field.type(str(attrs[field.name])) if field.type in (str, float) else \
                    int(attrs[field.name])
        return cls(**values)

    @property
    def gemm(self):
        """(rows, channels, depth) of its im2col GEMM."""
        return self.oh * self.ow, self.oc, self.kh * self.kw * self.ic

    def lower_bound(self) -> int:
        """Host bytes any schedule moves at least: each input element some window reads, each
        weight and each output once."""
        rows, channels, depth = self.gemm
        read = (positions_read(self.ih, self.oh, self.stride_h, self.kh, self.pad_top)
                * positions_read(self.iw, self.ow, self.stride_w, self.kw, self.pad_left) * self.ic)
        return OPERAND_BYTES[self.dtype] * (read + depth * channels + rows * channels)


@dataclasses.dataclass(frozen=True)
class Plan:
    """A loop order and where the operand tiles live, with what it moves.

    * ``stream``: for m, n: for k: load the A and the B tile (nothing reused);
    * ``rows``: for m: the row panel of A (all its depth tiles) stays; for n, k: load B tiles;
    * ``columns``: for n: the column panel of B stays; for m, k: load A tiles;
    * ``weights``: every B tile loaded once, before the loops; for m: the row panel of A stays;
    * ``blocks``: for each group of ``n_group`` column panels: its B tiles loaded once and kept;
      for each band of ``m_group`` row panels: its input rows loaded; for m: the row panel of A
      stays (gathered on chip); for n in the group, k.  Weights too big to stay whole and an
      input too big to stay whole: the input is read once per group, each weight once.

    Where A tiles come from (``patch``): "" the im2col DMA from the host (each input element
    once per window reading it); "whole": the input rows read, once, into the scratchpad, and
    every A tile gathered on chip from them; "bands": per row panel (m outermost), the band of
    input rows its pixels read, then gathered on chip.
    """

    order: str
    dtype: str
    partitions: Dict[str, int]  # bytes of the A, B, accumulator and input-patch ("in") partitions
    a_tiles: int  # tiles moved (DMA, or gathered on chip from the patch)
    b_tiles: int
    tile_bytes: Dict[str, int]
    patch: str = ""
    patches: Tuple[Tuple[int, int], ...] = ()  # (first input row, rows) of each patch transfer
    host_bytes: int = 0  # host bytes the DMA reads and writes: what the model's counters count
    dma_cycles: int = 0  # the model's cost of every transfer (setup + bytes / rate)
    m_group: int = 1  # row panels per band (bands) ...
    n_group: int = 0  # ... and column panels per group of resident weights (order blocks)

    @property
    def bases(self) -> Dict[str, int]:
        sizes = self.partitions
        return {"acc": 0, "a": sizes["acc"], "b": sizes["acc"] + sizes["a"], "in": sizes["acc"] + sizes["a"] + sizes["b"]}

    @property
    def dma_in_bytes(self) -> int:
        """Scratchpad bytes the DMA fills (tiles, padding included)."""
        return self.a_tiles * self.tile_bytes["a"] + self.b_tiles * self.tile_bytes["b"]

    def describe(self) -> str:
        source = {"": "im2col DMA", "whole": "the input once, gathered on chip",
                  "bands": f"{len(self.patches)} bands of input rows, gathered on chip"}[self.patch]
        if self.order.startswith("blocks"):
            source += f" (bands of {self.m_group} row panels, weights in groups of {self.n_group} column panels)"
        return (f"order {self.order}, A from {source}: {self.a_tiles} A tiles, {self.b_tiles} B tiles, moves "
                f"{self.host_bytes} host bytes in {self.dma_cycles} DMA cycles; partitions A {self.partitions['a']}, "
                f"B {self.partitions['b']}, accumulator {self.partitions['acc']}, input {self.partitions['in']} bytes")


class Unfit(Exception):
    """The layer's tiles do not fit the scratchpad in any order."""


def band(layer: "ConvLayer", m0, tile_m: int, lo=max, hi=min):
    """(first input row, rows) the output pixels [m0, m0 + tile_m) read, inside the image; with
    lo/hi tir.max/tir.min, the same for a TIR expression m0."""
    rows = layer.oh * layer.ow
    first = lo((m0 // layer.ow) * layer.stride_h - layer.pad_top, 0)
    last = hi((hi(m0 + tile_m, rows) - 1) // layer.ow * layer.stride_h - layer.pad_top + layer.kh, layer.ih)
    # Pixels whose windows all fall in the padding read no input row; the patch still holds one (the
    # nearest: chocolate_dma_patch takes at least one row), which their im2col does not read.
    first = hi(first, layer.ih - 1)
    return first, lo(last, first + 1) - first


def _taps(size: int, out: int, stride: int, window: int, pad: int) -> int:
    """Window taps inside the input along one axis, summed over the outputs."""
    return sum(max(0, min(o * stride - pad + window, size) - max(o * stride - pad, 0)) for o in range(out))


def plans(layer: "ConvLayer", core: Core, dtype: str = "int8") -> List[Plan]:
    """Every order and source of A tiles with what it moves and the partitions it needs (fitting
    or not).  host_bytes and dma_cycles are what the hardware model counts, exactly."""
    rows, channels, depth = layer.gemm
    tm, tn, tk = core.tile_m, core.tile_n, core.tile_k
    mo, no, ko = -(-rows // tm), -(-channels // tn), -(-depth // tk)
    tile, elem = core.tile_bytes(dtype), OPERAND_BYTES[dtype]
    row_bytes = layer.iw * layer.ic * elem

    def cycles(nbytes):
        return core.dma_setup_cycles + -(-nbytes // core.dma_bytes_per_cycle)

    # host elements one pass of the im2col DMA over A reads (padding is not read)
    im2col = _taps(layer.ih, layer.oh, layer.stride_h, layer.kh, layer.pad_top) * \
        _taps(layer.iw, layer.ow, layer.stride_w, layer.kw, layer.pad_left) * layer.ic
    sources = {"": (), "whole": ((0, band(layer, 0, rows)[1]),),
               "bands": tuple(band(layer, m0, tm) for m0 in range(0, rows, tm))}
    out_bytes, out_cycles = rows * channels * elem, mo * no * cycles(4 * tm * tn)
    # order: (A tiles held, B tiles held, A tiles moved, B tiles moved)
    options = {"stream": (1, 1, mo * no * ko, mo * no * ko), "rows": (ko, 1, mo * ko, mo * no * ko),
               "columns": (1, ko, mo * no * ko, no * ko), "weights": (ko, no * ko, mo * ko, no * ko)}
    made = []
    for order, (a_held, b_held, a_moved, b_moved) in options.items():
        b_bytes = b_moved // (no * ko) * depth * channels * elem  # each pass over B reads every weight
        for patch, patches in sources.items():
            if patch == "bands" and (order == "columns" or min(r for _, r in patches) < 1):
                continue  # bands follow the row panels: m outermost, each band some rows
            if patch:
                a_bytes = sum(r for _, r in patches) * row_bytes
                a_cycles = sum(cycles(r * row_bytes) for _, r in patches)
                patch_bytes = -(-max(r for _, r in patches) * row_bytes // 4) * 4
            else:
                a_bytes, a_cycles, patch_bytes = a_moved // (mo * ko) * im2col * elem, 0, 0
            made.append(Plan(order, dtype, {"a": a_held * tile["a"], "b": b_held * tile["b"], "acc": tile["acc"],
                                            "in": patch_bytes}, a_moved, b_moved, tile, patch, patches,
                             a_bytes + b_bytes + out_bytes,
                             a_cycles + a_moved * cycles(tm * tk * elem) + b_moved * cycles(tk * tn * elem) + out_cycles))
    weights_bytes = depth * channels * elem
    for n_group in _divisors(no):  # blocks: each weight once, the input once per group of columns
        for m_group in sorted({-(-mo // count) for count in range(1, mo + 1)}):  # each number of bands once
            patches = tuple(band(layer, m0, tm * m_group) for m0 in range(0, rows, tm * m_group))
            passes = no // n_group
            # A's row panel kept across the group's columns, or one A tile gathered per core call
            # (more gathers on chip, room for more weights and rows)
            for order, a_held, a_moved in (("blocks", ko, passes * mo * ko), ("blocks_stream", 1, mo * no * ko)):
                made.append(Plan(order, dtype, {"a": a_held * tile["a"], "b": n_group * ko * tile["b"],
                                                "acc": tile["acc"], "in": -(-max(r for _, r in patches) * row_bytes // 4) * 4},
                                 a_moved, no * ko, tile, "bands", patches,
                                 passes * sum(r for _, r in patches) * row_bytes + weights_bytes + out_bytes,
                                 passes * sum(cycles(r * row_bytes) for _, r in patches) + a_moved * cycles(tm * tk * elem)
                                 + no * ko * cycles(tk * tn * elem) + out_cycles, m_group, n_group))
    return made


def _divisors(n: int) -> List[int]:
    return [d for d in range(1, n + 1) if n % d == 0]


def plan_layer(layer: "ConvLayer", core: Core, dtype: str = "int8") -> Plan:
    """The plan moving the fewest host bytes whose partitions fit the scratchpad (then the fewest
    DMA cycles, then the fewest scratchpad bytes)."""
    fitting = [p for p in plans(layer, core, dtype) if sum(p.partitions.values()) <= core.spad_bytes]
    if not fitting:
        tile = core.tile_bytes(dtype)
        raise Unfit(f"one A, B and accumulator tile take {sum(tile.values())} bytes, the scratchpad holds "
                    f"{core.spad_bytes}")
    return min(fitting, key=lambda p: (p.host_bytes, p.dma_cycles, sum(p.partitions.values())))


def scopes(plan: Plan) -> Dict[str, str]:
    """The memory scope of each partition, by its size (for TVM's StorageRewrite)."""
    unit_bits = {"a": 8 * OPERAND_BYTES[plan.dtype], "b": 8 * OPERAND_BYTES[plan.dtype], "acc": 32}
    return {part: scratchpad_scope(f"chocolate_{part}", plan.partitions[part], unit_bits[part])
            for part in ("a", "b", "acc")}


def _address(plan: Plan, part: str, buffer: tir.Buffer, mask: int) -> "tir.PrimExpr":
    """Byte address of a scratchpad buffer (its offset in the partition is filled in by TVM)."""
    size = 4 if part == "acc" else OPERAND_BYTES[plan.dtype]
    return plan.bases[part] + buffer.access_ptr(mask, "int32") * size


def register_intrinsics(core: Core, plan: Plan) -> Dict[str, str]:
    """The core's two operations as tensor intrinsics for this tile shape and partition layout;
    returns their names (each registered once)."""
    m, n, k = core.tile_m, core.tile_n, core.tile_k
    memory = scopes(plan)  # read by the TVMScript functions below
    dtype = plan.dtype
    acc_type = "int32" if dtype == "int8" else "float32"
    zero = tir.const(0, acc_type)

    def product(a, b):
        return T.Cast(acc_type, a) * T.Cast(acc_type, b) if dtype == "int8" else a * b

    @T.prim_func
    def matmul_desc(a: T.handle, b: T.handle, c: T.handle) -> None:
        A = T.match_buffer(a, (m, k), dtype, offset_factor=1, scope=memory["a"])
        B = T.match_buffer(b, (k, n), dtype, offset_factor=1, scope=memory["b"])
        C = T.match_buffer(c, (m, n), acc_type, offset_factor=1, scope=memory["acc"])
        with T.block("root"):
            T.reads(C[0:m, 0:n], A[0:m, 0:k], B[0:k, 0:n])
            T.writes(C[0:m, 0:n])
            for i, j, r in T.grid(m, n, k):
                with T.block("update"):
                    vi, vj, vr = T.axis.remap("SSR", [i, j, r])
                    C[vi, vj] = C[vi, vj] + product(A[vi, vr], B[vr, vj])

    @T.prim_func
    def matmul_impl(a: T.handle, b: T.handle, c: T.handle) -> None:
        A = T.match_buffer(a, (m, k), dtype, offset_factor=1, scope=memory["a"])
        B = T.match_buffer(b, (k, n), dtype, offset_factor=1, scope=memory["b"])
        C = T.match_buffer(c, (m, n), acc_type, offset_factor=1, scope=memory["acc"])
        with T.block("root"):
            T.reads(C[0:m, 0:n], A[0:m, 0:k], B[0:k, 0:n])
            T.writes(C[0:m, 0:n])
            T.evaluate(T.call_extern("int32", "chocolate_matmul" + CALL, _address(plan, "a", A, READ),
                                     _address(plan, "b", B, READ), _address(plan, "acc", C, READ | WRITE)))

    @T.prim_func
    def zero_desc(c: T.handle) -> None:
        C = T.match_buffer(c, (m, n), acc_type, offset_factor=1, scope=memory["acc"])
        with T.block("root"):
            T.reads()
            T.writes(C[0:m, 0:n])
            for i, j in T.grid(m, n):
                with T.block("init"):
                    vi, vj = T.axis.remap("SS", [i, j])
                    C[vi, vj] = zero

    @T.prim_func
    def zero_impl(c: T.handle) -> None:
        C = T.match_buffer(c, (m, n), acc_type, offset_factor=1, scope=memory["acc"])
        with T.block("root"):
            T.reads()
            T.writes(C[0:m, 0:n])
            T.evaluate(T.call_extern("int32", "chocolate_zero" + CALL, _address(plan, "acc", C, WRITE)))

    sizes = "_".join(str(plan.partitions[p]) for p in ("acc", "a", "b"))  # they place and size the partitions
    names = {"matmul": f"chocolate_matmul_{dtype}_{m}x{n}x{k}_in_{sizes}", "zero": f"chocolate_zero_{acc_type}_{m}x{n}_in_{sizes}"}
    for kind, desc, impl in (("matmul", matmul_desc, matmul_impl), ("zero", zero_desc, zero_impl)):
        if tir.TensorIntrin.get(names[kind], allow_missing=True) is None:
            tir.TensorIntrin.register(names[kind], desc, impl)
    return names


def _wide(index):
    """``index`` in int64, to be compared: TVM 0.16's canonical simplifier rewrites a comparison of
    a sum of loop variables whose coefficients share a divisor of 2**63 - 1 (7, 73, 127: tiles of
    14, strides of 7) with a literal near 2**63 / that divisor, which no int32 holds ("Literal value
    8589934591 exceeds maximum of int32"; fixed upstream in apache/tvm#16704)."""
    return tir.Cast("int64", index)


def gemm_compute(layer: ConvLayer, core: Core, shapes):
    """The layer's TE over placeholders shaped as the function's buffers (input, weights
    [depth][channels], channel table [3][channels], output [rows][channels]).  A and B are
    tiled ([row tile][depth tile][tile_m][tile_k], [depth tile][column tile][tile_k][tile_n]),
    so that every tile is contiguous wherever a panel of them is placed."""
    rows, channels, depth = layer.gemm
    tm, tn, tk = core.tile_m, core.tile_n, core.tile_k
    mo, no, ko = -(-rows // tm), -(-channels // tn), -(-depth // tk)
    dtype, acc = layer.dtype, "int32" if layer.dtype == "int8" else "float32"
    data = te.placeholder(shapes["input"], dtype, name="input")
    weights = te.placeholder(shapes["weights"], dtype, name="weights")
    table = te.placeholder(shapes["table"], acc, name="table")
    pad = tir.const(layer.input_zp if dtype == "int8" else 0, dtype)
    batch = (0,) * (len(shapes["input"]) - 3)

    def im2col(m, k):  # element (m, k) of the im2col matrix; the input zero point outside
        y, x = m // layer.ow, m % layer.ow
        ky, rest = k // (layer.kw * layer.ic), k % (layer.kw * layer.ic)
        kx, c = rest // layer.ic, rest % layer.ic
        iy, ix = y * layer.stride_h - layer.pad_top + ky, x * layer.stride_w - layer.pad_left + kx
        w = _wide
        inside = tir.all(w(m) < rows, w(k) < depth, w(iy) >= 0, w(iy) < layer.ih, w(ix) >= 0, w(ix) < layer.iw)
        return tir.if_then_else(inside, data[(*batch, iy, ix, c)], pad)

    a = te.compute((mo, ko, tm, tk), lambda i, r, ii, rr: im2col(i * tm + ii, r * tk + rr), name="A")
    b = te.compute((ko, no, tk, tn), lambda r, j, rr, jj: tir.if_then_else(
        tir.all(_wide(r * tk + rr) < depth, _wide(j * tn + jj) < channels), weights[r * tk + rr, j * tn + jj],
        tir.const(0, dtype)), name="B")
    r = te.reduce_axis((0, ko * tk), name="k")
    c = te.compute((mo * tm, no * tn), lambda m, n: te.sum(
        a[m // tm, r // tk, m % tm, r % tk].astype(acc) * b[r // tk, n // tn, r % tk, n % tn].astype(acc),
        axis=r), name="C")
    # Stands for the core's output stage (chocolate_store replaces it): reads C and the table.
    out = te.compute((rows, channels), lambda m, n: (c[m, n] + table[0, n]).astype(dtype), name="output")
    return [data, weights, table, out]


def _extern(name: str, *args) -> tir.Stmt:
    return status_checked(tir.call_extern("int32", name, *args), "status")


def _tile_region(region: tir.BufferRegion, name: str) -> "tir.MatchBufferRegion":
    """A buffer matching one tile of a scratchpad buffer, so its offset follows TVM's compaction."""
    buf = region.buffer
    shape = [r.extent for r in region.region]
    tile = tir.decl_buffer(shape, buf.dtype, name, elem_offset=tir.Var(f"{name}_offset", "int32"),
                           scope=buf.scope(), offset_factor=1)
    return tir.MatchBufferRegion(tile, region)


def schedule(layer: ConvLayer, core: Core, plan: Plan, tensors, names) -> tir.PrimFunc:
    """The scheduled PrimFunc of ``tensors`` (the function's buffers in its parameter order)."""
    sch = tir.Schedule(te.create_prim_func(tensors))
    c_block = sch.get_block("C")
    m, n, k = sch.get_loops(c_block)
    m_tile, m_in = sch.split(m, [None, core.tile_m])
    n_tile, n_in = sch.split(n, [None, core.tile_n])
    k_tile, k_in = sch.split(k, [None, core.tile_k])
    group = None  # blocks: the loop over groups of column panels, outermost
    if plan.order.startswith("blocks"):
        group, n_tile = sch.split(n_tile, [None, plan.n_group])
    outer = (n_tile, m_tile) if plan.order == "columns" else (m_tile, n_tile)
    sch.reorder(*([group] if group else []), *outer, k_tile, m_in, n_in, k_in)
    sch.reverse_compute_at(sch.get_block("output"), outer[1])
    for block, part in (("A", "a"), ("B", "b"), ("C", "acc")):
        sch.set_scope(sch.get_block(block), 0, scopes(plan)[part])
    # Where each operand's tiles are loaded: under the depth loop (one tile), under the row or
    # column loop (a panel, reused across the other), or before the loops (all of them).
    at = {"stream": (k_tile, k_tile), "rows": (m_tile, k_tile), "columns": (k_tile, n_tile),
          "weights": (m_tile, None), "blocks": (m_tile, group), "blocks_stream": (k_tile, group)}[plan.order]
    for block, loop in zip(("A", "B"), at):
        if loop is not None:
            sch.compute_at(sch.get_block(block), loop)
        sch.blockize(sch.get_loops(sch.get_block(block))[-2])  # one block per tile: one DMA call
    init = sch.decompose_reduction(c_block, k_tile)
    sch.tensorize(sch.get_loops(init)[-2], names["zero"])
    sch.tensorize(m_in, names["matmul"])
    func = sch.mod["main"]
    return func.with_body(_lower_transfers(func.body, layer, core, plan, sch.get(m_tile).loop_var))


def _lower_transfers(body: tir.Stmt, layer: ConvLayer, core: Core, plan: Plan, m_var: tir.Var) -> tir.Stmt:
    """The A and B tile copies become DMA calls (A: gathers from the input patch, if the plan
    has one), the output stage the core's store, every call's status is checked, and the layer
    begins with chocolate_begin, its configuration (and the whole input's patch); a plan with
    bands loads each at the top of the row panel's loop (m_var), at the band's first panel."""
    host = {}

    def patch(first, count):
        return _extern("chocolate_dma_patch" + SUFFIX[plan.dtype] + CALL, plan.bases["in"], host["input"].data, first,
                       count)

    def collect(node):
        if isinstance(node, (tir.BufferLoad, tir.BufferStore)):
            host.setdefault(node.buffer.name, node.buffer)

    def transfer(stmt):
        block = stmt.block
        write = block.writes[0]
        part = "a" if block.name_hint == "A_o" else "b"
        match = _tile_region(write, f"{part}_tile")
        tiles = [r.min for r in write.region[:2]]  # (row, depth) or (depth, column) tile
        sizes = (core.tile_m, core.tile_k) if part == "a" else (core.tile_k, core.tile_n)
        origin = [t * size for t, size in zip(tiles, sizes)]
        if part == "a" and plan.patch:  # on chip, from the input patch
            call = _extern("chocolate_im2col_patch" + CALL, _address(plan, part, match.buffer, WRITE), plan.bases["in"],
                           *origin)
        else:
            entry, source = ("chocolate_dma_im2col", "input") if part == "a" else ("chocolate_dma_weights", "weights")
            entry += SUFFIX[plan.dtype] + CALL
            call = _extern(entry, _address(plan, part, match.buffer, WRITE), host[source].data, *origin)
        new = tir.Block(block.iter_vars, block.reads, block.writes, block.name_hint, call, match_buffers=[match])
        return tir.BlockRealize(stmt.iter_values, stmt.predicate, new)

    def rewrite(stmt):
        if isinstance(stmt, tir.BlockRealize) and stmt.block.name_hint in ("A_o", "B_o"):
            return transfer(stmt)
        if isinstance(stmt, tir.Evaluate) and isinstance(stmt.value, tir.Call) and \
                stmt.value.op.name == "tir.call_extern" and stmt.value.args[0].value.startswith("chocolate_"):
            return status_checked(stmt.value, "status")
        if isinstance(stmt, tir.For) and stmt.loop_var.same_as(m_var) and plan.patch == "bands":
            first, count = band(layer, m_var * core.tile_m, core.tile_m * plan.m_group, tir.max, tir.min)
            load = patch(first, count)  # at the first row panel of each band
            if plan.m_group > 1:
                load = tir.IfThenElse(tir.floormod(m_var, plan.m_group) == 0, load, None)
            return tir.For(stmt.loop_var, stmt.min, stmt.extent, stmt.kind,
                           tir.SeqStmt([load, stmt.body]), stmt.thread_binding, stmt.annotations)
        return None

    def store(stmt):  # the outermost loop of the output stage's nest
        return _store(stmt, core, plan) if _only_block(stmt) == "output" else None

    tir.stmt_functor.post_order_visit(body, collect)
    body = tir.stmt_functor.ir_transform(body, store, rewrite, ["tir.BlockRealize", "tir.For", "tir.Evaluate"])
    geometry = (*layer.gemm, layer.ih, layer.iw, layer.ic, layer.kh, layer.kw, layer.stride_h, layer.stride_w,
                layer.pad_top, layer.pad_left, layer.ow)
    if layer.dtype == "int8":
        configure = _extern("chocolate_configure_s8" + CALL, *geometry, layer.input_zp, host["table"].data, layer.output_zp,
                            layer.act_min, layer.act_max)
    else:  # infinite bounds as FLT_MAX: C99 has no portable literal for infinity in generated code
        lo, hi = (tir.const(max(min(v, 3.4028234e38), -3.4028234e38), "float32") for v in (layer.lo, layer.hi))
        configure = _extern("chocolate_configure_f32" + CALL, *geometry, host["table"].data, lo, hi)
    setup = [_extern("chocolate_begin" + CALL, *core.begin_args()), configure]
    if plan.patch == "whole":
        setup.append(patch(*plan.patches[0]))
    root = body.block
    root = tir.Block(root.iter_vars, root.reads, root.writes, root.name_hint, tir.SeqStmt([*setup, root.body]),
                     root.init, root.alloc_buffers, root.match_buffers, root.annotations)
    return tir.BlockRealize(body.iter_values, body.predicate, root)


def _only_block(loop: tir.For):
    names = []
    tir.stmt_functor.post_order_visit(loop, lambda n: names.append(n.name_hint) if isinstance(n, tir.Block) else None)
    return names[0] if len(set(names)) == 1 else None


def _store(loop: tir.For, core: Core, plan: Plan) -> tir.Stmt:
    """The output stage's loop nest under a C tile -> one chocolate_store of that tile."""
    realize = []
    tir.stmt_functor.post_order_visit(loop, lambda n: realize.append(n) if isinstance(n, tir.BlockRealize) else None)
    inner = {}
    tir.stmt_functor.post_order_visit(
        loop, lambda n: inner.update({n.loop_var: tir.const(0, n.loop_var.dtype)}) if isinstance(n, tir.For) else None)
    origin = [tir.stmt_functor.substitute(v, inner) for v in realize[0].iter_values]
    acc = realize[0].block.reads[0].buffer
    region = tir.BufferRegion(acc, [tvm.ir.Range.from_min_extent(origin[0], core.tile_m),
                                    tvm.ir.Range.from_min_extent(origin[1], core.tile_n)])
    match = _tile_region(region, "acc_tile")
    out = realize[0].block.writes[0].buffer
    rows, channels = (int(s) for s in out.shape)
    out_region = tir.BufferRegion(out, [
        tvm.ir.Range.from_min_extent(origin[0], tir.min(core.tile_m, rows - origin[0])),
        tvm.ir.Range.from_min_extent(origin[1], tir.min(core.tile_n, channels - origin[1]))])
    call = _extern("chocolate_store" + SUFFIX[plan.dtype] + CALL, out.data, _address(plan, "acc", match.buffer, READ), *origin)
    return tir.BlockRealize([], tir.const(True, "bool"), tir.Block([], [region], [out_region], "store", call,
                                                                    match_buffers=[match]))
