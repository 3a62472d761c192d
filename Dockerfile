FROM python:3.11-slim
WORKDIR /app
COPY pyproject.toml README.md celeryconfig.py gunicorn.conf.py ./
COPY agentq ./agentq
RUN pip install --no-cache-dir .
