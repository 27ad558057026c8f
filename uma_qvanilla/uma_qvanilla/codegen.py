"""C code put in front of every function offloaded to QVanilla: the API's header (qvanilla.h), the
header of what generated code calls (qvanilla_calls.h), and the kit's requantization header
qvanilla.h includes (the framework ships each header's folder once)."""
from tvm_extension.api.resources import data_folder

KERNEL_DIR = data_folder(__package__, "c")
KIT_DIR = data_folder("tvm_extension.kit", "c")  # the kit's C library: requantization


def gen_includes() -> str:
    return "".join(f'#include "{header}"\n' for header in (KERNEL_DIR / "qvanilla.h", KERNEL_DIR / "qvanilla_calls.h",
                                                             KIT_DIR / "kit_requantize.h"))
