"""Side work's planned share of each frame: what the engine's step leaves of the frame, less a margin, so that a turn
never pushes the next step past its frame and every listener still gains audio at each step."""
SPAN_S = 0.5      # the capacity is the share over about this long: a step's own swings are not what words can use


class TurnPlan:
    def __init__(self, frame_s: float, fill: float = 0.9):
        self.frame_s, self.fill = frame_s, fill
        self.side_s = 0.0          # device seconds of side work per step, recent
        self.capacity = 1.0        # side work's device seconds per second, recent: what word contexts are admitted on
        self.turn_s = frame_s      # a turn's planned device seconds, recent: what side work sizes its slices to
        self.steps = 0

    def alone(self, step_s: float) -> float:
        """The engine's step without the turns' device time."""
        return max(step_s - self.side_s, 0.0)

    def after_step(self, step_s: float, side_s: float, most_s: float = float("inf")) -> float:
        """`step_s`: the engine's time per step, turns included; `side_s`: side work's device time since the last
        step; `most_s`: the longest turn the listeners allow now. -> the device seconds a turn may take now."""
        self.side_s = 0.9 * self.side_s + 0.1 * side_s            # as the engine's step time averages
        alone = self.alone(step_s)
        planned = min(max(self.fill * self.frame_s - alone, 0.0), max(most_s, 0.0))
        self.steps += 1                                             # a plain mean until SPAN_S is covered
        weight = max(min(1.0, (alone + planned) / SPAN_S), 1 / self.steps)
        self.capacity += weight * (planned / max(alone + planned, 1e-6) - self.capacity)
        if planned > 0:                                             # the size of a turn when one can come
            self.turn_s = 0.8 * self.turn_s + 0.2 * planned
        return planned
