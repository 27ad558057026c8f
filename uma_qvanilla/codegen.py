"""C code put in front of every function offloaded to QVanilla: the kernel library's header."""
import pathlib

KERNEL_DIR = pathlib.Path(__file__).resolve().parent.parent / "c_runtime" / "qvanilla"


def gen_includes() -> str:
    return f'#include "{KERNEL_DIR / "qvanilla.h"}"\n'
