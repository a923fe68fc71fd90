"""Runs of prompt rows through the prefill stage, grouped to fit its largest graph."""
import torch

from engine.core.transfer import upload


def prefill_runs(stage, runs: list[tuple[int, int, torch.Tensor]], device) -> torch.Tensor:
    """(table row, first position, rows) runs -> each run's last hidden state."""
    last, group, tokens = [], [], 0
    for run in runs:
        if group and tokens + run[2].shape[0] > stage.buckets[-1]:
            last.append(_prefill_group(stage, group, device))
            group, tokens = [], 0
        group.append(run)
        tokens += run[2].shape[0]
    last.append(_prefill_group(stage, group, device))
    return torch.cat(last)


def _prefill_group(stage, group, device) -> torch.Tensor:
    counts = [rows.shape[0] for _, _, rows in group]
    table_rows = [row for (row, _, _), n in zip(group, counts) for _ in range(n)]
    positions = [pos for (_, start, _), n in zip(group, counts) for pos in range(start, start + n)]
    h = stage(None, torch.cat([rows for _, _, rows in group]), upload(table_rows, device=device),
              upload(positions, device=device))
    return h[upload(counts, device=device).cumsum(0) - 1]
