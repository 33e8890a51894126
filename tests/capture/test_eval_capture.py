"""manage.py eval_capture on a handful of cases, rules path: the figures are computed, and a case
built to be missed is counted as a miss."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path
from typing import Any

import pytest
from django.core.management import CommandError, call_command

from evaluation import capture as evaluation
from evaluation import capture_scores as scoring
from memories.models import Project

pytestmark = pytest.mark.django_db

TOKEN = "ghp_R7kQ2mXv9LpT4sWc8NbY3hJd6FgA1zE5uK0o"


def case(id: str, text: str, expect: list[dict[str, Any]], **fields: Any) -> dict[str, Any]:
    return {
        "id": id,
        "domain": "test",
        "split": "tune",
        "messages": [{"role": "user", "content": text}],
        "expect": expect,
        **fields,
    }


def fact(text: str, scope: str = "user", **fields: Any) -> dict[str, Any]:
    return {"fact": text, "kind": "fact", "category": "user-facts", "scope": scope, **fields}


CASES = [
    case("hit", "I'm vegetarian.", [fact("The user is vegetarian.")]),
    # Built to be missed: the user never says it.
    case("miss", "Thanks, that worked!", [fact("The user works in Oslo.")]),
    # Expected nothing; the extractor writes a preference: a false positive, a "nothing" case not empty.
    case("extra", "I love spicy food.", []),
    case(
        "supersede",
        "Actually, I moved to Munich last month.",
        [fact("The user lives in Munich.", supersedes="berlin")],
        priors=[{"key": "berlin", "content": "The user lives in Berlin.", "kind": "fact", "category": "user-facts"}],
    ),
    # Labelled project on purpose: a hit with the wrong scope.
    case("scope", "I'm based in Lisbon.", [fact("The user is based in Lisbon.", scope="project")]),
    case("secret", f"My GitHub token is {TOKEN}. I work at Acme.", [fact("The user works at Acme.")], secrets=[TOKEN]),
]


@pytest.fixture
def cases_file(tmp_path: Path) -> Path:
    path = tmp_path / "cases.jsonl"
    path.write_text("".join(json.dumps(c) + "\n" for c in CASES))
    return path


def test_eval_capture_counts_hits_misses_false_positives_supersedes_scopes_and_secrets(
    cases_file: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    call_command("eval_capture", "--path", "rules", "--cases", str(cases_file), "--report-dir", str(tmp_path))

    report = json.loads((tmp_path / "capture-rules.json").read_text())
    figures = report["all"]
    assert {
        k: figures[k] for k in ("cases", "expected_memories", "produced_memories", "matched", "false_positives")
    } == {
        "cases": 6,
        "expected_memories": 5,
        "produced_memories": 5,
        "matched": 4,
        "false_positives": 1,
    }
    assert (figures["precision"], figures["recall"]) == (0.8, 0.8)
    assert (figures["supersedes_expected"], figures["supersedes_detected"], figures["wrong_supersedes"]) == (1, 1, 0)
    assert (figures["wrong_scope_rate"], figures["wrong_kind_rate"], figures["secrets_stored"]) == (0.25, 0.0, 0)
    assert (figures["nothing_cases"], figures["nothing_correct"], figures["jobs_failed"]) == (1, 0, 0)
    assert figures["jobs_per_second"] > 0
    details = {c["id"]: c for c in report["cases"]}
    assert (details["miss"]["misses"], details["miss"]["produced"]) == ([0], [])
    assert details["extra"]["false_positives"] == [0]
    assert report["run"]["path"] == "rules" and report["splits"]["heldout"]["cases"] == 0
    printed = capsys.readouterr().out
    assert "extraction precision" in printed and "0.800" in printed
    assert not Project.objects.filter(team__slug=evaluation.EVAL_TEAM).exists()


def test_eval_capture_on_the_llm_path_without_an_llm_says_so_and_fails(settings: Any, cases_file: Path) -> None:
    settings.MEMORYHUB_LLM_BASE_URL, settings.OPENAI_API_KEY = "", ""
    with pytest.raises(CommandError, match="none is configured"):
        call_command("eval_capture", "--path", "llm", "--cases", str(cases_file))


def test_an_inverted_memory_does_not_match_however_close_its_vector() -> None:
    expected = evaluation.Expected(
        facts=("The team never deploys on Fridays.",),
        kinds=("fact",),
        categories=("project-conventions",),
        scope="project",
    )
    [score] = scoring.score_runs(
        [_run(expected, "The team deploys on Fridays.", "The team never deploys on a Friday.")]
    )

    assert score.similarities[0][0] >= scoring.MATCH_THRESHOLD  # close by vector, yet inverted
    assert [(m.expected, m.produced) for m in score.matches] == [(0, 1)]
    assert score.false_positives == [0]


def _run(expected: evaluation.Expected, *produced: str) -> evaluation.Run:
    """A run of one case expecting ``expected`` that wrote ``produced``, for scoring alone."""
    case = evaluation.Case(id="c", domain="d", split="tune", messages=({"role": "user", "content": "x"},))
    return evaluation.Run(
        case=dataclasses.replace(case, expect=(expected,)),
        produced=[_produced(content) for content in produced],
        ids={},
        seconds=0.1,
        job_status="done",
        job_error="",
        extractor="rules",
    )


def _produced(content: str) -> evaluation.Produced:
    return evaluation.Produced(
        memory_id=content,
        content=content,
        kind="fact",
        category="project-conventions",
        scope="project",
        status="active",
        supersedes=None,
        links=(),
        stored_text=content,
    )


def test_the_shipped_set_loads_and_holds_the_issues_five_turns_in_order() -> None:
    cases = evaluation.load_cases("evaluation/data/capture/cases.jsonl")

    assert len(cases) >= 120
    issue = [c for c in cases if c.chain == "issue-11"]
    assert [c.messages[0]["content"][:30] for c in issue] == [
        "I use black for formatting my ",
        "Actually I switched from black",
        "I'm lactose intolerant, so kee",
        "We decided to deploy on Friday",
        "lol nice weather today",
    ]
    assert {c.split for c in cases} == {"tune", "heldout"}


def test_a_case_naming_an_unknown_memory_key_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "bad.jsonl"
    path.write_text(json.dumps(case("x", "I moved.", [fact("The user moved.", supersedes="nowhere")])) + "\n")

    with pytest.raises(evaluation.CaseFormatError, match="unknown memory key 'nowhere'"):
        evaluation.load_cases(path)


def test_a_memory_with_the_old_value_does_not_match_the_new_one() -> None:
    expected = evaluation.Expected(
        facts=("The user lives in Munich.",),
        kinds=("fact",),
        categories=("user-facts",),
        scope="user",
        values=("Munich",),
    )
    [score] = scoring.score_runs([_run(expected, "The user lives in Berlin.", "The user is based in Munich.")])

    assert score.similarities[0][0] >= scoring.MATCH_THRESHOLD  # a wrong value reads alike
    assert [(m.expected, m.produced) for m in score.matches] == [(0, 1)]


def test_the_threshold_check_reports_each_labelled_pair() -> None:
    rows = scoring.threshold_check("evaluation/data/capture/threshold_pairs.jsonl")

    assert {r["label"] for r in rows} == {"same", "different"}
    inverted = next(r for r in rows if r["produced"] == "The team deploys on Fridays.")
    assert (inverted["matched"], inverted["similarity"] >= scoring.MATCH_THRESHOLD) == (False, True)


def test_eval_capture_on_the_llm_path_runs_the_classifier(settings: Any, fake_openai: Any, tmp_path: Path) -> None:
    settings.MEMORYHUB_LLM_BASE_URL, settings.OPENAI_API_KEY = fake_openai.base_url, "test-key"
    path = tmp_path / "cases.jsonl"
    path.write_text("".join(json.dumps(c) + "\n" for c in CASES[:3]))
    item = {"content": "The user is vegetarian.", "kind": "fact", "category": "user-facts", "confidence": 0.9}
    fake_openai.script_chat(json.dumps([item]), "[]", "[]")

    call_command("eval_capture", "--path", "llm", "--cases", str(path), "--report-dir", str(tmp_path))

    report = json.loads((tmp_path / "capture-llm.json").read_text())
    assert {c["id"]: c["job"]["extractor"] for c in report["cases"]} == {
        "hit": "classifier",
        "miss": "classifier",
        "extra": "classifier",
    }
    assert (report["all"]["matched"], report["all"]["recall"], report["all"]["nothing_correct"]) == (1, 0.5, 1)
    assert fake_openai.count("/chat/completions") == 3
