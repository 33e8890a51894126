"""Run the bundled MiniLM's int8 weight matrices as int8 arithmetic (the route every text takes).

The packaged model stores each weight matrix as int8 values ``q`` with one float scale per
output column and computes ``x @ (float(q) * scale)``. onnxruntime folds that product into a
float32 matrix when it loads the model, so every call reads ~88 MB of float32 weights: for a
short query the matrix products are memory-bound, ~4 of the ~5.7 ms of a question's node time
on one core (ORT's profiler).

``int8_matmuls`` rewrites each such ``Cast → Mul(scale) → MatMul`` into one
``DynamicQuantizeMatMul`` (an onnxruntime contrib operator) that takes the same int8 matrix and
the same per-column scales: the activations are quantised to uint8 on the fly (one scale per
call) and the product runs on int8 kernels over 22 MB. Only the activations' rounding is new: a
query's vector has a cosine of >= 0.98 with the float32 one (0.984 at the lowest over 2,400 LoCoMo
questions, observations and turns, 0.994 at the median), and retrieval measured the same with
either (LoCoMo, golden and everyday; docs/adr/0029-int8-query-route.md).

Two smaller rewrites follow, each computing the same formula: each
product's bias ``Add`` goes into the product as its bias input, and each feed-forward GELU spelt
out in five nodes (``x * (0.5 * (1 + erf(x / sqrt 2)))``) becomes onnxruntime's one ``Gelu``
node. Both remove nodes whose fixed cost a short text pays on every run (60 of them). Then each layer's
attention, exported as ~25 nodes (reshapes, transposes, two products, the additive mask with its
NaN guard, softmax), becomes onnxruntime's ``MultiHeadAttention`` over the same query, key and
value products, with the attention mask as its key padding mask. Rounding can differ in the last
bits, and int8 re-quantises each product's input, so vectors move slightly (cosine >= 0.994 to
the route without these rewrites; docs/adr/0030-one-int8-route-for-every-text.md).

Imported on first use (``retrieval.embedders``); nothing is written to disk.
"""

from __future__ import annotations

import re
from typing import Any

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper


def int8_matmuls(model: bytes) -> tuple[bytes, int]:
    """The model with its int8 weight products as ``DynamicQuantizeMatMul`` (with their biases), its
    GELUs as ``Gelu`` and its attentions as ``MultiHeadAttention``; (serialised model, products rewritten)."""
    proto = onnx.load_from_string(model)
    graph = proto.graph
    initializers = {tensor.name: tensor for tensor in graph.initializer}
    producer = {output: node for node in graph.node for output in node.output}
    readers = {name: len(found) for name, found in _readers(list(graph.node)).items()}

    nodes, dropped, scales = [], set(), []
    for node in graph.node:
        found = _int8_weights(node, producer, initializers, readers)
        if found is None:
            nodes.append(node)
            continue
        cast, scale_node, weights, scale = found
        scales.append(numpy_helper.from_array(scale, f"{node.name}_int8_scale"))
        nodes.append(
            helper.make_node(
                "DynamicQuantizeMatMul",
                [node.input[0], weights, scales[-1].name],
                list(node.output),
                name=f"{node.name}_int8",
                domain="com.microsoft",
            )
        )
        dropped |= {cast.name, scale_node.name}

    graph.initializer.extend(scales)
    kept = [node for node in nodes if node.name not in dropped]
    kept = _fuse_gelus(_fold_biases(kept, initializers), initializers)
    kept = _fuse_attention(kept, initializers, graph)
    del graph.node[:]
    graph.node.extend(kept)
    used = {name for node in kept for name in node.input}
    tensors = [tensor for tensor in graph.initializer if tensor.name in used]
    del graph.initializer[:]
    graph.initializer.extend(tensors)
    if not any(opset.domain == "com.microsoft" for opset in proto.opset_import):
        proto.opset_import.append(helper.make_opsetid("com.microsoft", 1))
    return proto.SerializeToString(), len(scales)


def _int8_weights(
    node: Any, producer: dict[str, Any], initializers: dict[str, Any], readers: dict[str, int]
) -> tuple[Any, Any, str, np.ndarray] | None:
    """(cast, mul, int8 (K, N) matrix name, per-column scales (N,)) when ``node`` is ``x @ (float(q) * scale)``."""
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
    scales = numpy_helper.to_array(initializers[scale_name]).astype(np.float32)
    if len(source.dims) != 2 or scales.size != source.dims[1]:
        return None
    if not (node.name and cast.name and scale_node.name):  # nodes are told apart by name below
        return None
    return cast, scale_node, source.name, scales.reshape(-1)


def _readers(nodes: list[Any]) -> dict[str, list[Any]]:
    found: dict[str, list[Any]] = {}
    for node in nodes:
        for name in node.input:
            found.setdefault(name, []).append(node)
    return found


def _fold_biases(nodes: list[Any], initializers: dict[str, Any]) -> list[Any]:
    """Each ``DynamicQuantizeMatMul`` read only by ``Add(product, bias)``, the bias a 1-D float
    initializer, takes the bias as its fifth input (no zero point: the weights are symmetric) and
    the Add's output; the Add goes."""
    readers, dropped = _readers(nodes), set()
    for node in nodes:
        if node.op_type != "DynamicQuantizeMatMul" or len(node.input) != 3:
            continue
        found = readers.get(node.output[0], [])
        if len(found) != 1 or found[0].op_type != "Add" or len(found[0].input) != 2:
            continue
        add = found[0]
        bias = add.input[1] if add.input[0] == node.output[0] else add.input[0]
        tensor = initializers.get(bias)
        if tensor is None or tensor.data_type != TensorProto.FLOAT or len(tensor.dims) != 1:
            continue
        node.input.extend(["", bias])
        node.output[0] = add.output[0]
        dropped.add(id(add))
    return [node for node in nodes if id(node) not in dropped]


def _fuse_gelus(nodes: list[Any], initializers: dict[str, Any]) -> list[Any]:
    """``Mul(x, Mul(0.5, Add(Erf(Div(x, sqrt 2)), 1)))``, in either operand order and each
    intermediate read once, becomes ``Gelu(x)`` (com.microsoft: ``0.5 x (1 + erf(x / sqrt 2))``)."""
    readers, dropped = _readers(nodes), set()
    producer = {output: node for node in nodes for output in node.output}

    def constant(name: str, value: float) -> bool:
        tensor = initializers.get(name)
        return (
            tensor is not None
            and numpy_helper.to_array(tensor).size == 1
            and bool(np.isclose(float(numpy_helper.to_array(tensor).reshape(-1)[0]), value, rtol=1e-6))
        )

    def only_reader(node: Any, op_type: str) -> Any:
        found = readers.get(node.output[0], [])
        return found[0] if len(found) == 1 and found[0].op_type == op_type else None

    def other(node: Any, name: str) -> str | None:
        rest = [i for i in node.input if i != name]
        return rest[0] if len(node.input) == 2 and len(rest) == 1 else None

    for erf in [node for node in nodes if node.op_type == "Erf"]:
        div = producer.get(erf.input[0])
        if div is None or div.op_type != "Div" or not constant(div.input[1], float(np.sqrt(2.0))):
            continue
        x = div.input[0]
        if len(readers.get(div.output[0], [])) != 1 or (plus_one := only_reader(erf, "Add")) is None:
            continue
        if not constant(other(plus_one, erf.output[0]) or "", 1.0) or (half := only_reader(plus_one, "Mul")) is None:
            continue
        if not constant(other(half, plus_one.output[0]) or "", 0.5) or (gelu := only_reader(half, "Mul")) is None:
            continue
        if other(gelu, half.output[0]) != x:
            continue
        gelu.op_type, gelu.domain = "Gelu", "com.microsoft"
        del gelu.input[:]
        gelu.input.append(x)
        dropped |= {id(div), id(erf), id(plus_one), id(half)}
    return [node for node in nodes if id(node) not in dropped]


# The attention products' biases name their layer and role in the packaged graph.
_ATTENTION_ROLE = re.compile(r"layer\.(\d+)\.attention\.(self\.query|self\.key|self\.value|output\.dense)\.bias$")
_MASK_INPUT = "attention_mask"


def _fuse_attention(nodes: list[Any], initializers: dict[str, Any], graph: Any) -> list[Any]:
    """Each layer's self-attention, between its query/key/value products and the output product's
    input, becomes one ``MultiHeadAttention`` (com.microsoft) with the attention mask as its key
    padding mask. A layer is left as it is unless the attention is computed from the attention mask,
    its nodes in between hold one Softmax, nothing else reads what they compute, and the two
    scalar scalings of query and key multiply to 1 / sqrt(head size) (the operator's own scale).
    The nodes left without readers go; the rest are put back in topological order."""
    if _MASK_INPUT not in {value.name for value in graph.input}:
        return nodes
    producer = {output: node for node in nodes for output in node.output}
    readers = _readers(nodes)
    layers: dict[str, dict[str, Any]] = {}
    for node in nodes:
        found = (
            _ATTENTION_ROLE.search(node.input[4])
            if node.op_type == "DynamicQuantizeMatMul" and len(node.input) == 5
            else None
        )
        if found:
            layers.setdefault(found.group(1), {})[found.group(2)] = node
    mask = helper.make_node(
        "Cast", [_MASK_INPUT], ["attention_mask_int32"], name="attention_mask_int32", to=TensorProto.INT32
    )
    fused, dropped = [], set()
    for layer, role in sorted(layers.items()):
        if set(role) != {"self.query", "self.key", "self.value", "output.dense"}:
            continue
        inputs = [role[name].output[0] for name in ("self.query", "self.key", "self.value")]
        context = role["output.dense"].input[0]
        computed_from = _ancestors(context, producer)
        if not any(_MASK_INPUT in node.input for node in nodes if id(node) in computed_from):
            continue  # no mask in this attention: a key padding mask would change what it computes
        between = computed_from & _descendants(inputs, readers)
        inside = [node for node in nodes if id(node) in between]
        heads = _heads(inside, producer, initializers, width=int(initializers[role["self.query"].input[4]].dims[0]))
        if heads is None or sum(node.op_type == "Softmax" for node in inside) != 1:
            continue
        read_outside = {name for node in nodes if id(node) not in between for name in node.input}
        if any(name in read_outside for node in inside for name in node.output if name != context):
            continue  # something else reads a tensor from inside: the nodes cannot go
        fused.append(
            helper.make_node(
                "MultiHeadAttention",
                [*inputs, "", mask.output[0]],
                [context],
                name=f"attention_{layer}",
                domain="com.microsoft",
                num_heads=heads,
            )
        )
        dropped |= between
    if not fused:
        return nodes
    kept = [mask, *fused, *(node for node in nodes if id(node) not in dropped)]
    return _topological(_without_dead(kept, {value.name for value in graph.output}), graph)


def _ancestors(name: str, producer: dict[str, Any]) -> set[int]:
    """Nodes ``name`` is computed from, back to (not through) the int8 products."""
    found: set[int] = set()
    stack = [name]
    while stack:
        node = producer.get(stack.pop())
        if node is None or id(node) in found or node.op_type == "DynamicQuantizeMatMul":
            continue
        found.add(id(node))
        stack.extend(node.input)
    return found


def _descendants(names: list[str], readers: dict[str, list[Any]]) -> set[int]:
    """Nodes computed from ``names``, up to (not through) the int8 products."""
    found: set[int] = set()
    stack = list(names)
    while stack:
        for node in readers.get(stack.pop(), []):
            if id(node) in found or node.op_type == "DynamicQuantizeMatMul":
                continue
            found.add(id(node))
            stack.extend(node.output)
    return found


def _scalar(name: str, initializers: dict[str, Any]) -> float | None:
    tensor = initializers.get(name)
    if tensor is None:
        return None
    value = numpy_helper.to_array(tensor)
    return float(value.reshape(-1)[0]) if value.size == 1 else None


def _heads(inside: list[Any], producer: dict[str, Any], initializers: dict[str, Any], *, width: int) -> int | None:
    """The layer's head count, from the head size its query is reshaped to (``[.., .., -1, size]``);
    None unless the query and key scalings multiply to 1 / sqrt(size)."""
    sizes = set()
    for node in inside:
        shape = producer.get(node.input[1]) if node.op_type == "Reshape" else None
        if shape is not None and shape.op_type == "Concat" and len(shape.input) == 4:
            sizes.add(_scalar(shape.input[3], initializers))
    scalings: list[float] = []
    for node in inside:
        if node.op_type == "Mul":
            scalings += [value for value in (_scalar(name, initializers) for name in node.input) if value is not None]
    if len(sizes) != 1 or None in sizes or len(scalings) != 2:
        return None
    size = int(sizes.pop() or 0)
    if size < 1 or width % size or not np.isclose(scalings[0] * scalings[1], 1 / np.sqrt(size), rtol=1e-5):
        return None
    return width // size


def _without_dead(nodes: list[Any], outputs: set[str]) -> list[Any]:
    """Without the nodes none of whose outputs is read (repeatedly: their inputs' producers may follow)."""
    while True:
        read = {name for node in nodes for name in node.input} | outputs
        alive = [node for node in nodes if any(name in read for name in node.output)]
        if len(alive) == len(nodes):
            return nodes
        nodes = alive


def _topological(nodes: list[Any], graph: Any) -> list[Any]:
    """``nodes`` in an order ONNX accepts: each after the producers of its inputs."""
    ready = {""} | {value.name for value in graph.input} | {tensor.name for tensor in graph.initializer}
    ordered: list[Any] = []
    waiting = list(nodes)
    while waiting:
        now = [node for node in waiting if all(name in ready for name in node.input)]
        if not now:
            raise ValueError("the rewritten graph has a cycle or a missing input")
        for node in now:
            ordered.append(node)
            ready.update(node.output)
        taken = {id(node) for node in now}
        waiting = [node for node in waiting if id(node) not in taken]
    return ordered
