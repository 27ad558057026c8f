"""C code put in front of every function offloaded to QVanilla: the kernel library's header."""
from tvm_extension.api.resources import data_folder

KERNEL_DIR = data_folder(__package__, "c")


def gen_includes() -> str:
    return f'#include "{KERNEL_DIR / "qvanilla.h"}"\n'
