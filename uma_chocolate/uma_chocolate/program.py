"""The program of one layer for the Relax engine: the loops of DMA transfers and core calls that
``schedule.schedule`` makes with ``tir.Schedule`` on the Relay engine, built directly from the
same ``schedule.Plan``, with the same calls, arguments and scratchpad addresses.

Why not the schedule itself: apache-tvm 0.27 has no memory scopes with a size (TVM 0.16's
``tvm.info.mem``), through which TVM lays out the scratchpad partitions and turns each tile's
``access_ptr`` into its address (StorageRewrite, LowerDeviceStorageAccessInfo).  Here each tile's
address is written as TVM computes it there: the partition's base (``Plan.bases``) plus the tile's
offset in the compacted buffer of the tiles the order keeps (a row panel of A: tile k at k tiles;
every B tile: tile (k, n) at k * column tiles + n).

Engine-agnostic (``tvm.tir`` or apache-tvm's ``tvm.tirx``); ``extern(name, *args)`` makes one
checked call of a C entry (relax_patterns.py: its linked symbol, through tvm_extension.relax.calls).
"""
from __future__ import annotations  # the annotations name tvm.tir's types, which tvm.tirx names otherwise

from typing import Callable, Dict

try:  # hhb-tvm: the Relay engine
    from tvm import tir
except ImportError:  # apache-tvm: the Relax engine
    from tvm import tirx as tir

from .schedule import CALL, OPERAND_BYTES, SUFFIX, ConvLayer, Core, Plan, band

# Where the order keeps A's and B's tiles: "tile" (one), "panel" (a row panel of A, a column panel of
# B), "all" (every B tile), "group" (the B tiles of a group of column panels).
HELD = {"stream": ("tile", "tile"), "rows": ("panel", "tile"), "columns": ("tile", "panel"),
        "weights": ("panel", "all"), "blocks": ("panel", "group"), "blocks_stream": ("tile", "group")}


def _for(name: str, extent: int, body: Callable[[tir.PrimExpr], tir.Stmt]) -> tir.Stmt:
    """for name in range(extent): body(name); a loop of one iteration is its body (as TVM lowers it)."""
    if extent == 1:
        return body(tir.const(0, "int32"))
    var = tir.Var(name, "int32")
    return tir.For(var, 0, extent, tir.ForKind.SERIAL, body(var))


def _seq(*stmts) -> tir.Stmt:
    stmts = [s for s in stmts if s is not None]
    return stmts[0] if len(stmts) == 1 else tir.SeqStmt(stmts)


def build(layer: ConvLayer, core: Core, plan: Plan, host: Dict[str, tir.Var], extern: Callable) -> tir.Stmt:
    """The layer's body.  ``host``: the data pointers of input, weights ([depth][channels]), table
    (int8: [3][channels] of bias, multiplier, shift; float: the bias) and output ([rows][channels])."""
    rows, channels, depth = layer.gemm
    tm, tn, tk = core.tile_m, core.tile_n, core.tile_k
    mo, no, ko = -(-rows // tm), -(-channels // tn), -(-depth // tk)
    elem, suffix, base = OPERAND_BYTES[plan.dtype], SUFFIX[plan.dtype], plan.bases
    a_bytes, b_bytes = tm * tk * elem, tk * tn * elem  # a tile in its buffer (unrounded, as TVM packs them)
    a_held, b_held = HELD[plan.order]
    n_group = plan.n_group if b_held == "group" else no
    call = lambda entry, *args: extern(entry + CALL, *args)

    def a_addr(k):
        return base["a"] + (k * a_bytes if a_held == "panel" else 0)

    def b_addr(k, n):
        """n: the column tile (in its group, for the blocks orders)."""
        return base["b"] + {"tile": 0, "panel": k * b_bytes, "all": (k * no + n) * b_bytes,
                            "group": (k * n_group + n) * b_bytes}[b_held]

    def load_a(m, k):
        if plan.patch:  # gathered on chip from the input rows in the patch
            return call("chocolate_im2col_patch", a_addr(k), base["in"], m * tm, k * tk)
        return call("chocolate_dma_im2col" + suffix, a_addr(k), host["input"], m * tm, k * tk)

    def load_b(k, n, local):
        return call("chocolate_dma_weights" + suffix, b_addr(k, local), host["weights"], k * tk, n * tn)

    def patch(first, count):
        return call("chocolate_dma_patch" + suffix, base["in"], host["input"], first, count)

    def band_of(m):  # at the first row panel of each band
        if plan.patch != "bands":
            return None
        load = patch(*band(layer, m * tm, tm * plan.m_group, tir.max, tir.min))
        return load if plan.m_group == 1 else tir.IfThenElse(tir.floormod(m, plan.m_group) == 0, load, None)

    def tile(m, n, local):
        """One accumulator tile: zeroed, the depth loop (with the tiles the order loads there), stored."""
        def step(k):
            return _seq(load_a(m, k) if a_held == "tile" else None,
                        load_b(k, n, local) if b_held == "tile" else None,
                        call("chocolate_matmul", a_addr(k), b_addr(k, local), base["acc"]))

        return _seq(call("chocolate_zero", base["acc"]), _for("k_0", ko, step),
                    call("chocolate_store" + suffix, host["output"], base["acc"], m * tm, n * tn))

    def row_panel(m, columns):
        """Under the row loop: its band, its A panel (if held), then ``columns(m)``."""
        a_panel = _for("ax0", ko, lambda k: load_a(m, k)) if a_held == "panel" else None
        return _seq(band_of(m), a_panel, columns(m))

    if plan.order == "columns":
        program = _for("n_0", no, lambda n: _seq(
            _for("ax0", ko, lambda k: load_b(k, n, 0)),
            _for("m_0", mo, lambda m: tile(m, n, 0))))
    elif b_held == "group":
        groups = no // plan.n_group

        def group(g):
            column = lambda local: g * plan.n_group + local
            weights = _for("ax0", ko, lambda k: _for("ax1", plan.n_group, lambda j: load_b(k, column(j), j)))
            return _seq(weights, _for("m_0", mo, lambda m: row_panel(m, lambda m: _for(
                "n_0_1", plan.n_group, lambda j: tile(m, column(j), j)))))

        program = _for("n_0_0", groups, group)
    else:  # stream, rows, weights: m outermost
        weights = _for("r", ko, lambda k: _for("j", no, lambda n: load_b(k, n, n))) if b_held == "all" else None
        program = _seq(weights, _for("m_0", mo, lambda m: row_panel(m, lambda m: _for(
            "n_0", no, lambda n: tile(m, n, n)))))
    geometry = (*layer.gemm, layer.ih, layer.iw, layer.ic, layer.kh, layer.kw, layer.stride_h, layer.stride_w,
                layer.pad_top, layer.pad_left, layer.ow)
    if layer.dtype == "int8":
        configure = call("chocolate_configure_s8", *geometry, layer.input_zp, host["table"], layer.output_zp,
                         layer.act_min, layer.act_max)
    else:  # infinite bounds as FLT_MAX, as schedule.py passes them
        lo, hi = (tir.const(max(min(v, 3.4028234e38), -3.4028234e38), "float32") for v in (layer.lo, layer.hi))
        configure = call("chocolate_configure_f32", *geometry, host["table"], lo, hi)
    whole = patch(*plan.patches[0]) if plan.patch == "whole" else None
    return _seq(call("chocolate_begin", *core.begin_args()), configure, whole, program)
