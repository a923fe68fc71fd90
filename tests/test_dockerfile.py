"""The Dockerfile, checked where no Docker daemon runs: what it copies exists, it installs what the project needs."""
import re
import tomllib
from pathlib import Path

from packaging.requirements import Requirement
from packaging.utils import canonicalize_name

ROOT = Path(__file__).resolve().parent.parent
DOCKERFILE = (ROOT / "Dockerfile").read_text()


def pinned() -> dict[str, str]:
    lines = (ROOT / "deploy" / "requirements.txt").read_text().splitlines()
    reqs = [Requirement(line) for line in lines if line.strip() and not line.startswith("#")]
    return {canonicalize_name(r.name): str(r.specifier) for r in reqs}


def test_every_copied_path_exists():
    sources = [src for line in re.findall(r"^COPY (.+)$", DOCKERFILE, re.M) for src in line.split()[:-1]]
    assert sources and all((ROOT / src).exists() for src in sources), sources


def test_the_image_pins_every_runtime_dependency_and_installs_the_client_package():
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    deps = [Requirement(d) for d in project["dependencies"] + project["optional-dependencies"]["replicas"]]
    by_path = [d for d in deps if d.url]
    assert [canonicalize_name(d.name) for d in by_path] == ["qwen-tts-client"]
    assert "COPY integrations integrations" in DOCKERFILE
    assert "pip install --no-deps ./integrations ." in DOCKERFILE
    pins = pinned()
    missing = [d.name for d in deps if not d.url and canonicalize_name(d.name) not in pins]
    assert not missing, f"deploy/requirements.txt lacks {missing}"
    assert all(spec.startswith("==") for spec in pins.values()), pins


def test_the_entrypoint_is_the_projects_serve_command():
    scripts = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["scripts"]
    entry = re.search(r'^ENTRYPOINT \["([^"]+)", "serve"', DOCKERFILE, re.M)
    assert entry and entry[1] in scripts


def test_the_compile_cache_is_a_volume_in_the_image_and_on_every_gpu_pod():
    """A restarted container or an added replica starts warm (README: Start-up)."""
    cache = re.search(r"QWEN_TTS_GATEWAY_CACHE=(\S+)", DOCKERFILE)[1]
    volumes = re.search(r"^VOLUME (\[.*\])$", DOCKERFILE, re.M)[1]
    assert any(cache.startswith(v) for v in re.findall(r'"([^"]+)"', volumes)), (cache, volumes)
    rayservice = (ROOT / "deploy" / "rayservice.yaml").read_text()
    workers = rayservice[rayservice.index("workerGroupSpecs"):]
    mount = re.search(r"\{name: compile-cache, mountPath: (\S+)\}", workers)
    assert mount and cache.startswith(mount[1]) and "claimName: qwen-tts-compile-cache" in workers
    assert "name: qwen-tts-compile-cache" in rayservice and "ReadWriteMany" in rayservice
