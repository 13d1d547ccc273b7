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
are scaled up afterwards, so sampling at temperature 1.0 keeps the format. Offered FUNCTION among
its tools, it reasons as the effort says and then calls it on the commentary channel, which vLLM's
harmony parser streams as a tool call; once a tool's result stands in the chat, it reasons briefly
and answers. A second wired head finds FUNCTION's name or the earlier call's <|call|>.
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
# The function it calls when offered (chat or Responses `tools`, among any others), with the arguments it always sends.
# Its name ends in a token ("_weather") that no template and no random training text holds (id above 100,000): the
# tool head (_wire_cue_head) finds the offer by that token alone. One function, not several: with three, training
# taught the call's format but not which of the names to call (their logits stayed within 1 of each other).
FUNCTION, ARGUMENTS = "get_weather", '{"city": "Paris"}'
# Reasoning words after a tool's result, whatever the effort: it only has to say the result back. They are a chain of
# their own: had they been the low effort's, every answered chat would have taught "any effort, then low's words" and
# blurred the effort's reading (the effort was then read right about a third of the time).
TOOL_RESULT_REASONING_WORDS = 6
NAME_WORDS = 200  # words that unknown functions and their parameters are named with in training
USER_MARK, RESULT_MARK = "\u2063", "\u2060"  # rare characters, one token each, that stand for texts while rendering
TRAIN_STEPS = 320
# Tokens that decide (the first reasoning token reads the effort line and whether a tool answered; the channel after
# the reasoning, final or commentary, whether to call; the first of the answer and of the arguments, what the
# <|message|> before them opens): unweighted, each is one target in ~50 and the model settles for the commonest choice.
DECISION_TOKEN_WEIGHT = 10.0
# Steps take their chats from these (chats per step, shortest and longest user message in tokens, share of chats that
# offer tools) in turn: a batch is as wide as its longest chat, so chats of like length share one, and long ones (the
# 2k prompt set's) come few at a time. Long user messages teach the effort line to be read across ~2,000 tokens of
# text. Tools come mostly in the short batches, the cheapest: the tool head, wired like the effort head, reads its cue
# at any distance.
BATCHES = ((16, 1, 80, 0.7), (8, 80, 500, 0.4), (16, 1, 80, 0.7), (2, 1000, 2100, 0.25))
# Before training, one head of the last layer is wired to find the effort word wherever it stands (_wire_cue_head):
# learnt from nothing, that lookup is a needle in up to 2,000 tokens and 240 steps do not find it.
EFFORT_DIMS = (61, 62, 63)  # residual dimensions that carry "this token is low | medium | high" and nothing else
# Likewise "this token ends FUNCTION's name" and "this token is <|call|>" (a tool was called earlier in the chat),
# read by a second wired head.
TOOL_DIMS = (59, 60)
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
    """Chats rendered as vLLM renders them, and the harmony answer the model must give to each.

    A chat offers no tools, other tools, or FUNCTION among others; when it offers FUNCTION and no tool has answered
    yet, the answer calls it, else it is a final answer. A sample is the prompt, the answer, and the answer's deciding
    offsets (weighted in training).
    """

    def __init__(self, prose: list[str]) -> None:
        from vllm.entrypoints.openai.parser import harmony_utils as hu

        self.hu = hu
        self.encoding = hu.get_encoding()
        chains = {**REASONING_WORDS, "tool result": TOOL_RESULT_REASONING_WORDS}
        words = iter(_distinct_words(self.encoding, sum(chains.values()) + ANSWER_WORDS + NAME_WORDS))
        self.reasoning = {chain: [next(words) for _ in range(count)] for chain, count in chains.items()}
        self.answer = [next(words) for _ in range(ANSWER_WORDS)]
        self.name_words = [self.encoding.decode([token]).strip() for token in words]
        special = lambda text: self.encoding.encode(text, allowed_special="all")  # noqa: E731
        self.open_analysis = special("<|channel|>analysis<|message|>")
        self.next_channel = special("<|end|><|start|>assistant<|channel|>")
        self.final = special("final<|message|>")
        self.close = special("<|return|>")
        self.call = special(f"commentary to=functions.{FUNCTION} <|constrain|>json<|message|>{ARGUMENTS}<|call|>")
        # Words the user's text may hold that look like the effort line, so the model learns to read only that line.
        self.distractors = [t for w in (" low", " medium", " high", " Reasoning", ":", " final", " analysis")
                            for t in self.encoding.encode(w, disallowed_special=())]
        # Real prose too (the suite's own templates), so prompts like the served ones are familiar.
        self.corpus = self.encoding.encode("\n".join(prose), disallowed_special=())
        self.effort_words = [self._effort_token(effort) for effort in REASONING_WORDS]
        self.name_token = self.encoding.encode(f"type {FUNCTION}")[-1]  # as the tools' developer message holds it
        self.call_token = special("<|call|>")[0]
        self.message_token = special("<|message|>")[0]
        assert self.name_token >= 100000 and self.name_token not in self.corpus

    def _effort_token(self, effort: str) -> int:
        """The one token by which the rendered system message of ``effort`` differs from the others'."""
        rendered = {e: self._render(e, []) for e in REASONING_WORDS}
        (token,) = set(rendered[effort]) - {t for e, ids in rendered.items() if e != effort for t in ids}
        return token

    def _render(self, effort: str, user_ids: list[int], instructions: str | None = None, tools: list | None = None,
                called: bool = False, result_ids: list[int] = (), reasoning_shown: bool = False) -> list[int]:
        """The prompt vLLM renders for a chat, ``called``: after the assistant's call of FUNCTION and its result
        (ChatCompletionRequest's messages; the Responses API renders its input items the same)."""
        from vllm.entrypoints.openai.chat_completion.protocol import ChatCompletionToolsParam

        hu = self.hu
        # A chat's system message becomes harmony's developer message ("# Instructions").
        messages = hu.build_harmony_preamble(
            reasoning_effort=effort, instructions=instructions,
            tools=[ChatCompletionToolsParam.model_validate(tool) for tool in tools] if tools else None)
        chat = [{"role": "user", "content": USER_MARK}]
        if called:
            call = {"id": "call_0", "type": "function", "function": {"name": FUNCTION, "arguments": ARGUMENTS}}
            assistant = {"role": "assistant", "tool_calls": [call]}
            if reasoning_shown:  # a client may send the assistant's reasoning back with its call
                assistant["reasoning"] = self.encoding.decode(self.reasoning[effort])
            chat += [assistant, {"role": "tool", "tool_call_id": "call_0", "content": RESULT_MARK}]
        ids = hu.render_for_completion(messages + hu.parse_chat_inputs_to_harmony_messages(chat))
        # One rare character stands for each text, replaced by token ids here.
        for mark, text_ids in ((USER_MARK, user_ids), (RESULT_MARK, result_ids)):
            (mark_id,) = self.encoding.encode(mark, disallowed_special=())
            if mark_id in ids:
                at = ids.index(mark_id)
                ids = ids[:at] + list(text_ids) + ids[at + 1:]
        return ids

    def chat_template(self) -> str:
        """A Jinja chat template that renders as vLLM's harmony code does; vLLM's /tokenize uses it."""
        text = self.encoding.decode(self._render("medium", self.encoding.encode(USER_MARK, disallowed_special=())))
        system, user = text.split(f"<|start|>user<|message|>{USER_MARK}<|end|>")
        assert system.count("Reasoning: medium") == 1 and user == "<|start|>assistant"
        system = system.replace("Reasoning: medium", "Reasoning: {{ reasoning_effort | default('medium') }}")
        return (system + "{% for m in messages %}<|start|>{{ m['role'] }}<|message|>{{ m['content'] }}<|end|>"
                "{% endfor %}{% if add_generation_prompt %}<|start|>assistant{% endif %}")

    def answer_ids(self, effort: str, call: bool = False, answered: bool = False) -> tuple[list[int], list[int]]:
        """The answer and its deciding offsets: the channel after the reasoning and each token after a <|message|>
        (the first of the reasoning, the answer, the arguments: <|message|> alone does not say which)."""
        reasoning = self.open_analysis + self.reasoning["tool result" if answered else effort] + self.next_channel
        answer = reasoning + (self.call if call else self.final + self.answer + self.close)
        return answer, [len(reasoning)] + [at + 1 for at, token in enumerate(answer) if token == self.message_token]

    def output_vocabulary(self) -> list[int]:
        answers = [self.answer_ids(effort, call)[0] for effort in REASONING_WORDS for call in (False, True)]
        return sorted({token for answer in answers + [self.answer_ids("low", answered=True)[0]] for token in answer})

    def _text(self, rng: random.Random, length: int) -> list[int]:
        if rng.random() < 0.5:
            start = rng.randrange(len(self.corpus) - length)
            return self.corpus[start:start + length]
        return [rng.choice(self.distractors) if rng.random() < 0.05 else rng.randrange(200, 100000)
                for _ in range(length)]

    def _snippet(self, rng: random.Random, shortest: int, longest: int) -> str:
        start = rng.randrange(len(self.corpus) - longest)
        return self.encoding.decode(self.corpus[start:start + rng.randint(shortest, longest)])

    def _tools(self, rng: random.Random, known: bool) -> list[dict]:
        """One to three function tools in OpenAI's chat format, FUNCTION among them when ``known``."""
        names, count = [FUNCTION] if known else [], rng.randint(1, 3)
        while len(names) < count:
            name = "_".join(rng.sample(self.name_words, rng.randint(1, 3)))
            if self.name_token not in self.encoding.encode(f"type {name}"):
                names.append(name)
        rng.shuffle(names)
        tools = []
        for name in names:
            properties = {word: {"type": rng.choice(["string", "integer", "boolean"])}
                          for word in rng.sample(self.name_words, rng.randint(0, 3))}
            function = {"name": name, "parameters": {"type": "object", "properties": properties,
                                                     "required": list(properties)[:1]}}
            if rng.random() < 0.7:
                function["description"] = self._snippet(rng, 3, 20)
            tools.append({"type": "function", "function": function})
        return tools

    def sample(self, rng: random.Random, shortest: int, longest: int,
               tools_share: float) -> tuple[list[int], list[int], list[int]]:
        # No request without an effort: vLLM renders it as medium, which would make medium every other answer's effort
        # and the model's first guess.
        effort = rng.choice(list(REASONING_WORDS))
        length = rng.randint(shortest, longest)
        instructions = self._snippet(rng, 5, 40) if rng.random() < 0.4 else None
        offered = rng.random() < tools_share
        known = offered and rng.random() < 0.75
        tools = self._tools(rng, known) if offered else None
        answered = known and rng.random() < 0.45
        result_length = rng.randint(1, length) if answered else 0
        prompt = self._render(effort, self._text(rng, max(1, length - result_length)), instructions, tools,
                              answered, self._text(rng, result_length), rng.random() < 0.5)
        answer, decisions = self.answer_ids(effort, known and not answered, answered)
        return prompt, answer, decisions


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
    # Head 0 finds the effort word; head 1 FUNCTION's name among the tools offered, or <|call|> (a tool has answered),
    # which outweighs the name: the name stands again in the call that the result answers.
    _wire_cue_head(model, 0, [(token, dim, 1.0) for token, dim in zip(task.effort_words, EFFORT_DIMS)])
    _wire_cue_head(model, 1, [(task.name_token, TOOL_DIMS[0], 1.0), (task.call_token, TOOL_DIMS[1], 2.0)])
    _train(model, task)
    model.to(torch.bfloat16).save_pretrained(out)
    GenerationConfig(bos_token_id=199998, eos_token_id=[200002, 199999, 200012], pad_token_id=199999).save_pretrained(out)


def _wire_cue_head(model, head: int, cues: list[tuple[int, int, float]]) -> None:
    """One head of the last (full-attention) layer starts out attending to cue tokens and reading which they are.

    Each cue is (token, residual dimension, key weight). The cue tokens' embeddings alone hold their dimensions, so
    those name the cue and nothing else. The head's query is a constant and its key reads the dimensions (times
    the weight: a heavier cue draws the attention when both stand), both on the 4 slowest rotary pairs, which turn
    by under a hundredth of a radian across the context: the match holds at any distance. Its value copies the
    dimensions; training starts from there and learns the rest. The head has its own key and value (no head shares
    them), so the other heads stay free to learn the format.
    """
    attention = model.model.layers[-1].self_attn
    head_dim = model.config.head_dim
    slow = [head * head_dim + d
            for pair in range(head_dim // 2 - 4, head_dim // 2) for d in (pair, pair + head_dim // 2)]
    dims = [dim for _, dim, _ in cues]
    values = list(range(head * head_dim, head * head_dim + len(dims)))
    with torch.no_grad():
        embed = model.model.embed_tokens.weight
        embed[:, dims] = 0.0
        for token, dim, _ in cues:
            embed[token, dim] = 0.5  # ~25x the other dimensions: RMSNorm gives it nearly all the token's norm
        first = model.model.layers[0]  # the first layer's writes would blur the cue dimensions for every token
        first.self_attn.o_proj.weight[dims] = 0.0
        first.self_attn.o_proj.bias[dims] = 0.0
        first.mlp.experts.down_proj[:, :, dims] = 0.0
        first.mlp.experts.down_proj_bias[:, dims] = 0.0
        attention.q_proj.weight[slow] = 0.0
        attention.q_proj.bias[slow] = 1.6
        attention.k_proj.weight[slow] = 0.0
        for _, dim, weight in cues:
            attention.k_proj.weight[slow, dim] = 1.6 * weight
        attention.k_proj.bias[slow] = 0.0
        attention.v_proj.weight[values] = 0.0
        attention.v_proj.weight[values, dims] = 1.0


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
        chats, shortest, longest, tools_share = BATCHES[step % len(BATCHES)]
        batch = [task.sample(rng, shortest, longest, tools_share) for _ in range(chats)]
        width = max(len(p) + len(a) for p, a, _ in batch)
        ids = torch.full((chats, width), 199999)
        rows, positions, targets, weights = [], [], [], []
        for row, (prompt, answer, decisions) in enumerate(batch):
            sequence = prompt + answer
            ids[row, :len(sequence)] = torch.tensor(sequence)
            # Right padding needs no mask: causal attention never lets a token see what follows it.
            for offset, target in enumerate(answer):
                rows.append(row)
                positions.append(len(prompt) - 1 + offset)
                targets.append(column[target])
                weights.append(DECISION_TOKEN_WEIGHT if offset in decisions else 1.0)
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
