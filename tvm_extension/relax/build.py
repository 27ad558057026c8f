"""ONNX or TFLite model -> shared library (the backend's C library linked in) -> outputs with the Relax VM."""
import os
import re
import shlex
import subprocess
import time
import tempfile
from pathlib import Path
from typing import Dict, Iterable, List, Optional

import numpy as np

from tvm_extension.mlf.host import default_cc

from . import backends, lower
from . import tflite_exact as exact
from .fold import fold_batch_norms
from .backends import UserError
from .tvm_internals import constant_array


def _first_line(exc: Exception, last=False) -> str:
    lines = [line for line in str(exc).strip().splitlines() if line.strip()] or [type(exc).__name__]
    return lines[-1 if last else 0]


def _import_onnx(model: Path, shapes):
    import onnx  # pylint: disable=import-outside-toplevel
    from tvm.relax.frontend.onnx import from_onnx  # pylint: disable=import-outside-toplevel

    try:
        proto = onnx.load(str(model))
    except Exception as exc:
        raise UserError(f"'{model}' is not a readable ONNX model: {_first_line(exc)}")
    try:
        return from_onnx(proto, shape_dict=shapes, keep_params_in_input=False)
    except Exception as exc:
        raise UserError(f"TVM's Relax ONNX frontend cannot import '{model}': {_first_line(exc, last=True)}")


def _onnx_clips(mod):
    """ONNX's Clip imports as two TIR calls, ``maximum`` then ``minimum`` (``emit_te``), which no
    backend pattern can see into; with constant bounds (once folded) it is ``relax.clip``, which the
    conv patterns match as their output stage, as TFLite's RELU6."""
    import re  # pylint: disable=import-outside-toplevel
    from tvm import relax  # pylint: disable=import-outside-toplevel
    from tvm.relax.dpl import (  # pylint: disable=import-outside-toplevel
        GlobalVarPattern, is_const, is_op, is_tuple, wildcard)

    # A bound is a constant once folded; before (an int8 backend matches first) it is still
    # where(isnan(c), -inf or inf, c), evaluated here.
    def bound():
        parts = is_const(), is_const(), is_const(), is_const()  # the constant, or isnan's, where's two
        constant, probe, if_nan, otherwise = parts
        return constant | is_op("relax.where")(is_op("relax.isnan")(probe), if_nan, otherwise), parts

    (lo, lo_parts), (hi, hi_parts) = bound(), bound()
    x, at_least, at_most = wildcard(), GlobalVarPattern(""), GlobalVarPattern("")
    call_tir = lambda func, args: is_op("relax.call_tir")(func, is_tuple(args), add_constraint=False)
    clip = call_tir(at_most, [call_tir(at_least, [x, lo]), hi])

    def value(found, parts):
        constant, probe, if_nan, otherwise = (constant_array(found[p]) if p in found else None for p in parts)
        if constant is not None:
            return constant
        return if_nan if np.isnan(probe).all() else otherwise

    def rewrite(expr, found):
        names = found[at_least].name_hint, found[at_most].name_hint
        bounds = [value(found, parts) for parts in (lo_parts, hi_parts)]
        if not (re.fullmatch(r"maximum\d*", names[0]) and re.fullmatch(r"minimum\d*", names[1])
                and all(b.size == 1 for b in bounds) and "float" in str(expr.ty.dtype)
                and bounds[0].item() <= bounds[1].item()):
            return expr  # not a Clip (or one that clip would compute differently)
        return relax.op.clip(found[x], bounds[0].item(), bounds[1].item())

    for gv, func in list(mod.functions_items()):
        if isinstance(func, relax.Function):
            mod[gv] = relax.dpl.rewrite_call(clip, rewrite, func)
    return relax.transform.DeadCodeElimination()(mod)


def _import_tflite(model: Path, shapes):
    import tflite  # pylint: disable=import-outside-toplevel
    from tvm.relax.frontend.tflite import from_tflite  # pylint: disable=import-outside-toplevel

    buf = model.read_bytes()
    # A flatbuffer has no checksum: check its identifier ("TFL3" at bytes 4..8) before parsing it.
    if len(buf) < 8 or buf[4:8] != b"TFL3":
        raise UserError(f"'{model}' is not a readable TFLite model: no TFL3 flatbuffer identifier")
    try:
        return from_tflite(tflite.Model.GetRootAsModel(buf, 0), shape_dict=shapes)
    except Exception as exc:
        raise UserError(f"TVM's Relax TFLite frontend cannot import '{model}': {_first_line(exc, last=True)}")


FORMATS = {".onnx": "onnx", ".tflite": "tflite"}  # by suffix, as tvmc guesses a model's format


def model_format(model: Path, given: Optional[str] = None) -> str:
    """``given`` (tvmc's --model-format), else the format the suffix says."""
    if given is not None:
        if given not in FORMATS.values():
            raise UserError(f"--model-format {given}: the Relax engine reads {' and '.join(FORMATS.values())} models")
        return given
    if model.suffix not in FORMATS:
        raise UserError(f"'{model}': the Relax engine reads ONNX (.onnx) and TFLite (.tflite) models "
                        "(or name the format: --model-format onnx|tflite)")
    return FORMATS[model.suffix]


def _import(model: Path, fmt: str, shapes=None):
    """The model as a Relax module; ``shapes`` ({input: shape}) fix dynamic dimensions."""
    if not model.is_file():
        raise UserError(f"model file '{model}' does not exist")
    mod = {"onnx": _import_onnx, "tflite": _import_tflite}[fmt](model, shapes)
    names = [param.name for param in mod["main"].params]
    unknown = sorted(set(shapes or {}) - set(names))
    if unknown:
        raise UserError(f"--input-shapes names {unknown[0]!r}, which is not an input of '{model.name}' "
                        f"(its inputs: {', '.join(names)})")
    return mod


def _attrs(backend, given: Optional[Dict[str, str]]) -> dict:
    """The backend's target attributes: its defaults, overridden by ``given`` (typed as the default),
    checked against its ``TARGET_ATTR_RANGES`` ({name: (low, high)}, as the Relay backend's)."""
    name, attrs = backend.TARGET, dict(backend.TARGET_ATTRS)
    for attr, value in (given or {}).items():
        if attr not in attrs:
            raise UserError(f"target '{name}' has no attribute '{attr}' (known: {', '.join(sorted(attrs)) or 'none'})")
        try:
            attrs[attr] = type(attrs[attr])(value)
        except ValueError:
            raise UserError(f"target '{name}': attribute '{attr}' must be a {type(attrs[attr]).__name__}, got {value!r}")
    for attr, (low, high) in getattr(backend, "TARGET_ATTR_RANGES", {}).items():
        if not low <= attrs[attr] <= high:
            raise UserError(f"target '{name}': attribute '{attr}' must be between {low} and {high}, got {attrs[attr]!r}")
    return attrs


def _compile_c(sources: List[Path], includes: List[Path], work: Path, flags: List[str]) -> List[str]:
    """The C library as objects (gcc, C11: export_library links with g++, which would compile .c
    files as C++); a source's own flags come from ``NAME.cflags`` beside it, as for Relay."""
    objects = []
    for source in sources:
        own = source.with_suffix(".cflags")
        extra = own.read_text().split() if own.is_file() else []
        obj = work / f"{source.stem}.o"
        done = subprocess.run([*shlex.split(default_cc()), "-std=c11", "-fPIC", *flags, *extra,
                               *(f"-I{i}" for i in includes), "-c", str(source), "-o", str(obj)], capture_output=True, text=True)
        if done.returncode != 0:
            errors = [line for line in done.stderr.splitlines() if "error" in line] or done.stderr.splitlines() or ["?"]
            raise UserError(f"the backend's C library does not compile: {errors[0]}")
        objects.append(str(obj))
    return objects


CPU_ONLY = "llvm"  # --target llvm: the model with TVM's own kernels only
PLAIN_C = "c"  # --target c -f mlf: the same as embedded C (an MLF), what every offload is compared with


# tvmc's --desired-layout: the layouts of conv2d as Relay's tvmc chose them ("default" kernels).
LAYOUTS = {"NHWC": ["NHWC", "HWIO"], "NCHW": ["NCHW", "OIHW"]}


def compile_model(model, target: str, output, paths: Iterable[str] = (), attrs: Optional[Dict[str, str]] = None,
                  cflags: Iterable[str] = ("-O2",), shapes: Optional[Dict[str, tuple]] = None,
                  tflite_exact: bool = False, output_format: str = "so", *, fmt: Optional[str] = None,
                  host=CPU_ONLY, desired_layout: Optional[str] = None, pass_config: Optional[dict] = None,
                  module_name: str = "default", dumps: Optional[dict] = None) -> List[str]:
    """Compile ``model`` for ``target`` into the shared library ``output`` (``output_format`` "so") or
    the MLF ``output`` ("mlf": AOT C, ``aot``); returns the offload report.
    ``shapes`` ({input name: shape}, as tvmc's --input-shapes) fixes the inputs' dynamic dimensions;
    ``tflite_exact``: an int8 TFLite model computes what TFLite's reference kernels compute;
    ``fmt``: the model's format (onnx, tflite; default: by its suffix); ``host``: the VM library's
    LLVM target (a kind, or a dict as ``tvm.target.Target`` takes it); ``desired_layout``: NHWC or NCHW convs (tvmc's --desired-layout);
    ``pass_config``: TVM's PassContext config; ``module_name``: the MLF's C names (tvmgen_NAME_run);
    ``dumps``: a dict that gets the Relax module after offloading ("relax") and the MLF's C ("c").

    Written whole or not at all: nothing is left at ``output`` on an error."""
    import tvm  # pylint: disable=import-outside-toplevel
    from .tvm_internals import check_version  # pylint: disable=import-outside-toplevel

    check_version()

    model, output = Path(model), Path(output)
    if not output.parent.is_dir():
        raise UserError(f"output folder '{output.parent}' does not exist")
    fmt = model_format(model, fmt)
    if tflite_exact and fmt != "tflite":
        raise UserError(f"{exact.FLAG} applies to TFLite models only (this is an {fmt} model)")
    if output_format not in ("so", "mlf"):
        raise UserError(f"output format '{output_format}': so (a shared library for the Relax VM) or mlf (AOT C)")
    if desired_layout is not None and desired_layout not in LAYOUTS:
        raise UserError(f"--desired-layout {desired_layout}: {' or '.join(LAYOUTS)}")
    if output_format != "mlf" and module_name != "default":
        raise UserError(f"--module-name {module_name}: names the C functions of an MLF (tvmgen_NAME_run): -f mlf")
    if not module_name.isidentifier():
        raise UserError(f"--module-name {module_name!r}: a C identifier, as tvmgen_<name>_run is")
    try:
        context = tvm.transform.PassContext(config=pass_config or {})
    except Exception as exc:  # a value TVM's registry refuses
        raise UserError(f"--pass-config: {_first_line(exc, last=True)}")
    with context:
        return _compile(model, fmt, target, output, paths, attrs, list(cflags), shapes, tflite_exact,
                        output_format == "mlf", host, desired_layout, module_name,
                        dumps if dumps is not None else {})


def _compile(model: Path, fmt: str, target: str, output: Path, paths, attrs, cflags, shapes, tflite_exact: bool,
             mlf: bool, host, desired_layout: Optional[str], module_name: str, dumps: dict) -> List[str]:
    import tvm  # pylint: disable=import-outside-toplevel
    from tvm import relax  # pylint: disable=import-outside-toplevel

    cpu_only = PLAIN_C if mlf else CPU_ONLY
    backend, report, sources, includes = None, [f"{cpu_only}: nothing offloaded"], [], []
    if target == cpu_only:  # TVM's own build, nothing offloaded (what an offload is compared with)
        if attrs:
            raise UserError(f"target '{cpu_only}' has no attributes")
    else:
        backend = backends.find(target, paths)
        attrs = _attrs(backend, attrs)
        sources, includes = backends.c_library(backend)
    mod = _import(model, fmt, shapes)
    if fmt == "onnx":  # before ConvertLayout (the fold reads NCHW/OIHW convs) and any pattern
        mod = fold_batch_norms(mod)
    if desired_layout is not None:
        mod = relax.transform.ConvertLayout({"relax.nn.conv2d": LAYOUTS[desired_layout]})(mod)
    # Folding makes the bias a constant (ONNX: a reshape of one); an int8 backend's chains (qconv)
    # are matched first, so that they read the weights and bias as stored, int8 and int32 with their
    # scales; so does --tflite-exact, which then computes the rest in integers.  The backend's other
    # patterns (Chocolate's float convs in an int8 model) are matched after folding, as in a float model.
    early = backend is not None and getattr(backend, "MATCH_BEFORE_FOLDING", False)
    early = early(mod) if callable(early) else early  # a backend may decide per model (Chocolate: int8 or float)
    made_exact, offloaded, refused = [], None, 0
    if early:
        from . import qconv, qdq_layout  # pylint: disable=import-outside-toplevel  (they import tvm)

        if fmt == "onnx":  # ONNX's QDQ convs (NCHW) in the NHWC form the chains match
            mod = qdq_layout.to_nhwc(_onnx_clips(mod))
        if tflite_exact and not getattr(backend, "COMPUTES_TFLITE_ROUNDING", False):
            refused = lower.matches(mod, backend, attrs, which=qconv.is_chain)  # left to --tflite-exact
        else:
            with qconv.model_rounding(tflite=fmt == "tflite" and tflite_exact):
                mod, offloaded = lower.offload(mod, backend, attrs, which=qconv.is_chain)
    # The CPU's int8 layers: TFLite's arithmetic under --tflite-exact; else the Relay engine's (its
    # frontend's QNN operators in TVM's integer arithmetic), unless the backend's chains round as
    # TFLite does (QVanilla: the rest stays TVM's float legalization, as before).
    operators = None  # the CPU's operators as the model states them, for the report, when rewritten below
    if early and fmt == "onnx":  # ONNX's QDQ Add, Sub, Mul as the int8 backends' Relay side computes them
        from . import qdq_binary  # pylint: disable=import-outside-toplevel

        operators = lower.model_operators(mod)
        mod = qdq_binary.as_relay_module(mod)
    if fmt == "tflite":
        operators = lower.model_operators(mod)
        if tflite_exact:
            mod, made_exact = exact.make_exact(mod)
        else:
            mod = exact.make_as_relay(mod)
    mod = relax.transform.FoldConstant()(mod)
    if fmt == "onnx":
        mod = _onnx_clips(mod)
    if backend is not None:
        rest = (lambda name: not qconv.is_chain(name)) if early else None
        if not early or refused or any(rest(p.name) for p in backend.patterns(attrs)):
            mod, offloaded = lower.offload(mod, backend, attrs, which=rest, earlier=offloaded, operators=operators)
        if refused:  # these convs' patterns did match: say why they stay, as the Relay engine says it
            unmatched = ("nn.conv2d", "pattern did not match")
            offloaded.not_offloaded[unmatched] -= refused
            offloaded.not_offloaded[("nn.conv2d", "the model asks for TFLite's rounding, which this backend "
                                                  "does not compute")] += refused
            offloaded.not_offloaded = +offloaded.not_offloaded  # drops what reached 0
        report = list(offloaded.lines())
        dumps["offloads"] = offloaded
    report = report + made_exact
    dumps["relax"] = mod.script()
    mod = relax.transform.LegalizeOps()(mod)
    if mlf:
        dumps["c"] = _write_mlf(mod, _output_names(model, fmt), output, sources, includes,
                                backends.c_headers(backend) if backend is not None else [], module_name)
        return report
    try:
        executable = relax.build(mod, target=tvm.target.Target(host))
    except Exception as exc:  # e.g. an -mcpu LLVM does not know
        raise UserError(f"TVM cannot build for --target {host}: {_first_line(exc, last=True)}")
    with tempfile.TemporaryDirectory(prefix="relax-build-") as work:
        objects = _compile_c(sources, includes, Path(work), cflags)
        built = Path(work) / output.name
        executable.export_library(str(built), addons=objects, workspace_dir=work)
        os.replace(built, output)
    return report


def _output_names(model: Path, fmt: str) -> List[str]:
    """The model's output names, as the Relay engine's MLF names them: TFLite's tensor names; for
    ONNX, whose names tvmc's frontend drops, ``output`` or ``output0``, ``output1``..."""
    if fmt == "onnx":
        import onnx  # pylint: disable=import-outside-toplevel

        count = len(onnx.load(str(model), load_external_data=False).graph.output)
        return ["output"] if count == 1 else [f"output{i}" for i in range(count)]
    import tflite  # pylint: disable=import-outside-toplevel

    graph = tflite.Model.GetRootAsModel(model.read_bytes(), 0).Subgraphs(0)
    names = [graph.Tensors(graph.Outputs(i)).Name().decode() for i in range(graph.OutputsLength())]
    return [re.sub(r"[^A-Za-z0-9]", "_", name) for name in names]  # as TVM's SanitizeName


def _write_mlf(mod, output_names: List[str], output: Path, sources: List[Path], includes: List[Path],
               headers: List[Path], module_name: str) -> str:
    """The MLF of AOT C, with the backend's C library (its sources, their NAME.cflags, its headers);
    returns the generated C."""
    from tvm_extension.mlf import layout  # pylint: disable=import-outside-toplevel

    from . import aot  # pylint: disable=import-outside-toplevel

    program = aot.aot_c(mod, output_names, headers, model=module_name)
    library = {f"src/{s.name}": s for s in sources}
    library.update({f"src/{s.with_suffix('.cflags').name}": s.with_suffix(".cflags") for s in sources
                    if s.with_suffix(".cflags").is_file()})
    library.update({f"include/{h.name}": h for folder in includes for h in sorted(Path(folder).glob("*.h"))})
    tensors = lambda described: [layout.Tensor(*t) for t in described]
    layout.write(output, {"default_lib0.c": program.source}, tensors(program.inputs), tensors(program.outputs),
                 program.workspace_bytes, program.constants_bytes, program.functions, "c -keys=cpu", library,
                 model=module_name)
    return program.source


def run_model(library, inputs: Dict[str, np.ndarray], repeat: int = 0):
    """Run a library built by ``compile_model`` with the Relax VM on named inputs: its outputs; with
    ``repeat``, (outputs, the seconds per run of ``repeat`` more runs: their total / repeat, as
    ``tvm_extension.mlf run --repeat`` measures the MLF)."""
    import tvm  # pylint: disable=import-outside-toplevel
    from tvm import relax  # pylint: disable=import-outside-toplevel

    library = Path(library)
    if not library.is_file():
        raise UserError(f"library '{library}' does not exist")
    try:
        vm = relax.VirtualMachine(tvm.runtime.load_module(str(library)), tvm.cpu())
    except Exception:
        raise UserError(f"'{library}' is not a library built by the Relax engine")
    names = [vm._get_function_param_name("main", i) for i in range(vm._get_function_arity("main"))]
    missing = [n for n in names if n not in inputs]
    if missing:
        raise UserError(f"no input named {missing[0]!r} (the model's inputs: {', '.join(names)}; given: {', '.join(inputs) or 'none'})")
    args = []
    for name in names:
        value = inputs[name]
        try:
            args.append(tvm.runtime.tensor(np.ascontiguousarray(value)))
        except Exception as exc:
            raise UserError(f"input {name!r}: {exc}")
    try:
        result = vm["main"](*args)
    except Exception as exc:  # a wrong shape or dtype (the VM's argument checks), a kernel's refusal
        lines = [line for line in str(exc).splitlines() if line.strip()]
        raise UserError(f"running '{library.name}' failed: {lines[-1] if lines else type(exc).__name__}")
    outputs = result if isinstance(result, (list, tuple)) or type(result).__name__ == "Array" else [result]
    outputs = [o.numpy() for o in outputs]
    if not repeat:
        return outputs
    started = time.perf_counter()
    for _ in range(repeat):
        vm["main"](*args)
    return outputs, (time.perf_counter() - started) / repeat
