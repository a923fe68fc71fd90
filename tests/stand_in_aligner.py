"""A deterministic stand-in for the forced aligner, whose word times follow the text, for tests of what the
gateway and its clients do with word timestamps."""
import threading

import numpy as np


class StandIn:
    """Deterministic aligner: each unit gets a share of the window's audio proportional to its length (plus one
    for the gap). A unit 'fail' makes the batch raise; 'slow' stalls it until `release` is set."""
    name, slices = "stand-in", 1

    def __init__(self):
        self.stalled, self.release = threading.Event(), threading.Event()
        self.units: list[str] = []          # every unit aligned, in order

    def align_units(self, items, sample_rate, turn=None):
        out = []
        self.units += [u for _, units in items for u in units]
        for audio, units in items:
            if "fail" in units:
                raise RuntimeError("stand-in failure")
            if "slow" in units:
                self.stalled.set()
                self.release.wait(60)
            edges = np.cumsum([0] + [len(u) + 1 for u in units]) * (len(audio) / sample_rate) / (sum(map(len, units)) + len(units))
            out.append([(round(float(a), 3), round(float(b) - (b - a) / (len(u) + 1), 3))
                        for u, a, b in zip(units, edges[:-1], edges[1:])])
        return out
