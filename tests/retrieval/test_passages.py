"""A chat message's passages: the sentences and clauses a question may ask about on their own."""

from __future__ import annotations

from conversations.models import Message
from retrieval.vectors.message_vectors import passage_texts, passages


def test_a_message_splits_at_sentences_and_at_a_new_subject() -> None:
    said = "can you plan meals for the week? i work nights as a paramedic, so my sleep is a mess and my wife hates it"
    assert passages(said) == [
        "can you plan meals for the week",
        "i work nights as a paramedic",
        "my sleep is a mess",
        "my wife hates it",
    ]


def test_short_pieces_are_left_out_and_a_list_stays_whole() -> None:
    assert passages("yes pls. lol") == []
    listed = "jellyfin, home assistant, pihole, all in docker"
    assert passages(listed) == [listed]


def test_a_one_sentence_message_has_a_passage_only_when_its_vector_carries_a_context() -> None:
    alone = Message(role="user", content="i use zsh not bash actually")
    replying = Message(role="user", content="i use zsh not bash actually", context="Here is a bash script.")
    assert passage_texts(alone) == []
    assert passage_texts(replying) == ["i use zsh not bash actually"]
    assert passage_texts(Message(role="assistant", content="Sure. I can do that. Anything else?")) == []
