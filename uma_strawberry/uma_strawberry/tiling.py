"""How a conv layer is split to fit Strawberry's scratchpad, and what each split costs in DMA.

The scratchpad has three partitions (target attributes): one for the input tile, one for the
weights (with the bias and PReLU slope), one for the output tile (with the residual tile).  A
layer is cut into tiles of ``rows`` output rows x ``cols`` output columns x ``channels`` output
channels; an input tile holds what those outputs read (the halo: ``(rows - 1) * stride + kh``
input rows, the same for columns), padded by the DMA.  A dense conv's input channels may be cut
too, into chunks of ``in_channels``: the engine adds each chunk's sums into the output tile,
which stays in the scratchpad until the last chunk (partial sums, ``STRAWBERRY_ACC_*``).  Two loop
orders, the input-channel chunks always innermost:

* channels outer: each weight chunk (all its input channels) is loaded once and stays resident
  while the spatial tiles stream through, if it fits; a dense conv's input is read once per
  channel chunk;
* rows outer (spatial tiles outer): each input tile (all its input channels) is loaded once
  and serves every channel tile, if it fits; the weights are reloaded per spatial tile unless
  all of them fit at once (then they are loaded once, before the loops).

What does not stay resident is reloaded per output tile and input-channel chunk.  The bytes a
split moves do not depend on ``in_channels`` (only its transfers do), so ``plan_layer`` tries
every tile size along rows, columns and output channels (every distinct tile count) in both
orders, keeps whatever fits resident, takes the largest input-channel chunk that fits, and
keeps the split moving the fewest bytes between host memory and the scratchpad (then the
fewest transfers).  The byte counts are exact: they are what the hardware model's counters
report for the generated code (host bytes read, zero-padding bytes, host bytes written), so the
tests compare the two.
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

    def in_rows(self, out_rows: int) -> int:
        """Input rows (with the halo) that ``out_rows`` output rows read."""
        return (out_rows - 1) * self.stride_h + self.kh

    def in_cols(self, out_cols: int) -> int:
        """Input columns (with the halo) that ``out_cols`` output columns read."""
        return (out_cols - 1) * self.stride_w + self.kw

    @property
    def taps(self) -> int:
        return self.kh * self.kw

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
    cols: int  # output columns per tile
    channels: int  # output channels per tile
    in_channels: int  # input channels per chunk (a depthwise conv: its tile's channels)
    rows_outer: bool  # loop order: spatial tiles outside channel tiles
    weights_resident: bool  # every weight loaded once (all input channels of a channel tile stay)
    ifmap_resident: bool  # every input tile loaded once (all its input channels stay: rows outer)
    row_tiles: int
    col_tiles: int
    channel_tiles: int
    in_tiles: int
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
    def compute_calls(self) -> int:
        return self.row_tiles * self.col_tiles * self.channel_tiles * self.in_tiles

    @property
    def occupancy_bytes(self) -> int:
        """Scratchpad bytes the layer uses: its largest (first) tile in each partition."""
        return WORD * (self.ifmap_words + self.weights_words + self.ofmap_words)

    def describe(self) -> str:
        order = "rows outer" if self.rows_outer else "channels outer"
        resident = "".join(f", {what} resident" for what, flag in (("weights", self.weights_resident),
                                                                   ("input", self.ifmap_resident)) if flag)
        return (f"{self.row_tiles} x {self.rows} rows, {self.col_tiles} x {self.cols} columns, "
                f"{self.channel_tiles} x {self.channels} channels, {self.in_tiles} x {self.in_channels} input channels "
                f"({order}{resident}); DMA {self.dma_bytes} bytes in {self.dma_calls} transfers")


def tile_words(layer: Layer, rows: int, cols: int, channels: int, in_channels: int, weights_resident: bool = False,
               ifmap_resident: bool = False) -> Tuple[int, int, int]:
    """Words of the ifmap, weights and ofmap partitions a tile needs (a resident tensor: all input
    channels, one chunk after the other)."""
    if layer.depthwise:
        in_ch, weight_in = channels, 1
    else:
        in_ch = layer.ic if ifmap_resident else in_channels
        weight_in = layer.ic if weights_resident else in_channels
    ifmap = in_ch * layer.in_rows(rows) * layer.in_cols(cols)
    weights = channels * (weight_in * layer.taps + layer.extras)
    ofmap = channels * rows * cols * (2 if layer.residual else 1)
    return ifmap, weights, ofmap


@functools.lru_cache(maxsize=1 << 16)
def _axis(outputs: int, size: int, stride: int, kernel: int, pad: int, tile: int) -> Tuple[int, int, int]:
    """Along one spatial axis cut into tiles of ``tile`` outputs: (tiles, input positions the input
    tiles span, of which inside the input).  Rows and columns are separable: a pass of input tiles
    moves channels x (row sums) x (column sums)."""
    tiles = spanned = inside = 0
    for first in range(0, outputs, tile):
        span = (min(tile, outputs - first) - 1) * stride + kernel
        tiles, spanned, inside = tiles + 1, spanned + span, inside + _overlap(first * stride - pad, span, size)
    return tiles, spanned, inside


def cost(layer: Layer, rows: int, cols: int, channels: int, in_channels: int, rows_outer: bool,
         weights_resident: bool = False, ifmap_resident: bool = False) -> Plan:
    if layer.depthwise:
        in_channels = channels
    n_rt, span_rows, inside_rows = _axis(layer.oh, layer.ih, layer.stride_h, layer.kh, layer.pad_top, rows)
    n_xt, span_cols, inside_cols = _axis(layer.ow, layer.iw, layer.stride_w, layer.kw, layer.pad_left, cols)
    n_st, n_ct = n_rt * n_xt, -(-layer.oc // channels)
    n_it = 1 if layer.depthwise else -(-layer.ic // in_channels)
    assert not (ifmap_resident and (layer.depthwise or not rows_outer)) and not (rows_outer and weights_resident
                                                                                 and n_ct > 1), "not a loop order"
    # One pass of input tiles over all the input channels.
    ifmap_read, ifmap_tile = layer.ic * inside_rows * inside_cols, layer.ic * span_rows * span_cols
    # A dense conv's input is read once per channel tile unless it stays resident.
    ifmap_passes = 1 if (layer.depthwise or ifmap_resident) else n_ct
    ifmap_calls = n_st * n_ct if layer.depthwise else n_st * n_it * (1 if ifmap_resident else n_ct)
    weights_passes = 1 if weights_resident else n_st
    weights_calls = n_ct * (n_it + layer.extras) * weights_passes
    weight_words = layer.oc * (layer.weights_per_channel + layer.extras)
    out_words = layer.oc * layer.oh * layer.ow
    ifmap_words, weights_words, ofmap_words = tile_words(layer, rows, cols, channels, in_channels, weights_resident,
                                                         ifmap_resident)
    return Plan(
        rows=rows, cols=cols, channels=channels, in_channels=in_channels, rows_outer=rows_outer,
        weights_resident=weights_resident, ifmap_resident=ifmap_resident,
        row_tiles=n_rt, col_tiles=n_xt, channel_tiles=n_ct, in_tiles=n_it,
        ifmap_words=ifmap_words, weights_words=weights_words, ofmap_words=ofmap_words,
        dma_in_bytes=WORD * (ifmap_passes * ifmap_read + weights_passes * weight_words
                             + (out_words if layer.residual else 0)),
        dma_pad_bytes=WORD * ifmap_passes * (ifmap_tile - ifmap_read),
        dma_out_bytes=WORD * out_words,
        dma_in_calls=ifmap_calls + weights_calls + (n_st * n_ct if layer.residual else 0),
        dma_out_calls=n_st * n_ct,
    )


def _tile_sizes(extent: int):
    """Every tile size giving a distinct number of tiles over ``extent``, smallest first."""
    return sorted({-(-extent // n) for n in range(1, extent + 1)})


class Unfit(Exception):
    """The layer does not fit the scratchpad however it is split (the message says what does not)."""


def _why_unfit(layer: Layer, config: Config) -> str:
    ifmap, weights, ofmap = (WORD * w for w in tile_words(layer, 1, 1, 1, 1))
    if ifmap > config.ifmap_bytes:
        return (f"one output reads {ifmap} bytes of input (1 channel x {layer.kh} rows x {layer.kw} columns), "
                f"the ifmap partition holds {config.ifmap_bytes}")
    if weights > config.weights_bytes:
        return (f"one output channel's weights for one input channel take {weights} bytes, the weights partition "
                f"holds {config.weights_bytes}")
    return f"one output takes {ofmap} bytes, the ofmap partition holds {config.ofmap_bytes}"


def _largest_chunk(layer: Layer, rows: int, cols: int, channels: int, weights_resident: bool, ifmap_resident: bool,
                   limits: Tuple[int, int, int]) -> int:
    """The most input channels per chunk (balanced over the chunks) for which the tile fits; 0 if none."""
    if layer.depthwise:
        fits = all(n <= limit for n, limit in zip(tile_words(layer, rows, cols, channels, channels), limits))
        return channels if fits else 0
    ifmap, weights, ofmap = tile_words(layer, rows, cols, channels, 1, weights_resident, ifmap_resident)
    if ifmap > limits[0] or weights > limits[1] or ofmap > limits[2]:
        return 0
    most = layer.ic
    if not ifmap_resident:
        most = min(most, limits[0] // (layer.in_rows(rows) * layer.in_cols(cols)))
    if not weights_resident:
        most = min(most, (limits[1] // channels - layer.extras) // layer.taps)
    return -(-layer.ic // -(-layer.ic // most))


def _splits_sums(layer: Layer, chunk: int) -> bool:
    """Whether the input channels come in chunks.  Each output is then summed in pieces, and float
    sums in another order round differently: a split that keeps them whole gives the bits the
    unsplit conv gives (the kit engine's one chain per output), so it comes first whenever one
    fits; chunks only when nothing else fits."""
    return not layer.depthwise and chunk < layer.ic


@functools.lru_cache(maxsize=4096)
def plan_layer(layer: Layer, config: Config) -> Plan:
    """The split of ``layer`` moving the fewest bytes (then the fewest transfers, then the fewest
    engine calls) that fits the partitions of ``config``, among those that keep every input channel
    in one engine call when one does; raises Unfit when even one output of one channel over one
    input channel does not fit."""
    limits = (config.ifmap_bytes // WORD, config.weights_bytes // WORD, config.ofmap_bytes // WORD)
    best, best_key = None, None
    for rows_outer in (False, True):
        for channels in _tile_sizes(layer.oc):
            # What may stay resident, preferred first (more residency never moves more).
            if not rows_outer:
                options = [(True, False), (False, False)]
            else:
                weights = [True, False] if channels == layer.oc else [False]
                options = [(w, i) for w in weights for i in ([False] if layer.depthwise else [True, False])]
            for rows in _tile_sizes(layer.oh):
                if not _largest_chunk(layer, rows, 1, channels, False, False, limits):
                    break  # more rows fit no better
                for cols in _tile_sizes(layer.ow):
                    fitted = False
                    for weights_resident, ifmap_resident in options:
                        chunk = _largest_chunk(layer, rows, cols, channels, weights_resident, ifmap_resident, limits)
                        if not chunk:
                            continue
                        fitted = True
                        plan = cost(layer, rows, cols, channels, chunk, rows_outer, weights_resident, ifmap_resident)
                        key = (_splits_sums(layer, chunk), plan.dma_bytes, plan.dma_calls, plan.compute_calls)
                        if best is None or key < best_key:
                            best, best_key = plan, key
                    if not fitted:
                        break
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
