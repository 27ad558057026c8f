"""``tvmc compile --dump-code`` and ``--dump-offloads`` with extension targets.

* ``--dump-code c`` writes *every* generated C file of an MLF beside it (``out.tar.c``): tvmc keeps
  one source per module kind, so the offloaded functions' C (also of kind ``c``) overwrote the
  host's.  tvmc also expects the package path as a string.
* ``--dump-offloads`` reads the ``Compiler`` attribute of each function; the functions this
  framework makes carry the backend's pattern name as ``Pattern`` (the composite itself is
  inlined), and functions without attributes are plain CPU code.
"""
import functools
import re
import tarfile
from pathlib import Path

_GENERATED_C = re.compile(r"^(?:\./)?codegen/host/src/[^/]*_lib\d+\.c$")  # TVM's names, not the kernel libraries'


def generated_c(package: Path) -> str:
    """The C TVM generated into an MLF (host and offloaded functions), each file headed by its path."""
    with tarfile.open(package) as tar:
        members = sorted((m for m in tar.getmembers() if _GENERATED_C.match(m.name)),
                         key=lambda m: [int(t) if t.isdigit() else t for t in re.split(r"(\d+)", m.name)])
        return "".join(f"/* ---- {m.name.removeprefix('./')} ---- */\n{tar.extractfile(m).read().decode()}\n"
                       for m in members)


def _save_dumps(original):
    from tvm_extension.mlf.host import is_mlf  # pylint: disable=import-outside-toplevel

    @functools.wraps(original)
    def save_dumps(module_name, dumps, dump_root="."):
        module_name = str(module_name)
        package = Path(dump_root, module_name)
        if "c" in dumps and package.is_file() and is_mlf(package):
            dumps = dict(dumps, c=generated_c(package))
        return original(module_name, dumps, dump_root)

    return save_dumps


def _operations_distribution():
    from tvm.relay.analysis.operations_distribution import AnalyzeOperationsDistribution

    class Distribution(AnalyzeOperationsDistribution):
        def extract(self, call):  # a function, despite the name
            attrs = call.attrs if call.attrs is not None else {}
            self.compiler_name = str(attrs["Compiler"]) if "Compiler" in attrs else "generic"
            self.func_name = str(attrs["Pattern"]) if "Pattern" in attrs else "generic"
            self.visit(call)

    def analyze_operations_distribution(mod):
        analyze = Distribution()
        for _, func in mod.functions.items():
            analyze.extract(func)
        return analyze.unique_op_ids

    return analyze_operations_distribution


def install(compiler):
    compiler.save_dumps = _save_dumps(compiler.save_dumps)
    compiler.analyze_operations_distribution = _operations_distribution()
