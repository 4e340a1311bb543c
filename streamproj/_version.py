"""The version of streamproj, as installed (``pyproject.toml`` is the one place it is typed).

A module of its own so that any module can read the version without importing
the package (``from ._version import __version__``), which would be circular.
"""

from importlib.metadata import PackageNotFoundError, version
from pathlib import Path

__all__ = ["__version__"]


def _source_checkout_version() -> str:
    """The version in ``pyproject.toml`` next to the package (a checkout never installed).

    Returns ``"0+unknown"`` when there is no such file or it names no version.
    """
    import tomllib

    pyproject = Path(__file__).resolve().parent.parent / "pyproject.toml"
    try:
        project = tomllib.loads(pyproject.read_text(encoding="utf-8")).get("project", {})
    except (OSError, tomllib.TOMLDecodeError):
        return "0+unknown"
    if project.get("name") != "streamproj":
        return "0+unknown"
    return str(project.get("version", "0+unknown"))


try:
    __version__: str = version("streamproj")
except PackageNotFoundError:
    __version__ = _source_checkout_version()
