# Production image: the same code, with DATABASE_URL / REDIS_URL pointing at real servers
# (README "Deploying"). Settings start no server, so collectstatic needs none at build time.
# Only what the service runs: the dev tools (requirements-dev.lock) stay out of the image.
FROM python:3.11-slim
ENV PYTHONDONTWRITEBYTECODE=1 PYTHONUNBUFFERED=1
WORKDIR /app
COPY requirements.lock .
RUN pip install --no-cache-dir -r requirements.lock
COPY . .
RUN python manage.py collectstatic --noinput \
    && python -m retrieval.embedding.int8_model \
    && useradd --system --no-create-home --home-dir /nonexistent --shell /usr/sbin/nologin memoryhub
# The processes run unprivileged; the code and static files stay root-owned, read-only to them.
USER memoryhub
EXPOSE 8000
CMD ["gunicorn", "memoryhub.wsgi:application", "--config", "python:serving.gunicorn_conf", "--bind", "0.0.0.0:8000"]
