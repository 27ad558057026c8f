"""The project's console scripts.

``tvmc``: TVM's own tvmc where the installed TVM has one (hhb-tvm, the Relay engine: this project
extends it), else tvmc's commands on the Relax engine (apache-tvm, which has no tvmc):

    tvmc compile --target vanilla_accelerator --experimental-tvm-extension ./uma_vanilla model.onnx -f mlf -o out.tar
    tvmc run out.tar -i in.npz -o out.npz

``tvm-extension``: the project's own commands (``list``, ``new``, ``examples``, ``sweep``, ``--version``,
as ``python -m tvm_extension``); its ``compile`` and ``run`` are ``tvmc``'s.
"""
import importlib.util
import sys


def relay_engine() -> bool:
    """Whether the installed TVM is the Relay engine's (hhb-tvm: its own tvmc, Relay, UMA)."""
    try:
        return importlib.util.find_spec("tvm.driver.tvmc") is not None
    except ImportError:  # no TVM at all: the Relax engine's command says what to install
        return False


def tvmc(argv=None) -> int:
    if relay_engine():
        from tvm.driver.tvmc.main import main as tvm_tvmc  # pylint: disable=import-outside-toplevel

        if argv is not None:
            sys.argv[1:] = list(argv)
        return tvm_tvmc()
    from tvm_extension.relax.__main__ import main as relax  # pylint: disable=import-outside-toplevel

    return relax(argv, prog="tvmc")


def main(argv=None) -> int:
    argv = sys.argv[1:] if argv is None else list(argv)
    command = argv[0] if argv else None
    if command in ("compile", "run", "tune"):
        return tvmc(argv)
    if command == "sweep":
        from tvm_extension.sweep.__main__ import main as sweep  # pylint: disable=import-outside-toplevel

        return sweep(argv[1:], prog="tvm-extension sweep")
    from tvm_extension.__main__ import main as project  # pylint: disable=import-outside-toplevel

    return project(argv, prog="tvm-extension")


if __name__ == "__main__":
    sys.exit(main())
