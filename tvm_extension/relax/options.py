"""tvmc's option spellings, read for the Relax engine: target strings, target attributes, pass
configurations, executor and runtime.  Plain Python on the parsed text (TVM only to check names),
so that ``tvmc compile`` on apache-tvm takes what TVM 0.16's tvmc takes, and refuses in one line
what the Relax engine cannot do.
"""
import dataclasses
import re
import shlex
from typing import Dict, List, Optional, Sequence, Tuple

from .backends import UserError

HOSTS = ("c", "llvm")  # TVM's CPU target kinds the host part of a target string may name
_TARGET_ATTR = re.compile(r"--target-([A-Za-z0-9_]+?)-([A-Za-z0-9_-]+)(?:=(.*))?", re.DOTALL)


@dataclasses.dataclass
class Targets:
    backend: Optional[str]  # the backend's target name, None for TVM's own kernels only
    attrs: Dict[str, str]  # its attributes, as text (typed by the backend's defaults later)
    host: dict  # the CPU part, as tvm.target.Target takes it: kind "c" for an MLF, "llvm" for the VM's library


def split_target_attrs(argv: Sequence[str]) -> Tuple[List[str], List[Tuple[str, str, str]]]:
    """(argv without them, [(target, attr, value)]) of ``--target-NAME-ATTR=VALUE`` and tvmc's
    spelling with a space, ``--target-NAME-ATTR VALUE``: backends' attributes are not known to the
    parser (a backend is found only once ``--target`` is read)."""
    rest, found, tokens = [], [], list(argv)
    while tokens:
        token = tokens.pop(0)
        match = _TARGET_ATTR.fullmatch(token)
        if not match:
            rest.append(token)
            continue
        target, attr, value = match.groups()
        if value is None:
            if not tokens:
                raise UserError(f"{token} expects a value")
            value = tokens.pop(0)
        found.append((target, attr.replace("-", "_"), value))
    return rest, found


def _inline(part: str) -> Tuple[str, Dict[str, str]]:
    """``"vanilla_accelerator -max_kernel_size=5"`` -> (name, {attr: value})."""
    words = shlex.split(part)
    if not words:
        raise UserError("--target: an empty target in the list")
    attrs = {}
    for word in words[1:]:
        key, equals, value = word.lstrip("-").partition("=")
        if not word.startswith("-") or not equals or not key:
            raise UserError(f"--target '{part.strip()}': expected NAME -ATTR=VALUE ..., got '{word}'")
        attrs[key.replace("-", "_")] = value
    return words[0], attrs


def read_targets(target: str, target_attrs: Sequence[Tuple[str, str, str]], output_format: str) -> Targets:
    """tvmc's ``--target`` (``NAME``, ``"NAME -attr=v, c"``, ``c``, ``llvm``) with the
    ``--target-NAME-ATTR`` options: the backend, its attributes and the host target."""
    parts = [_inline(p) for p in target.split(",")]
    backends = [(name, attrs) for name, attrs in parts if name not in HOSTS]
    hosts = [(name, attrs) for name, attrs in parts if name in HOSTS]
    if len(backends) > 1:
        raise UserError(f"--target '{target}': one accelerator target at a time on the Relax engine "
                        f"(given: {', '.join(n for n, _ in backends)})")
    if len(hosts) > 1:
        raise UserError(f"--target '{target}': one host target (c or llvm), given {len(hosts)}")
    mlf = output_format == "mlf"
    host_name, host_attrs = hosts[0] if hosts else ("c" if mlf else "llvm", {})
    if mlf and host_name != "c":
        raise UserError(f"--target '{target}': an MLF holds C for any CPU: its host target is c, not {host_name}")
    if not mlf and host_name != "llvm":
        raise UserError(f"--target '{target}': the Relax VM's shared library is built by LLVM for this host: "
                        "host target llvm (or -f mlf for C)")
    backend, attrs = backends[0] if backends else (None, {})
    attrs = dict(attrs)
    for name, attr, value in target_attrs:
        if name == backend:
            attrs[attr] = value
        elif name == host_name:
            host_attrs[attr] = value
        else:
            known = " or ".join(filter(None, (backend, host_name)))
            raise UserError(f"--target-{name}-{attr}: '{name}' is not a target compiled for (--target {known})")
    return Targets(backend, attrs, _host(host_name, host_attrs))


def _host(kind: str, attrs: Dict[str, str]) -> dict:
    """The host target as apache-tvm takes it (a dict: it no longer reads "llvm -mcpu=x"), its
    attributes checked against TVM's target kind and typed by it."""
    import tvm  # pylint: disable=import-outside-toplevel

    known = {name.replace("-", "_"): (name, kind_type) for name, kind_type in
             tvm.target.TargetKind.options_from_name(kind).items()}
    target = {"kind": kind}
    for attr, value in attrs.items():
        if attr not in known:
            raise UserError(f"target {kind} has no attribute '{attr}' (TVM's {kind} target: "
                            f"{', '.join(sorted(n for n, _ in known.values()))})")
        name, kind_type = known[attr]
        try:
            target[name] = int(value) if kind_type == "int" else value.split(",") if kind_type.startswith(
                "Array") else value
        except ValueError:
            raise UserError(f"--target-{kind}-{attr} {value}: expected an int")
    try:
        tvm.target.Target(target)
    except Exception as exc:  # TVM's own check of a value
        raise UserError(f"--target {target}: {str(exc).strip().splitlines()[-1]}")
    return target


def pass_config(entries: Sequence[str]) -> dict:
    """``--pass-config name=value`` -> PassContext's config.  tvmc's ``tir.*`` names are
    apache-tvm's ``tirx.*``; values are typed by TVM's registry (bool, int, str)."""
    import tvm  # pylint: disable=import-outside-toplevel

    known = tvm.transform.PassContext.list_configs()
    config = {}
    for entry in entries:
        name, equals, value = entry.partition("=")
        name, value = name.strip(), value.strip()
        if not equals or not name:
            raise UserError(f"--pass-config '{entry}': expected NAME=VALUE")
        if name not in known and name.startswith("tir.") and "tirx." + name[4:] in known:
            name = "tirx." + name[4:]
        if name not in known:
            relay = " (a Relay engine option)" if name.startswith("relay.") else ""
            raise UserError(f"--pass-config {name}{relay}: not a pass configuration of this TVM "
                            f"(tvm.transform.PassContext.list_configs() lists {len(known)})")
        kind = str(known[name].get("type", ""))
        try:
            if kind == "bool":
                if value.lower() not in ("0", "1", "true", "false"):
                    raise ValueError(value)
                config[name] = value.lower() in ("1", "true")
            elif kind in ("int", "ir.IntImm"):
                config[name] = int(value)
            else:
                raise UserError(f"--pass-config {name}: takes a {kind}, which a command line cannot give "
                                "(set it in Python: tvm.transform.PassContext(config=...))")
        except ValueError:
            raise UserError(f"--pass-config {name}={value}: expected a {kind} (true/false/1/0 for a bool)")
    return config


# What the Relax engine's MLF is, in tvmc's executor and runtime options.
MLF_EXECUTOR = {"executor": "aot", "executor_aot_interface_api": "c", "executor_aot_unpacked_api": "1", "runtime": "crt"}


def check_executor(args) -> None:
    """``--executor aot --runtime crt`` (and the AOT options) are what ``-f mlf`` makes: accepted
    there; any other choice, or these with ``-f so`` (a library for the Relax VM), refused."""
    given = {k: str(getattr(args, k)) for k in MLF_EXECUTOR if getattr(args, k, None) is not None}
    if not given:
        return
    option = lambda key: "--" + key.replace("_", "-")
    if args.output_format != "mlf":
        spelled = " ".join(f"{option(k)} {v}" for k, v in given.items())
        raise UserError(f"{spelled}: -f so builds a library for the Relax VM, which has no executor or runtime "
                        "to choose; AOT C on the CRT is -f mlf")
    for key, value in given.items():
        wanted = MLF_EXECUTOR[key]
        if value.lower() != wanted and not (wanted == "1" and value.lower() == "true"):
            raise UserError(f"{option(key)} {value}: the Relax engine's MLF is AOT C with the C interface and the "
                            f"unpacked API on the CRT ({option(key)} {wanted})")
