"""Numbers as aligned text: what both printouts of the trace (`trace`'s five parts and
`pretrained_trace`'s four steps) lay out, below both, so that neither imports the other."""
from __future__ import annotations

import numpy as np

WIDTH = 7  # characters per number


def nums(values, width: int = WIDTH, digits: int = 2) -> str:
    return "".join(f"{float(v):{width}.{digits}f}" for v in np.ravel(values))


def table(rows, labels, columns=None, label_width: int = 12, **fmt) -> list[str]:
    """Aligned rows of numbers, each after its label; `columns` heads the number columns."""
    head = [" " * label_width + "".join(f"{c:>{WIDTH}}" for c in columns)] if columns else []
    return head + [f"{label:<{label_width}}{nums(row, **fmt)}" for label, row in zip(labels, rows)]
