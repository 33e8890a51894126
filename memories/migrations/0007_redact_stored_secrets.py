"""Redact secrets already stored before every write was redacted (docs/adr/0015).

Memories written directly (content, metadata), their revisions, conversation messages (text
and extras) and scratchpad values go through ``common.redaction``; only rows that change
are written. A memory whose content changes gets a new content hash and is queued for
re-embedding (``embedding_status`` pending: the sweeper embeds it within minutes).
"""

import hashlib

from django.db import migrations

from common.redaction import find_secrets, redact, redact_json


def _hash(content):
    return hashlib.sha256(" ".join(content.split()).casefold().encode()).hexdigest()


def forward(apps, schema_editor):
    Memory = apps.get_model("memories", "Memory")
    for memory in Memory.objects.only("pk", "content", "metadata").iterator(chunk_size=2000):
        content, metadata = redact(memory.content)[0], redact_json(memory.metadata)
        if content != memory.content or metadata != memory.metadata:
            fields = {"metadata": metadata}
            if content != memory.content:
                fields |= {"content": content, "content_hash": _hash(content), "embedding_status": "pending"}
            Memory.objects.filter(pk=memory.pk).update(**fields)
    Revision = apps.get_model("memories", "MemoryRevision")
    for revision in Revision.objects.only("pk", "before", "after").iterator(chunk_size=2000):
        before, after = redact_json(revision.before), redact_json(revision.after)
        if before != revision.before or after != revision.after:
            Revision.objects.filter(pk=revision.pk).update(before=before, after=after)
    Message = apps.get_model("memories", "Message")
    for message in Message.objects.only("pk", "content", "extra").iterator(chunk_size=2000):
        if find_secrets(message.content) or redact_json(message.extra) != message.extra:
            Message.objects.filter(pk=message.pk).update(
                content=redact(message.content)[0], extra=redact_json(message.extra)
            )
    Entry = apps.get_model("memories", "ScratchpadEntry")
    for entry in Entry.objects.only("pk", "value").iterator(chunk_size=2000):
        value = redact_json(entry.value)
        if value != entry.value:
            Entry.objects.filter(pk=entry.pk).update(value=value)


class Migration(migrations.Migration):
    dependencies = [("memories", "0006_row_security")]

    operations = [migrations.RunPython(forward, migrations.RunPython.noop)]
