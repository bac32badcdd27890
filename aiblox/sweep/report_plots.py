"""The sweep report's plots (:mod:`aiblox.sweep.report`): the primary metric against each swept
parameter, named as the spec names it, a numeric axis drawn as lines and a categorical one (a
blend, a normalisation) as points at each category; and the Pareto front against each other
objective. PNG bytes without a software stamp, so a report is the same bytes every run."""

from __future__ import annotations

import base64
import io
from typing import Any

# ``rep`` below is a :class:`aiblox.sweep.report.SweepReport`, typed Any: the report imports
# its plots, never the other way round (no import cycle between sibling modules)

__all__ = ["axis_figure", "axis_png", "pareto_png", "value_key"]


def value_key(v: str) -> tuple[int, float, str]:
    try:
        return (0, float(v), v)
    except ValueError:
        return (1, 0.0, v)


def _png_base64(fig: Any) -> str:
    """A finished figure as a base64 PNG (no software stamp: the same bytes every run),
    closed."""
    from matplotlib import pyplot as plt

    fig.tight_layout()
    buf = io.BytesIO()
    fig.savefig(buf, format="png", metadata={"Software": None})
    plt.close(fig)
    return base64.b64encode(buf.getvalue()).decode("ascii")


def axis_png(rep: Any, axis: str) -> str:
    """Base64 PNG of the primary metric against one swept parameter."""
    return _png_base64(axis_figure(rep, axis))


def axis_figure(rep: Any, axis: str) -> Any:
    """The matplotlib figure of the primary metric against one swept parameter (named as the
    spec names it): a line per series and split over a numeric axis; over categories (a blend,
    a normalisation) the points side by side at each category, no line between them."""
    import matplotlib

    matplotlib.use("Agg")
    from matplotlib import pyplot as plt

    rows = rep.axes[axis]
    xs = sorted({r["value"] for r in rows}, key=value_key)
    numeric = all(value_key(x)[0] == 0 for x in xs)
    at = {x: (float(x) if numeric else float(i)) for i, x in enumerate(xs)}
    fig, ax = plt.subplots(figsize=(5, 3.2), dpi=90)
    series = list(dict.fromkeys(r.get("series", "all") for r in rows))
    # categories (a blend, a normalisation): each series' and split's point side by side
    # around the category's tick, never a line between categories
    slots = 2 * len(series)
    for n, name in enumerate(series):
        line = [r for r in rows if r.get("series", "all") == name]
        color = f"C{n}"
        for i, (split, key, mark) in enumerate(((rep.tune_split, "tune", "o-"),
                                                (rep.report_split, "report", "s--"))):
            if split is None:
                continue
            label = f"{split} ({key})" if name == "all" else f"{name}: {split} ({key})"
            shift = 0.0 if numeric else (2 * n + i - (slots - 1) / 2) * 0.6 / slots
            ax.plot([at[r["value"]] + shift for r in line], [r[key] for r in line],
                    mark if numeric else mark[0], color=color, label=label)
    if not numeric:
        ax.set_xticks([at[x] for x in xs], xs)
        ax.set_xlim(-0.5, len(xs) - 0.5)
    shown = rep.axis_name(axis)
    ax.set_xlabel(shown)
    # each value's point chosen on tune, its value on tune and (same point) on report
    ax.set_ylabel(f"{rep.primary} ({' / '.join(rep.splits)})")
    ax.set_title(f"{rep.primary} by {shown}: per value, the point best on {rep.tune_split}",
                 fontsize=9)
    ax.legend(fontsize=8)
    ax.grid(alpha=.3)
    return fig


def pareto_png(rep: Any, cost: str) -> str:
    """Base64 PNG of the primary metric against one other objective on the tune split: every
    point, the front as a step line, the chosen point starred."""
    import matplotlib

    matplotlib.use("Agg")
    from matplotlib import pyplot as plt

    par = rep.pareto
    directions = dict(par["objectives"])
    names = list(directions)
    q, c = names.index(rep.primary), names.index(cost)
    pts = par["points"]
    fig, ax = plt.subplots(figsize=(5, 3.2), dpi=90)
    ax.scatter([p["tune"][c] for p in pts], [p["tune"][q] for p in pts], s=14, alpha=.45,
               color="C0", label="points")
    front = sorted((p for p in pts if p["front"]), key=lambda p: (p["tune"][c], p["tune"][q]))
    ax.step([p["tune"][c] for p in front], [p["tune"][q] for p in front], "o-", where="post",
            color="C3", label=f"Pareto front ({len(front)})")
    for p in pts:
        if p["config_hash"] == rep.best["config_hash"]:
            ax.scatter([p["tune"][c]], [p["tune"][q]], marker="*", s=200, color="black",
                       zorder=4, label=f"chosen: {p['label']}")
        elif p["baseline"]:
            ax.scatter([p["tune"][c]], [p["tune"][q]], marker="D", s=40, color="grey",
                       zorder=4, label=f"baseline: {p['label']}")
    ax.set_xlabel(f"{cost} ({directions[cost]})")
    ax.set_ylabel(f"{rep.primary} ({rep.tune_split})")
    ax.set_title(f"{rep.primary} against {cost}")
    ax.legend(fontsize=7)
    ax.grid(alpha=.3)
    return _png_base64(fig)
