"""The aligner beside the engine's steps (on a GPU): each forward runs whole at once, waiting for no turn, and a new
context gets words while the aligner stays within the share of the frame the steps leave."""
import numpy as np

from aligner import AlignmentService
from aligner.beside import Beside
from stand_in_aligner import StandIn


class Sliced(StandIn):
    """Asks for its forward's slices in turns, as the real aligner does."""
    slices = 4

    def __init__(self):
        super().__init__()
        self.taken = []

    def align_units(self, items, sample_rate, turn=None):
        with turn([1.0] * self.slices) as (count, t):
            self.taken.append((count, t.budget_s, t.after))
        return super().align_units(items, sample_rate)


def test_a_forward_beside_the_steps_runs_all_its_slices_in_one_turn_given_at_once():
    aligner, step_ms = Sliced(), [20.0]
    service = AlignmentService(aligner, side_work=Beside(lambda: step_ms[0], 0.08), gather=0).start()
    try:
        spans = service.submit(np.zeros(24000, np.float32), ["one", "two"]).result(timeout=10)
    finally:
        service.close()
    assert len(spans) == 2 and aligner.taken == [(4, float("inf"), None)]


def test_words_are_admitted_on_the_share_of_the_frame_the_steps_leave():
    step_ms = [20.0]
    service = AlignmentService(StandIn(), side_work=Beside(lambda: step_ms[0], 0.08), gather=0)
    assert service.side_work.plan.capacity == 0.75
    assert service.admit().result() is None
    step_ms[0] = 80.0                                   # the steps fill the frame
    assert "no time left" in service.admit().result()
