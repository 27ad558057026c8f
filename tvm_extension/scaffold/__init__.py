"""Scaffold: a complete, working backend project for a new accelerator, in one command.

    python -m tvm_extension new my_npu            # float32 convs
    python -m tvm_extension new my_npu --int8     # TFLite's int8 convs

The files come from ``template/``, overlaid for ``--int8`` by ``template_int8/`` (which holds
only the files that differ), with ``${name}`` (the target name), ``${NAME}`` (its upper case,
for C macros), ``${Name}`` (its CamelCase) and ``${dist}`` (the distribution name) filled in;
``__name__`` in a path becomes the name.  A top-level file named ``_PART.md.tmpl`` is not
written: its text fills ``${PART}`` in the others (the part of the README that differs).  The
project is written to a temporary folder and moved into place only when complete, so a failure
leaves nothing behind.
"""
import keyword
import os
import shlex
import string
import tempfile
from pathlib import Path

TEMPLATE = Path(__file__).resolve().parent / "template"
TEMPLATE_INT8 = Path(__file__).resolve().parent / "template_int8"


class ScaffoldError(Exception):
    """An invalid name or destination (one line for the user)."""


def _taken_names():
    import tvm  # pylint: disable=import-outside-toplevel
    from tvm.driver.tvmc import composite_target  # pylint: disable=import-outside-toplevel

    from tvm_extension import uma  # pylint: disable=import-outside-toplevel

    names = {kind: "a TVM target kind" for kind in tvm.target.Target.list_kinds()}
    names.update({n: "a TVMC built-in codegen" for n in composite_target.REGISTERED_CODEGEN})
    names.update({n: "an installed backend" for n in composite_target.get_codegen_names() if n not in names})
    names.update({n: "a registered backend" for n in uma.registered_backends()})
    return names


def validate(name: str, directory: Path) -> Path:
    if not name.isidentifier() or keyword.iskeyword(name) or name != name.lower():
        raise ScaffoldError(f"'{name}' is not a valid backend name: use a lower-case Python identifier, e.g. my_npu")
    taken = _taken_names().get(name)
    if taken:
        raise ScaffoldError(f"'{name}' is already {taken}: choose another name")
    target = directory / name
    if target.exists():
        raise ScaffoldError(f"{target} already exists: choose another name or --directory")
    if not directory.is_dir():
        raise ScaffoldError(f"{directory} is not a folder")
    return target


def _template_files(int8: bool):
    """{path in the project (before renaming): template file}, the int8 files replacing the common ones."""
    files = {}
    for folder in (TEMPLATE, TEMPLATE_INT8) if int8 else (TEMPLATE,):
        for source in folder.rglob("*"):
            if source.is_file() and "__pycache__" not in source.parts:
                files[source.relative_to(folder)] = source
    return files


def create(name: str, directory=".", int8: bool = False) -> Path:
    """Write the project ``<directory>/<name>`` (an int8 backend if ``int8``) and return its path."""
    target = validate(name, Path(directory))
    values = {"name": name, "NAME": name.upper(), "Name": "".join(p.capitalize() for p in name.split("_")),
              "dist": "tvm-extension-" + name.replace("_", "-")}
    files = _template_files(int8)
    for relative in [r for r in files if r.name.startswith("_") and r.parent == Path(".")]:
        part = relative.name[1:].split(".")[0]
        values[part] = string.Template(files.pop(relative).read_text()).substitute(values)
    with tempfile.TemporaryDirectory(prefix=f".{name}-", dir=target.parent) as work:
        staging = Path(work) / name
        for relative, source in sorted(files.items()):
            destination = staging / str(relative).replace("__name__", name).removesuffix(".tmpl")
            destination.parent.mkdir(parents=True, exist_ok=True)
            destination.write_text(string.Template(source.read_text()).substitute(values))
        os.replace(staging, target)
    return target


def next_steps(project: Path, name: str) -> str:
    """What ``new`` prints: the commands that install the project with its tests' needs and run them."""
    where = str(project) if project.is_absolute() else os.path.join(".", project)  # pip reads a bare name as PyPI's
    with_tests = shlex.quote(f"{where}[test]")  # quoted: the brackets are a glob to the shell
    return (f"created {where}\n"
            f"  pip install {with_tests}   # with pytest; pip install -e {with_tests} while you edit the backend\n"
            f"  pytest {shlex.quote(os.path.join(where, 'tests'))}   # its own tests\n"
            f"  tvmc compile --target {name} MODEL -f mlf -o out.tar")
