"""The packed weights QVanilla's packed entries read (layout: ``c/qvanilla.h``).

Done once, at compile time, by ``PrepareQuantizedConv``:

* the weight zero point is subtracted and the weights widened to int16, in the order the
  engine reads them: per output channel one row ``[ky][kx][c]`` padded with zeros to a
  multiple of ``K_ALIGN`` entries, output channels padded with zero rows to a multiple of
  ``OC_BLOCK`` (dense); ``[ky][kx][c]`` rows of all channels (depthwise);
* for the packed8 entry (int8 weights, Helium), the same values as int8 in blocks of four
  channels by ``K8_ALIGN`` entries, where every one fits;
* the input zero point's contribution is folded into the bias, as TFLite Micro and CMSIS-NN
  do: ``bias - input_zp * sum(w - weight_zp)``, modulo 2^32 like the engine's adders
  (``tvm_extension.kit.quantization.fold_bias``), so the
  engine multiplies the raw input (``input_zp`` in the padding) by the packed weights.
"""
from typing import Optional, Tuple

import numpy as np

from tvm_extension.kit.quantization import fold_bias

K_ALIGN = 8  # QVANILLA_K_ALIGN
OC_BLOCK = 4  # QVANILLA_OC_BLOCK
K8_ALIGN = 16  # QVANILLA_K8_ALIGN


def _round_up(n: int, m: int) -> int:
    return -(-n // m) * m


def pack_conv(weights: np.ndarray, weight_zp: int, input_zp: int,
              bias: Optional[np.ndarray] = None) -> Tuple[np.ndarray, np.ndarray]:
    """(int16 [OCP][KP] weights, int32 folded bias [oc]) of HWIO int8 ``weights``."""
    kh, kw, ic, oc = weights.shape
    k = kh * kw * ic
    centred = weights.astype(np.int64).reshape(k, oc) - int(weight_zp)  # row (ky*kw + kx)*ic + c
    packed = np.zeros((_round_up(oc, OC_BLOCK), _round_up(k, K_ALIGN)), np.int16)
    packed[:oc, :k] = centred.T
    return packed, fold_bias(bias, centred.sum(axis=0), input_zp)


def pack_conv8(weights: np.ndarray, weight_zp: int, input_zp: int,
               bias: Optional[np.ndarray] = None) -> Optional[Tuple[np.ndarray, np.ndarray]]:
    """(int8 [OCP / 4][4 * K16] weights, int32 folded bias [oc]) of HWIO int8 ``weights`` for
    ``qvanilla_conv2d_packed8_s8``: ``pack_conv``'s rows as int8, K16 entries (K rounded up to 16),
    each block of four rows interleaved in runs of 16 (qvanilla.h); None if a value leaves int8."""
    packed, folded = pack_conv(weights, weight_zp, input_zp, bias)
    packed8 = interleave8(packed)
    return None if packed8 is None else (packed8, folded)


def fits_int8(weights: np.ndarray, weight_zp: int) -> bool:
    """Whether every weight less its zero point is an int8 (the packed8 entry takes them)."""
    low, high = (int(weights.min()), int(weights.max())) if weights.size else (weight_zp, weight_zp)
    return -128 <= low - int(weight_zp) and high - int(weight_zp) <= 127


def interleave8(packed: np.ndarray) -> Optional[np.ndarray]:
    """``pack_conv``'s int16 [OCP][KP] weights as the packed8 entry's int8 [OCP / 4][4 * K16], None
    if a value leaves int8."""
    if packed.min(initial=0) < -128 or packed.max(initial=0) > 127:
        return None
    ocp, kp = packed.shape
    k16 = _round_up(kp, K8_ALIGN)
    rows = np.zeros((ocp, k16), np.int8)
    rows[:, :kp] = packed
    # [o / 4][o % 4][k / 16][k % 16] -> [o / 4][k / 16][o % 4][k % 16]
    blocks = rows.reshape(ocp // OC_BLOCK, OC_BLOCK, k16 // K8_ALIGN, K8_ALIGN).transpose(0, 2, 1, 3)
    return np.ascontiguousarray(blocks).reshape(ocp // OC_BLOCK, OC_BLOCK * k16)


def pack_depthwise(weights: np.ndarray, weight_zp: int, input_zp: int,
                   bias: Optional[np.ndarray] = None) -> Tuple[np.ndarray, np.ndarray]:
    """(int16 [kh*kw][channels] weights, int32 folded bias) of ``weights`` [kh][kw][channels]
    (a depthwise conv's HWOI or HWIO weights with the multiplier or input axis of 1 dropped)."""
    kh, kw, channels = weights.shape
    centred = weights.astype(np.int64).reshape(kh * kw, channels) - int(weight_zp)
    return centred.astype(np.int16), fold_bias(bias, centred.sum(axis=0), input_zp)
