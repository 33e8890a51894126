"""Redact secrets already stored in capture windows and observation payloads (docs/adr/0015)."""

from django.db import migrations

from common.redaction import redact_json


def forward(apps, schema_editor):
    CaptureJob = apps.get_model("capture", "CaptureJob")
    for job in CaptureJob.objects.only("pk", "window", "payload").iterator(chunk_size=2000):
        window, payload = redact_json(job.window), redact_json(job.payload)
        if window != job.window or payload != job.payload:
            CaptureJob.objects.filter(pk=job.pk).update(window=window, payload=payload)


class Migration(migrations.Migration):
    dependencies = [("capture", "0002_row_security")]

    operations = [migrations.RunPython(forward, migrations.RunPython.noop)]
