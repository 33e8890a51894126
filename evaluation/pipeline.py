"""The end-to-end evaluation behind ``manage.py eval_pipeline``: conversations in, answers out.

Everything goes through the service as an agent uses it: each session of a conversation is one
``POST /api/v1/capture`` (``trigger: compaction``), the Celery worker extracts memories, then each
question is one ``POST /api/v1/retrieve``. Every message carries a ``timestamp`` on its session's
date and a ``correlation_id`` naming the turn, so a returned item can be traced to the turn it
came from:

* an episode (a raw captured message, in ``episodes[]``) carries its ``correlation_id``;
* a memory lists its source messages in ``source.messages[*].correlation_id``;
* a memory without ``source.messages`` (the service before provenance) is traced to the message
  of its capture job whose content words overlap its own (or its ``source.excerpt``) the most: an
  approximation, counted and reported as ``approximated_provenance``.

The rank is memories and episodes merged by ``score``, highest first. This module plans the
requests (:func:`natural_plan`, :func:`locomo_plan`) and runs them against a running service
(:func:`capture_all`, :func:`ask_all`); ``pipeline_scores`` scores the answers
(:func:`~evaluation.pipeline_scores.summarize`); the command starts the processes.
"""

from __future__ import annotations

import datetime as dt
import json
import re
import threading
import time
from collections import Counter
from collections.abc import Callable, Iterable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import quote

from evaluation.natural import load_natural

Call = Callable[..., tuple[int, Any]]
LOCOMO_CATEGORIES = {1: "multi-hop", 2: "temporal", 3: "open-domain", 4: "single-hop"}
# Words that carry no fact: left out of answer-word recall and of the provenance overlap.
STOP_WORDS = frozenset({
    "a", "an", "the", "and", "or", "but", "of", "to", "in", "on", "at", "for", "from", "by", "with", "as",
    "is", "are", "was", "were", "be", "been", "being", "it", "its", "this", "that", "these", "those", "i",
    "me", "my", "mine", "you", "your", "he", "him", "his", "she", "her", "we", "us", "our", "they", "them",
    "their", "what", "when", "where", "who", "whom", "which", "why", "how", "do", "does", "did", "has", "have",
    "had", "not", "no", "so", "if", "about", "can", "could", "should", "would", "will", "just", "than", "then",
    "there", "here", "into", "out", "up", "down", "over", "also", "very", "really", "too", "s", "t", "m", "ll",
    "re", "ve", "d", "am", "yes", "yeah", "ok", "oh", "lol"
})  # fmt: skip
_WORD = re.compile(r"[a-z0-9]+(?:'[a-z]+)?")


def content_words(text: str) -> list[str]:
    """The words of ``text`` that carry a fact (lower case, without STOP_WORDS): what the provenance
    overlap here and answer-word recall (``pipeline_scores``) compare."""
    return [w for w in _WORD.findall(text.lower()) if w not in STOP_WORDS]


# --- Plans: what to send, and what to ask ------------------------------------------------


@dataclass
class Capture:
    """One session as one capture request for one user."""

    user_id: str
    session_id: str
    messages: list[dict[str, Any]]


@dataclass
class Question:
    id: str
    query: str
    user_ids: list[str]  # asked to each; their answers merged by score
    group: str  # the split (natural) or the conversation (LoCoMo)
    tenant: str  # the person (natural) or the conversation (LoCoMo) whose turns it is about
    type: str  # the natural set's type, or LoCoMo's category name
    evidence: frozenset[str]  # correlation ids of the turns that state the answer
    answers: list[str] = field(default_factory=list)  # aliases (natural) or the one answer (LoCoMo)
    stale: list[str] = field(default_factory=list)
    answer_text: str = ""  # what answer-word recall counts the words of


@dataclass
class Plan:
    dataset: str
    captures: dict[str, list[Capture]]  # per user, in the order they must be captured
    tenants: dict[str, str]  # user -> the person or conversation (its project unless shared)
    questions: list[Question]
    turns: int  # messages sent, every user counted
    notes: list[str] = field(default_factory=list)


def _stamp(day: dt.datetime, index: int) -> str:
    # A minute between messages keeps them in order on the session's date.
    return (day + dt.timedelta(minutes=index)).isoformat()


def natural_plan(path: Path, *, split: str = "all", sample: int | None = None, people: int | None = None) -> Plan:
    """The natural set: each person one user; every session captured on its date."""
    rows = load_natural(path, split=split)
    if people:
        rows = rows[:people]
    captures: dict[str, list[Capture]] = {}
    questions: list[Question] = []
    turns = 0
    for person in rows:
        user = f"natural-{person['person']}"
        captures[user] = []
        for s_index, session in enumerate(person["sessions"]):
            day = dt.datetime.fromisoformat(session["date"]).replace(hour=19, tzinfo=dt.UTC)
            messages = [
                {
                    "role": m["role"],
                    "content": m["content"],
                    "timestamp": _stamp(day, m_index),
                    "correlation_id": f"{person['person']}:{s_index}:{m_index}",
                }
                for m_index, m in enumerate(session["messages"])
            ]
            turns += len(messages)
            captures[user].append(Capture(user, f"{person['person']}-s{s_index}", messages))
        for q in person["questions"]:
            answers = q["answers"]
            questions.append(
                Question(
                    id=q["id"],
                    query=q["question"],
                    user_ids=[user],
                    group=person["split"],
                    tenant=person["person"],
                    type=q["type"],
                    evidence=frozenset(f"{person['person']}:{s}:{m}" for s, m in q["evidence"]),
                    answers=answers,
                    stale=q.get("stale", []),
                    # The shortest alias's words: "pescatarian", not every way of writing it.
                    answer_text=min(answers, key=len) if answers else "",
                )
            )
    plan = Plan("natural", captures, {u: u.removeprefix("natural-") for u in captures}, questions, turns)
    return _sampled(plan, sample)


def parse_locomo_date(text: str) -> dt.datetime:
    """LoCoMo's session stamps ("1:56 pm on 8 May, 2023") as UTC datetimes."""
    return dt.datetime.strptime(text.strip(), "%I:%M %p on %d %B, %Y").replace(tzinfo=dt.UTC)


def speakers_named(question: str, speakers: Iterable[str]) -> list[str]:
    """The speakers a LoCoMo question names: a capitalised word that is their first name, or the
    start of it of three letters or more ("Mel" for Melanie). The rule is in the command's help."""
    words = {w.lower() for w in re.findall(r"\b[A-Z][a-z]+", question)}
    named = []
    for speaker in speakers:
        first = speaker.split()[0].lower()
        if any(w == first or (len(w) >= 3 and first.startswith(w)) for w in words):
            named.append(speaker)
    return named


def locomo_plan(path: Path, *, conversations: int | None = None, sample: int | None = None) -> Plan:
    """LoCoMo: each speaker their own user (their turns ``user``, the other's ``assistant``).

    A category 1–4 question goes to the speaker it names; one naming both, or neither, goes to
    both and their answers are merged by score (a memory of either may hold the evidence)."""
    data = json.loads(path.read_text(encoding="utf-8"))
    if conversations:
        data = data[:conversations]
    captures: dict[str, list[Capture]] = {}
    questions: list[Question] = []
    turns = 0
    routed: Counter[str] = Counter()
    for conv in data:
        sample_id = conv["sample_id"]
        talk = conv["conversation"]
        speakers = [talk["speaker_a"], talk["speaker_b"]]
        users = {name: f"{sample_id}:{name}"[:255] for name in speakers}
        for name in speakers:
            captures[users[name]] = []
        numbers = sorted(int(k.split("_")[1]) for k in talk if re.fullmatch(r"session_\d+", k) and talk[k])
        for number in numbers:
            day = parse_locomo_date(talk[f"session_{number}_date_time"])
            session = talk[f"session_{number}"]
            for name in speakers:
                messages = []
                for index, turn in enumerate(session):
                    text = turn["text"]
                    if turn.get("blip_caption"):  # the photo's caption, as the other speaker saw it
                        text = f"{text} [shares a photo: {turn['blip_caption']}]"
                    messages.append(
                        {
                            "role": "user" if turn["speaker"] == name else "assistant",
                            "content": text,
                            "timestamp": _stamp(day, index),
                            "correlation_id": f"{sample_id}:{turn['dia_id']}"[:100],
                        }
                    )
                turns += len(messages)
                captures[users[name]].append(Capture(users[name], f"{sample_id}-s{number}", messages))
        for index, qa in enumerate(conv["qa"]):
            category = qa.get("category")
            if category not in LOCOMO_CATEGORIES:
                continue
            named = speakers_named(qa["question"], speakers)
            routed["one" if len(named) == 1 else "both" if named else "neither"] += 1
            targets = named if len(named) == 1 else speakers
            evidence = {
                f"{sample_id}:{d.strip()}"
                for item in qa.get("evidence", [])
                for d in re.split(r"[;,]", item)
                if d.strip()
            }
            answer = str(qa.get("answer", ""))
            questions.append(
                Question(
                    id=f"{sample_id}:q{index}",
                    query=qa["question"],
                    user_ids=[users[t] for t in targets],
                    group=sample_id,
                    tenant=sample_id,
                    type=LOCOMO_CATEGORIES[category],
                    evidence=frozenset(evidence),
                    answer_text=answer,  # one free-text answer: scored by its words, not as an alias
                )
            )
    notes = [f"questions naming one speaker {routed['one']}, both {routed['both']}, neither {routed['neither']}"]
    plan = Plan("locomo", captures, {u: u.split(":")[0] for u in captures}, questions, turns, notes)
    return _sampled(plan, sample)


def _sampled(plan: Plan, sample: int | None) -> Plan:
    """The first ``sample`` questions, and only the captures of the users they ask: on a slow
    extractor the captures are what costs."""
    if not sample:
        return plan
    questions = plan.questions[:sample]
    asked = {user for q in questions for user in q.user_ids}
    captures = {user: items for user, items in plan.captures.items() if user in asked}
    turns = sum(len(c.messages) for items in captures.values() for c in items)
    notes = [*plan.notes, f"sample: the first {len(questions)} questions, {len(captures)} users captured"]
    tenants = {user: plan.tenants[user] for user in captures}
    return Plan(plan.dataset, captures, tenants, questions, turns, notes)


# --- Running: captures, then questions ------------------------------------------------------


@dataclass
class JobRecord:
    job_id: str
    user_id: str
    messages: list[dict[str, Any]]
    status: str = "queued"
    memory_ids: list[str] = field(default_factory=list)
    seconds: float | None = None  # created → finished: queueing included, as the agent waits
    run_seconds: float | None = None  # started → finished: the extraction itself
    error: str | None = None
    extractor: str | None = None


def _seconds(job: dict[str, Any], since: str = "created_at") -> float | None:
    if not job.get(since) or not job.get("finished_at"):
        return None
    start = dt.datetime.fromisoformat(str(job[since]).replace("Z", "+00:00"))
    end = dt.datetime.fromisoformat(str(job["finished_at"]).replace("Z", "+00:00"))
    return (end - start).total_seconds()


def capture_all(
    call: Call, keys: dict[str, str], plan: Plan, *, log: Callable[[str], None], timeout: float = 3600
) -> list[JobRecord]:
    """Send every capture; a user's next session only once their previous job is finished (as
    sessions days apart would be), different users in parallel. Waits for every job."""
    pending = {user: list(items) for user, items in plan.captures.items()}
    in_flight: dict[str, JobRecord] = {}
    done: list[JobRecord] = []
    total = sum(len(v) for v in pending.values())
    deadline = time.monotonic() + timeout
    last_log = time.monotonic()
    while pending or in_flight:
        for user in list(pending):
            if user in in_flight:
                continue
            capture = pending[user].pop(0)
            if not pending[user]:
                del pending[user]
            body = {
                "user_id": user,
                "session_id": capture.session_id,
                "trigger": "compaction",
                "messages": capture.messages,
            }
            status, answer = call("POST", "/api/v1/capture", body, key=keys[user])
            if status != 202:
                raise RuntimeError(f"capture for {user} answered {status}: {answer}")
            in_flight[user] = JobRecord(answer["job_id"], user, capture.messages)
        time.sleep(0.05)
        for user, record in list(in_flight.items()):
            status, job = call("GET", f"/api/v1/capture/{record.job_id}?user_id={_quote(user)}", key=keys[user])
            if status != 200:
                raise RuntimeError(f"capture job {record.job_id} answered {status}: {job}")
            if job["status"] in ("done", "failed", "coalesced"):
                record.status, record.memory_ids = job["status"], list(job["memory_ids"])
                record.seconds, record.error = _seconds(job), job.get("error")
                record.extractor = job.get("extractor")
                record.run_seconds = _seconds(job, "started_at")
                done.append(record)
                del in_flight[user]
        if time.monotonic() > deadline:
            raise RuntimeError(f"captures did not finish in {timeout} s ({len(done)} of {total} done)")
        if time.monotonic() - last_log > 15:
            log(f"  captures: {len(done)} of {total} done")
            last_log = time.monotonic()
    return done


def _quote(text: str) -> str:
    return quote(text, safe="")


@dataclass
class Item:
    """One returned item, memory or episode, with the turns it came from."""

    kind: str
    text: str
    score: float
    turns: frozenset[str]
    approximated: bool = False


def rebuild_profiles(call: Call, keys: dict[str, str], users: Iterable[str]) -> int:
    """Rebuild each user's profile now, as the worker does a few seconds after their last change
    (``MEMORYHUB_PROFILE_DEBOUNCE_S``), so every question meets the profile of everything captured;
    how many users have one (no memory to rest on is a 404)."""
    built = 0
    for user in users:
        status, _ = call("POST", f"/api/v1/users/{_quote(user)}/profile/rebuild", {}, key=keys[user])
        if status not in (200, 404):
            raise RuntimeError(f"profile rebuild for {user} answered {status}")
        built += status == 200
    return built


def ask_all(
    call: Call,
    keys: dict[str, str],
    plan: Plan,
    jobs: list[JobRecord],
    *,
    threads: int = 2,
    min_score: float | None = None,
) -> list[dict[str, Any]]:
    """Ask every question; for each, the merged ranking (top 10) and the request latencies."""
    job_by_memory = {mid: job for job in jobs for mid in job.memory_ids}
    job_by_id = {job.job_id: job for job in jobs}
    lock = threading.Lock()
    latencies: list[float] = []

    def one(question: Question) -> dict[str, Any]:
        items: list[Item] = []
        profiles: list[str] = []
        for user in question.user_ids:
            body: dict[str, Any] = {"user_id": user, "query": question.query, "limit": 10}
            if min_score is not None:  # otherwise the service's default relevance cut
                body["min_score"] = min_score
            started = time.perf_counter()
            status, answer = call("POST", "/api/v1/retrieve", body, key=keys[user], timeout=60)
            elapsed = (time.perf_counter() - started) * 1000
            if status != 200:
                raise RuntimeError(f"retrieve for {question.id} answered {status}: {answer}")
            with lock:
                latencies.append(elapsed)
            profiles.append(str((answer.get("profile") or {}).get("text") or ""))
            for memory in answer.get("memories") or []:
                items.append(_memory_item(memory, job_by_memory, job_by_id))
            for episode in answer.get("episodes") or []:
                corr = episode.get("correlation_id") or ""
                items.append(
                    Item(
                        "episode",
                        str(episode.get("content") or ""),
                        float(episode.get("score") or 0),
                        frozenset({corr}),
                    )
                )
        items.sort(key=lambda i: -i.score)
        return {"question": question, "items": items[:10], "profile": "\n".join(profiles)}

    with ThreadPoolExecutor(threads) as pool:
        results = list(pool.map(one, plan.questions))
    for result in results:
        result["latencies"] = latencies
    return results


def _memory_item(memory: dict[str, Any], job_by_memory: dict[str, JobRecord], job_by_id: dict[str, JobRecord]) -> Item:
    text = str(memory.get("content") or "")
    score = float(memory.get("score") or 0)
    source = memory.get("source") or {}
    listed = source.get("messages") if isinstance(source, dict) else None
    if isinstance(listed, list):  # the service says where it came from ([]: from no stored message)
        turns = frozenset(str(m.get("correlation_id") or "") for m in listed if isinstance(m, dict)) - {""}
        return Item("memory", text, score, turns)
    job = job_by_id.get(str(source.get("capture_job"))) if isinstance(source, dict) else None
    job = job or job_by_memory.get(str(memory.get("id")))
    if job is None:  # not from a capture this run knows (nothing else writes to the project)
        return Item("memory", text, score, frozenset())
    probe = set(content_words(str(source.get("excerpt") or "") or text)) or set(content_words(text))
    best, best_overlap = "", 0
    for message in job.messages:
        overlap = len(probe & set(content_words(str(message["content"]))))
        if overlap > best_overlap:
            best, best_overlap = message["correlation_id"], overlap
    return Item("memory", text, score, frozenset({best}) if best else frozenset(), approximated=True)
