"""Data folders (C sources, example extensions) shipped inside Python packages.

An installed wheel holds them inside the package they belong to (read with
``importlib.resources``; the wheel maps them there from the repository, see pyproject.toml).
A source checkout keeps them in the repository's own folders (``c_runtime/``, ``examples/``).
"""
import importlib.resources
import importlib.util
from pathlib import Path


def data_folder(package: str, name: str, checkout: str) -> Path:
    """``<package>/<name>`` when installed, else ``<checkout>`` relative to the checkout's root."""
    shipped = importlib.resources.files(package) / name
    if shipped.is_dir():
        return Path(str(shipped))
    spec = importlib.util.find_spec(package)
    root = Path(spec.origin).resolve().parent.parents[package.count(".")]
    folder = root / checkout
    if not folder.is_dir():
        raise FileNotFoundError(f"{package} is installed without its data folder '{name}' ({folder} is missing)")
    return folder
