"""The QVanilla extension: makes ``--target qvanilla`` (an int8 accelerator) available to tvmc."""
from tvm_extension.api import TVMExtension
from uma_qvanilla import QVanillaBackend


class QVanillaExtension(TVMExtension):
    def uma_backends(self):
        return [QVanillaBackend()]
