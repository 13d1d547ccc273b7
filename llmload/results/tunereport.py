"""The tune's result block: the configurations ranked by the objective, each with its interval and its difference from
the baseline (beyond the run-to-run spread or not), what failed and why, and what a rehearsal does not model."""

from __future__ import annotations

from llmload.results.tunefile import MEASURED, ConfigResult, TuneResult

__all__ = ["tune_lines"]


def _interval(config: ConfigResult) -> str:
    if config.objective is None:
        return "n/a"
    ci = config.objective_ci95 or [None, None]
    low = "n/a" if ci[0] is None else f"{ci[0]:.4g}"
    high = "n/a" if ci[1] is None else f"{ci[1]:.4g}"
    return f"{config.objective:.4g} [{low}, {high}]"


def _versus(config: ConfigResult, baseline: str) -> str:
    if config.name == baseline:
        return "baseline"
    if config.vs_baseline_pct is None:
        return "n/a"
    ci = config.vs_baseline_ci95 or [None, None]
    interval = "" if None in ci else f" [{ci[0]:+.1f}, {ci[1]:+.1f}]"
    verdict = {True: "beyond noise", False: "within noise", None: "no interval"}[config.beyond_noise]
    return f"{config.vs_baseline_pct:+.1f}%{interval} {verdict}"


def tune_lines(result: TuneResult) -> list[str]:
    """The block printed after a tune (and by the figures' report)."""
    head = "REHEARSAL: tune result" if result.rehearsal else "Tune result"
    baseline = result.configurations[0].name if result.configurations else ""
    lines = [f"{head:=^100}", f"Objective: {result.objective} ({result.unit}), SEARCH={result.search}"
             + (f", SLO {result.slo}" if result.slo else ""), f"Figures: {result.label}",
             f"{'rank':<5}{'configuration':<46}{'objective [95% interval]':<30}vs baseline [95% interval]"]
    ranks = {name: i + 1 for i, name in enumerate(result.ranking)}
    for config in sorted(result.configurations, key=lambda c: ranks.get(c.name, 10**6)):
        rank = str(ranks.get(config.name, "-"))
        status = "" if config.status == MEASURED else f" ({config.status})"
        lines.append(f"{rank:<5}{(config.name + status)[:45]:<46}{_interval(config):<30}{_versus(config, baseline)}")
    if result.best is not None:
        beyond = ("leads every other beyond its interval" if result.best_beyond_noise
                  else "its interval overlaps another configuration's: it does not lead every other beyond noise "
                       "(the vs baseline column tests each difference's own interval, a finer test)")
        lines.append(f"Best: {result.best}, {beyond}")
    lines.append(f"Stopped because {result.stopped_because}; {result.load_s / 60:.1f} minutes of load"
                 + (f" of BUDGET {result.budget_s / 60:g}" if result.budget_s else ""))
    for config in result.configurations:
        if config.startup_s is not None:
            lines.append(f"  {config.name}: ready in {config.startup_s:.0f} s" + (f", version {config.version}" if config.version else ""))
        if config.reason:
            lines.append(f"  {config.name}: {config.status}: {config.reason}")
            lines += [f"    | {line}" for line in config.log_tail[-5:]]
        if config.not_modelled:
            lines.append(f"  {config.name}: not modelled by the built-in target (predicts the baseline): "
                         f"{', '.join(config.not_modelled)}")
        lines += [f"  {config.name}: {note}" for note in config.notes]
    lines.append("=" * 100)
    return lines
