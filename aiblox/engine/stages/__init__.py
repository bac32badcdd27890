"""Built-in stage kinds beyond first-stage retrieval, one module each, registered on first use
(:data:`aiblox.engine.registry.BUILTIN_MODULES`)."""

__all__: list[str] = []
