"""The Chocolate extension: makes ``--target chocolate`` available to tvmc.

    tvmc compile --target chocolate --experimental-tvm-extension uma_chocolate MODEL -f mlf \
        --target-chocolate-tile_m=16 --target-chocolate-tile_n=16 --target-chocolate-tile_k=16
"""
from tvm_extension.api import TVMExtension
from uma_chocolate import ChocolateBackend


class ChocolateExtension(TVMExtension):
    def uma_backends(self):
        return [ChocolateBackend()]
