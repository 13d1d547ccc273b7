"""make tune's goals (issue 33): its own overhead per configuration, SEARCH=halving against SEARCH=grid, and no server
left running after any way of stopping it.

    python bench/tune_bench.py overhead [--vllm]      wall time per configuration less its startup and its load
    python bench/tune_bench.py halving [--seeds 0-9]  12 rehearsed configurations: halving's pick and load, grid's
    python bench/tune_bench.py stops [--vllm]         Ctrl-C, SIGTERM, a crash, kill -9: server processes left after

Each runs `python -m llmload tune` as a user does, reading its output line by line with the time each line came.
--vllm runs the real vLLM (CPU build, tiny-llama from ~/.cache/llmload) instead of the built-in target.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import signal
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from llmload.tune.keeper import group_members  # noqa: E402
from llmload.vllm_cpu.launcher import serve_shell_command  # noqa: E402

_LABEL = re.compile(r"^  \[(.+)\] rung (\d+)/(\d+)")
_CELL, _DONE = re.compile(r"^\[\d+/\d+\] cell "), re.compile(r"^    done in ")
REHEARSAL = ("GRID=max-num-seqs=8,16,32,64", "USERS=32", "DURATION=60s", "SPEEDUP=20", "MAX_TOKENS=200")
VLLM = ("GRID=max-num-seqs=1,8", "USERS=8", "REQUESTS=96", "MAX_TOKENS=64")
HALVING_GRID = "GRID=max-num-seqs=2,4,8,16,32,64 max-num-batched-tokens=512,4096 stream-interval=10"
"""12 configurations; 10 tokens per event (throughput and TPOT unchanged) keep the client and the target, on 2 shared
cores at SPEEDUP 10, from limiting the run (with one event per token the suite's self-check said they did, and the
64-sequence configurations' figures moved 25% from run to run, beyond their intervals)."""


@dataclass
class Line:
    t_s: float
    text: str


def tune(out: Path, *settings: str) -> tuple[int, list[Line]]:
    """Run a tune into ``out``; its exit code and its output lines, each with seconds since it started."""
    started_s = time.monotonic()
    process = subprocess.Popen([sys.executable, "-m", "llmload", "tune", f"OUT={out}", *settings], cwd=REPO,
                               stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, start_new_session=True)
    lines = []
    assert process.stdout is not None
    for text in process.stdout:
        lines.append(Line(time.monotonic() - started_s, text.rstrip("\n")))
    return process.wait(), lines


# -- overhead ----------------------------------------------------------------------------------------------------------

def _summaries(folder: Path) -> list[dict]:
    return [json.loads(p.read_text()) for p in sorted(folder.glob("cells/*/summary.json"))]


def overhead(vllm: bool) -> None:
    work = Path(tempfile.mkdtemp(prefix="tune-bench-"))
    settings = (f"SERVE={serve_shell_command('tiny-llama')}", *VLLM) if vllm else REHEARSAL
    workloads = [("builtin", settings)]
    if not vllm:
        workloads.append(("random 2048/200", (*settings, f"PROMPTS={random_set(work)}")))
    print("| server | prompts | configuration | wall (s) | startup (s) | load (s) | load process beyond its load (s) | "
          "tune's own (s) | of which stop (s) | overhead: wall - startup - load (s) | goal <= 5 s |")
    print("| --- | --- | --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | --- |")
    for prompts, words in workloads:
        out = work / f"out-{len(list(work.iterdir()))}"
        code, lines = tune(out, *words)
        assert code == 0, "\n".join(line.text for line in lines[-30:])
        labels = [i for i, line in enumerate(lines) if _LABEL.match(line.text)]
        end = next(i for i, line in enumerate(lines) if line.text.startswith("====="))
        for n, i in enumerate(labels):
            j = labels[n + 1] if n + 1 < len(labels) else end
            name, rung = _LABEL.match(lines[i].text).group(1, 2)
            slug = re.sub(r"[^A-Za-z0-9._-]+", "_", name).strip("_")
            folder = out / "configs" / slug
            startup_s = json.loads((folder / f"server-{int(rung) - 1}" / "startup.json").read_text())["startup_s"]
            load_s = sum(s["duration_s"] for s in _summaries(folder / f"rung-{int(rung) - 1}"))
            span = lines[i:j + 1]
            cell_s = sum(d.t_s - c.t_s for c, d in zip([x for x in span if _CELL.match(x.text)],
                                                         [x for x in span if _DONE.match(x.text)]))
            last_done = [x.t_s for x in span if _DONE.match(x.text)][-1]
            estimate = next(x.t_s for x in span if x.text.endswith("output tokens/s"))
            wall_s = lines[j].t_s - lines[i].t_s
            over_s = wall_s - startup_s - load_s
            print(f"| {'vLLM CPU, tiny-llama' if vllm else 'built-in target, h100'} | {prompts} | {name} | {wall_s:.2f} | "
                  f"{startup_s:.2f} | {load_s:.2f} | {cell_s - load_s:.2f} | {wall_s - startup_s - cell_s:.2f} | "
                  f"{estimate - last_done:.2f} | {over_s:.2f} | {'met' if over_s <= 5 else 'MISSED'} |")


def random_set(work: Path) -> Path:
    """random:2048:200 written once as a prompts file: the cells read it instead of drawing 1,000 prompts each."""
    from llmload.promptsets.workloads import random_prompts

    path = work / "random-2048-200.jsonl"
    path.write_text("".join(json.dumps(line) + "\n" for line in random_prompts(2048, 200, 4000, 0)))
    return path


# -- halving against grid ----------------------------------------------------------------------------------------------

def halving(seeds: list[int], words: tuple[str, ...]) -> None:
    work = Path(tempfile.mkdtemp(prefix="tune-bench-halving-"))
    prompts = random_set(work)
    common = (HALVING_GRID, f"PROMPTS={prompts}", *words)
    print(f"settings: {' '.join(common)}")
    print("| SEED | grid's best [95% interval] | halving's pick | its grid figure | named it or one inside | "
          "load s: grid / halving | ratio | rungs (configurations) | cells generator-limited: grid / halving | goal |")
    print("| ---: | --- | --- | ---: | --- | ---: | ---: | --- | --- | --- |")
    met = 0
    for seed in seeds:
        results, limited = {}, {}
        for search in ("grid", "halving"):
            out = work / f"{search}-{seed}"
            code, lines = tune(out, *common, f"SEARCH={search}", f"SEED={seed}")
            assert code == 0, "\n".join(line.text for line in lines[-30:])
            results[search] = json.loads((out / "tune.json").read_text())
            cells = [json.loads(p.read_text()) for p in out.glob("configs/*/rung-*/cells/*/summary.json")]
            limited[search] = f"{sum(1 for c in cells if (c.get('generator') or {}).get('generator_limited'))} of {len(cells)}"
        grid, halved = results["grid"], results["halving"]
        by_name = {c["name"]: c for c in grid["configurations"]}
        best = by_name[grid["best"]]
        low, high = best["objective_ci95"] or [best["objective"], best["objective"]]
        pick = by_name[halved["best"]]["objective"]
        inside = halved["best"] == grid["best"] or (low is not None and high is not None and low <= pick <= high)
        ratio = halved["load_s"] / grid["load_s"]
        reached = [c["rungs"] for c in halved["configurations"]]
        rungs = [sum(1 for n in reached if n > r) for r in range(max(reached))]
        ok = inside and ratio <= 0.5
        met += ok
        print(f"| {seed} | {grid['best']} {best['objective']:.0f} [{low:.0f}, {high:.0f}] | {halved['best']} | {pick:.0f} | "
              f"{'yes' if inside else 'NO'} | {grid['load_s']:.1f} / {halved['load_s']:.1f} | {ratio:.2f} | "
              f"{' -> '.join(map(str, rungs))} | {limited['grid']} / {limited['halving']} | {'met' if ok else 'MISSED'} |",
              flush=True)
    print(f"goal met in {met} of {len(seeds)} seeds (needed: 9 of 10)")


# -- ways of stopping ----------------------------------------------------------------------------------------------------

@dataclass(frozen=True)
class Stop:
    name: str
    signum: int | None
    """The signal sent (None: the tune crashes on its own)."""
    group: bool = False
    """Sent to the tune's process group (a terminal's Ctrl-C), else to its process."""


CRASH = """
import os, signal, sys
import llmload.tune.server as server

def crash(*_):
    raise RuntimeError("planted crash of the suite")

signal.signal(signal.SIGALRM, crash)
start = server.ManagedServer.start

def start_then_crash(self):
    if os.environ["CRASH_WHEN"] == "starting":
        signal.alarm(8)  # vLLM is importing and loading: 20-30 s before it serves
    ready = start(self)
    if os.environ["CRASH_WHEN"] == "mid-load":
        signal.alarm(3)
    return ready

server.ManagedServer.start = start_then_crash
from llmload.cli import main
sys.exit(main(sys.argv[1:]))
"""
STOPS = (Stop("Ctrl-C (SIGINT to its process group)", signal.SIGINT, group=True),
         Stop("SIGTERM", signal.SIGTERM),
         Stop("a crash: an exception the suite does not catch", None),
         Stop("a crash: SIGSEGV", signal.SIGSEGV),
         Stop("kill -9", signal.SIGKILL))


def _processes() -> list[tuple[int, int, list[str]]]:
    """(pid, pgid, command line) of every live process."""
    found = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            stat = Path(f"/proc/{entry}/stat").read_bytes()
            argv = Path(f"/proc/{entry}/cmdline").read_bytes().decode(errors="replace").split("\0")
        except OSError:
            continue
        fields = stat[stat.rfind(b")") + 2:].split()
        if fields[0] != b"Z":
            found.append((int(entry), int(fields[2]), argv))
    return found


def server_processes(groups: set[int], ports: set[int]) -> list[int]:
    """Live processes in a server's group, or whose command line gives one of the servers' ports."""
    return sorted(pid for pid, pgid, argv in _processes()
                  if pgid in groups or any(a == "--port" and b in {str(p) for p in ports} for a, b in zip(argv, argv[1:])))


def stops(vllm: bool) -> None:
    work = Path(tempfile.mkdtemp(prefix="tune-bench-stops-"))
    settings = (f"SERVE={serve_shell_command('tiny-llama')}", *VLLM[:-2], "DURATION=600s", "MAX_TOKENS=64") if vllm else \
               ("GRID=max-num-seqs=8,16", "USERS=4", "DURATION=600s", "MAX_TOKENS=50")
    print("| server | way of stopping | when | tune's exit code | server processes at its exit | seconds until none | "
          "left after 60 s |")
    print("| --- | --- | --- | ---: | ---: | ---: | ---: |")
    phases = ("mid-load", "starting") if vllm else ("mid-load",)
    for phase in phases:
        for stop in STOPS:
            out = work / f"out-{len(list(work.iterdir()))}"
            argv = [sys.executable, "-c", CRASH, "tune"] if stop.signum is None else [sys.executable, "-m", "llmload", "tune"]
            process = subprocess.Popen([*argv, f"OUT={out}", *settings], cwd=REPO, stdout=subprocess.DEVNULL,
                                       stderr=subprocess.DEVNULL, start_new_session=True,
                                       env={**os.environ, "CRASH_WHEN": phase})
            deadline = time.monotonic() + 600
            if phase == "starting":
                wanted = "configs/*/server-0/launch.json"
            else:
                wanted = "configs/*/server-0/startup.json" if stop.signum is None else "configs/*/rung-0/cells/*/samples.jsonl"
            while not list(out.glob(wanted)):
                assert process.poll() is None and time.monotonic() < deadline, "the tune did not get there"
                time.sleep(0.1)
            keeper = str(REPO / "llmload" / "tune" / "keeper.py")
            groups: set[int] = set()
            while not groups and process.poll() is None:
                groups = {pgid for pid, pgid, argv in _processes() if keeper in argv and str(process.pid) in argv}
            ports = {json.loads(p.read_text())["port"] for p in out.glob("configs/*/server-*/launch.json")}
            assert groups and ports, "no server was seen"
            if stop.signum is not None:
                time.sleep(8 if phase == "starting" else 0)  # vLLM is importing and loading: 20-30 s before it serves
                (os.killpg if stop.group else os.kill)(process.pid, stop.signum)
            code = process.wait(300)
            at_exit = len(server_processes(groups, ports))
            ended_s = time.monotonic()
            while server_processes(groups, ports) and time.monotonic() - ended_s < 60:
                time.sleep(0.1)
            gone_s = time.monotonic() - ended_s
            left = server_processes(groups, ports)
            print(f"| {'vLLM CPU, tiny-llama' if vllm else 'built-in target'} | {stop.name} | {phase} | {code} | {at_exit} | "
                  f"{gone_s:.1f} | {len(left)} |", flush=True)
            for pgid in groups:  # the bench leaves nothing behind either
                if group_members(pgid):
                    os.killpg(pgid, signal.SIGKILL)


def _seeds(text: str) -> list[int]:
    first, _, last = text.partition("-")
    return list(range(int(first), int(last or first) + 1))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("what", choices=("overhead", "halving", "stops"))
    parser.add_argument("--vllm", action="store_true", help="the real vLLM (CPU build) serving tiny-llama")
    parser.add_argument("--seeds", default="0-9")
    parser.add_argument("--settings", nargs="*", default=["USERS=64", "DURATION=90s", "SPEEDUP=10"],
                        help="halving: the load's settings")
    args = parser.parse_args()
    started = time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime())
    print(f"{started}, load average {os.getloadavg()[0]:.2f}: {' '.join(sys.argv)}")
    if args.what == "overhead":
        overhead(args.vllm)
    elif args.what == "halving":
        halving(_seeds(args.seeds), tuple(args.settings))
    else:
        stops(args.vllm)
    print(f"ended {time.strftime('%Y-%m-%d %H:%M:%S UTC', time.gmtime())}")


if __name__ == "__main__":
    main()
