"""Side work's planned share of each frame: what the engine's step leaves of the frame, less a margin, so that a turn
never pushes the next step past its frame and every listener still gains audio at each step."""


class TurnPlan:
    def __init__(self, frame_s: float, fill: float = 0.9):
        self.frame_s, self.fill = frame_s, fill
        self.side_s = 0.0          # device seconds of side work per step, recent
        self.capacity = 1.0        # side work's device seconds per second, recent: what word contexts are admitted on
        self.turn_s = frame_s      # a turn's planned device seconds, recent: what side work sizes its slices to

    def after_step(self, step_s: float, side_s: float, most_s: float = float("inf")) -> float:
        """`step_s`: the engine's time per step, turns included; `side_s`: side work's device time since the last
        step; `most_s`: the longest turn the listeners allow now. -> the device seconds a turn may take now."""
        self.side_s = 0.9 * self.side_s + 0.1 * side_s            # as the engine's step time averages
        alone = max(step_s - self.side_s, 0.0)
        planned = min(max(self.fill * self.frame_s - alone, 0.0), max(most_s, 0.0))
        self.capacity = 0.8 * self.capacity + 0.2 * planned / max(alone + planned, 1e-6)
        if planned > 0:                                             # the size of a turn when one can come
            self.turn_s = 0.8 * self.turn_s + 0.2 * planned
        return planned
