"""C code put in front of every function offloaded to Strawberry: its C API's header, and the
header of the kit's float conv engine, which the hardware model calls.

The absolute paths name the libraries; the framework packages each header's folder once
into the output (strawberry_*.c and kit_conv_f32.c) and rewrites the includes to bare
file names.
"""
from tvm_extension.api.resources import data_folder

KERNEL_DIR = data_folder(__package__, "c")
KIT_DIR = data_folder("tvm_extension.kit", "c")  # the kit's C library: the conv engine


def gen_includes() -> str:
    return f'#include "{KERNEL_DIR / "strawberry.h"}"\n#include "{KIT_DIR / "kit_conv_f32.h"}"\n'
