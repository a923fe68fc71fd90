"""Every replica's /metrics as one Prometheus page: each family once, each of its series labelled `replica`."""
import re

SAMPLE = re.compile(r"([a-zA-Z_:][a-zA-Z0-9_:]*)(?:\{(.*)\})? (\S+)$")


def gauges(text: str) -> dict[str, float]:
    values = {}
    for line in text.splitlines():
        if (m := SAMPLE.match(line)) and m.group(2) is None:
            values[m.group(1)] = float(m.group(3))
    return values


def families(text: str) -> dict[str, list[str]]:
    out: dict[str, list[str]] = {}
    current = None
    for line in text.splitlines():
        if line.startswith("# HELP ") or line.startswith("# TYPE "):
            current = line.split()[2]
        if current is not None and line:
            out.setdefault(current, []).append(line)
    return out


def labelled(line: str, replica: str) -> str:
    m = SAMPLE.match(line)
    if m is None:
        return line
    labels = f'replica="{replica}"' + (f",{m.group(2)}" if m.group(2) else "")
    return f"{m.group(1)}{{{labels}}} {m.group(3)}"


def merge(pages: dict[str, str]) -> str:
    merged: dict[str, list[str]] = {}
    for replica, text in sorted(pages.items()):
        for name, lines in families(text).items():
            family = merged.setdefault(name, [line for line in lines if line.startswith("#")])
            family += [labelled(line, replica) for line in lines if not line.startswith("#")]
    return "".join(line + "\n" for lines in merged.values() for line in lines)
