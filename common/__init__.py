"""Building blocks every app uses: auth, the error envelope, parsing, redaction, row security, Redis, the task queue, idempotency, configuration."""
