"""C code put in front of every function offloaded to Vanilla: the kernel library's header.

The absolute path names the library; the framework packages the header's folder once
into the output and rewrites the include to the bare file name.
"""
from tvm_extension.api.resources import data_folder

KERNEL_DIR = data_folder(__package__, "c")


def gen_includes() -> str:
    return f'#include "{KERNEL_DIR / "vanilla_accelerator.h"}"\n'
