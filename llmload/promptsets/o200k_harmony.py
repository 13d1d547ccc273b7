"""gpt-oss's tokenizer, tiktoken's o200k_harmony, built from a local o200k_base ranks file.

tiktoken's registered constructor fetches the ranks from a URL; its README's advice for custom
encodings is to pass tiktoken.Encoding the arguments directly, which ``encoding`` does with the
pattern and special tokens of tiktoken 0.14's ``tiktoken_ext/openai_public.py`` (tests/test_tokens.py
checks them against it). Imports only tiktoken and the standard library, since the tiny model's build
(llmload/vllm_cpu/build_model.py) runs it inside the vLLM venv too.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

__all__ = ["O200K_SHA256", "PATTERN", "SPECIAL_TOKENS", "encoding"]

O200K_SHA256 = "446a9538cb6c348e3516120d7c08b09f57c36495e2acfffe59a5bf8b0cfb1a2d"
"""sha256 of the official o200k_base.tiktoken."""

PATTERN = "|".join([
    r"""[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]*[\p{Ll}\p{Lm}\p{Lo}\p{M}]+(?i:'s|'t|'re|'ve|'m|'ll|'d)?""",
    r"""[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]+[\p{Ll}\p{Lm}\p{Lo}\p{M}]*(?i:'s|'t|'re|'ve|'m|'ll|'d)?""",
    r"""\p{N}{1,3}""",
    r""" ?[^\s\p{L}\p{N}]+[\r\n/]*""",
    r"""\s*[\r\n]+""",
    r"""\s+(?!\S)""",
    r"""\s+""",
])
"""o200k_base's pre-tokenizer regex, which o200k_harmony keeps."""

SPECIAL_TOKENS: dict[str, int] = {
    "<|endoftext|>": 199999, "<|endofprompt|>": 200018,  # o200k_base's
    "<|startoftext|>": 199998, "<|reserved_200000|>": 200000, "<|reserved_200001|>": 200001, "<|return|>": 200002,
    "<|constrain|>": 200003, "<|reserved_200004|>": 200004, "<|channel|>": 200005, "<|start|>": 200006,
    "<|end|>": 200007, "<|message|>": 200008, "<|reserved_200009|>": 200009, "<|reserved_200010|>": 200010,
    "<|reserved_200011|>": 200011, "<|call|>": 200012,
    **{f"<|reserved_{i}|>": i for i in range(200013, 201088)},
}
"""o200k_harmony's special tokens; 200018 has two names, as in tiktoken."""


def encoding(ranks_file: Path) -> Any:
    """tiktoken's o200k_harmony from ``ranks_file`` (an o200k_base.tiktoken, checked against O200K_SHA256)."""
    import tiktoken
    from tiktoken.load import load_tiktoken_bpe

    ranks = load_tiktoken_bpe(str(ranks_file), expected_hash=O200K_SHA256)
    return tiktoken.Encoding(name="o200k_harmony", pat_str=PATTERN, mergeable_ranks=ranks,
                             special_tokens=SPECIAL_TOKENS)
