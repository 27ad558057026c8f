"""Scaffold: a complete, working backend project for a new accelerator, in one command.

    python -m tvm_extension new my_npu            # float32 convs
    python -m tvm_extension new my_npu --int8     # TFLite's int8 convs
    python -m tvm_extension new my_npu --like chocolate   # a copy of an example backend, renamed

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
import re
import shlex
import shutil
import string
import tempfile
from pathlib import Path

TEMPLATE = Path(__file__).resolve().parent / "template"
TEMPLATE_INT8 = Path(__file__).resolve().parent / "template_int8"


class ScaffoldError(Exception):
    """An invalid name or destination (one line for the user)."""


def _taken_names():
    import tvm  # pylint: disable=import-outside-toplevel

    names = {kind: "a TVM target kind" for kind in tvm.target.Target.list_kinds()}
    try:
        from tvm.driver.tvmc import composite_target  # pylint: disable=import-outside-toplevel
    except ImportError:  # apache-tvm (the Relax engine): the backends it finds
        from tvm_extension.relax.backends import listed  # pylint: disable=import-outside-toplevel

        names.update({t: "a backend the Relax engine finds" for t, module, _, _ in listed()
                      if module is not None and t not in names})
        return names
    from tvm_extension import uma  # pylint: disable=import-outside-toplevel

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
    values["relax_entry_point"] = (
        "# apache-tvm (the Relax engine) calls this at `import tvm`: installed, it needs no option there.\n"
        f'[project.entry-points."tvm.backends"]\n{name} = "{name}.relax_patterns:register"\n\n')
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


# The example backends `--like` copies: {example: (its target name, its words as they appear in its
# names: target, C symbols and macros, classes, package)}.  Longest first: "vanilla_accelerator"
# is renamed before "vanilla".
EXAMPLES = {
    "vanilla": ("vanilla_accelerator", ["vanilla_accelerator", "VanillaAccelerator", "VANILLA", "Vanilla", "vanilla"]),
    "qvanilla": ("qvanilla", ["QVANILLA", "QVanilla", "qvanilla"]),
    "strawberry": ("strawberry", ["STRAWBERRY", "Strawberry", "strawberry"]),
    "chocolate": ("chocolate", ["CHOCOLATE", "Chocolate", "chocolate"]),
}


def examples_folder() -> Path:
    """The folder holding the example backends' projects (uma_vanilla...)."""
    from tvm_extension.api.resources import data_folder  # pylint: disable=import-outside-toplevel

    return data_folder("tvm_extension.scaffold", "examples", ".")


def _renamer(example: str, values: dict):
    """A function renaming the example's words in a text or a file name to the new backend's."""
    _, words = EXAMPLES[example]
    package = f"uma_{example}"
    new = {"vanilla_accelerator": values["name"], "VanillaAccelerator": values["Name"]}
    for word in words:
        new.setdefault(word, values["NAME"] if word.isupper() else values["Name"] if word[0].isupper() else values["name"])
    dist = f"tvm-extension-{example}"
    # a word is renamed where it is not part of a longer name (qvanilla is not vanilla), or follows -D,
    # Verilator's V of a module's C++ class (Vchocolate_top.h: the module chocolate_top is renamed), a
    # C string's \n, or lib of a library's name
    pattern = re.compile("|".join([re.escape(dist), re.escape(package)] + [
        rf"(?:(?<![A-Za-z])|(?<=-D)|(?<=\bV)|(?<=\\n)|(?<=\blib)){re.escape(w)}" for w in words]))
    replacement = {dist: values["dist"], package: values["name"], **new}
    return lambda text: pattern.sub(lambda m: replacement[m.group(0)], text)


def create_like(name: str, example: str, directory=".") -> Path:
    """Write ``<directory>/<name>``: the example backend ``example``'s project, renamed (its
    target, package, classes, C files, symbols and macros, tests), ready to ``pip install``."""
    if example not in EXAMPLES:
        raise ScaffoldError(f"unknown example '{example}' (examples: {', '.join(EXAMPLES)})")
    target = validate(name, Path(directory))
    values = {"name": name, "NAME": name.upper(), "Name": "".join(p.capitalize() for p in name.split("_")),
              "dist": "tvm-extension-" + name.replace("_", "-")}
    rename = _renamer(example, values)
    source = examples_folder() / f"uma_{example}"
    with tempfile.TemporaryDirectory(prefix=f".{name}-", dir=target.parent) as work:
        staging = Path(work) / name
        for path in sorted(source.rglob("*")):
            relative = path.relative_to(source)
            if not path.is_file() or {"__pycache__", "build", "dist"} & set(relative.parts) \
                    or relative.parts[0].endswith(".egg-info"):
                continue
            destination = staging / rename(str(relative))
            destination.parent.mkdir(parents=True, exist_ok=True)
            try:
                destination.write_text(rename(path.read_text()))
            except UnicodeDecodeError:  # not text (a picture): as it is
                shutil.copyfile(path, destination)
        os.replace(staging, target)
    return target


def next_steps(project: Path, name: str) -> str:
    """What ``new`` prints: the commands that install the project with its tests' needs and run them."""
    where = str(project) if project.is_absolute() else os.path.join(".", project)  # pip reads a bare name as PyPI's
    from tvm_extension.cli import relay_engine  # pylint: disable=import-outside-toplevel

    engine = "relay" if relay_engine() else "relax"  # the project's extra of the engine at hand
    with_tests = shlex.quote(f"{where}[test,{engine}]")  # quoted: the brackets are a glob to the shell
    return (f"created {where}\n"
            f"  pip install {with_tests}   # with pytest; pip install -e {with_tests} while you edit the backend\n"
            f"  pytest {shlex.quote(os.path.join(where, 'tests'))}   # its own tests\n"
            f"  tvmc compile --target {name} MODEL -f mlf -o out.tar")
