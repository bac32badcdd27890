"""aiblox: a notebook-first research and evaluation harness for retrieval-augmented generation."""

__version__ = "0.1.0"

__all__ = ["__version__"]
