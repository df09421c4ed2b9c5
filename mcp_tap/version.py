"""The package's version, in a module of its own so that any module can name it without
importing the package's public API (and what that imports)."""

__version__ = "0.1.0"
