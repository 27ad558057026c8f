"""The Vanilla extension: makes ``--target vanilla_accelerator`` available to tvmc.

    tvmc compile --target vanilla_accelerator --experimental-tvm-extension uma_vanilla MODEL -f mlf
"""
from tvm_extension.api import TVMExtension
from uma_vanilla import VanillaAcceleratorBackend


class VanillaExtension(TVMExtension):
    def uma_backends(self):
        return [VanillaAcceleratorBackend()]
