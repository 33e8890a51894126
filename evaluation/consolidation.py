"""Consolidation measured: the rules on labelled pairs, and a run's throughput on a large user.

``evaluate_pairs`` judges every pair of ``evaluation/data/consolidation/pairs.jsonl`` with the rules the
runs use (``consolidation.rules``) and the configured embedder's cosine, and scores merge and
supersede per split: precision counts a wrong merge twice (it loses a fact; a wrong supersede
only hides one behind its successor), recall is over the pairs labelled merge or supersede.

``measure_throughput`` stores a synthetic end user with ``memories`` memories (generated here:
facts over many topics, with near-duplicates and changes of value planted), runs a full
consolidation and then, after ``new`` more memories, an incremental one, on the same servers in
one sitting, and reports memories per second and the incremental run's cost as a share of the
full run's (docs/adr/0095-consolidation-measured.md).
"""

from __future__ import annotations

import json
import os
import random
import string
import time
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import timedelta
from pathlib import Path
from typing import Any

import numpy as np
from django.utils import timezone

from consolidation import observer, reader, rules, services, vectors
from consolidation.models import ConsolidationAction, ConsolidationObservation, ConsolidationRun, ConsolidationState
from evaluation import machine
from memories import services as memory_services
from memories.models import Memory, Project
from retrieval.embedding.embedders import get_embedder
from retrieval.embedding.protocol import Embedder
from retrieval.vectors.memory_vectors import active_model, store_vectors

SPLITS = ("dev", "heldout")
ACTIONS = ("merge", "supersede")
LABELS = ("merge", "supersede", "keep_both")
# A wrong merge loses a fact: it counts this many times among the false positives.
WRONG_MERGE_WEIGHT = 2


@dataclass(frozen=True)
class Pair:
    id: str
    domain: str
    older: str
    newer: str
    label: str
    split: str


def load_pairs(path: str | Path) -> list[Pair]:
    pairs = []
    for number, line in enumerate(Path(path).read_text().splitlines(), 1):
        if not line.strip():
            continue
        row = json.loads(line)
        if row.get("label") not in LABELS or row.get("split") not in SPLITS:
            raise ValueError(f"{path}:{number}: label must be one of {LABELS}, split one of {SPLITS}")
        pairs.append(Pair(**{name: str(row[name]) for name in Pair.__dataclass_fields__}))
    return pairs


def _predicted(verdict: rules.Verdict) -> str:
    return "keep_both" if verdict.action == "keep" else verdict.action


def score(rows: Sequence[tuple[str, str]]) -> dict[str, Any]:
    """Precision, recall and counts of merge + supersede over ``(label, predicted)`` rows."""
    right = sum(1 for label, predicted in rows if predicted in ACTIONS and predicted == label)
    wrong = [predicted for label, predicted in rows if predicted in ACTIONS and predicted != label]
    weighted = sum(WRONG_MERGE_WEIGHT if predicted == "merge" else 1 for predicted in wrong)
    labelled = sum(1 for label, _ in rows if label in ACTIONS)
    per_action = {
        action: {
            "labelled": sum(1 for label, _ in rows if label == action),
            "predicted": sum(1 for _, predicted in rows if predicted == action),
            "right": sum(1 for label, predicted in rows if label == predicted == action),
        }
        for action in ACTIONS
    }
    return {
        "pairs": len(rows),
        "precision": round(right / (right + weighted), 4) if right + weighted else 1.0,
        "recall": round(right / labelled, 4) if labelled else 1.0,
        "right": right,
        "wrong": len(wrong),
        "wrong_merges": wrong.count("merge"),
        "per_action": per_action,
        "confusion": {f"{label}->{predicted}": n for (label, predicted), n in sorted(Counter(rows).items())},
    }


def evaluate_pairs(pairs: Sequence[Pair], embedder: Embedder | None = None) -> dict[str, Any]:
    """Every pair judged; figures per split, and each pair's verdict."""
    embedder = embedder or get_embedder()
    vectors = np.asarray(embedder.embed([text for pair in pairs for text in (pair.older, pair.newer)]), np.float32)
    vectors /= np.linalg.norm(vectors, axis=1, keepdims=True)
    judged: list[dict[str, Any]] = []
    for index, pair in enumerate(pairs):
        cosine = float(vectors[2 * index] @ vectors[2 * index + 1])
        verdict = rules.judge(reader.read(pair.older), reader.read(pair.newer), cosine)
        judged.append(
            {
                "id": pair.id,
                "split": pair.split,
                "label": pair.label,
                "predicted": _predicted(verdict),
                "confidence": verdict.confidence,
                "reason": verdict.reason,
                "cosine": round(cosine, 4),
                "older": pair.older,
                "newer": pair.newer,
            }
        )
    splits = {
        split: score([(row["label"], row["predicted"]) for row in judged if row["split"] == split]) for split in SPLITS
    }
    return {"embedder": embedder.name, "splits": splits, "pairs": judged}


# --- throughput ---------------------------------------------------------------------------------


# Synthetic facts, generated: templates filled from lists, every text distinct (a store holds no
# exact duplicates: capture skips them). About one memory in twenty restates an earlier one in
# other words and one in fifty changes an earlier one's value, as a user repeating themselves
# and changing their mind over months would.
def _options(text: str) -> list[str]:
    """The options of a list written as one string, "|" between them (spaces inside an option)."""
    return [option.strip() for option in text.split("|")]


_NAMES = _options(
    "Ana|Lia|Tom|Ben|Priya|Kenji|Ines|Marco|Sam|Noor|Ravi|Elif|Omar|Yuki|Lena|Tariq|Mia|Zoe|Hugo|Ada|Ivan|Nia|Leo|"
    "Sara|Jon|Mei|Ali|Eva|Paul|Rosa"
)
_CITIES = _options(
    "Lisbon|Oslo|Hanoi|Lima|Nairobi|Montreal|Seoul|Tbilisi|Cusco|Porto|Kyoto|Berlin|Madrid|Dublin|Quito|Accra|"
    "Krakow|Austin|Perth|Bergen"
)
_LISTS: dict[str, list[str]] = {
    "name": _NAMES,
    "city": _CITIES,
    "month": _options("January|February|March|April|May|June|July|August|September|October|November|December"),
    "year": [str(year) for year in range(2010, 2026)],
    "relation": _options("cousin|friend|colleague|neighbour|mentor|classmate|godson|aunt"),
    "event": _options("a conference|a wedding|a meetup|a hackathon|a concert|a workshop|a birthday party|a marathon"),
    "project": _options("billing|search|checkout|onboarding|payments|analytics|mobile|reporting|auth|inventory"),
    "practice": _options(
        "type hints|docstrings|short functions|early returns|structured logging|unit tests|small commits|"
        "named arguments|immutable data|explicit errors"
    ),
    "language": _options("Python|Go|Rust|TypeScript|SQL|Kotlin|Ruby|Elixir|Java|Swift"),
    "activity": _options(
        "piano lessons|a yoga class|Spanish lessons|a pottery class|a climbing session|a swim|a choir rehearsal"
    ),
    "weekday": _options("Monday|Tuesday|Wednesday|Thursday|Friday|Saturday|Sunday"),
    "part": _options("mornings|evenings|afternoons"),
    "item": _options(
        "a desk lamp|a bookshelf|a standing desk|a rug|a coffee grinder|a printer|a monitor arm|a plant|"
        "an armchair|a kettle"
    ),
    "room": _options("office|kitchen|living room|bedroom|hallway|balcony"),
    "topic": _options("caching|queues|indexes|consensus|observability|migrations|retries|sharding|tracing|compilers"),
    "team": _options("platform|data|frontend|infra|security|growth|ML|mobile"),
    "book": _options(
        "Dune|Middlemarch|Beloved|Solaris|Ulysses|Persuasion|Neuromancer|Hyperion|Rebecca|Kindred|Emma|"
        "Frankenstein|Dracula|Siddhartha|Stoner"
    ),
}
_TEMPLATES = (
    ("The user read {book} in {year}.", "In {year} the user read {book}."),
    ("The user met {name} at {event} in {city}.", "The user got to know {name} at {event} in {city}."),
    ("The user's {relation} {name} lives in {city}.", "The user's {relation} {name} is based in {city}."),
    (
        "The user worked on the {project} service with {name}.",
        "The user and {name} built the {project} service together.",
    ),
    ("The user wants {practice} in {language} code.", "The user prefers {practice} in {language} code."),
    ("The user visited {city} in {month} {year}.", "The user went to {city} in {month} {year}."),
    ("The user takes {activity} on {weekday} {part}.", "The user has {activity} on {weekday} {part}."),
    ("The user bought {item} for the {room}.", "The user got {item} for the {room}."),
    ("The user is reading about {topic} for the {team} team.", "The user studies {topic} for the {team} team."),
)
_CHANGES = (
    (
        "The user uses {0} as their editor.",
        "The user switched to {1} as their editor.",
        ("Vim", "Helix", "Emacs", "Zed"),
    ),
    ("The user lives in {0}.", "The user moved to {1} recently.", tuple(_CITIES)),
    ("The user's timezone is {0}.", "The user's timezone is {1} now.", ("UTC", "CET", "EST", "JST", "PST", "IST")),
    ("The user works at {0}.", "The user started a new job at {1}.", ("Larkspur", "Fernway", "Quillon", "Brightwater")),
    ("The user's manager is {0}.", "The user's manager is {1} now.", tuple(_NAMES)),
)


def synthetic_contents(count: int, *, seed: int = 47) -> tuple[list[str], dict[str, tuple[str, ...]]]:
    """``count`` distinct memory texts of one user, in the order they were said (facts,
    restatements of earlier ones in other words, changes of an earlier value), and what each
    means: texts with the same meaning are duplicates (a merge is right); a change's texts mean
    ``("change", slot, value)`` (a supersede within one slot is right)."""
    rng = random.Random(seed)
    out: list[str] = []
    meaning: dict[str, tuple[str, ...]] = {}

    def add(text: str, means: tuple[str, ...]) -> None:
        if text not in meaning:
            meaning[text] = means
            out.append(text)

    while len(out) < count:
        roll = rng.random()
        number = rng.randrange(len(_TEMPLATES))
        plain, restated = _TEMPLATES[number]
        fields = [name for _, name, _, _ in string.Formatter().parse(plain) if name]
        values = {name: rng.choice(_LISTS[name]) for name in fields}
        means = (str(number), *(values[name] for name in fields))
        if roll < 0.05:
            add(plain.format(**values), means)
            add(restated.format(**values), means)
        elif roll < 0.07:
            slot = rng.randrange(len(_CHANGES))
            old, new, choices = _CHANGES[slot]
            first, second = rng.sample(choices, 2)
            add(old.format(first), ("change", str(slot), first))
            add(new.format(first, second), ("change", str(slot), second))
        else:
            add(plain.format(**values), means)
    return out[:count], {text: meaning[text] for text in out[:count]}


def _store(project: Project, user_id: str, contents: Sequence[str], *, days_ago: float) -> list[Memory]:
    """Store ``contents`` as ``user_id``'s active memories with their vectors, dated ``days_ago``
    (spread over the last minutes of that day, in order)."""
    drafts = [memory_services.MemoryDraft(user_id=user_id, content=text) for text in contents]
    created: list[Memory] = []
    for start in range(0, len(drafts), 1000):
        created += memory_services.memory_bulk_create(
            project=project, drafts=drafts[start : start + 1000], actor="system:eval_consolidation"
        )
    model = active_model(project)
    embedder = get_embedder()
    for start in range(0, len(created), 500):
        chunk = created[start : start + 500]
        store_vectors(chunk, embedder.embed([m.content for m in chunk]), model=model)
    base = timezone.now() - timedelta(days=days_ago, seconds=len(created) / 1000)
    for offset, memory in enumerate(created):
        memory.created_at = memory.updated_at = base + timedelta(milliseconds=offset)
    Memory.objects.bulk_update(created, ["created_at", "updated_at"], batch_size=1000)
    Memory.objects.filter(pk__in=[m.pk for m in created]).update(embedding_status="ready")
    return created


def measure_throughput(*, project: Project, memories: int = 10_000, new: int = 50, user_id: str = "") -> dict[str, Any]:
    """A full run over ``memories`` memories, then an incremental one after ``new`` more; the
    incremental run's cost by a worker holding none of the user's vectors (its whole read of them
    in place of its refresh); and how the runs' actions fare against the planted pairs."""
    user_id = user_id or f"throughput-{int(time.time())}"
    contents, meaning = synthetic_contents(memories + new)
    started = time.perf_counter()
    _store(project, user_id, contents[:memories], days_ago=30)
    stored_s = time.perf_counter() - started
    full = _timed_run(project, user_id)
    _store(project, user_id, contents[memories:], days_ago=0)
    incremental = _timed_run(project, user_id)
    services.forget_cached_vectors()
    clock = time.perf_counter()
    vectors.user_vectors(project=project, model=active_model(project), user_id=user_id)
    whole_read_s = time.perf_counter() - clock
    cold_s = incremental["seconds"] - incremental["timings"].get("vectors", 0.0) + whole_read_s
    return {
        "machine": machine.summary(machine.describe()),
        "load_average": [round(load, 2) for load in os.getloadavg()],
        "user_id": user_id,
        "memories": memories,
        "new": new,
        "store_s": round(stored_s, 2),
        "full": full,
        "incremental": incremental,
        "incremental_share": round(incremental["seconds"] / full["seconds"], 4),
        "whole_vector_read_s": round(whole_read_s, 4),
        "incremental_cold_s": round(cold_s, 3),
        "incremental_cold_share": round(cold_s / full["seconds"], 4),
        "planted": planted_figures(project=project, user_id=user_id, meaning=meaning),
    }


def planted_figures(*, project: Project, user_id: str, meaning: dict[str, tuple[str, ...]]) -> dict[str, Any]:
    """The runs' actions against what the generator meant: a merge is right when both texts mean
    the same, a supersede when both are values of one changed slot and the survivor the newer;
    recall: the share of texts repeating an earlier meaning that ended merged."""
    actions = ConsolidationAction.objects.filter(project=project, user_id=user_id).select_related("survivor", "retired")
    right = wrong = 0
    examples: list[str] = []
    for action in actions:
        survivor, retired = meaning.get(action.survivor.content), meaning.get(action.retired.content)
        if action.kind == "merge":
            ok = survivor is not None and survivor == retired
        else:
            ok = (
                survivor is not None
                and retired is not None
                and survivor[:2] == retired[:2]
                and survivor[0] == "change"
                and action.survivor.created_at > action.retired.created_at
            )
        right += ok
        wrong += not ok
        if not ok and len(examples) < 10:
            examples.append(f"{action.kind}: {action.retired.content!r} -> {action.survivor.content!r}")
    seen: set[tuple[str, ...]] = set()
    repeats = 0
    for means in meaning.values():
        if means[0] != "change":
            repeats += means in seen
            seen.add(means)
    merged = sum(1 for action in actions if action.kind == "merge" and action.status == "applied")
    return {
        "acted": right + wrong,
        "right": right,
        "precision": round(right / (right + wrong), 4) if right + wrong else 1.0,
        "repeated_facts": repeats,
        "merge_recall": round(min(merged, repeats) / repeats, 4) if repeats else 1.0,
        "wrong_examples": examples,
    }


def _timed_run(project: Project, user_id: str) -> dict[str, Any]:
    run = services.consolidation_submit(
        project=project, user_id=user_id, trigger="eval", actor="system:eval_consolidation", queue=False
    )
    started = time.perf_counter()
    services.consolidation_run(run_id=str(run.pk))
    seconds = time.perf_counter() - started
    run = ConsolidationRun.objects.get(pk=run.pk)
    return {
        "status": run.status,
        "seconds": round(seconds, 3),
        "compared": run.compared,
        "memories_per_s": round(run.compared / seconds, 1) if seconds else None,
        "counts": run.counts,
        "timings": run.timings,
        "error": run.error,
    }


def remove_user(*, project: Project, user_id: str) -> None:
    """Delete what ``measure_throughput`` stored (unless the command is told to keep it)."""
    ConsolidationRun.objects.filter(project=project, user_id=user_id).delete()
    ConsolidationState.objects.filter(project=project, user_id=user_id).delete()
    memories = Memory.objects.filter(project=project, user_id=user_id)
    memories.update(supersedes=None)
    memories.delete()


EVERYDAY_MEMORIES = Path(__file__).parent / "data" / "everyday_memories.jsonl"


def observation_figures(*, project: Project, path: Path = EVERYDAY_MEMORIES) -> dict[str, Any]:
    """With an LLM configured: each user of ``path`` (their own memories, as written) stored in
    ``project``, one run each, and every observation it proposed with the memories it cites.

    ``grounded`` is ``observer.grounded``: the share of an observation's words found in the
    memories it cites (a proposed one is above ``observer.MIN_GROUNDED``). Reading them is the
    other half.
    """
    rows = [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]
    by_user: dict[str, list[str]] = {}
    for row in rows:
        if row.get("scope", "user") == "user":
            by_user.setdefault(row["user_id"], []).append(row["content"])
    runs = []
    for user_id, contents in sorted(by_user.items()):
        _store(project, user_id, contents, days_ago=1)
        runs.append({"user_id": user_id, "memories": len(contents), **_timed_run(project, user_id)})
    observations: list[dict[str, Any]] = []
    shares: list[float] = []
    for proposal in ConsolidationObservation.objects.filter(project=project).order_by("user_id", "created_at"):
        cited = list(Memory.objects.filter(pk__in=proposal.cited).values_list("content", flat=True))
        grounded = observer.grounded(proposal.content, cited)
        shares.append(grounded)
        observations.append(
            {"user_id": proposal.user_id, "content": proposal.content, "cited": cited, "grounded": round(grounded, 3)}
        )
    return {
        "machine": machine.summary(machine.describe()),
        "users": len(by_user),
        "memories": sum(len(c) for c in by_user.values()),
        "runs": runs,
        "observations": observations,
        "cited_mean": round(float(np.mean([len(o["cited"]) for o in observations])), 2) if observations else None,
        "grounded_mean": round(float(np.mean(shares)), 3) if shares else None,
        "grounded_min": round(min(shares), 3) if shares else None,
    }
