"""Target attributes are checked against their bounds (``target_attr_ranges``) when the target
is parsed: a value out of range is one line on stderr naming the attribute and its range, a
non-zero exit, no traceback and no output file, before the model is even loaded."""
import pytest
pytest.importorskip("tvm.relay", reason="the Relay engine's tests (hhb-tvm, Python 3.10): not installed here")
from tvm.relay.backend.contrib.uma.backend import UMABackend

from conftest import MODELS, VANILLA_EXT, assert_one_line_error, run_tvmc
from tvm_extension import uma
from uma_chocolate import ChocolateBackend
from uma_qvanilla import QVanillaBackend
from uma_strawberry import StrawberryBackend
from uma_vanilla import VanillaAcceleratorBackend

BACKENDS = [VanillaAcceleratorBackend, QVanillaBackend, StrawberryBackend, ChocolateBackend]


def out_of_range_cases():
    """(target, attribute, bad value, range text, spelling) for both ends of every range: the low
    end as a --target-NAME-ATTR flag, the high end inside --target (each attribute both ways)."""
    cases = []
    for cls in BACKENDS:
        backend = cls()
        for attr, allowed in uma.attr_ranges(backend).items():
            if all(isinstance(a, str) for a in allowed):
                choices = ", ".join(repr(a) for a in allowed)
                cases += [(backend.target_name, attr, "not-a-choice", f"one of {choices}", s) for s in ("flag", "string")]
            else:
                low, high = allowed
                cases += [(backend.target_name, attr, low - 1, f"in {low}..{high}", "flag"),
                          (backend.target_name, attr, high + 1, f"in {low}..{high}", "string")]
    return cases


CASES = out_of_range_cases()


def test_every_example_backend_with_attributes_declares_ranges():
    for cls in BACKENDS:
        backend = cls()
        assert set(uma.attr_ranges(backend)) == set(backend._target_attrs) - {"cflags"}, backend.target_name


@pytest.mark.parametrize("target, attr, value, bounds, spelling", CASES, ids=[f"{c[0]}-{c[1]}={c[2]}" for c in CASES])
def test_out_of_range_attribute_is_one_line(tmp_path, target, attr, value, bounds, spelling):
    """The model does not even exist: the attribute fails first."""
    flags = ["--target", target, f"--target-{target}-{attr}", str(value)] if spelling == "flag" else \
        ["--target", f"{target} -{attr}={value}"]
    out = tmp_path / "model.tar"
    done = run_tvmc("compile", *flags, "--experimental-tvm-extension", VANILLA_EXT, tmp_path / "missing.onnx",
                    "-f", "mlf", "-o", out)
    got = repr(value) if isinstance(value, str) else value
    assert_one_line_error(done, f"target '{target}': attribute '{attr}' must be {bounds}, got {got}")
    assert not out.exists()


@pytest.mark.quick
def test_in_range_ends_compile(tmp_path):
    """Both ends of max_kernel_size are accepted (and the model then compiles)."""
    low, high = uma.attr_ranges(VanillaAcceleratorBackend())["max_kernel_size"]
    for value, spelling in ((low, "flag"), (high, "string")):
        out = tmp_path / f"{value}.tar"
        target = ["--target", "vanilla_accelerator", "--target-vanilla_accelerator-max_kernel_size", str(value)] \
            if spelling == "flag" else ["--target", f"vanilla_accelerator -max_kernel_size={value}"]
        done = run_tvmc("compile", *target, "--experimental-tvm-extension", VANILLA_EXT, MODELS / "cnn.onnx",
                        "-f", "mlf", "-o", out)
        assert done.returncode == 0, done.stderr[-2000:]
        assert out.exists()


# --- The convention, in process ---------------------------------------------------------------

def _backend(ranges, default=3, name="bounds_probe"):
    class Probe(UMABackend):
        def __init__(self):
            super().__init__()
            self._register_target_attr("size", default=default)

        @property
        def target_name(self):
            return name

    if ranges is not None:
        Probe.target_attr_ranges = ranges
    return Probe()


@pytest.mark.quick
def test_configure_checks_the_bounds_and_accepts_the_ends():
    backend = _backend({"size": (1, 4)})
    assert uma.target_attrs(backend, {"size": "1"})["size"] == 1
    assert uma.target_attrs(backend, {"size": "4"})["size"] == 4
    for bad in ("0", "5", "-3"):
        with pytest.raises(uma.BackendError, match=rf"^target 'bounds_probe': attribute 'size' must be in 1\.\.4, got {bad}$"):
            uma.configure(backend, {"size": bad})


def test_string_choices():
    backend = _backend({"size": ("small", "large")}, default="small")
    assert uma.target_attrs(backend, {"size": "large"})["size"] == "large"
    with pytest.raises(uma.BackendError, match=r"attribute 'size' must be one of 'small', 'large', got 'huge'"):
        uma.target_attrs(backend, {"size": "huge"})


def test_no_ranges_means_no_bounds():
    """A backend written for upstream UMA (no target_attr_ranges) takes any integer."""
    assert uma.target_attrs(_backend(None), {"size": "-7"})["size"] == -7


@pytest.mark.parametrize("ranges, default, fragment", [
    ({"size": (1, 4)}, 9, "the default 9 of attribute 'size' is not in 1..4"),
    ({"speed": (1, 4)}, 3, "target_attr_ranges names 'speed', which is no attribute"),
    ({"size": (4, 1)}, 3, "is neither (low, high) integers"),
    ({"size": ("a", "b")}, 3, "is neither (low, high) integers"),
])
def test_registration_checks_the_declared_ranges(ranges, default, fragment):
    with pytest.raises(uma.BackendError, match=None) as err:
        uma.register_backend(_backend(ranges, default, name="bounds_probe_bad"))
    assert fragment in str(err.value)
    assert "bounds_probe_bad" not in uma.registered_backends()
