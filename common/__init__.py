"""Building blocks every app uses: API auth, the error envelope, body parsing, redaction, row
security, the Redis client, the task queue, idempotency, configuration."""
