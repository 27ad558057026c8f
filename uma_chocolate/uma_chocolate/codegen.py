"""C code put in front of every function offloaded to Chocolate: its C API's header, and
QVanilla's, whose requantization the core's output stage uses (QVanilla's folder is found by
its package's name, without importing QVanilla)."""
from tvm_extension.api.resources import data_folder

KERNEL_DIR = data_folder(__package__, "c")
QVANILLA_DIR = data_folder("uma_qvanilla", "c")


def gen_includes() -> str:
    return f'#include "{KERNEL_DIR / "chocolate.h"}"\n#include "{QVANILLA_DIR / "qvanilla.h"}"\n'
