"""The side-work hook's rule: a turn after a step only when the listeners' slack past the reserve holds 1.5x the
cost asked for; the engine readies itself (`settle`) only for a turn it gives, and the turn's budget is what the
listeners can spare."""
import threading
import time

from engine.core.side_work import SideWork


def test_a_turn_is_offered_only_from_enough_slack_and_carries_what_the_listeners_can_spare():
    side_work, settled, seen = SideWork(timeout_s=5), [], []
    assert side_work.offer(10.0, 0.1, lambda: settled.append(1)) is None and not settled   # no one waits

    def side():
        with side_work.turn(0.2) as turn:
            seen.append((turn.after, turn.budget_s))
            turn.end("queued")
    thread = threading.Thread(target=side)
    thread.start()
    while side_work.wanted is None:
        time.sleep(0.001)
    assert side_work.offer(0.35, 0.1, lambda: settled.append(1)) is None and not settled   # (0.35-0.1)/1.5 < 0.2
    assert side_work.offer(0.46, 0.1, lambda: settled.append(1) or "step") == "queued"
    thread.join(5)
    assert settled == [1] and seen[0][0] == "step" and abs(seen[0][1] - 0.24) < 1e-9


def test_a_stream_waiting_for_text_holds_the_turns_while_its_first_frames_wait_to_be_sent():
    from engine.api.request import SynthesisRequest
    from engine.core.scheduler import Scheduler
    from engine.core.sequence import Sequence
    from engine.models.base import AudioFormat

    audio = AudioFormat(num_codebooks=1, samples_per_frame=1920, sample_rate=24000)      # 80 ms frames
    scheduler = Scheduler(None, 4, 256, kv=None, admission=None, max_context=1024)
    playing, starting = (Sequence(i, SynthesisRequest(text_complete=False), None, 0, "", audio) for i in range(2))
    playing.playout.listener.add(10 * 24000, 100.0)                                    # 10 s sent at t=100
    scheduler.running = [playing, starting]
    assert starting.text.ready() is False
    assert abs(scheduler.slack_s(101.0) - 9.0) < 1e-9          # a stream with no audio yet and no text: not a listener
    starting.playout.unread = 1                                # its first frame in flight: it is about to play
    assert scheduler.slack_s(101.0) == 0.0
    starting.playout.unread, starting.playout.pending = 0, [("codes", "pcm")]    # read, not sent: one frame ahead
    assert abs(scheduler.slack_s(101.0) - 0.08) < 1e-9
