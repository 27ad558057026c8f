"""The TIR of one tiled layer: scratchpad buffers, DMA transfers around each compute call.

Built directly as TIR statements from a ``tiling.Plan`` (README.md says why not through
``tir.Schedule``).  The scratchpad buffers are ordinary TIR allocations in memory
scopes of Strawberry's own, one per partition and size (``global.strawberry_ifmap_<bytes>``,
``..._weights_...``, ``..._ofmap_...``), each registered once with TVM's memory-info mechanism
(``tvm.info.mem.<scope>``, ``tvm_extension.kit.scopes``) with the partition's size.  TVM itself then

* packs the buffers of each partition and checks they fit (StorageRewrite: "Allocation exceed
  bound of memory tag ..." otherwise), and
* turns every ``tvm_access_ptr`` of a scratchpad buffer into its offset in the partition
  (LowerDeviceStorageAccessInfo, registered by the backend at phase 3),

so the generated C passes plain integer scratchpad addresses (partition base + 4 * offset) to
the C API's packing functions (``strawberry_dma_in_call``...: TIR cannot build the entries'
structs; strawberry.h fills them).  Every call's status is checked: a non-zero status stops
the inference.

The Relax engine (apache-tvm, whose TIR is ``tvm.tirx``, without TVM 0.16's memory scopes) builds
the same program given its ``extern``: each partition's buffers laid out one after the other here
(``Placed``), and each call made and its status checked by ``extern`` (``relax_patterns.py``).
"""
from __future__ import annotations  # the annotations name tvm.tir's types, which tvm.tirx names otherwise

from typing import Callable, Dict, Optional

import tvm

try:  # hhb-tvm: the Relay engine
    from tvm import tir
except ImportError:  # apache-tvm: the Relax engine
    from tvm import tirx as tir

from .tiling import WORD, Config, Layer, Plan, tile_words

READ, WRITE = 1, 2
NONE = -1  # STRAWBERRY_NONE: no bias / residual / slope
ACC_ADD, ACC_PARTIAL = 1, 2  # STRAWBERRY_ACC_*: an input-channel chunk's sums added to / left as partial sums


def scope(part: str, config: Config) -> str:
    """The memory scope of a partition of this size (for TVM's StorageRewrite)."""
    from tvm_extension.kit.scopes import scratchpad_scope  # pylint: disable=import-outside-toplevel

    return scratchpad_scope(f"strawberry_{part}", getattr(config, f"{part}_bytes"))


class Scratch:
    """One scratchpad buffer of ``words`` float32 in a partition."""

    def __init__(self, name: str, part: str, words: int, config: Config):
        self.var = tir.Var(name, tvm.ir.PointerType(tvm.ir.PrimType("float32"), scope(part, config)))
        self.words, self.base = words, config.bases[part]

    def addr(self, mask: int, words=0) -> tir.PrimExpr:
        """The byte address in the scratchpad of its element ``words`` (the buffer's offset is filled
        in by TVM)."""
        offset = tir.call_intrin("int32", "tir.tvm_access_ptr", tir.type_annotation("float32"), self.var, 0,
                                 self.words, mask)
        return self.base + (offset + words) * WORD

    def allocate(self, body: tir.Stmt) -> tir.Stmt:
        return tir.Allocate(self.var, "float32", [self.words], tir.const(True, "bool"), body)


class Placed:
    """One scratchpad buffer of ``words`` float32 at the next free offset of its partition
    (``free``: words used so far, by partition), for the Relax engine."""

    def __init__(self, name: str, part: str, words: int, config: Config, free: Dict[str, int]):
        self.words, self.offset = words, free.get(part, 0)
        self.base = config.bases[part]
        free[part] = self.offset + words
        if free[part] * WORD > getattr(config, f"{part}_bytes"):
            raise ValueError(f"{name}: {free[part] * WORD} bytes do not fit the {part} partition")

    def addr(self, mask: int, words=0) -> tir.PrimExpr:
        return self.base + (self.offset + words) * WORD

    def allocate(self, body: tir.Stmt) -> tir.Stmt:
        return body  # the scratchpad is the device's, addressed by the integers above


def fmap_box(layout: str, dims, start, n):
    """(ext, strides, start, n) of a channels x rows x columns box of a feature map, in the
    DMA's dimension order (NCHW: c, h, w; NHWC: h, w, c)."""
    c, h, w = dims
    if layout == "nchw":
        return (c, h, w), (h * w, w, 1), start, n
    return (h, w, c), (w * c, c, 1), (start[1], start[2], start[0]), (n[1], n[2], n[0])


def vector_box(length: int, first, count):
    return (1, 1, length), (0, 0, 1), (0, 0, first), (1, 1, count)


def status_checked(call: tir.PrimExpr) -> tir.Stmt:
    """The AOT executor's check (Relay engine): the function returns a non-zero status."""
    from tvm_extension.kit.calls import status_checked as checked  # pylint: disable=import-outside-toplevel

    return checked(call, "status")


def dma_in(extern, scratch: Scratch, host: tir.Var, box, words=0) -> tir.Stmt:
    ext, strides, start, n = box
    return extern("strawberry_dma_in_call", scratch.addr(WRITE, words), host, *ext, *strides, *start, *n)


def dma_out(extern, host: tir.Var, scratch: Scratch, box) -> tir.Stmt:
    ext, strides, start, n = box
    return extern("strawberry_dma_out_call", host, scratch.addr(READ), *ext, *strides, *start, *n)


def _seq(*stmts) -> tir.Stmt:
    stmts = [s for s in stmts if s is not None]
    if not stmts:
        return None
    return stmts[0] if len(stmts) == 1 else tir.SeqStmt(stmts)


def _let(var: tir.Var, value: tir.PrimExpr, body: tir.Stmt) -> tir.Stmt:
    if hasattr(tir, "Bind"):  # apache-tvm's TIR binds a variable for the statements after it
        return tir.SeqStmt([tir.Bind(var, value), body])
    return tir.LetStmt(var, value, body)


def _tiles(name: str, count: int, size: int, extent: int,
           body: Callable[[tir.PrimExpr, tir.PrimExpr, tir.PrimExpr], tir.Stmt]) -> tir.Stmt:
    """for t in range(count): first = t * size, length = min(size, extent - first): body(t, first, length)."""
    if count == 1:
        return body(tir.const(0, "int32"), tir.const(0, "int32"), tir.const(extent, "int32"))
    index = tir.Var(f"{name}_tile", "int32")
    first = index * size
    if extent % size == 0:
        inner = body(index, first, tir.const(size, "int32"))
    else:
        length = tir.Var(name, "int32")
        inner = _let(length, tir.min(tir.const(size, "int32"), extent - first), body(index, first, length))
    return tir.For(index, 0, count, tir.ForKind.SERIAL, inner)


def _flag(condition: tir.PrimExpr, value: int) -> tir.PrimExpr:
    return tir.Cast("int32", condition) * value


def build(layer: Layer, plan: Plan, config: Config, host: Dict[str, Optional[tir.Var]], lo: float, hi: float,
          extern: Optional[Callable[..., tir.Stmt]] = None) -> tir.Stmt:
    """The body of an offloaded function computing ``layer`` as ``plan`` splits it.

    ``host``: the data pointers of the function's tensors by role (ifmap, weights, bias,
    residual, slope, ofmap; None when absent).  Weights are packed [oc][ic|1][kh][kw].
    A resident tensor split into input-channel chunks holds chunk j at j times a full chunk.
    ``extern(name, *args)``: the Relax engine's call of a C entry, its status checked (module docstring).
    """
    tc, th, tw, ti, n_it = plan.channels, plan.rows, plan.cols, plan.in_channels, plan.in_tiles
    dense, taps = not layer.depthwise, layer.taps
    ifmap_words, weights_words, _ = tile_words(layer, th, tw, tc, ti, plan.weights_resident,
                                                         plan.ifmap_resident)
    free = {}
    buffer = Scratch if extern is None else (lambda *a: Placed(*a, free))
    _extern = extern or (lambda name, *args: status_checked(tir.call_extern("int32", name, *args)))
    spad = {
        "ifmap": buffer("ifmap_spad", "ifmap", ifmap_words, config),
        "weights": buffer("weights_spad", "weights", weights_words - tc * layer.extras, config),
        "ofmap": buffer("ofmap_spad", "ofmap", tc * th * tw, config),
    }
    for role, part, words in (("bias", "weights", tc), ("slope", "weights", tc), ("residual", "ofmap", tc * th * tw)):
        if host.get(role) is not None:
            spad[role] = buffer(f"{role}_spad", part, words, config)
    in_tile_words = ti * layer.in_rows(th) * layer.in_cols(tw)  # a full input chunk

    def load_weights(c0, nc, i0, ni, words):
        if dense:
            box = ((layer.oc, layer.ic, taps), (layer.ic * taps, taps, 1), (c0, i0, 0), (nc, ni, taps))
        else:
            box = ((layer.oc, 1, taps), (taps, 0, 1), (c0, 0, 0), (nc, 1, taps))
        return dma_in(_extern, spad["weights"], host["weights"], box, words)

    def load_extras(c0, nc):
        return _seq(*[dma_in(_extern, spad[role], host[role], vector_box(layer.oc, c0, nc)) for role in ("bias", "slope")
                      if role in spad])

    def load_ifmap(c0, nc, y0, nr, x0, nx, words):
        box = fmap_box(layer.layout, (layer.ic, layer.ih, layer.iw),
                       (c0, y0 * layer.stride_h - layer.pad_top, x0 * layer.stride_w - layer.pad_left),
                       (nc, layer.in_rows(nr), layer.in_cols(nx)))
        return dma_in(_extern, spad["ifmap"], host["ifmap"], box, words)

    in_chunks = lambda body: _tiles("in", n_it, ti, layer.ic, body)  # body(j, first, count); j = 0 for one chunk

    def resident_weights(c0, nc):
        return _seq(in_chunks(lambda j, i0, ni: load_weights(c0, nc, i0, ni, j * tc * ti * taps)),
                    load_extras(c0, nc))

    def resident_ifmap(y0, nr, x0, nx):
        return in_chunks(lambda j, i0, ni: load_ifmap(i0, ni, y0, nr, x0, nx, j * in_tile_words))

    def output_tile(c0, nc, y0, nr, x0, nx):
        """The output tile: its residual, then per input-channel chunk what is not resident and the
        engine (partial sums until the last chunk), then the tile back to host memory."""
        out_box = fmap_box(layer.layout, (layer.oc, layer.oh, layer.ow), (c0, y0, x0), (nc, nr, nx))
        optional = [spad[role].addr(READ) if role in spad else tir.const(NONE, "int32")
                    for role in ("bias", "residual", "slope")]
        kernel = f"strawberry_{'depthwise_' if layer.depthwise else ''}conv2d_{layer.layout}_call"

        def chunk(j, i0, ni):
            weights_at = j * tc * ti * taps if plan.weights_resident else 0
            ifmap_at = j * in_tile_words if plan.ifmap_resident else 0
            accumulate = 0 if n_it == 1 else _flag(j > 0, ACC_ADD) + _flag(j < n_it - 1, ACC_PARTIAL)
            sizes = [layer.in_rows(nr), layer.in_cols(nx), ni if dense else nc,  # input tile (h, w, c)
                     nr, nx, nc, layer.kh, layer.kw, layer.stride_h, layer.stride_w]  # output, kernel, stride
            return _seq(
                None if plan.weights_resident else load_weights(c0, nc, i0, ni, 0),
                None if plan.ifmap_resident else load_ifmap(*((i0, ni) if dense else (c0, nc)), y0, nr, x0, nx, 0),
                _extern(kernel, spad["ifmap"].addr(READ, ifmap_at), spad["weights"].addr(READ, weights_at), *optional,
                        spad["ofmap"].addr(WRITE), *sizes, tir.FloatImm("float32", lo), tir.FloatImm("float32", hi),
                        accumulate))

        return _seq(
            dma_in(_extern, spad["residual"], host["residual"], out_box) if "residual" in spad else None,
            None if plan.weights_resident else load_extras(c0, nc),
            in_chunks(chunk),
            dma_out(_extern, host["ofmap"], spad["ofmap"], out_box))

    def spatial_tiles(body):
        return _tiles("rows", plan.row_tiles, th, layer.oh, lambda _, y0, nr: _tiles(
            "cols", plan.col_tiles, tw, layer.ow, lambda _, x0, nx: body(y0, nr, x0, nx)))

    channel_tiles = lambda body: _tiles("channels", plan.channel_tiles, tc, layer.oc, lambda _, c0, nc: body(c0, nc))
    if not plan.rows_outer:
        # Channels outer: each weight chunk loaded once (if resident) while the spatial tiles stream through.
        program = channel_tiles(lambda c0, nc: _seq(
            resident_weights(c0, nc) if plan.weights_resident else None,
            spatial_tiles(lambda y0, nr, x0, nx: output_tile(c0, nc, y0, nr, x0, nx))))
    else:
        # Rows outer: each input tile loaded once (if resident) for every channel tile.
        program = _seq(
            resident_weights(tir.const(0, "int32"), tir.const(layer.oc, "int32")) if plan.weights_resident else None,
            spatial_tiles(lambda y0, nr, x0, nx: _seq(
                resident_ifmap(y0, nr, x0, nx) if plan.ifmap_resident else None,
                channel_tiles(lambda c0, nc: output_tile(c0, nc, y0, nr, x0, nx)))))
    begin = _extern("strawberry_begin_call", config.spad_bytes, config.dma_bytes_per_cycle, config.dma_setup_cycles,
                    config.macs_per_cycle)
    body = _seq(begin, program)
    for scratch in spad.values():
        body = scratch.allocate(body)
    return body
