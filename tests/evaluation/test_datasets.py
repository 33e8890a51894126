"""Loaders, fed small JSONL files written here (never benchmark data)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from evaluation.datasets import DatasetError, load_golden, load_locomo


def _write(path: Path, records: list[dict[str, Any]]) -> Path:
    path.write_text("".join(json.dumps(r) + "\n" for r in records), encoding="utf-8")
    return path


def _turn(user: str, dia: str, text: str) -> dict[str, Any]:
    return {"id": f"{user}:{dia}", "user_id": user, "text": text, "speaker": "Ana", "session": 1,
            "timestamp": "2024-01-02T10:00:00", "dia_id": dia}  # fmt: skip


def _question(user: str, index: int, category: int, name: str, relevant: list[str]) -> dict[str, Any]:
    return {"dataset": "toy", "conversation_id": user, "user_id": user, "question_id": f"{user}:q{index}",
            "question": f"question {index}?", "category": category, "category_name": name,
            "relevant_ids": relevant, "answer": "x", "adversarial_answer": None, "evidence_dia_ids": []}  # fmt: skip


@pytest.fixture
def toy_benchmark(tmp_path: Path) -> tuple[Path, Path]:
    corpus = _write(
        tmp_path / "toy_corpus.jsonl",
        [
            _turn("u1", "D1:1", "Ana: I adopted a cat."),
            _turn("u1", "D1:2", "Ben: Nice!"),
            _turn("u2", "D1:1", "Ana: I moved to Porto."),
        ],  # fmt: skip
    )
    cases = _write(
        tmp_path / "toy_retrieval.jsonl",
        [
            _question("u1", 0, 4, "single-hop", ["u1:D1:1"]),
            _question("u1", 1, 2, "temporal", []),
            _question("u1", 2, 5, "adversarial", ["u1:D1:2"]),
            _question("u2", 3, 4, "single-hop", ["u2:D1:1"]),
        ],  # fmt: skip
    )
    return corpus, cases


def test_locomo_cases_keep_labels_and_skip_unlabelled_ones(toy_benchmark: tuple[Path, Path]) -> None:
    dataset = load_locomo(*toy_benchmark)
    assert dataset.name == "toy"
    assert [c.id for c in dataset.cases] == ["u1:q0", "u1:q2", "u2:q3"]
    assert dataset.skipped == ["u1:q1"]
    first = dataset.cases[0]
    assert (first.user_id, first.query, first.category, first.relevant_ids) == (
        "u1",
        "question 0?",
        "single-hop",
        ("u1:D1:1",),
    )
    assert first.negative is False
    assert first.metadata["category_number"] == 4


def test_locomo_corpus_items_carry_their_metadata(toy_benchmark: tuple[Path, Path]) -> None:
    item = load_locomo(*toy_benchmark).items_by_id["u1:D1:1"]
    assert (item.user_id, item.text, item.scope) == ("u1", "Ana: I adopted a cat.", "user")
    assert item.metadata == {"speaker": "Ana", "session": 1, "timestamp": "2024-01-02T10:00:00", "dia_id": "D1:1"}


def test_locomo_filters_by_category_name_or_number_and_limits(toy_benchmark: tuple[Path, Path]) -> None:
    assert [c.id for c in load_locomo(*toy_benchmark, categories=["adversarial"]).cases] == ["u1:q2"]
    assert [c.id for c in load_locomo(*toy_benchmark, categories=[4]).cases] == ["u1:q0", "u2:q3"]
    limited = load_locomo(*toy_benchmark, limit=1)
    assert [c.id for c in limited.cases] == ["u1:q0"]
    assert len(limited.corpus) == 3  # other users stay in the store for the leak check
    assert {i.user_id for i in load_locomo(*toy_benchmark, limit=1, restrict_corpus=True).corpus} == {"u1"}


def test_locomo_rejects_cases_that_name_ids_missing_from_the_corpus(tmp_path: Path) -> None:
    corpus = _write(tmp_path / "c.jsonl", [_turn("u1", "D1:1", "Ana: hi")])
    cases = _write(tmp_path / "q.jsonl", [_question("u1", 0, 4, "single-hop", ["u1:S1:obs0"])])
    with pytest.raises(DatasetError, match="missing from the corpus"):
        load_locomo(corpus, cases)


def test_a_malformed_line_is_reported_with_its_line_number(tmp_path: Path) -> None:
    corpus = tmp_path / "c.jsonl"
    corpus.write_text(json.dumps(_turn("u1", "D1:1", "Ana: hi")) + "\n\n{not json\n", encoding="utf-8")
    cases = _write(tmp_path / "q.jsonl", [])
    with pytest.raises(DatasetError, match=r"c\.jsonl:3: invalid JSON"):
        load_locomo(corpus, cases)


def _memory(key: str, user: str, content: str, **extra: Any) -> dict[str, Any]:
    return {"key": key, "user_id": user, "content": content, "kind": "fact", "category": "user-facts", **extra}


@pytest.fixture
def golden_dir(tmp_path: Path) -> Path:
    _write(
        tmp_path / "golden_memories.jsonl",
        [
            _memory("a.old", "alice", "Alice uses pip."),
            _memory("a.new", "alice", "Alice uses uv.", supersedes_key="a.old"),
            _memory("b.editor", "bob", "Bob uses Emacs.", links=[{"to_key": "b.theme", "relationship": "related"}]),
            _memory("b.theme", "bob", "Bob likes dark themes."),
            _memory("p.style", "alice", "Format with ruff.", scope="project"),
        ],
    )
    _write(
        tmp_path / "golden.jsonl",
        [
            {
                "id": "s1",
                "category": "supersede",
                "user_id": "alice",
                "query": "package manager?",
                "expected_retrievals": ["a.new"],
                "forbidden_retrievals": ["a.old"],
            },
            {
                "id": "c1",
                "category": "conversational",
                "user_id": "bob",
                "expected_retrievals": ["b.editor"],
                "messages": [
                    {"role": "user", "content": "Open the file."},
                    {"role": "assistant", "content": "Where?"},
                    {"role": "user", "content": "In my editor."},
                ],
            },
            {
                "id": "x1",
                "category": "cross_user",
                "user_id": "alice",
                "query": "Bob's editor?",
                "expected_retrievals": [],
                "forbidden_retrievals": ["b.editor"],
                "setup_memories": [_memory("a.inline", "alice", "Alice likes tea.")],
            },
        ],  # fmt: skip
    )
    return tmp_path


def test_golden_loader_reads_shared_and_inline_memories(golden_dir: Path) -> None:
    dataset = load_golden(golden_dir / "golden.jsonl")
    assert [item.id for item in dataset.corpus] == ["a.old", "a.new", "b.editor", "b.theme", "p.style", "a.inline"]
    new = dataset.items_by_id["a.new"]
    assert (new.supersedes, new.kind, new.category, new.scope) == ("a.old", "fact", "user-facts", "user")
    assert dataset.items_by_id["b.editor"].links[0].to == "b.theme"
    assert dataset.items_by_id["p.style"].scope == "project"


def test_golden_cases_take_the_last_user_message_as_query_and_flag_negatives(golden_dir: Path) -> None:
    supersede, conversational, cross_user = load_golden(golden_dir / "golden.jsonl").cases
    assert supersede.forbidden_ids == ("a.old",)
    assert conversational.query == "In my editor."
    assert [m.role for m in conversational.messages] == ["user", "assistant", "user"]
    assert (cross_user.negative, cross_user.relevant_ids, supersede.negative) == (True, (), False)


def test_result_for_counts_other_users_memories_as_leaks_but_not_project_ones(golden_dir: Path) -> None:
    dataset = load_golden(golden_dir / "golden.jsonl")
    case = dataset.cases[2]
    result = dataset.result_for(case, ["p.style", "b.editor", "b.editor", "unknown"], latency_ms=12.5)
    assert result.leaked_ids == ("b.editor",)
    assert result.negative and result.forbidden_ids == frozenset({"b.editor"})
    assert result.latency_ms == 12.5


def test_golden_loader_rejects_unknown_keys(golden_dir: Path) -> None:
    cases = golden_dir / "golden.jsonl"
    case = {"id": "k1", "category": "keyword", "user_id": "bob", "query": "q", "expected_retrievals": ["nope"]}
    cases.write_text(cases.read_text() + json.dumps(case) + "\n")
    with pytest.raises(DatasetError, match="unknown memory keys"):
        load_golden(cases)


def test_golden_loader_rejects_a_supersede_of_a_later_memory(tmp_path: Path) -> None:
    _write(tmp_path / "golden_memories.jsonl", [_memory("n", "a", "new", supersedes_key="o"), _memory("o", "a", "old")])
    _write(tmp_path / "golden.jsonl", [])
    with pytest.raises(DatasetError, match="defined after it"):
        load_golden(tmp_path / "golden.jsonl")


@pytest.mark.parametrize(
    "bad",
    [
        {"id": "first", "category": "negative", "user_id": "a", "query": "again", "expected_retrievals": []},
        {"id": "e", "category": "telepathy", "user_id": "a", "query": "q", "expected_retrievals": []},
        {"id": "f", "category": "negative", "user_id": "a", "expected_retrievals": []},
        {"id": "g", "category": "negative", "user_id": "a", "query": "q", "expected_retrievals": "none"},
        {"id": "h", "category": "negative", "user_id": "a", "messages": [{"role": "tool", "content": "x"}]},
    ],
    ids=["duplicate id", "unknown category", "no query", "expectations not a list", "bad role"],
)
def test_golden_loader_rejects_malformed_cases(tmp_path: Path, bad: dict[str, Any]) -> None:
    first = {"id": "first", "category": "negative", "user_id": "a", "query": "q", "expected_retrievals": []}
    _write(tmp_path / "golden.jsonl", [first, bad])
    with pytest.raises(DatasetError):
        load_golden(tmp_path / "golden.jsonl")
