"""TFLite's int8 AVERAGE_POOL_2D (reference_integer_ops::AveragePool), exactly: the window sum
rounded half away from zero, divided by the count of the window's elements inside the image."""
import numpy as np

from .graph import relay


def window_counts(height: int, width: int, pool_size, strides, padding) -> np.ndarray:
    """(1, out_h, out_w, 1) int64: how many elements of each window lie inside the image
    (``padding`` as Relay's: all sides, (vertical, horizontal) or (top, left, bottom, right))."""
    (kh, kw), (sh, sw) = pool_size, strides
    top, left, bottom, right = list(padding) * (4 // len(padding))

    def along(size, kernel, stride, before, after):
        starts = np.arange(0, size + before + after - kernel + 1, stride) - before
        return np.minimum(starts + kernel, size) - np.maximum(starts, 0)

    rows, cols = along(height, kh, sh, top, bottom), along(width, kw, sw, left, right)
    return (rows[:, None] * cols[None, :]).astype(np.int64)[None, :, :, None]


def exact_average_pool(x, shape, pool_size, strides, padding, dtype: str):
    """An int8 NHWC expression of ``shape`` (n, h, w, c) -> TFLite's average pool (no dilation, no
    ceil mode; ``padding`` as in ``window_counts``)."""
    _, height, width, channels = shape
    kh, kw = pool_size
    window_sum = relay.nn.conv2d(relay.cast(x, "int32"), relay.const(np.ones((kh, kw, channels, 1), np.int32)),
                                 groups=channels, channels=channels, kernel_size=(kh, kw), out_dtype="int32",
                                 kernel_layout="HWOI", strides=strides, padding=padding, data_layout="NHWC")
    counts = window_counts(height, width, pool_size, strides, padding)
    total = relay.cast(window_sum, "int64")
    half = relay.const(counts // 2, "int64")
    rounded = relay.where(relay.greater(total, relay.const(int(0), "int64")), relay.add(total, half),
                          relay.subtract(total, half))
    average = relay.divide(rounded, relay.const(counts, "int64"))
    info = np.iinfo(dtype)
    return relay.cast(relay.clip(average, int(info.min), int(info.max)), dtype)
