"""``tvmc compile --tflite-exact``: TFLite models imported so that they compute exactly what
TFLite's reference kernels compute (``tvm_extension.tflite_exact``), with one report line
per operator type made exact and per operator type left as TVM computes it.  Requantizes are
marked at import and computed after partitioning: backends that compute TFLite's rounding
(``computes_tflite_rounding``) take theirs, the CPU the rest."""
import functools

from tvm_extension import uma
from tvm_extension.tflite_exact import lower_tflite_rounding, make_exact

FLAG = "--tflite-exact"
HELP = ("int8 TFLite models: compute exactly what TFLite's reference kernels compute (double-rounding "
        "requantization, also in backends that declare it; ADD, MUL, MEAN, AVERAGE_POOL_2D, QUANTIZE, SOFTMAX, "
        "LOGISTIC, TANH); operators it cannot make exact are listed")

def _enabled() -> bool:
    """Whether the compile in progress asked for it (its settings: ``tvm_extension.uma.config``)."""
    running = uma.current()
    return running is not None and running.tflite_exact


def _counts(counter) -> str:
    return ", ".join(f"{name} x{count}" for name, count in sorted(counter.items()))


def install(frontends, compiler, exception_type):
    """Wrap TVMC's TFLite import (other formats with the flag are a one-line error) and its
    build (the requantizes no backend took are computed with TFLite's rounding on the CPU)."""
    original_build = compiler.build

    @functools.wraps(original_build)
    def build(mod, *args, **kwargs):
        if _enabled():
            mod, _, without_scales = lower_tflite_rounding(mod)
            if without_scales:
                print(f"[tflite-exact] not exact: qnn.requantize x{without_scales} (its convolution went to a "
                      "backend without it: multiplier from the float32 scale product)")
        return original_build(mod, *args, **kwargs)

    compiler.build = build
    original = frontends.TFLiteFrontend.load

    @functools.wraps(original)
    def load(self, path, shape_dict=None, **kwargs):
        mod, params = original(self, path, shape_dict, **kwargs)
        if _enabled():
            mod, exact, left = make_exact(mod)
            print(f"[tflite-exact] made exact: {_counts(exact) or 'nothing (no quantized operator found)'}")
            for name, count in sorted(left.items()):
                print(f"[tflite-exact] not exact: {name} x{count} (computed as TVM does)")
        return mod, params

    frontends.TFLiteFrontend.load = load
    for name in ("OnnxFrontend", "KerasFrontend", "TensorflowFrontend", "PyTorchFrontend", "PaddleFrontend"):
        frontend = getattr(frontends, name, None)
        if frontend is not None:
            frontend.load = _refuse(frontend.load, exception_type)


def _refuse(original, exception_type):
    @functools.wraps(original)
    def load(self, *args, **kwargs):
        if _enabled():
            raise exception_type(f"{FLAG} applies to TFLite models only (this is a {self.name()} model)")
        return original(self, *args, **kwargs)

    return load
