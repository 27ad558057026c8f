"""C code put in front of every function offloaded to Chocolate: its C API's header, and the
kit's requantization header, whose rounding the core's output stage uses (the framework ships
each header's folder once)."""
from tvm_extension.api.resources import data_folder

KERNEL_DIR = data_folder(__package__, "c")
KIT_DIR = data_folder("tvm_extension.kit", "c")  # the kit's C library: requantization


def gen_includes() -> str:
    return f'#include "{KERNEL_DIR / "chocolate.h"}"\n#include "{KIT_DIR / "kit_requantize.h"}"\n'
