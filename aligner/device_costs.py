"""What the aligner's forwards cost the device, learnt from the turns they took (a slice's fixed time, its time per
GFLOP, the time per aligned audio-second past the slices' fixed), and the audio a batch may hold for it."""
TURNS = 2.5               # a batch's forward spans about this many planned turns (its first slice, up to 30%, fits one)


class DeviceCosts:
    def __init__(self, rate: int, max_samples: int):
        """`rate`: the jobs' audio's."""
        self.rate, self.max_samples = rate, max_samples
        self.fixed_s, self.per_gflop_s = 0.0005, 6e-6
        self.marginal_s = 0.0002

    def of_slices(self, weights: list[float]) -> list[float]:
        """Each slice's device seconds, from its GFLOP."""
        return [self.fixed_s + self.per_gflop_s * w for w in weights]

    def batch_samples(self, turn_s: float, slices: int) -> int:
        """Audio a batch of forwards in `slices` may hold: within TURNS planned turns of `turn_s` (larger batches
        spread the slices' fixed time; a job waits for one batch before its own)."""
        seconds = max(TURNS * turn_s - slices * self.fixed_s, 0.0) / self.marginal_s
        return int(min(self.max_samples, seconds * self.rate))

    def per_audio_s(self, batch_samples: int, slices: int) -> float:
        """Device seconds a second of audio costs, in batches of `batch_samples`."""
        return self.marginal_s + slices * self.fixed_s * self.rate / max(batch_samples, 1)

    def learn(self, measured: list[tuple[float, float, int]], audio_s: float, complete: bool) -> None:
        """`measured`: (device seconds, GFLOP, slices) of a batch's timed turns; `complete`: every turn timed."""
        for seconds, gflop, n in measured:
            self.per_gflop_s = 0.8 * self.per_gflop_s + 0.2 * max(0.0, seconds - n * self.fixed_s) / max(gflop, 1e-3)
        if measured and complete:
            spent, fixed = sum(m[0] for m in measured), self.fixed_s * sum(m[2] for m in measured)
            self.marginal_s = 0.8 * self.marginal_s + 0.2 * max(spent - fixed, 0.0) / max(audio_s, 1e-3)
