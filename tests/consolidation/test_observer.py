"""The observer's pure parts (consolidation/observer.py): which memories make a group, and which
parts of an LLM's answer make an observation. No servers."""

from __future__ import annotations

from consolidation import observer
from consolidation.vectors import Candidate

CONTENTS = {"a": "Works as a data engineer.", "b": "Uses Python for pipelines.", "c": "Writes SQL daily."}
BATCH = [["a", "b", "c"]]


def star(seed: str, others: list[str], cosine: float) -> list[Candidate]:
    return [Candidate(seed, other, cosine) for other in others]


def test_a_group_needs_a_seed_with_two_close_eligible_neighbours():
    found = star("a", ["b", "c"], 0.5) + star("x", ["y"], 0.9) + star("p", ["q", "r"], 0.2)
    groups = observer.groups(found, eligible={"a", "b", "c", "x", "y", "p", "q", "r"}, seeds={"a", "x", "p"})
    assert [g.ids for g in groups] == [("a", "b", "c")]
    # A memory already cited elsewhere (not eligible) leaves too few.
    assert observer.groups(found, eligible={"a", "b"}, seeds={"a"}) == []
    # Only a compared memory seeds a group: its neighbours are the only complete ones.
    assert observer.groups(found, eligible={"a", "b", "c"}, seeds={"b"}) == []


def test_groups_are_most_cohesive_first_disjoint_and_bounded():
    found: list[Candidate] = []
    seeds = []
    for n in range(observer.MAX_GROUPS + 5):
        seed = f"s{n}"
        seeds.append(seed)
        found += star(seed, [f"{seed}-1", f"{seed}-2"], 0.5 + n / 100)
    found += star("s0", ["s1-1"], 0.99)  # shared with s1's group
    eligible = {i for c in found for i in (c.first, c.second)}
    groups = observer.groups(found, eligible=eligible, seeds=seeds)
    assert len(groups) == observer.MAX_GROUPS
    members = [i for g in groups for i in g.ids]
    assert len(members) == len(set(members))
    assert [g.cohesion for g in groups] == sorted((g.cohesion for g in groups), reverse=True)
    assert all(len(g.ids) >= observer.GROUP_MIN for g in groups)


def test_json_is_found_in_prose_and_fences_and_numbers_may_be_quoted():
    item = '{"group": "1", "statement": " A data engineer who  writes SQL daily. ", "cites": ["1", 3, 9]}'
    reply = 'Sure!\n```json\n{"observations": [' + item + "]}\n```"
    [proposal] = observer.parse(reply, BATCH, CONTENTS)
    assert proposal.statement == "A data engineer who writes SQL daily." and proposal.cited == ("a", "c")


def test_unusable_items_give_nothing():
    answers = [
        "",
        "no observation here",
        '{"observations": [{"group": 1, "statement": "x", "cites": [2]}]}',
        '{"observations": [{"group": 2, "statement": "x", "cites": [1, 2]}]}',
        '{"observations": [{"group": 1, "statement": "Writes SQL daily", "cites": [1, 3]}]}',
        '{"observations": [{"group": 1, "statement": "' + "long " * 100 + '", "cites": [1, 2]}]}',
        '{"observations": [{"group": true, "statement": "x y", "cites": [1, 2]}]}',
        '{"observations": [{"group": 1, "statement": ["x"], "cites": [1, 2]}]}',
        '{"verdicts": []}',
    ]
    assert [observer.parse(answer, BATCH, CONTENTS) for answer in answers] == [[]] * len(answers)


def test_one_statement_per_group_and_a_cut_off_answer_keeps_its_complete_items():
    reply = (
        '{"observations": [{"group": 1, "statement": "Data engineer, uses Python.", "cites": [1, 2]},'
        ' {"group": 1, "statement": "Uses Python, writes SQL.", "cites": [2, 3]}, {"group": 1, "statem'
    )
    [proposal] = observer.parse(reply, BATCH, CONTENTS)
    assert proposal.statement == "Data engineer, uses Python." and proposal.cited == ("a", "b")
