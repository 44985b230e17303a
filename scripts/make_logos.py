"""Draw msnb's kernel logos (kernel/logo-32x32.png, logo-64x64.png).

Run once with `python scripts/make_logos.py`; the PNGs are committed. The mark is
a falling loss curve on MindSpore-ish blue, so the kernel is recognisable in
VS Code's and JupyterLab's kernel pickers.
"""

from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402

HERE = Path(__file__).resolve().parent.parent / "kernel"


def draw(size: int) -> None:
    fig = plt.figure(figsize=(1, 1), dpi=size)
    ax = fig.add_axes([0, 0, 1, 1])
    ax.set_xlim(0, 1)
    ax.set_ylim(0, 1)
    ax.axis("off")
    ax.add_patch(plt.Rectangle((0, 0), 1, 1, color="#1f5fbf"))
    x = np.linspace(0.12, 0.88, 60)
    y = 0.18 + 0.62 * np.exp(-4.0 * (x - 0.12))
    ax.plot(x, y, color="white", linewidth=max(1.5, size / 14), solid_capstyle="round")
    ax.plot([0.12, 0.12, 0.88], [0.88, 0.12, 0.12], color="#bcd3f5", linewidth=max(1.0, size / 32))
    fig.savefig(HERE / f"logo-{size}x{size}.png", dpi=size)
    plt.close(fig)


if __name__ == "__main__":
    for s in (32, 64):
        draw(s)
