"""Model Library Format export without native microTVM.

TVM's own exporter (``tvm/micro/model_library_format.py``) is pure Python but sits in
``tvm.micro``, whose ``__init__`` refuses to import in this build.  We load that one file
with ``tvm.micro`` resolved to a stand-in that supplies the two things it asks of
microTVM: the standalone C runtime folder and the CRT template files.  Both come from
this project's ``c_runtime/crt`` plus the runtime headers that ship in the TVM wheel.

Then the C libraries of the backends the model was offloaded to are added once, what TVM
leaves to the clock or to hash order is fixed (``reproducible``: the same compile gives the
same bytes), and the archive is written atomically (nothing half-written is left on failure).
"""
import importlib.util
import json
import re
import shutil
import sys
import tempfile
import types
from pathlib import Path

import tvm
from tvm import relay

from tvm_extension import uma
from tvm_extension.api import stages
from tvm_extension.api.resources import data_folder

from . import layout, reproducible

CRT_DIR = data_folder(__package__, "c_runtime", "c_runtime") / "crt"
TVM_ROOT = Path(tvm.__file__).resolve().parent
TVM_HEADERS = {
    "tvm/runtime/c_runtime_api.h": TVM_ROOT / "include" / "tvm" / "runtime" / "c_runtime_api.h",
    "tvm/runtime/c_backend_api.h": TVM_ROOT / "include" / "tvm" / "runtime" / "c_backend_api.h",
    "dlpack/dlpack.h": TVM_ROOT / "dlpack" / "include" / "dlpack" / "dlpack.h",
}


def _stage_runtime(into: Path) -> Path:
    """The MLF's ``runtime/`` folder: the headers generated code includes, and our runtime."""
    for relative, source in TVM_HEADERS.items():
        target = into / "include" / relative
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(source, target)
    shutil.copytree(CRT_DIR / "src", into / "src")
    return into


def _load_tvm_exporter(staging: Path):
    """TVM's model_library_format module, with tvm.micro replaced while it imports."""
    path = TVM_ROOT / "micro" / "model_library_format.py"
    stand_in = types.ModuleType("tvm.micro")
    stand_in.__path__ = [str(path.parent)]
    stand_in.get_standalone_crt_dir = lambda: str(_stage_runtime(staging / "runtime"))
    stand_in.get_microtvm_template_projects = lambda name: str(CRT_DIR)
    saved = sys.modules.get("tvm.micro")
    sys.modules["tvm.micro"] = stand_in
    try:
        spec = importlib.util.spec_from_file_location("tvm.micro.model_library_format", path)
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
    finally:
        if saved is None:
            sys.modules.pop("tvm.micro", None)
        else:
            sys.modules["tvm.micro"] = saved
    return module


def _add_c_libraries(tree: Path):
    """Copy, once, the C library of each backend the generated code was offloaded to into codegen/host."""
    sources = sorted((tree / "codegen" / "host" / "src").glob("*.c"))
    targets = {m for p in sources for m in re.findall(r"^// offloaded to (\S+)$", p.read_text(), re.MULTILINE)}
    backends = uma.registered_backends()
    copied = {}
    for name in sorted(targets):
        if name not in backends:
            raise ValueError(f"the generated code was offloaded to '{name}', which is not a registered backend")
        for relative, file in uma.c_library(backends[name]).items():
            if copied.get(relative, file) != file:
                raise ValueError(f"two C libraries provide '{Path(relative).name}': {copied[relative]} and {file}")
            target = tree / "codegen" / "host" / relative
            if relative not in copied and target.exists():
                raise FileExistsError(f"C library file {file.name} clashes with a generated file")
            target.parent.mkdir(parents=True, exist_ok=True)
            if isinstance(file, str):
                target.write_text(file)
            else:
                shutil.copyfile(file, target)
            copied[relative] = file


def _tensor_shapes(ty):
    if isinstance(ty, relay.TupleType):
        return [shape for field in ty.fields for shape in _tensor_shapes(field)]
    return [[int(d) for d in ty.shape]]


def _complete_metadata(tree: Path, modules, seconds: int):
    """Record input and output shapes in metadata.json (TVM's records only byte sizes), and fix
    its export time and order."""
    path = tree / "metadata.json"
    metadata = reproducible.settle_metadata(json.loads(path.read_text()), seconds)
    for mod in modules:
        main = relay.transform.InferType()(mod.ir_mod)["main"]
        entry = metadata["modules"][mod.libmod_name]["memory"]["functions"]["main"][0]
        entry["input_shapes"] = {p.name_hint: _tensor_shapes(p.checked_type)[0] for p in main.params}
        entry["output_shapes"] = _tensor_shapes(main.ret_type)
    path.write_text(json.dumps(metadata, indent=2, sort_keys=True))


def _settle_order(tree: Path, modules):
    """TVM's generated C, Relay text and parameters in an order that does not change from run to run."""
    for path in sorted((tree / "codegen" / "host" / "src").glob("*.c")):
        path.write_text(reproducible.sorted_declarations(path.read_text()))
    for path in sorted((tree / "src").glob("*.relay")):
        path.write_text(reproducible.sorted_attribute_maps(path.read_text()))
    for mod in modules:
        (tree / "parameters" / f"{mod.libmod_name}.params").write_bytes(reproducible.params_in_name_order(mod.params))


def export_model_library_format(mods, file_name):
    """Drop-in for ``tvm.micro.export_model_library_format`` (graph and AOT modules)."""
    file_name = Path(file_name)
    modules = mods if isinstance(mods, list) else [mods]
    seconds = reproducible.build_time()
    with stages.stage("packaging MLF"), tempfile.TemporaryDirectory(prefix="mlf-") as work:
        work = Path(work)
        exporter = _load_tvm_exporter(work)
        tree = work / "tree"
        tree.mkdir()
        exporter._export_graph_model_library_format(modules, tree)
        _complete_metadata(tree, modules, seconds)
        _settle_order(tree, modules)
        _add_c_libraries(tree)
        layout.finish(tree, file_name, seconds, make_tar=lambda tar: exporter._make_tar(tree, tar, modules))
    return file_name
