"""The sweep's plan: models, backends and attribute grids from a TOML file or options, checked
before anything runs, expanded into points.

    models = ["examples/models/cnn.onnx", "kws_dscnn_int8"]      # paths or model-zoo names
    [backends.strawberry]
    scratchpad_bytes = "16K..512K*2"                             # or a list: [16384, 65536]
    [backends.chocolate]
    models = ["kws_dscnn_int8"]                                  # this backend's own models
    tile_m = "4..32*2"
    tile_n = [8, 16]

``engine = "relax"`` compiles every point with the Relax engine (apache-tvm: ``tvmc
compile -f mlf`` of the environment ``TVM_EXTENSION_RELAX`` names, else the checkout's
``.venv-relax``); the default is TVM's own tvmc (the Relay engine).  Either archive is built, run,
counted and checked the same way.

A range is ``FROM..TO*FACTOR`` (geometric) or ``FROM..TO+STEP`` (arithmetic), both ends
included; ``K`` and ``M`` mean KiB and MiB.  A model is a string or a table
``{model = "...", input_shapes = "input:[1,3,32,32]"}`` (tvmc's --input-shapes).
"""
import dataclasses
import hashlib
import itertools
import os
import re
import sys
from pathlib import Path
from typing import Dict, List, Optional, Tuple

from tvm_extension.api.digest import tree_digest


class GridError(Exception):
    """The plan cannot run as written: one line for the user."""


# Zoo networks whose input is dynamic (or named oddly) and needs tvmc's --input-shapes.
ZOO_SHAPES = {"mtcnn_pnet": "input_1:[1,24,24,3]", "mtcnn_rnet": "input_2:[1,24,24,3]",
              "mtcnn_onet": "input_3:[1,48,48,3]"}


@dataclasses.dataclass(frozen=True)
class Model:
    label: str
    path: Path
    sha256: str
    input_shapes: Optional[str] = None


@dataclasses.dataclass(frozen=True)
class Point:
    model: Model
    backend: str
    attrs: Tuple[Tuple[str, object], ...]  # sorted (name, value) pairs
    board: Optional[str] = None  # also built for this emulated Cortex-M board and run in QEMU
    backend_code: str = ""  # digest of the backend package's sources: an edited backend is recomputed
    engine: str = "relay"  # or "relax": the Relax engine compiles it
    device: Optional[str] = None  # also run against this device (tvm_extension.mlf.devices), e.g. "rtl"

    def attr_options(self) -> List[str]:
        return [f"--target-{self.backend}-{name}={value}" for name, value in self.attrs]


_NUMBER = re.compile(r"^\s*(\d+)\s*([KM]?)\s*$", re.IGNORECASE)
_RANGE = re.compile(r"^(.+)\.\.(.+?)(?:([*+])(\d+))?$")


def _number(text: str) -> int:
    match = _NUMBER.match(text)
    if not match:
        raise GridError(f"'{text}' is not a number (an integer, K for KiB, M for MiB)")
    return int(match.group(1)) << {"": 0, "k": 10, "m": 20}[match.group(2).lower()]


def values(spec, where: str) -> list:
    """A list of attribute values from a TOML list, a scalar, or a range string."""
    if isinstance(spec, list):
        found = spec
    elif isinstance(spec, str) and _RANGE.match(spec):
        start, stop, kind, step = _RANGE.match(spec).groups()
        start, stop = _number(start), _number(stop)
        kind, step = kind or "*", int(step or 2)
        if start > stop or step < (2 if kind == "*" else 1) or start < (1 if kind == "*" else 0):
            raise GridError(f"{where}: range '{spec}' is empty or never ends")
        found, value = [], start
        while value <= stop:
            found.append(value)
            value = value * step if kind == "*" else value + step
    elif isinstance(spec, str) and _NUMBER.match(spec):
        found = [_number(spec)]
    else:
        found = [spec]
    if not found:
        raise GridError(f"{where}: empty list of values")
    return found


def resolve_model(spec) -> Model:
    """A path or a model-zoo name (fetched once into the zoo's cache) -> Model."""
    shapes = None
    if isinstance(spec, dict):
        unknown = set(spec) - {"model", "input_shapes"}
        if "model" not in spec or unknown:
            raise GridError(f"a model table has 'model' and optionally 'input_shapes' (got {', '.join(spec)})")
        spec, shapes = spec["model"], spec.get("input_shapes")
    if not isinstance(spec, str):
        raise GridError(f"a model is a path or a zoo name, not {spec!r}")
    path = Path(spec).expanduser()
    if path.is_file():
        label = path.stem
    elif path.suffix or "/" in spec:
        raise GridError(f"model file '{spec}' not found")
    else:
        from tvm_extension.testing.model_zoo import MODELS, ModelFetchError, fetch  # pylint: disable=import-outside-toplevel

        if spec not in MODELS:
            raise GridError(f"unknown model '{spec}': neither a file nor a zoo name (known: {', '.join(MODELS)})")
        try:
            path = fetch(spec)
        except ModelFetchError as err:
            raise GridError(str(err)) from None
        label, shapes = spec, shapes or ZOO_SHAPES.get(spec)
    return Model(label, path.resolve(), hashlib.sha256(path.read_bytes()).hexdigest(), shapes)


def known_backends() -> Dict[str, object]:
    """Each installed backend by its target name."""
    from tvm_extension import api  # pylint: disable=import-outside-toplevel

    return {b.target_name: b for e in api.discover([], strict=False) if not e.error for b in e.backends()}


def _check_point(backend, attrs: dict):
    """The backend's own check of one point's attributes (names, types, declared ranges), as
    tvmc makes it when the target is parsed: GridError with its line."""
    from tvm_extension.uma.attrs import BackendError, target_attrs  # pylint: disable=import-outside-toplevel

    try:
        target_attrs(backend, attrs)
    except BackendError as err:
        raise GridError(str(err)) from None


def _check_device(name) -> None:
    """A device an installed backend offers: GridError naming the installed ones otherwise."""
    from tvm_extension.mlf import HostBuildError, devices  # pylint: disable=import-outside-toplevel

    try:
        devices.device(str(name))
    except HostBuildError as err:
        raise GridError(f"device: {err}") from None


def _check_board(name) -> None:
    """A board the MLF runner knows, and its tools installed: GridError with the runner's line."""
    from tvm_extension.mlf import board as boards  # pylint: disable=import-outside-toplevel

    try:
        boards.board(str(name))
        boards.check_tools()
    except boards.BoardError as err:
        raise GridError(f"board: {err}") from None


def source_digest(backend) -> str:
    """sha256 of the sources (Python, C, headers, templates...) of the package defining ``backend``."""
    module = sys.modules.get(type(backend).__module__)
    folder = Path(getattr(module, "__file__", "") or ".").parent if module else None
    if folder is None or not (folder / "__init__.py").exists():
        return ""
    return tree_digest(folder)[:16]


ENGINES = ("relay", "relax")
RELAX_VARIABLE = "TVM_EXTENSION_RELAX"


def relax_command() -> Path:
    """The Relax engine's ``tvmc``: the one ``$TVM_EXTENSION_RELAX`` names, else the
    checkout's ``.venv-relax``; GridError when there is none."""
    named = os.environ.get(RELAX_VARIABLE)
    command = Path(named) if named else Path(__file__).resolve().parents[2] / ".venv-relax" / "bin" / "tvmc"
    if not command.is_file():
        raise GridError(f"engine 'relax': {command} not found; set {RELAX_VARIABLE} to the tvmc command of "
                        "an environment with apache-tvm (pip install 'tvm-uma-extensions[relax]')")
    return command


def expand(plan: dict, backends: Optional[Dict[str, object]] = None) -> List[Point]:
    """Every point of the plan, after checking it whole: GridError on the first problem."""
    if not isinstance(plan, dict) or not plan.get("backends"):
        raise GridError("no backends: give [backends.NAME] tables (or --backend NAME)")
    unknown = set(plan) - {"models", "backends", "board", "engine", "device"}
    if unknown:
        raise GridError(f"unknown key '{sorted(unknown)[0]}' (the plan has 'models', 'board', 'engine', 'device' "
                        "and [backends.NAME] tables)")
    engine = plan.get("engine", "relay")
    if engine not in ENGINES:
        raise GridError(f"engine '{engine}': the engines are {' and '.join(ENGINES)}")
    if engine == "relax":
        relax_command()
    board, device = plan.get("board"), plan.get("device")
    if board is not None:
        _check_board(board)
    if device is not None:
        _check_device(device)
    backends = known_backends() if backends is None else backends
    models: Dict[str, Model] = {}
    points = []
    for backend, grid in plan["backends"].items():
        if backend not in backends:
            raise GridError(f"unknown backend '{backend}' (installed: {', '.join(sorted(backends))})")
        grid = dict(grid or {})
        specs = grid.pop("models", plan.get("models"))
        if not specs:
            raise GridError(f"no models for backend '{backend}': give models = [...]")
        defaults = backends[backend]._target_attrs  # pylint: disable=protected-access
        axes = []
        for name, spec in sorted(grid.items()):
            if name not in defaults:
                raise GridError(f"backend '{backend}' has no attribute '{name}' "
                                f"(its attributes: {', '.join(defaults) or 'none'})")
            choices = values(spec, f"{backend}.{name}")
            kind = type(defaults[name])
            if kind is int:  # "16K" in a list means what it means in a range
                choices = [_number(v) if isinstance(v, str) and _NUMBER.match(v) else v for v in choices]
            for value in choices:
                if not isinstance(value, kind) or isinstance(value, bool) != isinstance(defaults[name], bool):
                    raise GridError(f"{backend}.{name}: {value!r} is not a {kind.__name__} like its default "
                                    f"{defaults[name]!r}")
            axes.append([(name, v) for v in choices])
        combos = list(itertools.product(*axes))
        for combo in combos:
            _check_point(backends[backend], dict(combo))
        for spec in specs:
            key = repr(spec)
            models[key] = models.get(key) or resolve_model(spec)
            code = source_digest(backends[backend])
            points += [Point(models[key], backend, tuple(combo), board, code, engine, device) for combo in combos]
    return points
