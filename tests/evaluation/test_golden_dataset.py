"""The golden set in eval/ obeys the rules its README promises."""

from __future__ import annotations

import re
from collections import Counter
from pathlib import Path

import pytest

from retrieval.evaluation.datasets import GOLDEN_CATEGORIES, Case, CorpusItem, Dataset, load_golden

EVAL_DIR = Path(__file__).resolve().parents[2] / "eval"
TAXONOMY = {
    "coding-preferences", "project-conventions", "architectural-decisions", "user-facts",
    "corrections", "patterns", "finding", "insight", "lesson",
}  # fmt: skip
# Function words only: what is left is what a keyword search could match on.
STOP_WORDS = {
    "a", "an", "the", "and", "or", "of", "to", "in", "on", "at", "for", "is", "are", "was", "were", "be", "been",
    "being", "it", "its", "this", "that", "these", "those", "with", "as", "by", "from", "i", "me", "my", "you",
    "your", "he", "she", "his", "her", "we", "our", "us", "they", "them", "their", "what", "when", "where", "who",
    "how", "which", "why", "did", "do", "does", "has", "have", "had", "not", "no", "so", "if", "but", "about", "can",
    "could", "should", "would", "will", "just", "s", "t", "m", "ll", "re", "ve", "d", "up", "out", "into", "than",
    "then", "there", "here", "one", "some", "every", "any", "all"
}  # fmt: skip


@pytest.fixture(scope="module")
def golden() -> Dataset:
    return load_golden(EVAL_DIR / "golden.jsonl")


def _words(text: str) -> set[str]:
    return {w for w in re.findall(r"[a-z0-9]+", text.lower()) if w not in STOP_WORDS}


def _identifiers(text: str) -> set[str]:
    # Tokens a person would copy verbatim: with digits, _ . / : or an inner capital letter.
    tokens = re.findall(r"[A-Za-z0-9_./:-]*[A-Za-z0-9_/]", text)
    return {t for t in tokens if re.search(r"[0-9_./:]|[a-z][A-Z]", t)}


def _case_text(case: Case) -> str:
    return " ".join(m.content for m in case.messages) if case.messages else case.query


def _of(golden: Dataset, category: str) -> list[Case]:
    return [case for case in golden.cases if case.category == category]


def _visible(item: CorpusItem, user_id: str) -> bool:
    return item.scope == "project" or item.user_id == user_id


def test_the_golden_set_is_big_enough(golden: Dataset) -> None:
    user_memories = Counter(item.user_id for item in golden.corpus if item.scope == "user")
    assert len(golden.cases) >= 60
    assert len(user_memories) == 4 and sum(user_memories.values()) >= 80
    assert min(user_memories.values()) >= 15
    assert sum(1 for item in golden.corpus if item.scope == "project") >= 10


def test_every_category_has_at_least_eight_cases_and_there_are_ten_negatives(golden: Dataset) -> None:
    counts = Counter(case.category for case in golden.cases)
    assert set(counts) == set(GOLDEN_CATEGORIES)
    assert min(counts.values()) >= 8
    assert counts["negative"] >= 10


def test_every_referenced_key_exists_and_memories_use_the_taxonomy(golden: Dataset) -> None:
    keys = golden.items_by_id
    for case in golden.cases:
        assert set(case.relevant_ids) | set(case.forbidden_ids) <= set(keys), case.id
        assert not set(case.relevant_ids) & set(case.forbidden_ids), case.id
    assert {item.category for item in golden.corpus} <= TAXONOMY
    assert len(keys) == len(golden.corpus)


def test_expected_memories_are_visible_to_the_asking_user(golden: Dataset) -> None:
    for case in golden.cases:
        for key in case.relevant_ids:
            assert _visible(golden.items_by_id[key], case.user_id), (case.id, key)


def test_links_stay_within_one_owner_or_within_project_scope(golden: Dataset) -> None:
    for item in golden.corpus:
        for link in item.links:
            target = golden.items_by_id[link.to]
            same_owner = item.scope == target.scope == "user" and item.user_id == target.user_id
            assert same_owner or item.scope == target.scope == "project", (item.id, link.to)


def test_negative_and_cross_user_cases_expect_nothing(golden: Dataset) -> None:
    for case in _of(golden, "negative") + _of(golden, "cross_user"):
        assert case.relevant_ids == () and case.negative, case.id
    for case in golden.cases:
        if case.category not in ("negative", "cross_user"):
            assert case.relevant_ids, case.id


def test_cross_user_forbidden_memories_belong_to_another_user(golden: Dataset) -> None:
    for case in _of(golden, "cross_user"):
        assert case.forbidden_ids, case.id
        for key in case.forbidden_ids:
            item = golden.items_by_id[key]
            assert item.scope == "user" and item.user_id != case.user_id, (case.id, key)


def _chain(golden: Dataset, key: str) -> list[str]:
    """Older versions of ``key``, newest first."""
    older: list[str] = []
    item = golden.items_by_id[key]
    while item.supersedes:
        older.append(item.supersedes)
        item = golden.items_by_id[item.supersedes]
    return older


def test_supersede_cases_expect_the_newest_version_and_forbid_the_older_ones(golden: Dataset) -> None:
    superseded = {item.supersedes for item in golden.corpus if item.supersedes}
    for case in _of(golden, "supersede"):
        (newest,) = case.relevant_ids
        assert newest not in superseded, case.id
        assert case.forbidden_ids and set(case.forbidden_ids) <= set(_chain(golden, newest)), case.id
    assert any(len(_chain(golden, c.relevant_ids[0])) >= 2 for c in _of(golden, "supersede"))


def test_no_case_expects_a_superseded_memory(golden: Dataset) -> None:
    superseded = {item.supersedes for item in golden.corpus if item.supersedes}
    for case in golden.cases:
        assert not superseded & set(case.relevant_ids), case.id


def test_graph_hop_answers_are_reachable_only_through_a_link(golden: Dataset) -> None:
    for case in _of(golden, "graph_hop"):
        expected = set(case.relevant_ids)
        hops = [(item, link.to) for item in golden.corpus for link in item.links if item.id in expected]
        hops = [(source, target) for source, target in hops if target in expected]
        assert hops, case.id
        for source, target in hops:
            query = _words(case.query)
            assert query & _words(source.text), (case.id, source.id)
            assert not query & _words(golden.items_by_id[target].text), (case.id, target)


def test_paraphrase_queries_share_at_most_one_word_with_their_memory(golden: Dataset) -> None:
    for case in _of(golden, "paraphrase"):
        for key in case.relevant_ids:
            shared = _words(case.query) & _words(golden.items_by_id[key].text)
            assert len(shared) <= 1, (case.id, shared)


def test_keyword_queries_contain_an_identifier_from_their_memory(golden: Dataset) -> None:
    for case in _of(golden, "keyword"):
        for key in case.relevant_ids:
            shared = _identifiers(case.query) & _identifiers(golden.items_by_id[key].text)
            assert shared, (case.id, _identifiers(case.query))


def test_conversational_cases_are_multi_message_windows(golden: Dataset) -> None:
    for case in _of(golden, "conversational"):
        assert len(case.messages) >= 2 and case.messages[-1].role == "user", case.id
        assert case.query == case.messages[-1].content


def test_every_category_is_asked_by_at_least_three_users(golden: Dataset) -> None:
    askers: dict[str, set[str]] = {}
    for case in golden.cases:
        askers.setdefault(case.category, set()).add(case.user_id)
    assert all(len(users) >= 3 for users in askers.values()), askers


def test_no_two_cases_ask_the_same_thing(golden: Dataset) -> None:
    texts = [_case_text(case).lower() for case in golden.cases]
    assert len(texts) == len(set(texts))
