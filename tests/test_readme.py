"""README.md stays true: its install commands are what CI (`.ci/run` -> tests/run.sh) and deploy/ run, its serve
synopsis is `serve --help`'s, its Python API snippet runs as written."""
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from bench.load_server import ROOT
from gateway.cli import build_parser

README = (ROOT / "README.md").read_text()
RUN_SH = (ROOT / "tests" / "run.sh").read_text()


def section(title: str) -> str:
    start = README.index(f"\n## {title}\n")
    return README[start:README.find("\n## ", start + 1)]


def fenced(text: str, lang: str = "") -> list[str]:
    return re.findall(rf"```{lang}\n(.*?)```", text, re.S)


def test_readme_installs_the_torch_ci_and_the_container_pin():
    pins = {re.search(r"torch==([\d.]+)", text).group(1) for text in (
        RUN_SH, (ROOT / "deploy" / "requirements.txt").read_text(), section("Install"), section("Running on a GPU"))}
    assert len(pins) == 1, pins
    assert "--index-url https://download.pytorch.org/whl/cpu" in section("Install")
    cuda = re.search(r"nvidia/cuda:(\d+)\.(\d+)", (ROOT / "Dockerfile").read_text()).groups()
    gpu = section("Running on a GPU")
    assert f"whl/cu{''.join(cuda)}" in gpu and f"CUDA {'.'.join(cuda)}" in gpu


def test_readme_installs_the_project_and_client_as_ci_does():
    assert "bash tests/run.sh" in (ROOT / ".ci" / "run").read_text() and "bash tests/run.sh" in section("Tests")
    install = fenced(section("Install"), "bash")[0]
    assert "python3 -m venv" in install and "pip install -e ." in install and '-e ".[' in RUN_SH
    client = re.search(r'"(qwen-tts-client\[[a-z,]+\] @ file://\$PWD/integrations)"', RUN_SH).group(1)
    assert f'pip install "{client}"' in section("Agent frameworks")
    assert not re.search(r'pip install "qwen-tts-client\[[a-z,]+\]"', README)      # not published: no bare name
    assert "once on PyPI" not in README and "from\nPyPI" not in README and "from PyPI" not in section("Tests")
    extras = re.findall(r'pip install -e "\.\[([a-z]+)\]"', README)
    pyproject = (ROOT / "pyproject.toml").read_text()
    assert extras and all(re.search(rf"^{e} = \[", pyproject, re.M) for e in extras)


def test_readme_container_entrypoint_is_the_dockerfiles():
    entry = re.search(r"ENTRYPOINT \[(.*)\]", (ROOT / "Dockerfile").read_text()).group(1)
    words = " ".join(re.findall(r'"([^"]+)"', entry))
    assert f"The entrypoint is `{words}`" in README


def test_readme_serve_synopsis_is_serve_help():
    synopsis = fenced(section("Serve"))[0]
    parser = build_parser()[1]["serve"]
    options = {a.option_strings[-1]: a for a in parser._actions if a.option_strings and a.option_strings[0] != "-h"}
    shown = dict(re.findall(r"(--[a-z][a-z-]*)(?: ([^\s\[\]|]+))?", synopsis))
    assert set(shown) == set(options), set(shown) ^ set(options)
    for flag, value in shown.items():
        default = options[flag].default
        if isinstance(default, (int, float)) and not isinstance(default, bool):
            assert float(value) == default, (flag, value, default)
        elif isinstance(default, str) and default:
            assert value == default, (flag, value, default)
        if options[flag].metavar:
            assert value == options[flag].metavar.split("|")[0], flag
        elif options[flag].choices and default is None:
            assert "|".join(options[flag].choices) in synopsis, flag
    formatter = parser._get_formatter()
    for flag, action in options.items():
        assert action.help, flag                                        # --host and --port included
        if action.default not in (None, False, []):
            assert "default" in formatter._get_help_string(action), flag


@pytest.mark.slow                                   # a fresh Python loads the engine
def test_readme_python_api_snippet_runs_as_written(tmp_path):
    code = fenced(section("Python API"), "python")[0]
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(ROOT), str(ROOT / "integrations")]))
    result = subprocess.run([sys.executable, "-c", code], cwd=tmp_path, env=env, capture_output=True, text=True,
                            timeout=300)
    assert result.returncode == 0, result.stderr
    assert Path(tmp_path / "hello.wav").stat().st_size > 24000
