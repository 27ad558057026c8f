"""An MLF archive from C sources and a description of the model's interface, in the layout,
``metadata.json`` and C interface of the Relay engine's (TVM's own exporter): what the Relax
engine's AOT C is packaged with, so that ``mlf run`` (host and boards), the sweep and a team's
firmware take either engine's archive unchanged.

    codegen/host/src/*.c              the generated C (and the backends' kernel libraries)
    codegen/host/include/tvmgen_NAME.h  struct tvmgen_NAME_inputs/outputs, tvmgen_NAME_run
    codegen/host/BUILD.md             how to build it, and which library sources ask for flags
    runtime/src/aot_runtime.c         TVMGetLastError, what the generated C needs of a runtime
    parameters/NAME.params            none: the weights are const arrays of the C (tvmc run reads the file)
    metadata.json                     sizes, shapes, workspace and constants bytes

``finish`` is what both engines' archives get last: the Relay engine's exporter (``export``) and
``write`` here.
"""
import dataclasses
import json
import os
import re
import shutil
import struct
import tarfile
import tempfile
import time
from pathlib import Path
from typing import Callable, Dict, List, Sequence, Tuple

from tvm_extension.api.resources import data_folder

from . import reproducible

AOT_RUNTIME = data_folder(__package__, "c_runtime", "c_runtime") / "aot"


@dataclasses.dataclass
class Tensor:
    name: str  # the model's
    dtype: str
    shape: Tuple[int, ...]

    @property
    def size(self) -> int:
        count = 1
        for d in self.shape:
            count *= int(d)
        bits = int(re.sub(r"\D", "", self.dtype) or 8)
        return count * max(bits, 8) // 8


def c_name(name: str) -> str:
    """A struct field's name for a tensor name (as TVM's and ``host`` spell it)."""
    return re.sub(r"\W", "_", name)


def interface_header(model: str, inputs: Sequence[Tensor], outputs: Sequence[Tensor], workspace_bytes: int) -> str:
    """``tvmgen_MODEL.h``: the entry point and its argument structs, as TVM's AOT writes it."""
    prefix, upper = f"tvmgen_{model}", f"TVMGEN_{model.upper()}"
    lines = [f"#ifndef {upper}_H_", f"#define {upper}_H_", "#include <stdint.h>", "", "#ifdef __cplusplus",
             'extern "C" {', "#endif", ""]
    for kind, tensors in (("INPUT", inputs), ("OUTPUT", outputs)):
        for t in tensors:
            lines.append(f"/* {kind.lower()} {t.name}: {t.dtype} {list(t.shape)}, in bytes */")
            lines.append(f"#define {upper}_{c_name(t.name).upper()}_SIZE {t.size}")
    for kind, tensors in (("inputs", inputs), ("outputs", outputs)):
        lines += [f"/* {kind.capitalize()[:-1]} tensor pointers of model \"{model}\" */", f"struct {prefix}_{kind} {{"]
        lines += [f"  void* {c_name(t.name)};" for t in tensors] + ["};", ""]
    lines += [f"/* Runs model \"{model}\": 0, or the status of the kernel that failed (TVMGetLastError() names it). */",
              f"int32_t {prefix}_run(", f"  struct {prefix}_inputs* inputs,", f"  struct {prefix}_outputs* outputs",
              ");", f"/* Bytes of the workspace (a static array of the generated C) */",
              f"#define {upper}_WORKSPACE_SIZE {workspace_bytes}", "", "#ifdef __cplusplus", "}", "#endif", "",
              f"#endif  // {upper}_H_", ""]
    return "\n".join(lines)


def metadata(model: str, inputs: Sequence[Tensor], outputs: Sequence[Tensor], workspace_bytes: int,
             constants_bytes: int, functions: Dict[str, int], target: str, seconds: int) -> dict:
    """``metadata.json`` with the keys the Relay engine's archive has (TVM's version 7)."""
    main = {
        "constants_size_bytes": constants_bytes, "device": 1,
        "input_shapes": {t.name: list(t.shape) for t in inputs},
        "inputs": {t.name: {"dtype": t.dtype, "size": t.size} for t in inputs},
        "io_size_bytes": sum(t.size for t in [*inputs, *outputs]),
        "output_shapes": [list(t.shape) for t in outputs],
        "outputs": {t.name: {"dtype": t.dtype, "size": t.size} for t in outputs},
        "workspace_size_bytes": workspace_bytes,
    }
    operators = [{"function_name": f, "workspace": [{"device": 1, "workspace_size_bytes": functions[f]}]}
                 for f in sorted(functions)]
    return {"modules": {model: {
        "executors": ["aot"], "export_datetime": time.strftime("%Y-%m-%d %H:%M:%SZ", time.gmtime(seconds)),
        "external_dependencies": [{"short_name": "tvm_extension_aot_runtime", "url": "./runtime",
                                   "url_type": "mlf_path", "version_spec": "1"}],
        "memory": {"functions": {"main": [main], "operator_functions": operators}},
        "model_name": model, "style": "full-model", "target": [target]}}, "version": 7}


def write(archive: os.PathLike, sources: Dict[str, str], inputs: List[Tensor], outputs: List[Tensor],
          workspace_bytes: int, constants_bytes: int, functions: Dict[str, int], target: str,
          library: Dict[str, Path] = None, model: str = "default"):
    """Write the MLF ``archive`` (``sources``: file name -> C text of ``codegen/host/src``;
    ``functions``: operator name -> bytes of workspace it uses; ``library``: relative path under ``codegen/host`` -> a kernel library's file).  The same
    arguments give the same bytes; the archive appears whole or not at all."""
    archive = Path(archive)
    seconds = reproducible.build_time()
    with tempfile.TemporaryDirectory(prefix="mlf-") as work:
        tree = Path(work) / "tree"
        src, include = tree / "codegen" / "host" / "src", tree / "codegen" / "host" / "include"
        src.mkdir(parents=True)
        include.mkdir(parents=True)
        for name, text in sources.items():
            (src / name).write_text(text)
        for relative, file in sorted((library or {}).items()):
            (tree / "codegen" / "host" / relative).parent.mkdir(parents=True, exist_ok=True)
            shutil.copyfile(file, tree / "codegen" / "host" / relative)
        (include / f"tvmgen_{model}.h").write_text(interface_header(model, inputs, outputs, workspace_bytes))
        shutil.copytree(AOT_RUNTIME / "src", tree / "runtime" / "src")
        (tree / "runtime" / "include").mkdir()
        (tree / "metadata.json").write_text(json.dumps(
            metadata(model, inputs, outputs, workspace_bytes, constants_bytes, functions, target, seconds),
            indent=2, sort_keys=True))
        finish(tree, archive, seconds)
    return archive


BUILD_NOTE = """# Building this model

Compile every `.c` file of `codegen/host/src/` and `runtime/src/` with any C99 compiler, with
`codegen/host/include` and `runtime/include` on the include path, and link them with your
application (the C interface is `codegen/host/include/tvmgen_<name>.h`).
{flags}"""

# TVM's parameters file holding none: its magic number, a reserved word, 0 names, 0 arrays.
NO_PARAMETERS = struct.pack("<QQQQ", 0xF7E58D4F05049CB7, 0, 0, 0)


def _write_build_note(tree: Path):
    """How to build the archive's C, and which library sources ask for their own flags."""
    flagged = sorted((tree / "codegen" / "host" / "src").glob("*.cflags"))
    flags = "".join(f"* `{p.with_suffix('.c').name}`: `{p.read_text().strip()}`\n" for p in flagged)
    text = BUILD_NOTE.format(flags=(
        "\nThese sources ask for extra flags (from `NAME.cflags` beside them; everything else builds with\n"
        "your own flags, and every source is portable C99, so leaving them out only costs speed):\n\n" + flags
    ) if flags else "")
    (tree / "codegen" / "host" / "BUILD.md").write_text(text)


def _plain_tar(tree: Path, tar_path: Path):
    with tarfile.open(tar_path, "w") as tar:
        tar.add(tree, arcname=".")


def finish(tree: Path, archive: Path, seconds: int, make_tar: Callable[[Path], None] = None):
    """The last steps of every archive: the build note, a parameters file for each model that has
    none, and the tar (``make_tar(path)``, else the tree as it is) in a fixed order, appearing whole
    or not at all."""
    _write_build_note(tree)
    for model in json.loads((tree / "metadata.json").read_text())["modules"]:
        params = tree / "parameters" / f"{model}.params"
        if not params.exists():
            params.parent.mkdir(exist_ok=True)
            params.write_bytes(NO_PARAMETERS)
    plain = tree.parent / "plain.tar"
    (make_tar or (lambda path: _plain_tar(tree, path)))(plain)
    partial = archive.with_name(f".{archive.name}.partial")
    try:
        reproducible.repack(str(plain), str(partial), seconds)
        os.replace(partial, archive)
    finally:
        partial.unlink(missing_ok=True)
