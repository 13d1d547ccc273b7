"""`make tune`: each server configuration started, loaded and stopped in turn; the best named at the objective,
beyond the run-to-run spread or not.

SEARCH=grid measures every configuration at the workload's load time. SEARCH=halving measures every configuration
briefly (1/9 of it for 10 to 27 configurations), keeps those whose objective's interval still overlaps the leader's,
at most the best third of the rung's (at least two), and measures them three times as long, until one leads beyond its
interval, the last rung ran, or BUDGET (minutes of load on the server's clock) is spent. A configuration the search
left ranks below every one measured longer: short runs are not compared with long ones. Every rung of every
configuration is a sweep (or capacity search) folder of its own: a rerun of the same command skips what is measured
and starts servers only for what is not. A configuration that fails to start, or whose server dies, is recorded with
its log's tail, and the tune goes on (a rerun tries it again: the rung of a server that died is set aside as
``rung-N.died-K``); no server outlives the tune (tune/server.py: each in a process group its keeper ends, also after
kill -9 of the tune).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Callable

import numpy as np

from llmload.errors import LoadTestError, ServerFailed
from llmload.results.decision import figure_of
from llmload.results.metrics import RUN_BY_NAME
from llmload.results.records import read_records
from llmload.results.storage import CAPACITY_FILE, CELL_FILE, SAMPLES_FILE, SUMMARY_FILE, read_summary
from llmload.results.sweepfiles import read_capacity
from llmload.results.tunefile import MEASURED, CellFigures, ConfigResult, TuneResult, write_tune
from llmload.system.listening import free_loopback_port
from llmload.sweep.fresh import PROMPT_START, next_prompt_start
from llmload.settings import parse_duration_s
from llmload.timescale import time_scale_of

from .estimate import Estimate, difference, geometric_mean, leader, overlaps
from .grid import Configuration
from .plan import HALVING_ETA, TunePlan, scaled_cell, server_command
from .server import ManagedServer, fill_port

__all__ = ["run_tune", "objective_estimate", "cell_figures", "UNITS"]

UNITS = {"capacity": "users at the SLO", "throughput": "output tokens/s", "cost": "USD per million output tokens"}
LEFT = "left by the search"
_OUTPUT, _TOTAL, _COST = (RUN_BY_NAME[n] for n in ("output_throughput_tok_s", "total_throughput_tok_s",
                                                    "usd_per_million_output_tokens"))


def _mean_tpot_ms(run: Path, scale: float) -> tuple[float | None, list[float] | None]:
    """Mean TPOT of a run's measured requests with its 95% interval (mean ± 1.96 standard errors), in ms."""
    values = [r.tpot_s for r in read_records(run / SAMPLES_FILE) if r.ok and not r.warmup and r.tpot_s is not None]
    if not values:
        return None, None
    a = np.asarray(values) * 1000.0 * scale
    half = 1.96 * float(a.std(ddof=1)) / math.sqrt(a.size) if a.size > 1 else None
    mean = float(a.mean())
    return mean, None if half is None else [mean - half, mean + half]


def cell_figures(run: Path, label: str, key: str) -> CellFigures:
    """One finished run's figures (a rehearsal's predicted for the GPU played)."""
    summary = read_summary(run)
    scale = time_scale_of(summary.config)
    output, total, cost = (figure_of(summary, m) for m in (_OUTPUT, _TOTAL, _COST))
    tpot, tpot_ci = _mean_tpot_ms(run, scale.factor("time"))
    played = summary.predicted if summary.predicted is not None else summary
    config = summary.config
    return CellFigures(label=label, key=key, basis=summary.predicted.label if summary.predicted is not None else "measured",
                       users=float(config.get("rate") or config.get("users") or 0),
                       duration_s=summary.duration_s, output_throughput_tok_s=output.value,
                       output_throughput_tok_s_ci95=output.ci95, total_throughput_tok_s=total.value,
                       total_throughput_tok_s_ci95=total.ci95, tpot_mean_ms=tpot, tpot_mean_ms_ci95=tpot_ci,
                       ttft_median_ms=played.ttft_ms.median, tpot_median_ms=played.tpot_ms.median,
                       usd_per_million_output_tokens=cost.value, usd_per_million_output_tokens_ci95=cost.ci95)


@dataclass(frozen=True)
class _Measured:
    """One configuration's rung: its estimate and what stands behind it."""

    estimate: Estimate
    cells: list[CellFigures]
    load_s: float
    capacity: float | None = None
    capacity_ci95: list[float | None] | None = None


def objective_estimate(objective: str, cells: list[CellFigures]) -> Estimate:
    """Throughput: the cells' output tokens/s (their geometric mean); cost: their USD per million output tokens."""
    if objective == "cost":
        return geometric_mean([Estimate.of("cost", c.usd_per_million_output_tokens, c.usd_per_million_output_tokens_ci95)
                               for c in cells])
    return geometric_mean([Estimate.of("throughput", c.output_throughput_tok_s, c.output_throughput_tok_s_ci95)
                           for c in cells])


def _rung_done(plan: TunePlan, folder: Path, factor: float) -> bool:
    if plan.cells:
        return all((folder / "cells" / scaled_cell(c, factor).key / CELL_FILE).exists() for c in plan.cells)
    return (folder / CAPACITY_FILE).exists()


def _read_rung(plan: TunePlan, folder: Path, factor: float) -> _Measured:
    """What a finished rung measured."""
    if plan.cells:
        cells = [cell_figures(folder / "cells" / scaled.key, scaled.label, scaled.key)
                 for scaled in (scaled_cell(c, factor) for c in plan.cells)]
        return _Measured(objective_estimate(plan.objective, cells), cells, sum(c.duration_s for c in cells))
    result = read_capacity(folder)
    steps = [folder / "cells" / s.key for s in result.steps]
    load_s = sum(read_summary(s).duration_s for s in steps if (s / SUMMARY_FILE).exists())
    at = next((s for s in result.steps if result.answer is not None and s.load == result.answer), None)
    cells = [cell_figures(folder / "cells" / at.key, f"at capacity ({result.by}={at.load:g})", at.key)] if at else []
    if plan.objective == "cost":
        estimate = objective_estimate("cost", cells) if cells else Estimate(None, higher_is_better=False)
    else:
        estimate = Estimate.of("capacity", result.answer, result.answer_ci95)
    return _Measured(estimate, cells, load_s, result.answer, list(result.answer_ci95))


def _run_rung(plan: TunePlan, config: Configuration, folder: Path, factor: float, api_key: str, out: Path,
              progress: Callable[[str], None]) -> None:
    """Start the configuration's server, load it with the rung's workload, stop it (ServerFailed on failure)."""
    from llmload.sweep.capacity import run_capacity
    from llmload.sweep.runner import run_sweep
    from llmload.sweep.scenarios import Scenario

    command, _, _ = server_command(plan, config)
    launch = fill_port(config.name, command, free_loopback_port(), config.env)
    rung = folder.name.removeprefix("rung-")
    with ManagedServer(launch, folder.parent / f"server-{rung}", plan.serve_timeout_s, api_key, progress) as server:
        ready = server.start()
        progress(f"    ready in {ready.startup_s:.0f} s ({launch.base_url}, {', '.join(ready.models)})")
        fresh = {PROMPT_START: str(next_prompt_start(out))}  # past every earlier run's prompts in the tune
        if plan.cells:
            scenario = Scenario(f"{config.slug}-rung-{rung}", "", Path(""), {},
                                tuple(scaled_cell(c, factor) for c in plan.cells))
            code = run_sweep(scenario, folder, launch.base_url, plan.speedup, 1.0, api_key, progress=progress,
                             exported=fresh)
        else:
            from llmload.options import CAPACITY_OPTIONS
            from llmload.settings import parse_settings

            words = dict(plan.capacity_words)
            words["DURATION"] = f"{parse_duration_s(words.get('DURATION', '120s')) * factor:g}s"
            capacity = parse_settings([f"{k}={v}" for k, v in words.items() if k.startswith("CAPACITY_")], CAPACITY_OPTIONS)
            code = run_capacity({k: v for k, v in words.items() if not k.startswith("CAPACITY_")}, capacity, folder,
                                launch.base_url, plan.speedup, api_key, progress, fresh)
        server.check_alive()
        if code != 0:
            raise LoadTestError(f"the load on {config.name} did not finish (see {folder})")


def _config_result(config: Configuration, plan: TunePlan, out: Path, status: str, measured: _Measured | None,
                   rungs: int, load_s: float, failure: ServerFailed | LoadTestError | None = None) -> ConfigResult:
    command, not_modelled, notes = server_command(plan, config)
    server = sorted((out / "configs" / config.slug).glob("server-*"))
    startup = version = None
    effective: dict = {}
    if server and (server[-1] / "startup.json").exists():
        import orjson

        startup = orjson.loads((server[-1] / "startup.json").read_bytes()).get("startup_s")
        version_file = server[-1] / "version.json"
        version = orjson.loads(version_file.read_bytes()) if version_file.exists() else None
        version = version.get("version") if isinstance(version, dict) else version
        effective_file = server[-1] / "effective.json"
        effective = orjson.loads(effective_file.read_bytes()) if effective_file.exists() else {}
    estimate = measured.estimate if measured else None
    return ConfigResult(
        name=config.name, slug=config.slug, settings=config.settings, command=command.split(), env=config.env,
        status=status, reason=str(failure) if failure else None,
        log_tail=_lines(getattr(failure, "log_tail", None)), startup_s=startup, version=version,
        effective=effective, not_modelled=not_modelled, notes=notes + _effective_notes(config, effective),
        objective=estimate.value if estimate else None,
        objective_ci95=[estimate.low, estimate.high] if estimate and estimate.value is not None else None,
        capacity=measured.capacity if measured else None, capacity_ci95=measured.capacity_ci95 if measured else None,
        rungs=rungs, load_s=load_s, cells=measured.cells if measured else [])


def _lines(tail: str | list[str] | None) -> list[str]:
    """A failed server's log tail as lines."""
    if not tail:
        return []
    return tail.splitlines() if isinstance(tail, str) else list(tail)


def _effective_notes(config: Configuration, effective: dict) -> list[str]:
    """What the server's log says of the flags given (one that changed nothing, a backend other than asked)."""
    notes = []
    if "--async-scheduling" in config.args and effective.get("async_scheduling") is True and effective.get("version"):
        notes.append(f"async scheduling: the server's log says it ran on (vLLM {effective['version']}); since vLLM 0.14 it "
                     "is on by default, so --async-scheduling changes nothing there")
    asked = config.env.get("VLLM_ATTENTION_BACKEND")
    ran = effective.get("attention_backend")
    if asked and ran and asked.upper() not in str(ran).upper():
        notes.append(f"VLLM_ATTENTION_BACKEND={asked} was asked; the server's log says it ran {ran} (newer vLLM reads "
                     "--attention-backend)")
    return notes


def run_tune(plan: TunePlan, out: Path, api_key: str = "", progress: Callable[[str], None] = print) -> TuneResult:
    """Run the tune, writing OUT/tune.json and configs.csv after every configuration; the result."""
    (out / "configs").mkdir(parents=True, exist_ok=True)
    configs = list(plan.configurations)
    latest: dict[str, _Measured] = {}
    rungs_run: dict[str, int] = {}
    failed: dict[str, tuple[str, ServerFailed | LoadTestError]] = {}
    load_s = {c.name: 0.0 for c in configs}
    survivors = configs
    stopped = ""
    mode = "rehearsal: the built-in target plays each configuration" if not plan.serve and not any(c.command for c in configs) else "server: " + (plan.serve or "each configuration's own command")
    progress(f"tune: {len(configs)} configurations, SEARCH={plan.search}, OBJECTIVE={plan.objective} ({UNITS[plan.objective]}); "
             f"{mode} -> {out}")

    def result(stopped_because: str) -> TuneResult:
        return _result(plan, configs, latest, rungs_run, failed, load_s, survivors, stopped_because, out)

    for number, factor in enumerate(plan.rung_factors):
        for config in survivors:
            if plan.budget_s is not None and sum(load_s.values()) >= plan.budget_s:
                stopped = f"BUDGET={plan.budget_s / 60:g} minutes of load is spent"
                break
            folder = out / "configs" / config.slug / f"rung-{number}"
            label = f"  [{config.name}] rung {number + 1}/{len(plan.rung_factors)} ({factor:g} of the load time)"
            if not _rung_done(plan, folder, factor):
                progress(label)
                try:
                    _run_rung(plan, config, folder, factor, api_key, out, progress)
                except ServerFailed as e:
                    failed[config.name] = ("failed to start" if e.phase == "start" else "died mid-run", e)
                    progress(f"    {failed[config.name][0]}: {e}")
                    if e.phase == "run":
                        _set_aside(folder)
                    write_tune(out, result("running"))
                    continue
                except LoadTestError as e:
                    failed[config.name] = ("failed", e)
                    progress(f"    failed: {e}")
                    write_tune(out, result("running"))
                    continue
            else:
                progress(f"{label}: measured before, reused")
            measured = _read_rung(plan, folder, factor)
            latest[config.name] = measured
            rungs_run[config.name] = number + 1
            load_s[config.name] += measured.load_s
            progress(f"    {_estimate_text(measured.estimate)} {UNITS[plan.objective]}")
            write_tune(out, result("running"))
        if stopped:
            break
        if plan.search == "grid":
            break
        survivors = _survivors([c for c in survivors if c.name in latest and c.name not in failed], latest,
                               last=number + 1 == len(plan.rung_factors))
        if len(survivors) == 1:
            stopped = f"{survivors[0].name} leads beyond its interval after rung {number + 1}"
            break
        if number + 1 < len(plan.rung_factors):
            progress(f"  rung {number + 1}: {len(survivors)} configurations still within the leader's interval: "
                     f"{', '.join(c.name for c in survivors)}")
    if not stopped:
        stopped = "every configuration was measured" if plan.search == "grid" else "the last rung ran"
    final = result(stopped)
    write_tune(out, final)
    return final


def _set_aside(folder: Path) -> None:
    """Rename the rung of a server that died mid-run to ``rung-N.died-K``: the cells it finished are kept to read,
    not reused by a rerun, which measures the configuration again."""
    if not folder.exists():
        return
    k = 1
    while folder.with_name(f"{folder.name}.died-{k}").exists():
        k += 1
    folder.rename(folder.with_name(f"{folder.name}.died-{k}"))


def _survivors(measured: list[Configuration], latest: dict[str, _Measured], last: bool = False) -> list[Configuration]:
    """Those whose objective's interval overlaps the leader's (the leader included); before the ``last`` rung at most
    the best 1/HALVING_ETA of ``measured`` (at least two), in their order."""
    estimates = [latest[c.name].estimate for c in measured]
    best = leader(estimates)
    if best is None:
        return measured
    close = [i for i, e in enumerate(estimates) if i == best or overlaps(e, estimates[best])]
    if not last:
        keep = max(2, math.ceil(len(measured) / HALVING_ETA))
        close = sorted(close, key=lambda i: _order(estimates[i]))[:keep]
    return [measured[i] for i in sorted(close)]


def _order(e: Estimate) -> float:
    """Sort key, best first; an unknown value last."""
    if e.value is None:
        return math.inf
    return -e.value if e.higher_is_better else e.value


def _estimate_text(e: Estimate) -> str:
    if e.value is None:
        return "n/a"
    high = "n/a" if e.high is None else f"{e.high:.4g}"
    return f"{e.value:.4g} [{'n/a' if e.low is None else f'{e.low:.4g}'}, {high}]"


def _result(plan: TunePlan, configs: list[Configuration], latest: dict[str, _Measured], rungs: dict[str, int],
            failed: dict[str, tuple[str, ServerFailed | LoadTestError]], load_s: dict[str, float],
            survivors: list[Configuration], stopped: str, out: Path) -> TuneResult:
    """The tune's record: each configuration's status and figures, the differences from the baseline, the ranking."""
    alive = {c.name for c in survivors}
    results = []
    for config in configs:
        if config.name in failed:
            status, failure = failed[config.name]
            results.append(_config_result(config, plan, out, status, latest.get(config.name), rungs.get(config.name, 0),
                                          load_s[config.name], failure))
        elif config.name in latest:
            status = MEASURED if config.name in alive else LEFT
            results.append(_config_result(config, plan, out, status, latest[config.name], rungs[config.name],
                                          load_s[config.name]))
        else:
            results.append(_config_result(config, plan, out, "not run", None, 0, 0.0))
    baseline = latest.get(configs[0].name)
    with_differences = []
    for r in results:
        m = latest.get(r.name)
        if m is None or baseline is None or r.name == configs[0].name:
            with_differences.append(r)
            continue
        d = difference(m.estimate, baseline.estimate, additive=plan.objective == "capacity")
        with_differences.append(replace(r, vs_baseline_pct=d.change_pct, vs_baseline_ci95=[d.low_pct, d.high_pct],
                                        beyond_noise=d.beyond_noise))
    # those measured at a later rung first (halving: a configuration left after a short run is not compared with a
    # longer run's figure), then by the objective
    ranked = sorted((n for n in latest if n not in failed and latest[n].estimate.value is not None),
                    key=lambda n: (-rungs[n], _order(latest[n].estimate)))
    best = ranked[0] if ranked else None
    beyond = None
    if best is not None:
        others = [latest[n].estimate for n in ranked[1:] if rungs[n] == rungs[best]]  # those measured as long
        beyond = not any(overlaps(latest[best].estimate, e) for e in others) if others else None
    rehearsal = not plan.serve and not any(c.command for c in configs)
    label = next((cell.basis for m in latest.values() for cell in m.cells), "measured")
    return TuneResult(objective=plan.objective, unit=UNITS[plan.objective], search=plan.search,
                      slo=plan.capacity_words.get("SLO", ""), gpus=plan.gpus, rehearsal=rehearsal,
                      label=label, configurations=with_differences, ranking=ranked,
                      best=best, best_beyond_noise=beyond, stopped_because=stopped, load_s=sum(load_s.values()),
                      budget_s=plan.budget_s)

