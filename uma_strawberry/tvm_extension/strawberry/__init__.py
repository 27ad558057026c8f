"""The Strawberry extension: makes ``--target strawberry`` available to tvmc.

    tvmc compile --target strawberry --experimental-tvm-extension uma_strawberry MODEL -f mlf
    tvmc compile --target "strawberry -scratchpad_bytes=65536, c" ...   (or --target-strawberry-scratchpad_bytes)
"""
from tvm_extension.api import TVMExtension
from uma_strawberry import StrawberryBackend


class StrawberryExtension(TVMExtension):
    def uma_backends(self):
        return [StrawberryBackend()]
