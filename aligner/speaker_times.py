"""An aligner with random weights answering as a speaker at an even pace: its own times put every word at its window's
end, so no word would settle before an utterance's audio ends and each window would re-align the utterance from its
start, a job flow unlike speech's. The forward still runs, for its device time; the times are a speaker's who says
each window's units from its start, a character in CHAR_S (a CJK character in CJK_S), the units past its audio at
its end."""
from .text import CJK, _in

CHAR_S, CJK_S = 0.064, 0.22     # bench/workload.py's 0.8 frames a character; Chinese at ~4.5 characters a second


class SpeakerTimes:
    def __init__(self, aligner):
        self.aligner = aligner

    def __getattr__(self, name: str):
        return getattr(self.aligner, name)

    def align_units(self, items, sample_rate: int, turn=None) -> list[list[tuple[float, float]]]:
        return self.finish(self.launch_units(items, sample_rate, turn))

    def launch_units(self, items, sample_rate: int, turn=None) -> tuple:
        times = [said(units, len(audio) / sample_rate) for audio, units in items]
        return self.aligner.launch_units(items, sample_rate, turn), times

    def finish(self, launched: tuple) -> list[list[tuple[float, float]]]:
        """The forward's classes read (its device wait and copy), not repaired into times: random weights' are
        seldom in order, and their repair (Python over every pair) is host work a trained model's in order skip."""
        if launched[0].forward is not None:
            launched[0].forward.read()
        return launched[1]


def said(units: list[str], seconds: float) -> list[tuple[float, float]]:
    out, t = [], 0.0
    for unit in units:
        cjk = all(_in(ch, CJK) for ch in unit)
        end = t + len(unit) * (CJK_S if cjk else CHAR_S)
        out.append((round(min(t, seconds), 3), round(min(end, seconds), 3)))
        t = end if cjk else end + CHAR_S      # a space after a word
    return out
