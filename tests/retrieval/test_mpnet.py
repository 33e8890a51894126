"""The optional all-mpnet-base-v2 embedder: choosing it, refusing a missing or altered build,
the torch-free graph's parts, and (when `make mpnet` has built it) its vectors."""

from __future__ import annotations

import json
import struct
from pathlib import Path

import numpy as np
import pytest

from retrieval.embedding import mpnet
from retrieval.embedding.embedders import embedder_for_model, get_embedder, reset_embedder_cache
from retrieval.embedding.integrity import ModelIntegrityError
from retrieval.embedding.local_embedder import LocalEmbedder
from retrieval.embedding.mpnet_embedder import MPNET_MODEL_NAME, MpnetEmbedder
from retrieval.vectors.memory_vectors import default_model_name

BUILT = mpnet.read_manifest(mpnet.model_dir()) is not None
needs_build = pytest.mark.skipif(
    not BUILT, reason=f"all-mpnet-base-v2 is not built in {mpnet.model_dir()} (optional: `make mpnet`)"
)


@pytest.fixture
def fresh_embedder_cache():
    reset_embedder_cache(include_local=True)
    yield
    reset_embedder_cache(include_local=True)


# -- choosing it ----------------------------------------------------------------------------


def test_the_mpnet_name_gives_one_shared_mpnet_embedder_without_loading_it(fresh_embedder_cache: None) -> None:
    embedder = embedder_for_model(MPNET_MODEL_NAME)

    assert isinstance(embedder, MpnetEmbedder)
    assert (embedder.name, embedder.dimension) == ("all-mpnet-base-v2", 768)
    assert embedder_for_model(MPNET_MODEL_NAME) is embedder
    assert embedder_for_model("all-MiniLM-L6-v2") is not embedder


def test_local_mpnet_makes_it_the_default_model(settings, fresh_embedder_cache: None) -> None:
    settings.MEMORYHUB_EMBEDDER = "local-mpnet"

    assert default_model_name() == MPNET_MODEL_NAME
    assert get_embedder() is embedder_for_model(MPNET_MODEL_NAME)


def test_local_still_means_minilm(settings, fresh_embedder_cache: None) -> None:
    settings.MEMORYHUB_EMBEDDER = "local"

    assert default_model_name() == "all-MiniLM-L6-v2"
    assert type(get_embedder()) is LocalEmbedder


# -- refusing a missing or altered build ------------------------------------------------------


def test_without_a_build_embedding_names_the_command_that_builds_it(tmp_path: Path) -> None:
    with pytest.raises(ModelIntegrityError, match="make mpnet"):
        MpnetEmbedder(model_dir=tmp_path).embed(["hello"])


def test_a_model_file_that_is_not_the_one_built_is_refused(tmp_path: Path) -> None:
    (tmp_path / mpnet.MODEL_FILE).write_bytes(b"not the model")
    manifest = {"build_version": mpnet.BUILD_VERSION, "model_sha256": "0" * 64}
    (tmp_path / mpnet.MANIFEST_FILE).write_text(json.dumps(manifest))

    with pytest.raises(ModelIntegrityError, match="sha256.*python -m retrieval.embedding.mpnet --force"):
        MpnetEmbedder(model_dir=tmp_path).embed(["hello"])


def test_a_build_of_an_older_version_is_not_used(tmp_path: Path) -> None:
    (tmp_path / mpnet.MANIFEST_FILE).write_text(json.dumps({"build_version": mpnet.BUILD_VERSION - 1}))

    with pytest.raises(ModelIntegrityError, match="not built"):
        MpnetEmbedder(model_dir=tmp_path).embed(["hello"])


# -- the graph's parts -----------------------------------------------------------------------

DISTANCES = [0, 1, 7, 8, 11, 12, 15, 16, 23, 24, 31, 32, 63, 64, 127, 128, 500]


def test_relative_position_buckets_are_the_ones_mpnet_was_trained_with() -> None:
    # Reference values from the transformers implementation (float32 log buckets): a key
    # before the query (i - j > 0) uses buckets 0-15, a key after it 16-31.
    table = mpnet.relative_position_buckets(512)

    before = [int(table[d, 0]) for d in DISTANCES]
    after = [int(table[0, d]) for d in DISTANCES]

    assert before == [0, 1, 7, 8, 8, 9, 9, 10, 11, 11, 11, 12, 13, 14, 15, 15, 15]
    assert after == [0, 17, 23, 24, 24, 25, 25, 26, 27, 27, 27, 28, 29, 30, 31, 31, 31]
    assert table.shape == (512, 512)
    assert (np.diagonal(table, offset=3) == 19).all()


def test_safetensors_are_read_by_name_with_shape_dtype_and_values() -> None:
    matrix = np.arange(6, dtype=np.float32).reshape(2, 3)
    ids = np.array([[5, -1]], dtype=np.int64)
    header = {
        "__metadata__": {"format": "pt"},
        "w": {"dtype": "F32", "shape": [2, 3], "data_offsets": [0, 24]},
        "ids": {"dtype": "I64", "shape": [1, 2], "data_offsets": [24, 40]},
    }
    encoded = json.dumps(header).encode()
    data = struct.pack("<Q", len(encoded)) + encoded + matrix.tobytes() + ids.tobytes()

    tensors = mpnet.read_safetensors(data)

    assert sorted(tensors) == ["ids", "w"]
    np.testing.assert_array_equal(tensors["w"], matrix)
    np.testing.assert_array_equal(tensors["ids"], ids)


def _tiny_weights(vocab: int = 40, positions: int = 40) -> dict[str, np.ndarray]:
    rng = np.random.default_rng(7)
    h, ffn = mpnet.HIDDEN, 64

    def normal(*shape: int) -> np.ndarray:
        return (rng.standard_normal(shape) * 0.05).astype(np.float32)

    weights = {
        "embeddings.word_embeddings.weight": normal(vocab, h),
        "embeddings.position_embeddings.weight": normal(positions, h),
        "embeddings.LayerNorm.weight": np.ones(h, np.float32),
        "embeddings.LayerNorm.bias": np.zeros(h, np.float32),
        "encoder.relative_attention_bias.weight": normal(mpnet.RELATIVE_BUCKETS, mpnet.HEADS) * 20,
    }
    shapes = {f"attention.attn.{part}": (h, h) for part in ("q", "k", "v", "o")}
    shapes |= {"intermediate.dense": (ffn, h), "output.dense": (h, ffn)}
    for name, (rows, columns) in shapes.items():
        weights[f"encoder.layer.0.{name}.weight"] = normal(rows, columns)
        weights[f"encoder.layer.0.{name}.bias"] = normal(rows)
    for norm in ("attention.LayerNorm", "output.LayerNorm"):
        weights[f"encoder.layer.0.{norm}.weight"] = np.ones(h, np.float32)
        weights[f"encoder.layer.0.{norm}.bias"] = np.zeros(h, np.float32)
    return weights


def test_a_padded_batch_gives_each_text_the_vectors_it_gets_alone() -> None:
    pytest.importorskip("onnx", reason="onnx is only installed with requirements-mpnet.txt")
    import onnxruntime

    model = mpnet.build_graph(_tiny_weights(), layers=1, max_positions=32)
    session = onnxruntime.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    texts = [[0, 11, 12, 13, 14, 15, 2], [0, 21, 2]]

    def run(ids: list[list[int]], mask: list[list[int]]) -> np.ndarray:
        feeds = {"input_ids": np.array(ids, dtype=np.int64), "attention_mask": np.array(mask, dtype=np.int64)}
        return session.run(None, feeds)[0]

    batch = run([texts[0], texts[1] + [0] * 4], [[1] * 7, [1] * 3 + [0] * 4])
    alone = [run([ids], [[1] * len(ids)])[0] for ids in texts]

    assert batch.shape == (2, 7, mpnet.HIDDEN)
    np.testing.assert_allclose(batch[0], alone[0], atol=1e-5)
    np.testing.assert_allclose(batch[1, :3], alone[1], atol=1e-5)
    # Word order matters (positions and the relative bias are in the graph).
    assert not np.allclose(run([[0, 15, 14, 13, 12, 11, 2]], [[1] * 7])[0], alone[0], atol=1e-3)


# -- the built model -------------------------------------------------------------------------

PAIRS = [
    "Enjoys hiking in the mountains on weekends.",
    "What does the user do outdoors?",
    "The quarterly budget meeting moved to Thursday.",
    "Which editor theme does the user like?",
    "The user prefers a dark colour scheme in their code editor.",
]
# Cosines of the original float32 model (sentence-transformers pooling) on PAIRS.
REFERENCE = {(0, 1): 0.4045, (0, 2): 0.0020, (1, 2): -0.0912, (3, 4): 0.4314, (2, 4): 0.0025, (0, 4): 0.0958}


@needs_build
def test_the_built_model_gives_unit_768_rows_close_to_the_float_model() -> None:
    vectors = MpnetEmbedder().embed(PAIRS)

    assert vectors.shape == (5, 768)
    assert vectors.dtype == np.float32
    np.testing.assert_allclose(np.linalg.norm(vectors, axis=1), 1.0, atol=1e-5)
    # int8 moves these by 0.00-0.03 (0.010 on average); quantising the feed-forward outputs
    # too moved them by up to 0.07 (0.033 on average).
    deviations = [abs(float(vectors[a] @ vectors[b]) - expected) for (a, b), expected in REFERENCE.items()]
    assert max(deviations) < 0.05
    assert float(np.mean(deviations)) < 0.02


@needs_build
def test_a_text_gets_the_same_vector_alone_or_among_others() -> None:
    embedder = MpnetEmbedder()

    together = embedder.embed(PAIRS)
    alone = np.vstack([embedder.embed([text]) for text in PAIRS])

    np.testing.assert_array_equal(together, alone)


@needs_build
def test_a_text_longer_than_the_model_reads_is_truncated_not_refused() -> None:
    long_text = " ".join(["The ferry timetable changes in winter."] * 200)

    (vector,) = MpnetEmbedder().embed([long_text])

    assert np.isfinite(vector).all()
    assert float(np.linalg.norm(vector)) == pytest.approx(1.0, abs=1e-5)
