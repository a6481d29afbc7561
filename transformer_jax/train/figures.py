"""Where every figure's matplotlib comes from. Figures are written to files, never shown, so
the back-end is Agg: chosen here, once, before pyplot is imported (pyplot settles its back-end on
import, and an interactive one fails on a machine without a display). It sits in train/, the
lowest layer that both studies/ and explain/ may import."""
from __future__ import annotations

FILE_BACKEND = "Agg"  # raster images, no window


def file_pyplot():
    """matplotlib.pyplot, drawing to files only."""
    import matplotlib
    matplotlib.use(FILE_BACKEND)
    import matplotlib.pyplot as plt
    return plt
