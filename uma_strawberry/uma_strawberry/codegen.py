"""C code put in front of every function offloaded to Strawberry: its C API's header, and the
header of Vanilla's conv engine, which the hardware model calls.

The absolute paths name the libraries; the framework packages each header's folder once
into the output (strawberry.c and vanilla_accelerator.c) and rewrites the includes to bare
file names.  Vanilla's folder is found by its package's name, without importing Vanilla.
"""
from tvm_extension.api.resources import data_folder

KERNEL_DIR = data_folder(__package__, "c")
VANILLA_DIR = data_folder("uma_vanilla", "c")  # the conv engine's C library


def gen_includes() -> str:
    return f'#include "{KERNEL_DIR / "strawberry.h"}"\n#include "{VANILLA_DIR / "vanilla_accelerator.h"}"\n'
