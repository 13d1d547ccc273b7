"""Build a tiny model folder that vLLM's CPU build serves: `python build_model.py NAME OUT O200K_FILE PROSE...`.

Runs inside the vLLM venv (torch, transformers, tokenizers, vLLM), never in the suite's: the suite
only starts it (llmload/vllm_cpu/launcher.py), with the suite's source on PYTHONPATH for the one module
this imports from it (llmload/promptsets/o200k_harmony.py, tiktoken and the standard library only).
The launcher hashes this file, that module and the PROSE files (the suite's templates, which both
models train on) as the model's recipe, so any edit to them rebuilds the cached model. Nothing is
downloaded; HF_HUB_OFFLINE and the harmony system message's date are set by the launcher.

tiny-llama: a Llama with random weights and a byte-level BPE tokenizer trained here on the
suite's own templates; it answers with random text, no reasoning.

tiny-gptoss: a GptOssForCausalLM (2 layers, 4 experts) with the real o200k_harmony tokenizer,
trained here to answer every chat in harmony format: an analysis message whose length follows the
"Reasoning:" line of vLLM's system message, then a final answer. Prompts are rendered with vLLM's
own harmony code, so training sees exactly what the server will. Each effort reasons in its own
chain of words, so only the first reasoning token has to read the effort line: every later token
follows from the one before it, which two small layers learn reliably. The effort line is found by
a head wired for it before training, under short prompts and 2,000-token ones alike; the logits
are scaled up afterwards, so sampling at temperature 1.0 keeps the format.
"""

from __future__ import annotations

import json
import random
import sys
import time
from pathlib import Path

import torch

from llmload.promptsets.o200k_harmony import PATTERN, SPECIAL_TOKENS

SEED = 0
# Reasoning words per effort: what tests and users can expect from `reasoning_tokens`.
REASONING_WORDS = {"low": 8, "medium": 24, "high": 64}
ANSWER_WORDS = 12
TRAIN_STEPS = 240
# The first reasoning token is the only one that reads the effort line; unweighted, it is one target in ~50 and the
# model settles for the commonest effort.
EFFORT_TOKEN_WEIGHT = 10.0
# Steps take their chats from these (chats per step, shortest and longest user message in tokens) in turn: a batch is
# as wide as its longest chat, so chats of like length share one, and long ones (the 2k prompt set's) come few at a
# time. Long user messages teach the effort line to be read across ~2,000 tokens of text.
BATCHES = ((16, 1, 80), (8, 80, 500), (2, 1000, 2100))
# Before training, one head of the last layer is wired to find the effort word wherever it stands (_wire_effort_head):
# learnt from nothing, that lookup is a needle in up to 2,000 tokens and 240 steps do not find it.
EFFORT_DIMS = (61, 62, 63)  # residual dimensions that carry "this token is low | medium | high" and nothing else
# Logits are multiplied by this after training: at temperature 1.0 the sampled token is then the trained answer
# (its logit leads every other, the 201,000 zero rows included, by far more than their number outweighs).
LOGIT_SCALE = 4.0


def main(argv: list[str]) -> int:
    name, out, o200k_file = argv[1], Path(argv[2]), Path(argv[3])
    prose = [Path(arg).read_text(encoding="utf-8") for arg in argv[4:]]
    torch.manual_seed(SEED)
    # Training gathers hidden states with a list of index tensors; on CPU the default backward of that accumulates
    # in thread order, so two builds of one recipe gave different weights.
    torch.use_deterministic_algorithms(True)
    torch.set_num_threads(2)
    started_s = time.monotonic()
    BUILDERS[name](out, o200k_file, prose)
    build_s = time.monotonic() - started_s
    (out / "build.json").write_text(json.dumps({"model": name, "build_s": round(build_s, 1)}) + "\n")
    print(f"{name}: built in {build_s:.1f} s", file=sys.stderr)
    return 0


# ---------------------------------------------------------------------------------- tiny-llama

def build_tiny_llama(out: Path, _o200k_file: Path, prose: list[str]) -> None:
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
    from transformers import LlamaConfig, LlamaForCausalLM, PreTrainedTokenizerFast

    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    specials = ["<s>", "</s>", "<|user|>", "<|assistant|>", "<|system|>"]
    tok.train_from_iterator(prose, trainers.BpeTrainer(
        vocab_size=2048, special_tokens=specials, initial_alphabet=pre_tokenizers.ByteLevel.alphabet()))
    chat_template = (
        "{% for m in messages %}{{ '<|' + m['role'] + '|>' + m['content'] + '</s>' }}{% endfor %}"
        "{% if add_generation_prompt %}{{ '<|assistant|>' }}{% endif %}")
    fast = PreTrainedTokenizerFast(tokenizer_object=tok, bos_token="<s>", eos_token="</s>", pad_token="</s>")
    fast.chat_template = chat_template
    fast.save_pretrained(out)
    config = LlamaConfig(
        vocab_size=tok.get_vocab_size(), hidden_size=64, intermediate_size=128, num_hidden_layers=2,
        num_attention_heads=2, num_key_value_heads=2, head_dim=32, max_position_embeddings=16384,
        bos_token_id=tok.token_to_id("<s>"), eos_token_id=tok.token_to_id("</s>"), tie_word_embeddings=False)
    LlamaForCausalLM(config).to(torch.bfloat16).save_pretrained(out)


# --------------------------------------------------------------------------------- tiny-gptoss

def _save_harmony_tokenizer(out: Path, o200k_file: Path, chat_template: str) -> None:
    from transformers import PreTrainedTokenizerFast
    from transformers.convert_slow_tokenizer import TikTokenConverter

    # tiktoken gives id 200018 two names (<|endofprompt|> and a reserved one); a tokenizer.json takes one.
    by_id: dict[int, str] = {}
    for token, token_id in sorted(SPECIAL_TOKENS.items(), key=lambda item: "reserved" in item[0]):
        by_id.setdefault(token_id, token)
    ids = sorted(by_id)
    assert ids == list(range(ids[0], ids[0] + len(ids)))
    converted = TikTokenConverter(vocab_file=str(o200k_file), pattern=PATTERN,
                                  extra_special_tokens=[by_id[i] for i in ids]).converted()
    assert converted.token_to_id("<|return|>") == 200002 and converted.get_vocab_size() == 201088
    fast = PreTrainedTokenizerFast(tokenizer_object=converted, bos_token="<|startoftext|>",
                                   eos_token="<|return|>", pad_token="<|endoftext|>")
    fast.model_max_length = 131072
    fast.chat_template = chat_template
    fast.save_pretrained(out)


def _distinct_words(encoding, count: int) -> list[int]:
    """Token ids of `count` distinct lowercase words (" word"), each one token however it is joined."""
    rng = random.Random(SEED)
    ids = []
    for rank in rng.sample(range(2000, 60000), 20000):
        text = encoding.decode([rank])
        if text.startswith(" ") and text[1:].isascii() and text[1:].isalpha() and text[1:].islower() and len(text) >= 5:
            ids.append(rank)
            if len(ids) == count:
                return ids
    raise AssertionError("not enough word tokens")


class HarmonyTask:
    """Chats rendered as vLLM renders them, and the harmony answer the model must give to each."""

    def __init__(self, prose: list[str]) -> None:
        from vllm.entrypoints.openai.parser import harmony_utils as hu

        self.hu = hu
        self.encoding = hu.get_encoding()
        words = iter(_distinct_words(self.encoding, sum(REASONING_WORDS.values()) + ANSWER_WORDS))
        self.reasoning = {effort: [next(words) for _ in range(count)] for effort, count in REASONING_WORDS.items()}
        self.answer = list(words)
        special = lambda text: self.encoding.encode(text, allowed_special="all")  # noqa: E731
        self.open_analysis = special("<|channel|>analysis<|message|>")
        self.open_final = special("<|end|><|start|>assistant<|channel|>final<|message|>")
        self.close = special("<|return|>")
        # Words the user's text may hold that look like the effort line, so the model learns to read only that line.
        self.distractors = [t for w in (" low", " medium", " high", " Reasoning", ":", " final", " analysis")
                            for t in self.encoding.encode(w, disallowed_special=())]
        # Real prose too (the suite's own templates), so prompts like the served ones are familiar.
        self.corpus = self.encoding.encode("\n".join(prose), disallowed_special=())
        self.effort_words = [self._effort_token(effort) for effort in REASONING_WORDS]

    def _effort_token(self, effort: str) -> int:
        """The one token by which the rendered system message of ``effort`` differs from the others'."""
        rendered = {e: self._render(e, []) for e in REASONING_WORDS}
        (token,) = set(rendered[effort]) - {t for e, ids in rendered.items() if e != effort for t in ids}
        return token

    def _render(self, effort: str, user_ids: list[int], instructions: str | None = None) -> list[int]:
        hu = self.hu
        # A chat's system message becomes harmony's developer message ("# Instructions").
        messages = hu.build_harmony_preamble(reasoning_effort=effort, instructions=instructions)
        marker = "\u2063"  # one rare character stands in for the user's text, replaced by token ids below
        messages.append(hu.get_user_message(marker))
        ids = hu.render_for_completion(messages)
        marker_ids = self.encoding.encode(marker, disallowed_special=())
        at = next(i for i in range(len(ids)) if ids[i:i + len(marker_ids)] == marker_ids)
        return ids[:at] + user_ids + ids[at + len(marker_ids):]

    def chat_template(self) -> str:
        """A Jinja chat template that renders as vLLM's harmony code does; vLLM's /tokenize uses it."""
        text = self.encoding.decode(self._render("medium", self.encoding.encode("\u2063", disallowed_special=())))
        system, user = text.split("<|start|>user<|message|>\u2063<|end|>")
        assert system.count("Reasoning: medium") == 1 and user == "<|start|>assistant"
        system = system.replace("Reasoning: medium", "Reasoning: {{ reasoning_effort | default('medium') }}")
        return (system + "{% for m in messages %}<|start|>{{ m['role'] }}<|message|>{{ m['content'] }}<|end|>"
                "{% endfor %}{% if add_generation_prompt %}<|start|>assistant{% endif %}")

    def answer_ids(self, effort: str) -> list[int]:
        reasoning = self.reasoning[effort]
        return self.open_analysis + reasoning + self.open_final + self.answer + self.close

    def output_vocabulary(self) -> list[int]:
        reasoning = [token for chain in self.reasoning.values() for token in chain]
        return sorted(set(self.open_analysis + reasoning + self.open_final + self.answer + self.close))

    def sample(self, rng: random.Random, shortest: int, longest: int) -> tuple[list[int], list[int]]:
        # No request without an effort: vLLM renders it as medium, which would make medium every other answer's effort
        # and the model's first guess.
        effort = rng.choice(list(REASONING_WORDS))
        length = rng.randint(shortest, longest)
        if rng.random() < 0.5:
            start = rng.randrange(len(self.corpus) - length)
            user = self.corpus[start:start + length]
        else:
            user = [rng.choice(self.distractors) if rng.random() < 0.05 else rng.randrange(200, 100000)
                    for _ in range(length)]
        instructions = None
        if rng.random() < 0.4:
            start = rng.randrange(len(self.corpus) - 40)
            instructions = self.encoding.decode(self.corpus[start:start + rng.randint(5, 40)])
        return self._render(effort, user, instructions), self.answer_ids(effort)


def build_tiny_gptoss(out: Path, o200k_file: Path, prose: list[str]) -> None:
    from transformers import GenerationConfig, GptOssConfig, GptOssForCausalLM

    task = HarmonyTask(prose)
    _save_harmony_tokenizer(out, o200k_file, task.chat_template())
    config = GptOssConfig(
        num_hidden_layers=2, num_local_experts=4, num_experts_per_tok=2, vocab_size=201088, hidden_size=64,
        intermediate_size=64, head_dim=64, num_attention_heads=4, num_key_value_heads=4, sliding_window=128,
        layer_types=["sliding_attention", "full_attention"], max_position_embeddings=131072,
        rope_parameters={"rope_type": "yarn", "rope_theta": 150000.0, "factor": 32.0, "beta_fast": 32.0,
                         "beta_slow": 1.0, "truncate": False, "original_max_position_embeddings": 4096},
        bos_token_id=199998, eos_token_id=[200002, 199999, 200012], pad_token_id=199999,
        tie_word_embeddings=False, attn_implementation="eager")
    model = GptOssForCausalLM(config)
    _wire_effort_head(model, task.effort_words)
    _train(model, task)
    model.to(torch.bfloat16).save_pretrained(out)
    GenerationConfig(bos_token_id=199998, eos_token_id=[200002, 199999, 200012], pad_token_id=199999).save_pretrained(out)


def _wire_effort_head(model, effort_words: list[int]) -> None:
    """Head 0 of the last (full-attention) layer starts out attending to the effort word and reading which it is.

    The effort words' embeddings alone hold EFFORT_DIMS (one each), so those dimensions name the effort and
    nothing else. The head's query is a constant and its key reads EFFORT_DIMS, both on the 4 slowest rotary
    pairs, which turn by under a hundredth of a radian across the context: the match holds at any distance.
    Its value copies EFFORT_DIMS; training starts from there and learns the rest (effort words in user text).
    The head has its own key and value (no head shares them), so the other heads stay free to learn the format.
    """
    attention = model.model.layers[-1].self_attn
    head_dim = model.config.head_dim
    slow = [d for pair in range(head_dim // 2 - 4, head_dim // 2) for d in (pair, pair + head_dim // 2)]
    dims = list(EFFORT_DIMS)
    with torch.no_grad():
        embed = model.model.embed_tokens.weight
        embed[:, dims] = 0.0
        for token, dim in zip(effort_words, dims):
            embed[token, dim] = 0.5  # ~25x the other dimensions: RMSNorm gives it nearly all the token's norm
        first = model.model.layers[0]  # the first layer's writes would blur EFFORT_DIMS for every token
        first.self_attn.o_proj.weight[dims] = 0.0
        first.self_attn.o_proj.bias[dims] = 0.0
        first.mlp.experts.down_proj[:, :, dims] = 0.0
        first.mlp.experts.down_proj_bias[:, dims] = 0.0
        attention.q_proj.weight[slow] = 0.0
        attention.q_proj.bias[slow] = 1.6
        attention.k_proj.weight[slow] = 0.0
        attention.k_proj.weight[[[d] for d in slow], dims] = 1.6
        attention.k_proj.bias[slow] = 0.0
        attention.v_proj.weight[: len(dims)] = 0.0
        attention.v_proj.weight[range(len(dims)), dims] = 1.0


def _train(model, task: HarmonyTask) -> None:
    """Teacher-forced training on the answer tokens only, with a softmax over the tokens answers use.

    The full vocabulary (201,088 rows) would make every step ~1,000x dearer. Every other row of the
    output layer is zeroed afterwards, so its logit is exactly 0; training includes one extra logit
    of log(V - K) standing for those V - K zero logits, which makes the restricted loss equal to
    the full softmax loss of the saved model.
    """
    rng = random.Random(SEED)
    vocab = torch.tensor(task.output_vocabulary())
    head = torch.nn.Parameter(model.lm_head.weight.data[vocab].clone())
    rest_logit = torch.log(torch.tensor(float(model.config.vocab_size - len(vocab))))
    column = {int(t): i for i, t in enumerate(vocab)}
    model.model.embed_tokens.weight.requires_grad_(False)
    model.lm_head.weight.requires_grad_(False)
    params = [p for p in model.parameters() if p.requires_grad] + [head]
    optimizer = torch.optim.AdamW(params, lr=3e-3, weight_decay=0.0)
    schedule = torch.optim.lr_scheduler.OneCycleLR(optimizer, max_lr=3e-3, total_steps=TRAIN_STEPS, pct_start=0.1)
    model.train()
    for step in range(TRAIN_STEPS):
        chats, shortest, longest = BATCHES[step % len(BATCHES)]
        batch = [task.sample(rng, shortest, longest) for _ in range(chats)]
        width = max(len(p) + len(a) for p, a in batch)
        ids = torch.full((chats, width), 199999)
        rows, positions, targets, weights = [], [], [], []
        for row, (prompt, answer) in enumerate(batch):
            sequence = prompt + answer
            ids[row, :len(sequence)] = torch.tensor(sequence)
            # Right padding needs no mask: causal attention never lets a token see what follows it.
            for offset, target in enumerate(answer):
                rows.append(row)
                positions.append(len(prompt) - 1 + offset)
                targets.append(column[target])
                weights.append(EFFORT_TOKEN_WEIGHT if offset == len(task.open_analysis) else 1.0)
        hidden = model.model(input_ids=ids).last_hidden_state[torch.tensor(rows), torch.tensor(positions)]
        logits = hidden @ head.T
        logits = torch.cat([logits, rest_logit.expand(len(rows), 1)], dim=1)
        weight = torch.tensor(weights)
        losses = torch.nn.functional.cross_entropy(logits, torch.tensor(targets), reduction="none")
        loss = (losses * weight).sum() / weight.sum()
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        schedule.step()
        if step % 20 == 0 or step == TRAIN_STEPS - 1:
            print(f"step {step} loss {loss.item():.4f}", file=sys.stderr, flush=True)
    with torch.no_grad():
        model.lm_head.weight.zero_()
        model.lm_head.weight[vocab] = head * LOGIT_SCALE


BUILDERS = {"tiny-llama": build_tiny_llama, "tiny-gptoss": build_tiny_gptoss}

if __name__ == "__main__":
    sys.exit(main(sys.argv))
