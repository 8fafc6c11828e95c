"""Figures as the repository keeps them: PNG in a palette of 256 colours, about a third of
matplotlib's full-colour file (a 2,029 x 925 trajectories figure: 141 kB against 462 kB), and
SVG beside it where asked. The layout is worked out once, for every file written."""

from __future__ import annotations

import io
from pathlib import Path

from matplotlib.figure import Figure
from PIL import Image


def save_figure(figure: Figure, png: Path, svg: Path | None = None) -> None:
    """Write `figure` to `png` as a 256-colour PNG at 120 dpi (plots use few colours), and to
    `svg` as SVG when given."""
    figure.draw_without_rendering()  # the layout (constrained or tight), then kept as it is
    figure.set_layout_engine("none")
    buffer = io.BytesIO()
    figure.savefig(buffer, format="png", dpi=120, bbox_inches="tight")
    full = Image.open(buffer).convert("RGB")
    full.quantize(colors=256, method=Image.Quantize.MEDIANCUT, dither=Image.Dither.NONE).save(
        png, optimize=True
    )
    if svg is not None:
        figure.savefig(svg, bbox_inches="tight")
