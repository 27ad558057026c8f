"""How a conv layer is split to fit Strawberry's scratchpad, and what each split costs in DMA.

The scratchpad has three partitions (target attributes): one for the input tile, one for the
weights (with the bias and PReLU slope), one for the output tile (with the residual tile).  A
layer is cut into tiles of ``rows`` output rows x ``channels`` output channels; an input tile
holds the rows that many output rows read (the halo: ``(rows - 1) * stride + kh`` input rows),
padded by the DMA, over the whole (padded) width.  Two loop orders:

* channels outer: each weight chunk is loaded once and stays resident while the row tiles
  stream through; a dense conv's input is read once per channel chunk;
* rows outer: each input tile is loaded once; the weights are reloaded per row tile unless
  all output channels fit at once (then they are loaded once, before the loops).

``plan_layer`` tries every tile size (every distinct tile count along each axis) in both
orders and keeps the one moving the fewest bytes between host memory and the scratchpad
(then the fewest transfers).  The byte counts are exact: they are what the hardware model's
counters report for the generated code (host bytes read, zero-padding bytes, host bytes
written), so the tests compare the two.
"""
import dataclasses
import functools
from typing import Dict, Optional, Tuple

from tvm_extension.kit.tiling import positions_read

from .target import ATTR_RANGES, MAX_SPAD_BYTES, MIN_SPAD_BYTES  # noqa: F401  (the bounds, target.py's)

WORD = 4  # bytes per float32


class ConfigError(ValueError):
    """A bad value among Strawberry's target attributes (one line for the user)."""


@dataclasses.dataclass(frozen=True)
class Config:
    """The chip, from the target attributes: partition sizes in bytes and the DMA/engine rates."""

    spad_bytes: int
    ifmap_bytes: int
    weights_bytes: int
    ofmap_bytes: int
    dma_bytes_per_cycle: int
    dma_setup_cycles: int
    macs_per_cycle: int

    @property
    def bases(self) -> Dict[str, int]:
        """Byte address of each partition in the scratchpad."""
        return {"ifmap": 0, "weights": self.ifmap_bytes, "ofmap": self.ifmap_bytes + self.weights_bytes}

    @classmethod
    def from_attrs(cls, attrs) -> "Config":
        def number(name):
            try:
                return int(str(attrs[name]))
            except ValueError:
                raise ConfigError(f"target 'strawberry': {name} must be an integer, got '{attrs[name]}'") from None

        spad, ifmap_pc, weights_pc = number("scratchpad_bytes"), number("ifmap_percent"), number("weights_percent")
        if spad < MIN_SPAD_BYTES or spad % WORD or spad > MAX_SPAD_BYTES:
            raise ConfigError(f"target 'strawberry': scratchpad_bytes {spad} must be a multiple of 4 in "
                              f"[{MIN_SPAD_BYTES}, {MAX_SPAD_BYTES}]")
        if ifmap_pc < 1 or weights_pc < 1 or ifmap_pc + weights_pc > 99:
            raise ConfigError(f"target 'strawberry': ifmap_percent {ifmap_pc} and weights_percent {weights_pc} must be "
                              ">= 1 and leave at least 1% to the ofmap partition")
        rates = {name: number(name) for name in ("dma_bytes_per_cycle", "dma_setup_cycles", "macs_per_cycle")}
        if rates["dma_bytes_per_cycle"] < 1 or rates["dma_setup_cycles"] < 0 or rates["macs_per_cycle"] < 1:
            raise ConfigError(f"target 'strawberry': dma_bytes_per_cycle {rates['dma_bytes_per_cycle']}, "
                              f"dma_setup_cycles {rates['dma_setup_cycles']}, macs_per_cycle {rates['macs_per_cycle']} "
                              "must be >= 1, >= 0, >= 1")
        ifmap = spad * ifmap_pc // 100 // WORD * WORD
        weights = spad * weights_pc // 100 // WORD * WORD
        return cls(spad, ifmap, weights, spad - ifmap - weights, **rates)


@dataclasses.dataclass(frozen=True)
class Layer:
    """One offloaded conv: shapes of its unpadded input and of its output, window, output stage."""

    layout: str  # "nchw" or "nhwc"
    depthwise: bool
    ic: int
    ih: int
    iw: int
    oc: int
    oh: int
    ow: int
    kh: int
    kw: int
    stride_h: int
    stride_w: int
    pad_top: int
    pad_left: int
    bias: bool = False
    residual: bool = False
    slope: bool = False

    @property
    def in_cols(self) -> int:
        """Columns of every input tile: the padded width the outputs read."""
        return (self.ow - 1) * self.stride_w + self.kw

    def in_rows(self, out_rows: int) -> int:
        """Input rows (with the halo) that ``out_rows`` output rows read."""
        return (out_rows - 1) * self.stride_h + self.kh

    @property
    def weights_per_channel(self) -> int:
        return (1 if self.depthwise else self.ic) * self.kh * self.kw

    @property
    def extras(self) -> int:
        """Per-channel vectors beside the weights: bias and slope."""
        return int(self.bias) + int(self.slope)

    @property
    def macs(self) -> int:
        return self.oc * self.oh * self.ow * self.weights_per_channel


def _overlap(start: int, length: int, size: int) -> int:
    """Elements of [start, start + length) inside [0, size)."""
    return max(0, min(start + length, size) - max(start, 0))


@dataclasses.dataclass(frozen=True)
class Plan:
    """A split of one layer and what it moves (bytes as the hardware model counts them)."""

    rows: int  # output rows per tile
    channels: int  # output channels per tile
    rows_outer: bool  # loop order: row tiles outside channel tiles
    row_tiles: int
    channel_tiles: int
    weights_resident: bool  # every weight loaded once (stays in the scratchpad across the row tiles)
    ifmap_words: int  # partition use, in float32 words
    weights_words: int
    ofmap_words: int
    dma_in_bytes: int
    dma_pad_bytes: int
    dma_out_bytes: int
    dma_in_calls: int
    dma_out_calls: int

    @property
    def dma_bytes(self) -> int:
        return self.dma_in_bytes + self.dma_out_bytes

    @property
    def dma_calls(self) -> int:
        return self.dma_in_calls + self.dma_out_calls

    @property
    def occupancy_bytes(self) -> int:
        """Scratchpad bytes the layer uses: its largest (first) tile in each partition."""
        return WORD * (self.ifmap_words + self.weights_words + self.ofmap_words)

    def describe(self) -> str:
        order = "rows outer" if self.rows_outer else "channels outer"
        resident = ", weights resident" if self.weights_resident else ""
        return (f"{self.row_tiles} x {self.rows} rows, {self.channel_tiles} x {self.channels} channels ({order}{resident}); "
                f"DMA {self.dma_bytes} bytes in {self.dma_calls} transfers")


def tile_words(layer: Layer, rows: int, channels: int) -> Tuple[int, int, int]:
    """Words of the ifmap, weights and ofmap partitions a tile of rows x channels needs."""
    in_channels = channels if layer.depthwise else layer.ic
    ifmap = in_channels * layer.in_rows(rows) * layer.in_cols
    weights = channels * (layer.weights_per_channel + layer.extras)
    ofmap = channels * rows * layer.ow * (2 if layer.residual else 1)
    return ifmap, weights, ofmap


def _row_tiles(layer: Layer, rows: int):
    """(first output row, rows) of every row tile."""
    return [(y0, min(rows, layer.oh - y0)) for y0 in range(0, layer.oh, rows)]


def cost(layer: Layer, rows: int, channels: int, rows_outer: bool) -> Plan:
    row_tiles = _row_tiles(layer, rows)
    n_rt, n_ct = len(row_tiles), -(-layer.oc // channels)
    cols_inside = _overlap(-layer.pad_left, layer.in_cols, layer.iw)
    # One pass of input tiles over all the input channels.
    ifmap_read = ifmap_tile = 0
    for y0, nr in row_tiles:
        first, count = y0 * layer.stride_h - layer.pad_top, layer.in_rows(nr)
        ifmap_read += _overlap(first, count, layer.ih) * cols_inside * layer.ic
        ifmap_tile += count * layer.in_cols * layer.ic
    # Dense convs read all input channels per channel tile: channels outer reads them n_ct times.
    ifmap_passes = n_ct if (not layer.depthwise and not rows_outer) else 1
    ifmap_calls = n_rt * n_ct if (layer.depthwise or not rows_outer) else n_rt
    weights_resident = n_ct == 1 or not rows_outer
    weights_passes = 1 if weights_resident else n_rt
    weight_words = layer.oc * (layer.weights_per_channel + layer.extras)
    weights_calls = weights_passes * n_ct * (1 + layer.extras)
    out_words = layer.oc * layer.oh * layer.ow
    ifmap_words, weights_words, ofmap_words = tile_words(layer, rows, channels)
    return Plan(
        rows=rows, channels=channels, rows_outer=rows_outer, row_tiles=n_rt, channel_tiles=n_ct,
        weights_resident=weights_resident,
        ifmap_words=ifmap_words, weights_words=weights_words, ofmap_words=ofmap_words,
        dma_in_bytes=WORD * (ifmap_passes * ifmap_read + weights_passes * weight_words
                             + (out_words if layer.residual else 0)),
        dma_pad_bytes=WORD * ifmap_passes * (ifmap_tile - ifmap_read),
        dma_out_bytes=WORD * out_words,
        dma_in_calls=ifmap_calls + weights_calls + (n_rt * n_ct if layer.residual else 0),
        dma_out_calls=n_rt * n_ct,
    )


def _tile_sizes(extent: int):
    """Every tile size giving a distinct number of tiles over ``extent``, largest first."""
    return sorted({-(-extent // n) for n in range(1, extent + 1)}, reverse=True)


class Unfit(Exception):
    """The layer does not fit the scratchpad however it is split (the message says what does not)."""


def _why_unfit(layer: Layer, config: Config) -> str:
    ifmap, weights, ofmap = (WORD * w for w in tile_words(layer, 1, 1))
    channels = "1 channel" if layer.depthwise else f"{layer.ic} channels"
    if ifmap > config.ifmap_bytes:
        return (f"one output row reads {ifmap} bytes of input ({channels} x {layer.kh} rows x {layer.in_cols} columns), "
                f"the ifmap partition holds {config.ifmap_bytes}")
    if weights > config.weights_bytes:
        return f"one output channel's weights take {weights} bytes, the weights partition holds {config.weights_bytes}"
    return f"one output row of one channel takes {ofmap} bytes, the ofmap partition holds {config.ofmap_bytes}"


@functools.lru_cache(maxsize=4096)
def plan_layer(layer: Layer, config: Config) -> Plan:
    """The split of ``layer`` moving the fewest bytes (then the fewest transfers) that fits the
    partitions of ``config``; raises Unfit when even one output row of one channel does not fit."""
    limits = (config.ifmap_bytes // WORD, config.weights_bytes // WORD, config.ofmap_bytes // WORD)
    best: Optional[Plan] = None
    for channels in _tile_sizes(layer.oc):
        if tile_words(layer, 1, channels)[1] > limits[1]:
            continue
        for rows in _tile_sizes(layer.oh):
            if any(need > limit for need, limit in zip(tile_words(layer, rows, channels), limits)):
                continue
            for rows_outer in (False, True):
                plan = cost(layer, rows, channels, rows_outer)
                key = (plan.dma_bytes, plan.dma_calls, plan.row_tiles * plan.channel_tiles)
                if best is None or key < (best.dma_bytes, best.dma_calls, best.row_tiles * best.channel_tiles):
                    best = plan
    if best is None:
        raise Unfit(_why_unfit(layer, config))
    return best


def lower_bound(layer: Layer) -> int:
    """Bytes every split moves at least: each input byte some window reads, every weight, bias,
    slope and residual byte once in, every output byte once out."""
    rows = positions_read(layer.ih, layer.oh, layer.stride_h, layer.kh, layer.pad_top)
    cols = positions_read(layer.iw, layer.ow, layer.stride_w, layer.kw, layer.pad_left)
    out_words = layer.oc * layer.oh * layer.ow
    words = (layer.ic * rows * cols + layer.oc * (layer.weights_per_channel + layer.extras)
             + out_words * (2 if layer.residual else 1))
    return WORD * words
