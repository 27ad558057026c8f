"""Extension folders written for the TVMC-extension patch load unchanged.

Two shapes real clients use, written here file by file as their authors lay them out:

* MLonMCU's: ``tvmc_extension/`` without ``__init__.py``; the extension is a plain module
  (``vanilla.py``) that appends its own folder to ``sys.path`` and imports a sibling backend
  folder without ``__init__.py`` (``Vanilla_Accelerator/backend.py``, relative imports).
* Upstream TVM's ``apps/uma/_template`` copied untouched (its own ``__init__.py``, no
  extension class, a ``run.py`` that only runs from inside it) next to a small wrapper module.

Both compile the example CNN through plain tvmc to an MLF that builds, runs and matches.
"""
import sys
import textwrap

import numpy as np
import pytest

from conftest import MODELS, assert_one_line_error, kernel_calls, onnx_reference, run_tvmc
from tvm_extension.testing import random_inputs
from tvm_extension import api
from tvm_extension.mlf import build

CNN = MODELS / "cnn.onnx"


@pytest.fixture(autouse=True)
def forget_imported_folders(tmp_path):
    """Each test's folders define the same module names: drop them (and what MLonMCU's
    modules append to sys.path) afterwards, as a new process would start without them."""
    path = list(sys.path)
    # extension modules an earlier test imported in this process (the installed example backends'
    # tvm_extension.vanilla...) would shadow this test's modules of the same name: set aside
    earlier = {name: module for name, module in sys.modules.items()
               if name.startswith("tvm_extension.") and name.split(".")[1] not in api.RESERVED_NAMES}
    for name in earlier:
        del sys.modules[name]
    yield
    sys.path[:] = path
    for name, module in list(sys.modules.items()):
        if str(getattr(module, "__file__", None) or "").startswith(str(tmp_path)):
            del sys.modules[name]
        elif name.split(".")[0] in ("tvmc_extension", "Vanilla_Accelerator"):
            del sys.modules[name]
    sys.modules.update(earlier)

# The backend a tutorial reader writes: stride-1, same-padded NCHW float conv2d -> one C call.
PATTERNS = """
from tvm.relay.dataflow_pattern import is_constant, is_op, wildcard


def _same_padding(conv):
    attrs = conv.attrs
    kh, kw = (int(d) for d in conv.args[1].checked_type.shape[2:])
    return (
        [int(p) for p in attrs.padding] == [kh // 2, kw // 2, kh // 2, kw // 2]
        and [int(d) for d in attrs.dilation] == [1, 1]
        and int(attrs.groups) == 1
        and attrs.data_layout == "NCHW"
    )


def conv2d_pattern():
    return is_op("nn.conv2d")(wildcard(), is_constant()).has_attr({"strides": [1, 1]})


def conv2d_check(conv):
    return _same_padding(conv)
"""

PASSES = """
import tvm
from tvm import tir


@tvm.tir.transform.prim_func_pass(opt_level=2)
class Conv2dPass:
    def transform_function(self, func, mod, ctx):
        blocks = []
        tir.stmt_functor.post_order_visit(
            func.body, lambda s: blocks.append(s.name_hint) if isinstance(s, tir.Block) else None
        )
        if "conv2d_nchw" not in blocks:
            return func
        data, weights, result = (func.buffer_map[p] for p in func.params)
        _, ic, ih, iw = (int(d) for d in data.shape)
        oc, _, kh, kw = (int(d) for d in weights.shape)
        call = tir.call_extern("int32", "{kernel}", data.data, weights.data, result.data, oc, iw, ih, ic, kh, kw)
        return func.with_body(tir.Evaluate(call))
"""

CODEGEN = """
import pathlib


def gen_includes():
    topdir = pathlib.Path(__file__).parent.absolute()
    return f'#include "{{topdir}}/conv2dnchw.cc"'
"""

KERNEL = """
#include <stdlib.h>

#ifdef __cplusplus
extern "C"
#endif
int {kernel}(float* ifmap, float* weights, float* result, int oc, int iw, int ih, int ic, int kh, int kw) {{
  for (int o = 0; o < oc; ++o)
    for (int y = 0; y < ih; ++y)
      for (int x = 0; x < iw; ++x) {{
        float sum = 0.0f;
        for (int c = 0; c < ic; ++c)
          for (int ky = 0; ky < kh; ++ky)
            for (int kx = 0; kx < kw; ++kx) {{
              int iy = y + ky - kh / 2, ix = x + kx - kw / 2;
              if (iy >= 0 && iy < ih && ix >= 0 && ix < iw)
                sum += ifmap[(c * ih + iy) * iw + ix] * weights[((o * ic + c) * kh + ky) * kw + kx];
            }}
        result[(o * ih + y) * iw + x] = sum;
      }}
  return 0;
}}
"""

BACKEND = """
from tvm.relay.backend.contrib.uma.api.utils import PassPhase
from tvm.relay.backend.contrib.uma.backend import UMABackend

from .codegen import gen_includes
from .passes import Conv2dPass
from .patterns import conv2d_check, conv2d_pattern


class {cls}(UMABackend):
    def __init__(self):
        super().__init__()
        self._register_target_attr("dimension", default=8)
        self._register_pattern("conv2d", conv2d_pattern(), conv2d_check)
        self._register_tir_pass(PassPhase.TIR_PHASE_0, Conv2dPass())
        self._register_codegen(fmt="c", includes=gen_includes)

    @property
    def target_name(self):
        return "{target}"
"""


def _write(path, text):
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(textwrap.dedent(text).lstrip())


def write_backend(folder, cls, target, kernel):
    """A backend folder laid out as the tutorial's files (no __init__.py: callers add one if theirs has it)."""
    _write(folder / "patterns.py", PATTERNS)
    _write(folder / "passes.py", PASSES.format(kernel=kernel))
    _write(folder / "codegen.py", CODEGEN.format())
    _write(folder / "conv2dnchw.cc", KERNEL.format(kernel=kernel))
    _write(folder / "backend.py", BACKEND.format(cls=cls, target=target))


def mlonmcu_folder(root, package="tvmc_extension"):
    """MLonMCU's resources/frameworks/tvm/tvmc_extension shape."""
    ext = root / package
    write_backend(ext / "Vanilla_Accelerator", "VanillaAcceleratorBackend", "vanilla_accelerator", "vanilla_conv2dnchw")
    _write(ext / "vanilla.py", """
        import os, sys
        sys.path.append(os.path.join(os.path.dirname(__file__)))

        from tvm.driver.tvmc.extensions import TVMCExtension
        from Vanilla_Accelerator.backend import VanillaAcceleratorBackend


        class VanillaExtension(TVMCExtension):
            def __init__(self):
                self.backend = VanillaAcceleratorBackend()

            def uma_backends(self):
                return [self.backend]
    """)
    return root


def template_folder(root, package="tvmc_extension"):
    """Upstream's apps/uma/_template copied as is, wrapped by one module beside it."""
    template = root / package / "_template"
    write_backend(template, "MyAiHwBackend", "my_ai_hw", "my_ai_hw_conv2dnchw")
    _write(template / "__init__.py", '"""Template files for UMA tutorial"""\n')
    _write(template / "run.py", """
        from backend import MyAiHwBackend  # only works when run from inside the folder

        if __name__ == "__main__":
            MyAiHwBackend()
    """)
    _write(root / package / "my_ai_hw.py", f"""
        from tvm.driver.tvmc.extensions import TVMExtension
        from {package}._template.backend import MyAiHwBackend


        class MyAiHwExtension(TVMExtension):
            def uma_backends(self):
                return [MyAiHwBackend()]
    """)
    return root


SHAPES = {
    "mlonmcu": (mlonmcu_folder, "vanilla_accelerator", "vanilla_conv2dnchw"),
    "template": (template_folder, "my_ai_hw", "my_ai_hw_conv2dnchw"),
}


@pytest.mark.parametrize("package", ["tvmc_extension", "tvm_extension"])
@pytest.mark.parametrize("shape", sorted(SHAPES))
def test_discovery_finds_extension_modules(tmp_path, shape, package):
    make, target, _ = SHAPES[shape]
    found = api.discover([str(make(tmp_path, package))], environ={}, python_path=False, entry_points=False)
    assert [[b.target_name for b in e.backends()] for e in found if not e.error] == [[target]]
    # The template's run.py is private to it (under _template): never imported.
    assert not [e for e in found if e.error]


@pytest.mark.parametrize(
    "shape, how",
    [("mlonmcu", "flag"), ("mlonmcu", "environment"), ("template", "flag"), ("template", "environment")],
)
def test_client_folder_compiles_and_runs(tmp_path, shape, how):
    make, target, kernel = SHAPES[shape]
    folder = make(tmp_path / "ext")
    out = tmp_path / "o.tar"
    if how == "flag":
        done = run_tvmc("compile", "--target", target, "--experimental-tvmc-extension", folder,
                        CNN, "-f", "mlf", "-o", out)
    else:
        done = run_tvmc("compile", "--target", target, CNN, "-f", "mlf", "-o", out,
                        env={"TVMC_EXTENSION_DIR": str(folder)})
    assert done.returncode == 0, done.stderr
    # The two same-padded stride-1 3x3 convs and the 5x5 one; the dilated stride-2 one stays on the CPU.
    assert kernel_calls(out, kernel) == 3
    inputs = random_inputs(CNN, seed=4)
    got = build(out, tmp_path / "b").run(inputs)[0]["output"]
    np.testing.assert_allclose(got, onnx_reference(CNN, inputs)[0], rtol=1e-4, atol=1e-5)


def test_broken_module_beside_extension_is_a_warning(tmp_path):
    folder = mlonmcu_folder(tmp_path)
    _write(folder / "tvmc_extension" / "broken.py", "import does_not_exist\n")
    found = api.discover([str(folder)], environ={}, python_path=False, entry_points=False)
    assert [e.name for e in found if not e.error] == ["tvmc_extension.vanilla:VanillaExtension"]
    (failure,) = [e.error for e in found if e.error]
    assert "broken.py:1" in failure and "ModuleNotFoundError" in failure


def test_folder_defining_no_extension_is_one_line_error(tmp_path):
    folder = tmp_path / "ext"
    write_backend(folder / "tvmc_extension" / "Vanilla_Accelerator", "B", "b", "b_conv")
    _write(folder / "tvmc_extension" / "helpers.py", "VALUE = 1\n")
    done = run_tvmc("compile", "--target", "b", "--experimental-tvmc-extension", folder,
                    CNN, "-f", "mlf", "-o", tmp_path / "o.tar")
    assert_one_line_error(done, str(folder), "defines no TVMExtension subclass")
    assert not (tmp_path / "o.tar").exists()
