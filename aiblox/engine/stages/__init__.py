"""Built-in stage kinds beyond the engine's own, one module each, registered on first lookup
(:data:`aiblox.engine.registry.BUILTIN_MODULES`); nothing is exported here."""

__all__: list[str] = []
