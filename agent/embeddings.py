"""A user-configured OpenAI-compatible embeddings endpoint: seed 002's internalStateEmbedding.

Off unless configured (`memtape run --embeddings-url URL`, or MEMTAPE_EMBEDDINGS_BASE_URL;
MEMTAPE_EMBEDDINGS_MODEL, default text-embedding-3-small; MEMTAPE_EMBEDDINGS_API_KEY). The
bundled agent embeds a run's internal state (its goal, as memory stores it: secrets scrubbed)
once, records the vector and its model in every step of the run, and step-memory retrieval
compares intents by the recorded vectors where both sides have one of the same model. A goal
already embedded by that model is read back from the ledger instead of asked again, so a
replay asks nothing and an experiment, which reads only the ledger, never could.
"""

from __future__ import annotations

import os

import openai

from memtape.agent.policy import PolicyError, endpoint_call
from memtape.projections.recording.run import Run

DEFAULT_MODEL = "text-embedding-3-small"


class Embeddings:
    """`/embeddings` of an OpenAI-compatible endpoint through the official `openai` client (a
    timeout on every request, retries on 408, 409, 429, 5xx); one request per distinct text."""

    def __init__(
        self,
        base_url: str,
        model: str | None = None,
        api_key: str | None = None,
        timeout: float = 30.0,
        max_retries: int = 2,
    ):
        self.base_url = base_url.rstrip("/")
        self.model = model or os.environ.get("MEMTAPE_EMBEDDINGS_MODEL") or DEFAULT_MODEL
        key = api_key if api_key is not None else os.environ.get("MEMTAPE_EMBEDDINGS_API_KEY", "")
        self.timeout = timeout
        # the client insists on a key; a local endpoint that needs none gets a placeholder bearer token
        self.client = openai.OpenAI(
            base_url=self.base_url, api_key=key or "no-key", timeout=timeout, max_retries=max_retries
        )
        self.asked: dict[str, list[float]] = {}

    def embed(self, text: str) -> list[float]:
        """The vector of `text` (asked once per text for the life of this object)."""
        if text not in self.asked:
            answer = endpoint_call(
                "embeddings",
                self.base_url,
                self.timeout,
                lambda: self.client.embeddings.create(model=self.model, input=[text], encoding_format="float"),
            )
            if not answer.data or not answer.data[0].embedding:
                raise PolicyError(f"embeddings endpoint {self.base_url} returned no vector")
            self.asked[text] = [float(x) for x in answer.data[0].embedding]
        return self.asked[text]


def use_embeddings(run: Run, embeddings: Embeddings) -> None:
    """The run's internalStateEmbedding from `embeddings`: the vector its model gave this goal
    before, read back from the ledger, else one request. Nothing with memory off."""
    if not run.enabled:
        return
    vector = run.recorded_embedding(embeddings.model)
    run.use_embedding(vector if vector is not None else embeddings.embed(run.internal_state), embeddings.model)


def configured(base_url: str | None) -> Embeddings | None:
    """The endpoint the user configured (`base_url`, else MEMTAPE_EMBEDDINGS_BASE_URL), or None."""
    url = base_url or os.environ.get("MEMTAPE_EMBEDDINGS_BASE_URL")
    return Embeddings(url) if url else None
