# Ballast image: one image for web (daphne) and worker (qcluster) processes.
FROM python:3.11-slim
ENV PYTHONDONTWRITEBYTECODE=1 PYTHONUNBUFFERED=1
WORKDIR /app
COPY pyproject.toml README.md ./
COPY ballast ballast
COPY builder builder
COPY runs runs
COPY approvals approvals
RUN pip install --no-cache-dir .
COPY . .
RUN BALLAST_VAR_DIR=/tmp/ballast python manage.py collectstatic --noinput
EXPOSE 8000
CMD ["daphne", "-b", "0.0.0.0", "-p", "8000", "ballast.asgi:application"]
