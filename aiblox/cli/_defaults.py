"""The library defaults the commands' options show in their help, written here so that a
command's startup (its options declared, its ``--help``) imports none of the modules that own
them (the engine, MLflow's writer, the sweep runner, the metrics).

``tests/cli/test_startup.py`` checks each one equals the value its owner defines, so they never
drift apart.
"""

from __future__ import annotations

__all__ = ["EVAL_EXPERIMENT", "MAX_POINTS", "METRICS", "STAGE_CACHE_DIR", "TOKEN_ENCODING",
           "TRACKING_URI"]

TRACKING_URI = "sqlite:///mlruns/mlflow.db"
"""``aiblox.engine.tracking.DEFAULT_TRACKING_URI``"""

STAGE_CACHE_DIR = ".aiblox/stages"
"""``aiblox.sweep.runner.DEFAULT_CACHE_DIR``"""

MAX_POINTS = 10_000
"""``aiblox.sweep.axes.DEFAULT_MAX_POINTS``"""

EVAL_EXPERIMENT = "aiblox-eval"
"""``aiblox.experiment.table.EVAL_EXPERIMENT``"""

METRICS: tuple[str, ...] = ("ndcg@10", "recall@100", "mrr@10", "map@100")
"""``aiblox.metrics.DEFAULT_METRICS``"""

TOKEN_ENCODING = "cl100k_base"
"""``aiblox.text.tokens.DEFAULT_ENCODING``"""
