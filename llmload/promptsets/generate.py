"""Prompt sets from Jinja templates: N prompts at a token target, each within 1% of it.

A template folder holds ``prompt.LANG.j2`` (the whole user message: shared instructions, a header
from ``ctx``, then ``units``), ``unit.LANG.j2`` (one unit: a support message, a review, a log line)
and ``pools.LANG.json`` (the lists ``ctx`` and each unit ``u`` are drawn from). A prompt grows by
natural means, more units, until its count as vLLM sees it (llmload.promptsets.tokens) is at the target.
"""

from __future__ import annotations

import random
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Iterator, Sequence

import jinja2
import orjson

from llmload.errors import TemplateError
from llmload.promptsets.tokens import prompt_tokens, text_tokens

__all__ = ["SIZES", "TOLERANCE", "Template", "TemplateError", "load_templates", "generate_prompt", "generate_set"]

SIZES = {"2k": 2000, "4k": 4000, "8k": 8000}
TOLERANCE = 0.01
_BATCH = 8  # units rendered per Jinja call
_FILL_CANDIDATES = 12  # units tried for the last slot, to land on the target
_MAX_ADJUSTMENTS = 20


@dataclass(frozen=True)
class Template:
    """One task in one language."""

    name: str
    """``task.lang``, e.g. ``support_reply.ja``."""
    prompt: jinja2.Template
    units: jinja2.Template
    """The unit template inside a loop: one render makes a batch of units (Jinja's per-call cost
    is most of a unit's)."""
    context_pools: dict[str, list[Any]]
    unit_pools: dict[str, list[Any]]
    prompt_path: Path
    unit_path: Path


_UNIT_SEPARATOR = "\x00"  # not whitespace (\x1c-\x1f are, for the "-%}" trim)
# No newline before the unit's text, so error line numbers stay those of unit.LANG.j2.
_BATCH_OPEN = "{% for u in batch %}{% set i = first + loop.index0 %}"
_BATCH_CLOSE = "\x00{% endfor %}"


def _compile(env: jinja2.Environment, path: Path, batch: bool = False) -> jinja2.Template:
    source = path.read_text(encoding="utf-8")
    try:
        return env.from_string(f"{_BATCH_OPEN}{source}{_BATCH_CLOSE}" if batch else source)
    except jinja2.TemplateSyntaxError as e:
        raise TemplateError(f"{path}:{e.lineno}: {e.message}") from None


class _DirectCallContext(jinja2.runtime.Context):
    """Calls a template's functions directly unless they ask for Jinja's context.

    Jinja routes every call in a template through ``Context.call``, which costs more than the
    helpers and macros it calls; the units of an 8k prompt make thousands of such calls.
    """

    def call(__self, __obj: Any, *args: Any, **kwargs: Any) -> Any:  # noqa: N805 (Jinja's signature)
        if getattr(__obj, "jinja_pass_arg", None) is None:
            kwargs.pop("_block_vars", None)
            kwargs.pop("_loop_vars", None)
            return __obj(*args, **kwargs)
        return super().call(__obj, *args, **kwargs)


def load_templates(root: Path, kind: str = "prompt") -> list[Template]:
    """Every ``task/prompt.LANG.j2`` under ``root`` with its unit template and pools; ``kind="followup"``: every
    ``task/followup.LANG.j2``, a later turn of a conversation about the task, grown from the same units."""
    env = jinja2.Environment(undefined=jinja2.StrictUndefined, keep_trailing_newline=False, autoescape=False)
    env.context_class = _DirectCallContext
    templates = []
    for prompt_path in sorted(root.glob(f"*/{kind}.*.j2")):
        lang = prompt_path.name.split(".")[1]
        folder = prompt_path.parent
        unit_path, pools_path = folder / f"unit.{lang}.j2", folder / f"pools.{lang}.json"
        for needed in (unit_path, pools_path):
            if not needed.is_file():
                raise TemplateError(f"{needed} is missing (every {kind}.LANG.j2 needs unit.LANG.j2 and pools.LANG.json)")
        try:
            pools = orjson.loads(pools_path.read_bytes())
            context_pools, unit_pools = dict(pools["context"]), dict(pools["unit"])
        except (orjson.JSONDecodeError, KeyError, TypeError, ValueError) as e:
            raise TemplateError(f"{pools_path}: {e}; it needs {{\"context\": {{...}}, \"unit\": {{...}}}} of lists") from None
        for key, values in {**context_pools, **unit_pools}.items():
            if not isinstance(values, list) or not values:
                raise TemplateError(f"{pools_path}: pool {key!r} must be a non-empty list")
        templates.append(Template(f"{folder.name}.{lang}", _compile(env, prompt_path), _compile(env, unit_path, batch=True),
                                  context_pools, unit_pools, prompt_path, unit_path))
    if not templates:
        raise TemplateError(f"{root} holds no */{kind}.LANG.j2 templates")
    return templates


def _render(template: jinja2.Template, source: str, **variables: Any) -> str:
    try:
        return template.render(**variables).strip()
    except jinja2.TemplateError as e:
        line = _template_line(e)
        raise TemplateError(f"{source}{f':{line}' if line else ''}: {type(e).__name__}: {e}") from None


def _template_line(error: Exception) -> int | None:
    """The template line a render error came from (Jinja compiles templates to <template> code)."""
    tb = error.__traceback__
    line = None
    while tb is not None:
        if tb.tb_frame.f_code.co_filename == "<template>":
            line = tb.tb_lineno
        tb = tb.tb_next
    return line


_PLACEHOLDER = re.compile(r"\{(\w+)(?::(-?\d+):(-?\d+))?\}")


class _LazyPicks(dict):
    """A unit's pool picks, drawn on first use: a unit reads a few of its template's many pools."""

    def __init__(self, pools: dict[str, list[Any]], rng: random.Random) -> None:
        super().__init__()
        self._pools = pools
        self._rng = rng

    def __missing__(self, key: str) -> Any:
        if key not in self._pools:
            raise KeyError(key)
        value = self[key] = self._rng.choice(self._pools[key])
        return value


def _helpers(rng: random.Random, ctx: dict[str, Any], pools: dict[str, list[Any]]) -> dict[str, Callable[..., Any]]:
    def fill(text: str, **values: Any) -> str:
        """Fill ``{name}`` from ``values``, then ctx, then a pick of pool ``name``; ``{num:LO:HI}`` draws an int."""
        def replace(match: re.Match[str]) -> str:
            name, low, high = match.groups()
            if low is not None:
                return str(rng.randint(int(low), int(high)))
            if name in values:
                return str(values[name])
            if name in ctx:
                return str(ctx[name])
            if name in pools:
                return str(rng.choice(pools[name]))
            raise jinja2.UndefinedError(f"fill(): no value, ctx field or pool named {name!r}")
        return _PLACEHOLDER.sub(replace, text)

    return {"pick": rng.choice, "num": rng.randint, "chance": lambda p: rng.random() < p, "sample": rng.sample, "fill": fill}


def _messages(content: str) -> list[dict[str, str]]:
    return [{"role": "user", "content": content}]


def generate_prompt(template: Template, target_tokens: int, rng: random.Random, effort: str = "medium",
                    tolerance: float = TOLERANCE) -> tuple[list[dict[str, str]], int]:
    """Messages and their exact token count, within ``tolerance`` (a share) of ``target_tokens``."""
    prompt_source, unit_source = str(template.prompt_path), str(template.unit_path)
    ctx = {key: rng.choice(values) for key, values in template.context_pools.items()}
    helpers = _helpers(rng, ctx, {**template.context_pools, **template.unit_pools})

    pending: list[str] = []
    drawn = 0

    def new_unit() -> tuple[str, int]:
        """The next unit and its tokens (with the newline that joins it); ``i`` counts units drawn."""
        nonlocal drawn
        if not pending:
            batch = [_LazyPicks(template.unit_pools, rng) for _ in range(_BATCH)]
            rendered = _render(template.units, unit_source, ctx=ctx, batch=batch, first=drawn, **helpers)
            pending.extend(reversed([text.strip() for text in rendered.split(_UNIT_SEPARATOR)[:-1]]))
            drawn += _BATCH
        text = pending.pop()
        return text, text_tokens(text + "\n")

    def render_and_count(units: list[str]) -> tuple[str, int]:
        content = _render(template.prompt, prompt_source, ctx=ctx, units=units, **helpers)
        return content, prompt_tokens(_messages(content), effort)

    share, tolerance = tolerance, int(target_tokens * tolerance)
    close = max(2, tolerance // 2)  # stop refining once this near
    empty_tokens = render_and_count([])[1]
    units: list[str] = []
    sizes: list[int] = []
    total = empty_tokens
    while True:
        text, size = new_unit()
        if total + size > target_tokens:
            break
        units.append(text)
        sizes.append(size)
        total += size
    # Units' own counts add up to the prompt's within a token or two (BPE rarely merges across
    # the newline between them), so steer by that sum and count the whole prompt only to confirm.
    exact = False
    best: tuple[str, int] | None = None
    for attempt in range(_MAX_ADJUSTMENTS):
        gap = target_tokens - total
        if exact and abs(gap) <= tolerance and (best is None or abs(gap) < abs(target_tokens - best[1])):
            best = (content, total)
        if abs(gap) <= tolerance and not exact:
            content, total = render_and_count(units)
            exact = True
            continue
        if abs(gap) <= close:
            break
        if gap < 0:
            units.pop()
            total, exact = total - sizes.pop(), False
            continue
        # Add the unit, of several drawn, that best fills the gap.
        fill = None
        for _ in range(_FILL_CANDIDATES * (1 + attempt // 2)):  # search wider when the gap is hard to fill
            candidate = new_unit()
            if fill is None or abs(gap - candidate[1]) < abs(gap - fill[1]):
                fill = candidate
            if abs(gap - fill[1]) <= close:
                break
        units.append(fill[0])
        sizes.append(fill[1])
        total, exact = total + fill[1], False
    if best is None:
        raise TemplateError(f"{template.name}: could not land within {share:.0%} of {target_tokens} tokens; its units may be too long")
    return _messages(best[0]), best[1]


def generate_set(templates: Sequence[Template], size_name: str, target_tokens: int, count: int, seed: int,
                 start: int = 0) -> Iterator[dict[str, Any]]:
    """Prompt lines ``start`` to ``count - 1`` of a set; each depends only on (seed, size, index)."""
    for index in range(start, count):
        template = templates[index % len(templates)]
        rng = random.Random(f"{seed}:{size_name}:{index}")
        messages, tokens = generate_prompt(template, target_tokens, rng)
        yield {"id": f"{size_name}-{index:05d}", "template": template.name, "messages": messages,
               "target_tokens": target_tokens, "prompt_tokens": tokens}
