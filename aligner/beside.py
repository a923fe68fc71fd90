"""The aligner's forwards beside the engine's steps: launched at once on the aligner's own lowest-priority stream (the
steps' is the highest), so an utterance's opening words wait for no turn between steps. Each forward is timed, and a
new context gets words while the aligner's recent device time stays within the share of the frame the steps leave."""
from contextlib import contextmanager

from engine.core.side_work import Turn


class Beside:
    def __init__(self, step_ms, frame_s: float):
        """`step_ms`: the engine's recent step time, read on the aligner's threads (a callable)."""
        self.plan = IdleShare(step_ms, frame_s)

    def attach(self) -> None:
        """The engine plans no turns: it is never told."""

    @contextmanager
    def turn(self, cost_s: float):
        turn = Turn(self, True)                 # the whole forward at once, on the aligner's stream
        try:
            yield turn
        finally:
            turn.end()

    @staticmethod
    def _end(turn: Turn, done, started) -> None:
        if not turn.ended:
            turn.done, turn.started, turn.ended = done, started, True


class IdleShare:
    turn_s = float("inf")              # no turn bounds a batch's forward

    def __init__(self, step_ms, frame_s: float):
        self.step_ms, self.frame_s = step_ms, frame_s

    @property
    def capacity(self) -> float:
        """The device seconds a second the steps leave: what words are admitted on."""
        return max(0.0, 1.0 - self.step_ms() / 1000 / self.frame_s)
