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
"""
from typing import Callable, Dict, Optional

import tvm
from tvm import tir

from tvm_extension.kit.scopes import scratchpad_scope
from tvm_extension.kit.calls import status_checked

from .tiling import WORD, Config, Layer, Plan

READ, WRITE = 1, 2
NONE = -1  # STRAWBERRY_NONE: no bias / residual / slope


def scope(part: str, config: Config) -> str:
    """The memory scope of a partition of this size (for TVM's StorageRewrite)."""
    return scratchpad_scope(f"strawberry_{part}", getattr(config, f"{part}_bytes"))


class Scratch:
    """One scratchpad buffer of ``words`` float32 in a partition."""

    def __init__(self, name: str, part: str, words: int, config: Config):
        self.var = tir.Var(name, tvm.ir.PointerType(tvm.ir.PrimType("float32"), scope(part, config)))
        self.words, self.base = words, config.bases[part]

    def addr(self, mask: int) -> tir.PrimExpr:
        """Its byte address in the scratchpad (the offset is filled in by TVM)."""
        offset = tir.call_intrin("int32", "tir.tvm_access_ptr", tir.type_annotation("float32"), self.var, 0,
                                 self.words, mask)
        return self.base + offset * WORD

    def allocate(self, body: tir.Stmt) -> tir.Stmt:
        return tir.Allocate(self.var, "float32", [self.words], tir.const(True, "bool"), body)


def fmap_box(layout: str, dims, start, n):
    """(ext, strides, start, n) of a channels x rows x columns box of a feature map, in the
    DMA's dimension order (NCHW: c, h, w; NHWC: h, w, c)."""
    c, h, w = dims
    if layout == "nchw":
        return (c, h, w), (h * w, w, 1), start, n
    return (h, w, c), (w * c, c, 1), (start[1], start[2], start[0]), (n[1], n[2], n[0])


def vector_box(length: int, first, count):
    return (1, 1, length), (0, 0, 1), (0, 0, first), (1, 1, count)


def _extern(name: str, *args) -> tir.Stmt:
    return status_checked(tir.call_extern("int32", name, *args), "status")


def dma_in(scratch: Scratch, host: tir.Var, box) -> tir.Stmt:
    ext, strides, start, n = box
    return _extern("strawberry_dma_in_call", scratch.addr(WRITE), host, *ext, *strides, *start, *n)


def dma_out(host: tir.Var, scratch: Scratch, box) -> tir.Stmt:
    ext, strides, start, n = box
    return _extern("strawberry_dma_out_call", host, scratch.addr(READ), *ext, *strides, *start, *n)


def _seq(*stmts) -> tir.Stmt:
    stmts = [s for s in stmts if s is not None]
    return stmts[0] if len(stmts) == 1 else tir.SeqStmt(stmts)


def _tiles(name: str, count: int, size: int, extent: int, body: Callable[[tir.PrimExpr, tir.PrimExpr], tir.Stmt]):
    """for t in range(count): first = t * size, length = min(size, extent - first): body(first, length)."""
    if count == 1:
        return body(tir.const(0, "int32"), tir.const(extent, "int32"))
    index = tir.Var(f"{name}_tile", "int32")
    first = index * size
    if extent % size == 0:
        inner = body(first, tir.const(size, "int32"))
    else:
        length = tir.Var(name, "int32")
        inner = tir.LetStmt(length, tir.min(tir.const(size, "int32"), extent - first), body(first, length))
    return tir.For(index, 0, count, tir.ForKind.SERIAL, inner)


def build(layer: Layer, plan: Plan, config: Config, host: Dict[str, Optional[tir.Var]], lo: float, hi: float) -> tir.Stmt:
    """The body of an offloaded function computing ``layer`` as ``plan`` splits it.

    ``host``: the data pointers of the function's tensors by role (ifmap, weights, bias,
    residual, slope, ofmap; None when absent).  Weights are packed [oc][ic|1][kh][kw].
    """
    tc, th = plan.channels, plan.rows
    spad = {
        "ifmap": Scratch("ifmap_spad", "ifmap", plan.ifmap_words, config),
        "weights": Scratch("weights_spad", "weights", tc * layer.weights_per_channel, config),
        "ofmap": Scratch("ofmap_spad", "ofmap", tc * th * layer.ow, config),
    }
    for role, part, words in (("bias", "weights", tc), ("slope", "weights", tc), ("residual", "ofmap", tc * th * layer.ow)):
        if host.get(role) is not None:
            spad[role] = Scratch(f"{role}_spad", part, words, config)
    per_channel = layer.weights_per_channel

    def load_weights(c0, nc):
        loads = [dma_in(spad["weights"], host["weights"],
                        ((layer.oc, 1, per_channel), (per_channel, 0, 1), (c0, 0, 0), (nc, 1, per_channel)))]
        for role in ("bias", "slope"):
            if role in spad:
                loads.append(dma_in(spad[role], host[role], vector_box(layer.oc, c0, nc)))
        return _seq(*loads)

    def load_ifmap(c0, nc, y0, nr):
        channels = (c0, nc) if layer.depthwise else (0, layer.ic)
        rows = (nr - 1) * layer.stride_h + layer.kh
        box = fmap_box(layer.layout, (layer.ic, layer.ih, layer.iw), (channels[0], y0 * layer.stride_h - layer.pad_top,
                       -layer.pad_left), (channels[1], rows, layer.in_cols))
        return dma_in(spad["ifmap"], host["ifmap"], box)

    def compute_and_store(c0, nc, y0, nr):
        out_box = fmap_box(layer.layout, (layer.oc, layer.oh, layer.ow), (c0, y0, 0), (nc, nr, layer.ow))
        residual = dma_in(spad["residual"], host["residual"], out_box) if "residual" in spad else None
        optional = [spad[role].addr(READ) if role in spad else tir.const(NONE, "int32")
                    for role in ("bias", "residual", "slope")]
        rows = (nr - 1) * layer.stride_h + layer.kh
        sizes = [rows, layer.in_cols, nc if layer.depthwise else layer.ic,  # input tile (h, w, c)
                 nr, layer.ow, nc, layer.kh, layer.kw, layer.stride_h, layer.stride_w]  # output, kernel, stride
        kernel = f"strawberry_{'depthwise_' if layer.depthwise else ''}conv2d_{layer.layout}_call"
        compute = _extern(kernel, spad["ifmap"].addr(READ), spad["weights"].addr(READ), *optional,
                          spad["ofmap"].addr(WRITE), *sizes, tir.FloatImm("float32", lo), tir.FloatImm("float32", hi))
        return _seq(residual, compute, dma_out(host["ofmap"], spad["ofmap"], out_box))

    rows_tiles = lambda body: _tiles("rows", plan.row_tiles, th, layer.oh, body)
    channel_tiles = lambda body: _tiles("channels", plan.channel_tiles, tc, layer.oc, body)
    if not plan.rows_outer:
        # Channels outer: each weight chunk loaded once, resident while the row tiles stream through.
        program = channel_tiles(lambda c0, nc: _seq(
            load_weights(c0, nc),
            rows_tiles(lambda y0, nr: _seq(load_ifmap(c0, nc, y0, nr), compute_and_store(c0, nc, y0, nr)))))
    else:
        # Rows outer: each input tile loaded once (a dense conv's serves every channel tile).
        resident = plan.channel_tiles == 1
        program = _seq(
            load_weights(tir.const(0, "int32"), tir.const(layer.oc, "int32")) if resident else None,
            rows_tiles(lambda y0, nr: _seq(
                None if layer.depthwise else load_ifmap(None, None, y0, nr),
                channel_tiles(lambda c0, nc: _seq(
                    None if resident else load_weights(c0, nc),
                    load_ifmap(c0, nc, y0, nr) if layer.depthwise else None,
                    compute_and_store(c0, nc, y0, nr))))))
    begin = _extern("strawberry_begin_call", config.spad_bytes, config.dma_bytes_per_cycle, config.dma_setup_cycles,
                    config.macs_per_cycle)
    body = _seq(begin, program)
    for scratch in spad.values():
        body = scratch.allocate(body)
    return body
