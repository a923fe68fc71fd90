"""Start-up time of the real `serve`: cold (an empty --cache-dir), then warm (the cache kept), each from the process's
start to /health answering 200, with the phases its log reports (`start-up: NAME 12.3 s`, engine/core/startup.py).

python3 bench/startup_bench.py --serve "--dummy 1.7B-CustomVoice --max-frames 150 --dummy-aligner" --out DIR
writes DIR/startup_bench.json and DIR/serve-cold.log, DIR/serve-warm.log (--profile warm: DIR/profile-warm.txt, py-spy's
raw samples of every process of that start, for bench/pyspy_summary.py).

pip compiles a package's bytecode when it installs it. Where this Python finds none for torch (the lent GPU machines
run with PYTHONDONTWRITEBYTECODE=1 and torch without .pyc files: each process that imports it compiles its sources
again, 13-16 s for torch's compiler alone on an H200's host; elsewhere the cold start alone would pay it), the bench
compiles every folder on sys.path once into a prefix before the starts, as an install would have, so the starts time
what a user's do."""
import argparse
import compileall
import contextlib
import importlib.util
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from bench.load_server import ROOT, ServeProcess, device_name  # noqa: E402
from engine.core.startup import PREFIX  # noqa: E402

PHASE = re.compile(rf"{PREFIX} (.+?) (\d+(?:\.\d+)?) s(?: \((.*)\))?$")


def phases(log: str) -> list[dict]:
    found = (PHASE.search(line) for line in log.splitlines())
    return [dict(phase=m[1], seconds=float(m[2]), **({"detail": m[3]} if m[3] else {})) for m in found if m]


def profiler(pid: int, path: Path) -> subprocess.Popen | None:
    if not shutil.which("py-spy"):
        print("py-spy not found: no profile", file=sys.stderr)
        return None
    return subprocess.Popen(["py-spy", "record", "-p", str(pid), "--subprocesses", "--threads", "--idle", "-r", "20",
                             "--format", "raw", "-o", str(path)], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)


def start(serve_args: str, log: Path, timeout: float, profile: Path | None = None) -> dict:
    """One `serve` from its start to /health 200, then stopped; -> seconds to /health (None and the error where it
    never came) and the phases it logged."""
    t0 = time.monotonic()
    server = ServeProcess(serve_args, log)
    spy = profiler(server.proc.pid, profile) if profile else None
    result = dict(health_s=None)
    try:
        server.wait_ready(timeout)
        result["health_s"] = round(time.monotonic() - t0, 1)
    except RuntimeError as exc:                      # exited or too slow: the phases so far still say where it went
        result["error"] = str(exc)
    finally:
        if spy is not None:
            spy.send_signal(signal.SIGINT)
            spy.wait(60)
        server.stop()
    return dict(result, phases=phases(log.read_text()))


@contextlib.contextmanager
def installed_bytecode(package: str = "torch"):
    """-> "installed" where `package` has bytecode where Python looks; else every folder on sys.path compiled into a
    temporary prefix, which this process and serve (inheriting PYTHONPYCACHEPREFIX) read until exit."""
    spec = importlib.util.find_spec(package)
    if spec is None or not spec.origin:
        raise SystemExit(f"{package} is not installed here: serve needs it")
    if Path(importlib.util.cache_from_source(spec.origin)).exists():
        yield "installed"
        return
    was = os.environ.get("PYTHONPYCACHEPREFIX"), sys.pycache_prefix
    with tempfile.TemporaryDirectory(prefix="qwen-tts-bytecode-") as prefix:
        os.environ["PYTHONPYCACHEPREFIX"] = sys.pycache_prefix = prefix
        try:
            t0 = time.monotonic()
            for folder in {Path(p).resolve() for p in sys.path if p and Path(p).is_dir()}:
                compileall.compile_dir(folder, quiet=1, workers=0)
            done = f"compiled by the bench before the starts, in {time.monotonic() - t0:.0f} s"
            print(f"bytecode {done}", flush=True)
            yield done
        finally:
            sys.pycache_prefix = was[1]
            if was[0] is None:
                os.environ.pop("PYTHONPYCACHEPREFIX", None)
            else:
                os.environ["PYTHONPYCACHEPREFIX"] = was[0]


def commit() -> str | None:
    done = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=ROOT, capture_output=True, text=True)
    return done.stdout.strip() or None


def main(argv=None) -> dict:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--serve", required=True, metavar="ARGS", help="serve's arguments (no --port, no --cache-dir)")
    ap.add_argument("--out", required=True, help="folder for the JSON and the logs")
    ap.add_argument("--cache-dir", help="serve's --cache-dir, emptied first (default: a temporary folder, removed "
                                        "after; never under --out, whose files a device call sends back)")
    ap.add_argument("--timeout", type=float, default=300, help="seconds each start may take to /health")
    ap.add_argument("--profile", choices=("cold", "warm"), help="py-spy this start (every process, 20 Hz)")
    ap.add_argument("--label", help="the commit to record when this tree has no git (default: git's HEAD)")
    args = ap.parse_args(argv)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    cache = Path(args.cache_dir or tempfile.mkdtemp(prefix="qwen-tts-startup-"))
    shutil.rmtree(cache, ignore_errors=True)
    try:
        with installed_bytecode() as bytecode:
            runs = {}
            for name in ("cold", "warm"):
                runs[name] = start(f"{args.serve} --cache-dir {cache}", out / f"serve-{name}.log", args.timeout,
                                   out / f"profile-{name}.txt" if args.profile == name else None)
                print(f"{name}: /health after {runs[name]['health_s']} s", flush=True)
    finally:
        if not args.cache_dir:
            shutil.rmtree(cache, ignore_errors=True)
    result = dict(commit=args.label or commit(), date=time.strftime("%Y-%m-%d"), device=device_name(),
                  serve=args.serve, bytecode=bytecode, startup_cold_s=runs["cold"]["health_s"],
                  startup_warm_s=runs["warm"]["health_s"], runs=runs)
    (out / "startup_bench.json").write_text(json.dumps(result, indent=1))
    print(f"{result['device']} startup: startup_cold_s={result['startup_cold_s']} "
          f"startup_warm_s={result['startup_warm_s']}")            # the keys of BENCHMARKS.md's headline line
    return result


if __name__ == "__main__":
    main()
