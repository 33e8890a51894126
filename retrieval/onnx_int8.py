"""Run the bundled MiniLM's int8 weight matrices as int8 arithmetic (the query session).

The packaged model stores each weight matrix as int8 values ``q`` with one float scale per
output column and computes ``x @ (float(q) * scale)``. onnxruntime folds that product into a
float32 matrix when it loads the model, so every call reads ~88 MB of float32 weights: for a
short query the matrix products are memory-bound, ~4 of the ~5 ms a question costs on one
core (ORT's profiler, DECISIONS.md "Query embedding in int8").

``int8_matmuls`` rewrites each such ``Cast → Mul(scale) → MatMul`` into one ``MatMulNBits``
(onnxruntime's contrib operator for block-quantised weights) holding the same int8 values
and scales, with ``accuracy_level=4``: the activations are quantised to int8 per block of
``BLOCK`` inputs and the product runs on int8 kernels. Only the activations' rounding is new:
a vector from the rewritten model has a cosine of >= 0.999 with the float32 one (0.9992 at the
lowest over 1,600 LoCoMo questions and memories; a one-word text can fall to ~0.996).
``tests/retrieval/test_embedders.py`` holds the floors.

Imported on first use (``retrieval.embedders``); nothing is written to disk.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

# Activations are quantised per block of this many inputs. Measured on one core over 800 LoCoMo
# questions (time per question; lowest cosine with float32 over them and 800 LoCoMo memories):
# float32 6.5 ms; 32 → 4.3 ms (0.9996); 64 → 3.9 ms (0.9992); 128 → 3.8 ms (0.9986).
BLOCK = 64
ACCURACY_INT8 = 4  # MatMulNBits accuracy_level: int8 activations and int8 dot products


def int8_matmuls(model: bytes, *, accuracy_level: int = ACCURACY_INT8) -> tuple[bytes, int]:
    """The model with its int8 weight products as ``MatMulNBits``; (serialised model, products rewritten).

    ``accuracy_level=0`` keeps float32 activations (the same vectors as the original model, and
    slower than it: a check of the rewrite, not a setting to run with).
    """
    proto = onnx.load_from_string(model)
    graph = proto.graph
    initializers = {tensor.name: tensor for tensor in graph.initializer}
    producer = {output: node for node in graph.node for output in node.output}
    readers: dict[str, int] = {}
    for node in graph.node:
        for name in node.input:
            readers[name] = readers.get(name, 0) + 1

    nodes, dropped, added = [], set(), []
    for node in graph.node:
        weights = _int8_weights(node, producer, initializers, readers)
        if weights is None:
            nodes.append(node)
            continue
        cast, scale_node, quantised, scales = weights
        tensors = _blocks(node.name, quantised, scales)
        added += tensors
        nodes.append(
            helper.make_node(
                "MatMulNBits",
                [node.input[0], *(tensor.name for tensor in tensors)],
                list(node.output),
                name=f"{node.name}_int8",
                domain="com.microsoft",
                K=quantised.shape[0],
                N=quantised.shape[1],
                bits=8,
                block_size=BLOCK,
                accuracy_level=accuracy_level,
            )
        )
        dropped |= {cast.name, scale_node.name}

    kept = [node for node in nodes if node.name not in dropped]
    del graph.node[:]
    graph.node.extend(kept)
    used = {name for node in kept for name in node.input}
    tensors = [tensor for tensor in graph.initializer if tensor.name in used] + added
    del graph.initializer[:]
    graph.initializer.extend(tensors)
    if not any(opset.domain == "com.microsoft" for opset in proto.opset_import):
        proto.opset_import.append(helper.make_opsetid("com.microsoft", 1))
    return proto.SerializeToString(), len(added) // 3


def _int8_weights(
    node: Any, producer: dict[str, Any], initializers: dict[str, Any], readers: dict[str, int]
) -> tuple[Any, Any, np.ndarray, np.ndarray] | None:
    """(cast, mul, int8 weights (K, N), per-column scales (N,)) when ``node`` is ``x @ (float(q) * scale)``."""
    if node.op_type != "MatMul" or len(node.input) != 2:
        return None
    scale_node = producer.get(node.input[1])
    if scale_node is None or scale_node.op_type != "Mul" or readers.get(scale_node.output[0]) != 1:
        return None
    cast = producer.get(scale_node.input[0])
    scale_name = scale_node.input[1]
    if cast is None or cast.op_type != "Cast" or readers.get(cast.output[0]) != 1:
        return None
    source = initializers.get(cast.input[0])
    if source is None or source.data_type != TensorProto.INT8 or scale_name not in initializers:
        return None
    quantised = numpy_helper.to_array(source)
    scales = numpy_helper.to_array(initializers[scale_name]).astype(np.float32)
    if quantised.ndim != 2 or scales.size != quantised.shape[1]:
        return None
    if not (node.name and cast.name and scale_node.name):  # nodes are told apart by name below
        return None
    return cast, scale_node, quantised, scales.reshape(-1)


def _blocks(name: str, quantised: np.ndarray, scales: np.ndarray) -> list[Any]:
    """MatMulNBits' B, scales and zero points for int8 weights (K, N) with one scale per column.

    MatMulNBits stores unsigned values per output column in blocks of ``BLOCK`` inputs with a
    scale and a zero point per block: ``q + 128`` with zero point 128 is ``q`` exactly, and
    every block of a column repeats the column's scale. Padding (K not a multiple of the
    block) holds the zero point, i.e. a weight of 0.
    """
    inputs, outputs = quantised.shape
    blocks = -(-inputs // BLOCK)
    unsigned = (quantised.astype(np.int16) + 128).astype(np.uint8).T
    unsigned = np.pad(unsigned, ((0, 0), (0, blocks * BLOCK - inputs)), constant_values=128)
    return [
        numpy_helper.from_array(unsigned.reshape(outputs, blocks, BLOCK), f"{name}_int8_B"),
        numpy_helper.from_array(np.repeat(scales[:, np.newaxis], blocks, axis=1).reshape(-1), f"{name}_int8_scales"),
        numpy_helper.from_array(np.full(outputs * blocks, 128, dtype=np.uint8), f"{name}_int8_zero_points"),
    ]
