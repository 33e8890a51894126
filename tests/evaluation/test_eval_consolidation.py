"""manage.py eval_consolidation: the labelled pairs' file, the score (a wrong merge counts twice),
and the throughput measure on a small synthetic user."""

from __future__ import annotations

import json
from collections import Counter

import pytest
from django.core.management import CommandError, call_command

from evaluation import consolidation as evaluation
from tests.consolidation.test_observations import WORK, observer_reply

PAIRS = "evaluation/data/consolidation/pairs.jsonl"


def test_the_labelled_set_has_sixty_pairs_or_more_over_three_labels_a_third_held_out():
    pairs = evaluation.load_pairs(PAIRS)
    assert len(pairs) >= 60 and len({p.id for p in pairs}) == len(pairs)
    labels = Counter(p.label for p in pairs)
    assert set(labels) == {"merge", "supersede", "keep_both"} and min(labels.values()) >= 20
    held = [p for p in pairs if p.split == "heldout"]
    assert 0.25 <= len(held) / len(pairs) <= 0.4
    assert {p.label for p in held} == {"merge", "supersede", "keep_both"}
    assert len({p.domain for p in pairs}) >= 6
    texts = {(p.older, p.newer) for p in pairs}
    assert ("Has a sister named Ana.", "Has a sister named Lia.") in texts
    assert ("Likes tea.", "Likes green tea in the morning.") in texts


def test_precision_counts_a_wrong_merge_twice_and_recall_is_over_the_labelled_actions():
    rows = [
        ("merge", "merge"),
        ("supersede", "supersede"),
        ("supersede", "keep_both"),
        ("keep_both", "merge"),  # a wrong merge: two false positives
        ("keep_both", "supersede"),  # a wrong supersede: one
        ("keep_both", "keep_both"),
    ]
    figures = evaluation.score(rows)
    assert figures["precision"] == pytest.approx(2 / (2 + 3), abs=1e-3) and figures["recall"] == pytest.approx(
        2 / 3, abs=1e-3
    )
    assert (figures["right"], figures["wrong"], figures["wrong_merges"]) == (2, 2, 1)
    assert evaluation.score([("keep_both", "keep_both")])["precision"] == 1.0


def test_a_label_or_split_outside_the_vocabulary_is_refused(tmp_path):
    path = tmp_path / "pairs.jsonl"
    row = {"id": "x", "domain": "d", "older": "a", "newer": "b", "label": "same", "split": "dev"}
    path.write_text(json.dumps(row) + "\n")
    with pytest.raises(ValueError, match="label must be one of"):
        evaluation.load_pairs(path)


def test_the_synthetic_user_is_distinct_texts_with_their_meanings_the_same_every_time():
    texts, meaning = evaluation.synthetic_contents(500)
    assert len(texts) == len(set(texts)) == 500 and set(meaning) == set(texts)
    assert evaluation.synthetic_contents(500) == (texts, meaning)
    repeated = Counter(meaning.values())
    assert any(count > 1 for count in repeated.values())  # facts said twice are planted


@pytest.mark.django_db
def test_the_throughput_measure_runs_full_then_incremental_on_one_user(project):
    figures = evaluation.measure_throughput(project=project, memories=80, new=5, user_id="synthetic")
    assert figures["full"]["status"] == "done" and figures["full"]["compared"] == 80
    assert figures["incremental"]["status"] == "done" and 5 <= figures["incremental"]["compared"] < 80
    assert figures["incremental_share"] > 0 and figures["incremental_cold_share"] > 0
    assert figures["planted"]["precision"] == 1.0
    evaluation.remove_user(project=project, user_id="synthetic")
    assert not project.memories.filter(user_id="synthetic").exists()


def test_the_command_prints_both_splits(capsys, tmp_path):
    call_command("eval_consolidation", "--report-dir", str(tmp_path))
    printed = capsys.readouterr().out
    assert "dev " in printed and "heldout " in printed
    report = json.loads((tmp_path / "consolidation.json").read_text())
    assert set(report["splits"]) == {"dev", "heldout"} and len(report["pairs"]) >= 60


@pytest.mark.django_db
def test_the_observations_measure_lists_each_with_what_it_cites_and_how_grounded(
    project, tmp_path, settings, fake_openai
):
    settings.MEMORYHUB_LLM_BASE_URL, settings.OPENAI_API_KEY = fake_openai.base_url, "test-key"
    # The model adds one word the memories never said: "Spark".
    fake_openai.default_chat = observer_reply("The user is a data engineer using Python, SQL, Airflow and Spark.")
    path = tmp_path / "memories.jsonl"
    rows = [{"user_id": "u-ana", "content": text, "scope": "user"} for text in WORK]
    rows.append({"user_id": "u-ana", "content": "Pull requests stay small.", "scope": "project"})
    path.write_text("".join(json.dumps(row) + "\n" for row in rows))
    figures = evaluation.observation_figures(project=project, path=path)
    assert (figures["users"], figures["memories"], figures["runs"][0]["status"]) == (1, len(WORK), "done")
    [observation] = figures["observations"]
    assert len(observation["cited"]) >= 3 and set(observation["cited"]) <= set(WORK)
    assert 0.5 < observation["grounded"] < 1.0


def test_the_observations_measure_needs_an_llm(settings, tmp_path):
    settings.MEMORYHUB_LLM_BASE_URL, settings.OPENAI_API_KEY = "", ""
    with pytest.raises(CommandError, match="need an LLM"):
        call_command("eval_consolidation", "--observations", "--report-dir", str(tmp_path))
