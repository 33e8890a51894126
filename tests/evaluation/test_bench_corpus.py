"""bench_retrieve's corpus: different sentences, each memory with its own vector (docs/adr/0053).

The corpus it replaced had ~8,400 sentences in "(note N)" variants with one vector per sentence;
pgvector keeps identical vectors as one HNSW element, so its "100k" graph had ~8.4k elements.
"""

from __future__ import annotations

import pytest
from django.db import connection

from evaluation.management.commands.bench_retrieve import USERS, questions, seed
from evaluation.synthetic import varied_memories
from memories.models import Memory


def test_varied_memories_are_different_sentences_and_the_same_for_a_seed():
    sentences = varied_memories(5000, seed=3)
    assert len(set(sentences)) == 5000
    assert varied_memories(5000, seed=3) == sentences
    assert varied_memories(50, seed=4) != sentences[:50]
    # Few sentences share all but their last three words: not clusters of near-copies, as the
    # old corpus's "(note N)" variants were.
    cores = {sentence.rsplit(" ", 3)[0] for sentence in sentences}
    assert len(cores) > 0.9 * len(sentences)


def test_questions_are_the_generators_sentences_asked():
    assert questions(3, seed=5) == [f"{s[:-1]}?" for s in varied_memories(3, seed=5)]


@pytest.mark.django_db
def test_the_seed_embeds_every_memory_on_its_own_and_reuses_a_home_seeded_so():
    project = seed(120, log=lambda _: None)
    memories = Memory.objects.filter(project=project)
    assert memories.count() == 120
    assert set(memories.values_list("content", flat=True)) == set(varied_memories(120, seed=7))
    assert memories.values("user_id").distinct().count() == USERS
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT count(*), count(DISTINCT md5(vector::text)) FROM memories_embedding WHERE project_id = %s",
            [project.pk],
        )
        assert cursor.fetchone() == (120, 120)
    ids = set(memories.values_list("id", flat=True))
    assert seed(120, log=lambda _: None).pk == project.pk
    assert set(Memory.objects.filter(project=project).values_list("id", flat=True)) == ids
