"""Each front end's metrics for every front end's /metrics, straight between them: a JSON file each, rewritten every
second in the folder of the engine core's socket (the core never sees them)."""
import json
import os
import time
from pathlib import Path

STALE_S = 5.0              # a report this old is a front end that is gone


class FrontendReports:
    def __init__(self, address: str, name: str):
        self.folder = Path(address.removeprefix("ipc://")).parent
        self.mine = self.folder / f"frontend-{name}.json"

    def publish(self, report: dict) -> None:
        staged = self.mine.with_suffix(".tmp")
        staged.write_text(json.dumps(report))
        os.replace(staged, self.mine)                 # readers never see half a report

    def others(self) -> list[dict]:
        reports, now = [], time.time()
        for path in self.folder.glob("frontend-*.json"):
            try:
                if path != self.mine and now - path.stat().st_mtime < STALE_S:
                    reports.append(json.loads(path.read_text()))
            except (OSError, ValueError):             # gone or replaced meanwhile
                continue
        return reports

    def withdraw(self) -> None:
        self.mine.unlink(missing_ok=True)
