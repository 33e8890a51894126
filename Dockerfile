# Production image: the same code, with DATABASE_URL / REDIS_URL pointing at real servers.
FROM python:3.11-slim
ENV PYTHONDONTWRITEBYTECODE=1 PYTHONUNBUFFERED=1
WORKDIR /app
COPY requirements.lock .
RUN pip install --no-cache-dir -r requirements.lock
COPY . .
RUN DATABASE_URL=postgresql://build@localhost/build REDIS_URL=redis://localhost:6379/0 \
    python manage.py collectstatic --noinput
EXPOSE 8000
CMD ["gunicorn", "memoryhub.wsgi:application", "--config", "python:memoryhub.gunicorn_conf", "--bind", "0.0.0.0:8000"]
