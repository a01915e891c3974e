# Ballast image: one image for web (daphne) and worker (qcluster) processes.

# Stage 1: build the browser app (Vite) with Node 20; only frontend/dist is kept.
FROM node:20-slim AS frontend
WORKDIR /frontend
COPY frontend/package.json frontend/package-lock.json ./
RUN npm ci --no-audit --no-fund --loglevel=error
COPY frontend/ ./
# The New graph dialog bundles the example graphs (src/shell/examples.ts reads ../examples/*.json).
COPY examples/*.json /examples/
RUN npm run build

# Stage 2: the Python app, with the built front end collected into its static root.
FROM python:3.11-slim
# The build every step attempt records (core/build.py): the image has no .git, so name it
# here, e.g. docker build --build-arg BALLAST_BUILD=$(git describe --always --dirty) .
ARG BALLAST_BUILD=""
ENV BALLAST_BUILD=${BALLAST_BUILD}
ENV PYTHONDONTWRITEBYTECODE=1 PYTHONUNBUFFERED=1 \
    BALLAST_FRONTEND_DIST=/app/frontend/dist \
    BALLAST_STATIC_ROOT=/app/staticfiles
WORKDIR /app
COPY pyproject.toml README.md ./
COPY ballast ballast
COPY core core
COPY graphs graphs
COPY audit audit
COPY accounts accounts
COPY builder builder
COPY runs runs
COPY approvals approvals
RUN pip install --no-cache-dir .
COPY . .
COPY --from=frontend /frontend/dist /app/frontend/dist
# whitenoise serves /static/ from here (admin, API docs and the app's hashed assets).
RUN BALLAST_VAR_DIR=/tmp/ballast python manage.py collectstatic --noinput
EXPOSE 8000
CMD ["daphne", "-b", "0.0.0.0", "-p", "8000", "ballast.asgi:application"]
