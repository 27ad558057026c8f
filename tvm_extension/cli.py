"""``tvm-extension``: the project's one command line, in either environment.

    tvm-extension compile MODEL --target NAME -o model.so ...   # the Relax engine (apache-tvm 0.27)
    tvm-extension run model.so -i in.npz -o out.npz             # its Relax VM
    tvm-extension sweep ...                                     # design-space sweeps (Relay engine)
    tvm-extension list | new | examples | --version             # as python -m tvm_extension

``compile`` and ``run`` are tvmc's spelling for the engine that has no tvmc; on the Relay engine
(hhb-tvm) they say in one line to use ``tvmc compile`` and ``python -m tvm_extension.mlf run``.
"""
import sys


def main(argv=None) -> int:
    argv = sys.argv[1:] if argv is None else list(argv)
    command = argv[0] if argv else None
    if command in ("compile", "run"):
        from tvm_extension.relax.__main__ import main as relax  # pylint: disable=import-outside-toplevel

        return relax(argv, prog="tvm-extension")
    if command == "sweep":
        from tvm_extension.sweep.__main__ import main as sweep  # pylint: disable=import-outside-toplevel

        return sweep(argv[1:], prog="tvm-extension sweep")
    from tvm_extension.__main__ import main as project  # pylint: disable=import-outside-toplevel

    return project(argv)


if __name__ == "__main__":
    sys.exit(main())
