"""The packed weights QVanilla's packed entries read (layout: ``c/qvanilla.h``).

Done once, at compile time, by ``PrepareQuantizedConv``:

* the weight zero point is subtracted and the weights widened to int16, in the order the
  engine reads them: per output channel one row ``[ky][kx][c]`` padded with zeros to a
  multiple of ``K_ALIGN`` entries, output channels padded with zero rows to a multiple of
  ``OC_BLOCK`` (dense); ``[ky][kx][c]`` rows of all channels (depthwise);
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


def pack_depthwise(weights: np.ndarray, weight_zp: int, input_zp: int,
                   bias: Optional[np.ndarray] = None) -> Tuple[np.ndarray, np.ndarray]:
    """(int16 [kh*kw][channels] weights, int32 folded bias) of ``weights`` [kh][kw][channels]
    (a depthwise conv's HWOI or HWIO weights with the multiplier or input axis of 1 dropped)."""
    kh, kw, channels = weights.shape
    centred = weights.astype(np.int64).reshape(kh * kw, channels) - int(weight_zp)
    return centred.astype(np.int16), fold_bias(bias, centred.sum(axis=0), input_zp)
