"""The labelled sets in evaluation/data/ obey the rules evaluation/data/README.md promises.

Every structural rule runs on each set: the golden set (``golden.jsonl``) and the held-out
everyday set (``everyday.jsonl``); ``SetSpec`` holds what differs between them (size, users,
minimum cases per category, share of unanswerable cases).
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from evaluation.datasets import GOLDEN_CATEGORIES, Case, CorpusItem, Dataset, load_golden

EVAL_DIR = Path(__file__).resolve().parents[2] / "evaluation" / "data"
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
SMALL_USER_MEMORIES = 2  # a user with at most this many memories is a "small" user
UNANSWERABLE = ("negative", "cross_user")


@dataclass(frozen=True)
class SetSpec:
    """What one labelled set promises beyond the shared format rules."""

    name: str
    min_cases: int
    users: tuple[int, int]  # users owning user-scope memories: (min, max)
    user_memories: tuple[int, int]  # user-scope memories in total: (min, max)
    min_memories_per_large_user: int
    small_users: tuple[int, int]  # users with at most SMALL_USER_MEMORIES memories: (min, max)
    min_project_memories: int
    min_per_category: Mapping[str, int] = field(default_factory=dict)
    min_unanswerable_share: float = 0.0
    min_two_memory_cases: int = 0  # cases other than graph hops that need two or more memories

    @property
    def cases_path(self) -> Path:
        return EVAL_DIR / f"{self.name}.jsonl"

    @property
    def memories_path(self) -> Path:
        return EVAL_DIR / f"{self.name}_memories.jsonl"


SPECS = (
    SetSpec(
        name="golden",
        min_cases=60,
        users=(4, 4),
        user_memories=(80, 10_000),
        min_memories_per_large_user=15,
        small_users=(0, 0),
        min_project_memories=10,
        min_per_category=dict.fromkeys(GOLDEN_CATEGORIES, 8) | {"negative": 10},
    ),
    SetSpec(
        name="everyday",
        min_cases=150,
        users=(8, 12),
        user_memories=(250, 450),
        min_memories_per_large_user=25,
        small_users=(3, 6),
        min_project_memories=15,
        min_per_category={
            "paraphrase": 35,
            "conversational": 15,
            "keyword": 12,
            "supersede": 12,
            "graph_hop": 8,
            "negative": 30,
            "cross_user": 20,
        },  # fmt: skip
        min_unanswerable_share=0.30,
        min_two_memory_cases=3,
    ),
)


@pytest.fixture(scope="module", params=SPECS, ids=[spec.name for spec in SPECS])
def spec(request: pytest.FixtureRequest) -> SetSpec:
    chosen: SetSpec = request.param
    return chosen


@pytest.fixture(scope="module")
def dataset(spec: SetSpec) -> Dataset:
    return load_golden(spec.cases_path, memories_path=spec.memories_path)


def _stem(word: str) -> str:
    # Just enough that "migraine" and "migraines" or "cook" and "cooking" count as one word.
    for suffix in ("ing", "ed", "es", "s", "er", "ly"):
        if len(word) > 4 and word.endswith(suffix):
            word = word[: -len(suffix)]
            break
    return word.rstrip("e") if len(word) > 3 else word


def _words(text: str) -> set[str]:
    return {_stem(w) for w in re.findall(r"[a-z0-9]+", text.lower()) if w not in STOP_WORDS}


def _identifiers(text: str) -> set[str]:
    # Tokens a person would copy verbatim: with digits, _ . / : or an inner capital letter.
    tokens = re.findall(r"[A-Za-z0-9_./:-]*[A-Za-z0-9_/]", text)
    return {t for t in tokens if re.search(r"[0-9_./:]|[a-z][A-Z]", t)}


def _case_text(case: Case) -> str:
    return " ".join(m.content for m in case.messages) if case.messages else case.query


def _of(dataset: Dataset, category: str) -> list[Case]:
    return [case for case in dataset.cases if case.category == category]


def _visible(item: CorpusItem, user_id: str) -> bool:
    return item.scope == "project" or item.user_id == user_id


def _memories_per_user(dataset: Dataset) -> Counter[str]:
    return Counter(item.user_id for item in dataset.corpus if item.scope == "user")


def test_the_set_is_big_enough(spec: SetSpec, dataset: Dataset) -> None:
    per_user = _memories_per_user(dataset)
    small = [user for user, count in per_user.items() if count <= SMALL_USER_MEMORIES]
    assert len(dataset.cases) >= spec.min_cases
    assert spec.users[0] <= len(per_user) <= spec.users[1]
    assert spec.user_memories[0] <= sum(per_user.values()) <= spec.user_memories[1]
    assert spec.small_users[0] <= len(small) <= spec.small_users[1], small
    assert all(count >= spec.min_memories_per_large_user for user, count in per_user.items() if user not in small)
    assert sum(1 for item in dataset.corpus if item.scope == "project") >= spec.min_project_memories


def test_every_category_has_its_minimum_number_of_cases(spec: SetSpec, dataset: Dataset) -> None:
    counts = Counter(case.category for case in dataset.cases)
    assert set(counts) == set(GOLDEN_CATEGORIES)
    for category, minimum in spec.min_per_category.items():
        assert counts[category] >= minimum, (category, counts[category])


def test_enough_cases_are_unanswerable(spec: SetSpec, dataset: Dataset) -> None:
    unanswerable = sum(1 for case in dataset.cases if case.category in UNANSWERABLE)
    assert unanswerable / len(dataset.cases) >= spec.min_unanswerable_share


def test_some_cases_need_two_memories(spec: SetSpec, dataset: Dataset) -> None:
    pairs = [case for case in dataset.cases if case.category != "graph_hop" and len(case.relevant_ids) >= 2]
    assert len(pairs) >= spec.min_two_memory_cases


def test_small_users_are_asked_paraphrases_and_unanswerable_questions(spec: SetSpec, dataset: Dataset) -> None:
    small = {user for user, count in _memories_per_user(dataset).items() if count <= SMALL_USER_MEMORIES}
    for user in small:
        asked = {case.category for case in dataset.cases if case.user_id == user}
        assert "paraphrase" in asked and asked & set(UNANSWERABLE), (user, asked)


def test_every_referenced_key_exists_and_memories_use_the_taxonomy(dataset: Dataset) -> None:
    keys = dataset.items_by_id
    for case in dataset.cases:
        assert set(case.relevant_ids) | set(case.forbidden_ids) <= set(keys), case.id
        assert not set(case.relevant_ids) & set(case.forbidden_ids), case.id
    assert {item.category for item in dataset.corpus} <= TAXONOMY
    assert len(keys) == len(dataset.corpus)


def test_expected_memories_are_visible_to_the_asking_user(dataset: Dataset) -> None:
    for case in dataset.cases:
        for key in case.relevant_ids:
            assert _visible(dataset.items_by_id[key], case.user_id), (case.id, key)


def test_links_stay_within_one_owner_or_within_project_scope(dataset: Dataset) -> None:
    for item in dataset.corpus:
        for link in item.links:
            target = dataset.items_by_id[link.to]
            same_owner = item.scope == target.scope == "user" and item.user_id == target.user_id
            assert same_owner or item.scope == target.scope == "project", (item.id, link.to)


def test_negative_and_cross_user_cases_expect_nothing(dataset: Dataset) -> None:
    for case in _of(dataset, "negative") + _of(dataset, "cross_user"):
        assert case.relevant_ids == () and case.negative, case.id
    for case in dataset.cases:
        if case.category not in UNANSWERABLE:
            assert case.relevant_ids, case.id


def test_cross_user_forbidden_memories_belong_to_another_user(dataset: Dataset) -> None:
    for case in _of(dataset, "cross_user"):
        assert case.forbidden_ids, case.id
        for key in case.forbidden_ids:
            item = dataset.items_by_id[key]
            assert item.scope == "user" and item.user_id != case.user_id, (case.id, key)


def _chain(dataset: Dataset, key: str) -> list[str]:
    """Older versions of ``key``, newest first."""
    older: list[str] = []
    item = dataset.items_by_id[key]
    while item.supersedes:
        older.append(item.supersedes)
        item = dataset.items_by_id[item.supersedes]
    return older


def test_supersede_cases_expect_the_newest_version_and_forbid_the_older_ones(dataset: Dataset) -> None:
    superseded = {item.supersedes for item in dataset.corpus if item.supersedes}
    for case in _of(dataset, "supersede"):
        (newest,) = case.relevant_ids
        assert newest not in superseded, case.id
        assert case.forbidden_ids and set(case.forbidden_ids) <= set(_chain(dataset, newest)), case.id
    assert any(len(_chain(dataset, c.relevant_ids[0])) >= 2 for c in _of(dataset, "supersede"))


def test_no_case_expects_a_superseded_memory(dataset: Dataset) -> None:
    superseded = {item.supersedes for item in dataset.corpus if item.supersedes}
    for case in dataset.cases:
        assert not superseded & set(case.relevant_ids), case.id


def test_graph_hop_answers_are_reachable_only_through_a_link(dataset: Dataset) -> None:
    for case in _of(dataset, "graph_hop"):
        expected = set(case.relevant_ids)
        hops = [(item, link.to) for item in dataset.corpus for link in item.links if item.id in expected]
        hops = [(source, target) for source, target in hops if target in expected]
        assert hops, case.id
        for source, target in hops:
            query = _words(case.query)
            assert query & _words(source.text), (case.id, source.id)
            assert not query & _words(dataset.items_by_id[target].text), (case.id, target)


def test_paraphrase_queries_share_at_most_one_word_with_their_memory(dataset: Dataset) -> None:
    for case in _of(dataset, "paraphrase"):
        for key in case.relevant_ids:
            shared = _words(case.query) & _words(dataset.items_by_id[key].text)
            assert len(shared) <= 1, (case.id, shared)


def test_keyword_queries_contain_an_identifier_from_their_memory(dataset: Dataset) -> None:
    for case in _of(dataset, "keyword"):
        for key in case.relevant_ids:
            shared = _identifiers(case.query) & _identifiers(dataset.items_by_id[key].text)
            assert shared, (case.id, _identifiers(case.query))


def test_conversational_cases_are_multi_message_windows(dataset: Dataset) -> None:
    for case in _of(dataset, "conversational"):
        assert len(case.messages) >= 2 and case.messages[-1].role == "user", case.id
        assert case.query == case.messages[-1].content


def test_every_category_is_asked_by_at_least_three_users(dataset: Dataset) -> None:
    askers: dict[str, set[str]] = {}
    for case in dataset.cases:
        askers.setdefault(case.category, set()).add(case.user_id)
    assert all(len(users) >= 3 for users in askers.values()), askers


def test_no_two_cases_ask_the_same_thing(dataset: Dataset) -> None:
    texts = [_case_text(case).lower() for case in dataset.cases]
    assert len(texts) == len(set(texts))


def test_the_sets_share_no_memory_text_and_no_question() -> None:
    # The everyday set is held out: nothing in it may be a copy of the golden set.
    golden, everyday = (load_golden(spec.cases_path, memories_path=spec.memories_path) for spec in SPECS)
    assert not {item.text for item in golden.corpus} & {item.text for item in everyday.corpus}
    assert not {_case_text(c).lower() for c in golden.cases} & {_case_text(c).lower() for c in everyday.cases}
    assert not {item.user_id for item in golden.corpus} & {item.user_id for item in everyday.corpus}
