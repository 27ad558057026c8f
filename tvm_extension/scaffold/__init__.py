"""Scaffold: a complete, working backend project for a new accelerator, in one command.

    python -m tvm_extension new my_npu

The files come from ``template/`` with ``${name}`` (the target name), ``${Name}`` (its
CamelCase) and ``${dist}`` (the distribution name) filled in; ``__name__`` in a path becomes
the name.  The project is written to a temporary folder and moved into place only when
complete, so a failure leaves nothing behind.
"""
import keyword
import os
import shutil
import string
import tempfile
from pathlib import Path

TEMPLATE = Path(__file__).resolve().parent / "template"


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


def create(name: str, directory=".") -> Path:
    """Write the project ``<directory>/<name>`` and return its path."""
    target = validate(name, Path(directory))
    values = {"name": name, "Name": "".join(p.capitalize() for p in name.split("_")),
              "dist": "tvm-extension-" + name.replace("_", "-")}
    with tempfile.TemporaryDirectory(prefix=f".{name}-", dir=target.parent) as work:
        staging = Path(work) / name
        for source in sorted(TEMPLATE.rglob("*")):
            if source.is_dir() or "__pycache__" in source.parts:
                continue
            relative = Path(str(source.relative_to(TEMPLATE)).replace("__name__", name).removesuffix(".tmpl"))
            destination = staging / relative
            destination.parent.mkdir(parents=True, exist_ok=True)
            destination.write_text(string.Template(source.read_text()).substitute(values))
        os.replace(staging, target)
    return target
