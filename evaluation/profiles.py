"""How many standing-fact questions of the natural set a user's profile alone answers.

Each person's sessions are captured in process (``capture.services.capture_submit``, then the
job run here as a worker would, with the rule extractor unless an LLM is configured), the
profile is rebuilt from the memories that results, and a question counts as answered when one
of its aliases occurs in the profile text (the natural set's own match, ``alias_in``).

Which questions are about standing facts is decided by a rule on the question text alone,
written before looking at any profile: answerable questions (``single``, ``multi``, ``change``)
that ask about food and health (eat, diet, allergic, food, health), work (job, work, living,
profession) or a partner or relative (partner, wife, husband, girlfriend, boyfriend, sister,
brother, mom, mum, mother, dad, father, son, daughter, kids). ``temporal`` questions ask when
something happened, which is no standing fact; ``unanswerable`` ones have nothing to find.
"""

from __future__ import annotations

import re
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from capture import services as capture_services
from evaluation.capture import _run_to_the_end
from evaluation.natural import NATURAL_PATH, any_alias_in, load_natural
from memories.models import Memory, Project, Status
from memories.tenancy import project_get_or_create
from profiles.services import profile_rebuild
from retrieval.ranking.tokens import count_tokens

EVAL_TEAM = "eval-profiles"
ACTOR = "system:eval-profiles"
STANDING = re.compile(
    r"\b(eat|diet|allergic|allergies|allergy|food|health|job|work|living|profession|partner|wife|husband|"
    r"girlfriend|boyfriend|sister|brother|mom|mum|mother|dad|father|son|daughter|kids)\b",
    re.IGNORECASE,
)
STANDING_TYPES = frozenset({"single", "multi", "change"})


def is_standing(question: dict[str, Any]) -> bool:
    """The rule of the module docstring, on the question's text and type only."""
    return question["type"] in STANDING_TYPES and STANDING.search(question["question"]) is not None


def _fresh_projects() -> None:
    Memory.objects.filter(project__team__slug=EVAL_TEAM).update(supersedes=None)
    Project.objects.filter(team__slug=EVAL_TEAM).delete()


def _capture_person(project: Project, person: dict[str, Any]) -> str:
    user_id = f"natural-{person['person']}"
    for index, session in enumerate(person["sessions"]):
        messages = [
            {"role": m["role"], "content": m["content"], "timestamp": f"{session['date']}T19:{n:02d}:00+00:00"}
            for n, m in enumerate(session["messages"])
        ]
        job = capture_services.capture_submit(
            project=project,
            user_id=user_id,
            session_id=f"{person['person']}-s{index}",
            trigger="compaction",
            messages=messages,
            actor=ACTOR,
        )
        _run_to_the_end(str(job.pk))
    return user_id


def run(*, split: str, path: Path = NATURAL_PATH, log: Callable[[str], None] = print) -> dict[str, Any]:
    """Capture every person of ``split``, rebuild their profile, score the standing questions.

    Each person is a project of their own: a person's "our team uses X" is a shared memory of
    their project, and must not reach another person's profile. ``in_memories`` counts the
    questions some active memory of the person answers at all (what capture kept): the profile
    cannot answer more than those.
    """
    _fresh_projects()
    rows: list[dict[str, Any]] = []
    sizes: list[int] = []
    started = time.perf_counter()
    for person in load_natural(path, split=split):
        project = project_get_or_create(slug=f"{EVAL_TEAM}-{person['person']}", team_slug=EVAL_TEAM)
        user_id = _capture_person(project, person)
        profile = profile_rebuild(project=project, user_id=user_id)
        text = profile.text if profile is not None else ""
        sizes.append(count_tokens(text))
        active = list(Memory.objects.filter(project=project, status=Status.ACTIVE).values_list("content", flat=True))
        for question in person["questions"]:
            if is_standing(question):
                found = any_alias_in(question["answers"], text)
                kept = any(any_alias_in(question["answers"], content) for content in active)
                rows.append({"id": question["id"], "question": question["question"], "answered": found, "kept": kept})
        log(f"  {person['person']}: {len(active)} active memories, profile {sizes[-1]} tokens")
    answered = sum(row["answered"] for row in rows)
    in_memories = [row for row in rows if row["kept"]]
    return {
        "split": split,
        "people": len(sizes),
        "questions": len(rows),
        "answered": answered,
        "share": round(answered / len(rows), 3) if rows else None,
        "in_memories": len(in_memories),
        "answered_of_in_memories": round(sum(r["answered"] for r in in_memories) / len(in_memories), 3)
        if in_memories
        else None,
        "profile_tokens_max": max(sizes, default=0),
        "seconds": round(time.perf_counter() - started, 1),
        "missed": [row for row in rows if not row["answered"]],
    }
