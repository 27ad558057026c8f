"""The versions a user reports with a problem: this project's and the TVM it runs on."""
import argparse
import importlib.metadata
from typing import Optional

DISTRIBUTION = "tvm-uma-extensions"


def _installed(distribution: str) -> Optional[str]:
    try:
        return importlib.metadata.version(distribution)
    except importlib.metadata.PackageNotFoundError:
        return None


def version_line() -> str:
    """``tvm-uma-extensions 0.1.0, TVM 0.16.dev0 (hhb-tvm 3.2.3)``: the distribution that
    provides ``tvm`` is looked up, since TVM ships under several names."""
    import tvm  # pylint: disable=import-outside-toplevel

    providers = importlib.metadata.packages_distributions().get("tvm", [])
    provider = f" ({providers[0]} {_installed(providers[0])})" if providers else ""
    return f"{DISTRIBUTION} {_installed(DISTRIBUTION) or '(not installed)'}, TVM {tvm.__version__}{provider}"


class VersionAction(argparse.Action):
    """``--version``: print ``version_line()`` and exit, as argparse's own version action does,
    computed only when asked.  ``tvm_first``: TVM's bare version first, as tvmc prints it (a
    script reading tvmc's first line still reads TVM's version)."""

    tvm_first = False

    def __init__(self, option_strings, dest=argparse.SUPPRESS, **kwargs):
        super().__init__(option_strings, dest, nargs=0, default=argparse.SUPPRESS, **kwargs)

    def __call__(self, parser, namespace, values, option_string=None):
        if self.tvm_first:
            import tvm  # pylint: disable=import-outside-toplevel

            print(tvm.__version__)
        print(version_line())
        parser.exit()
