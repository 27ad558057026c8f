"""C code put in front of every function offloaded to Chocolate: its C API's header, and
QVanilla's, whose requantization the core's output stage uses."""
from tvm_extension.api.resources import data_folder
from uma_qvanilla.codegen import KERNEL_DIR as QVANILLA_DIR

KERNEL_DIR = data_folder(__package__, "c", "c_runtime/chocolate")


def gen_includes() -> str:
    return f'#include "{KERNEL_DIR / "chocolate.h"}"\n#include "{QVANILLA_DIR / "qvanilla.h"}"\n'
