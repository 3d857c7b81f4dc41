"""The loss curve of a run as a PNG (matplotlib, no display)."""

from __future__ import annotations

import json
from pathlib import Path


def read_log(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def plot_loss_curve(rows: list[dict], out: Path, title: str) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    steps = [r["step"] for r in rows]
    fig, (ax_loss, ax_acc) = plt.subplots(1, 2, figsize=(10, 3.6), dpi=110)
    ax_loss.plot(steps, [r["ce"] for r in rows], label="answer cross-entropy")
    ax_loss.plot(steps, [r["indexer_loss"] for r in rows], label="indexer KL", alpha=0.8)
    ax_loss.set_yscale("log")
    ax_loss.set_xlabel("optimizer step")
    ax_loss.set_ylabel("loss (nats)")
    ax_loss.legend()
    ax_loss.grid(alpha=0.3)
    for task in rows[-1]["answer_token_acc"]:
        values = [r["answer_token_acc"].get(task) for r in rows]
        ax_acc.plot(steps, [v if v is not None else float("nan") for v in values], label=task)
    ax_acc.set_xlabel("optimizer step")
    ax_acc.set_ylabel("answer-token accuracy (teacher-forced)")
    ax_acc.set_ylim(0, 1)
    ax_acc.legend(fontsize=8)
    ax_acc.grid(alpha=0.3)
    fig.suptitle(title)
    fig.tight_layout()
    fig.savefig(out)
    plt.close(fig)
