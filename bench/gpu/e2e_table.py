"""The end-to-end stage's table (bench/gpu/e2e_aot.sh): one row per packed
step with its result, its step time, torch eager and torch.compile on the
same model and batch, the ratios, and the communication a multi-rank step
exposes. Standard library only.

    python3 bench/gpu/e2e_table.py --pack pack.json --status status.tsv --torch torch.json \
        [--gpu "NVIDIA H200, 9.0"]

status.tsv: one ``name<TAB>result<TAB>detail<TAB>report`` line per step
(result ok, FAIL or skipped; report the runner's --report JSON or empty).

Columns (docs/AOT.md): step, kind (cpu / gpu), ranks, dtype, result, step
(the runner's median step time, synchronized on the GPU), model and x model
(the cost model's estimate of a compute=gpu step for the GPU --gpu names,
fsdp-gpu-cost-report in docs/GPU.md, made when the pack was built, and the
measured time over it: the first runs on a GPU calibrate the model; h200's
when no GPU is named), eager and compile
(torch's median training step, same batch, one GPU), x eager and x compile
(step / torch: under 1 is faster than torch), exposed (the median per step
of the communication the compute waited for, as the runner measures it:
on the GPU the compute stream's stall in its waits, timed by events), and
pair delta (a multi-rank step's time minus that of the one-rank step with
the same work per rank, its "pair"), comm/step (rank 0's collectives and
bytes sent per step).
"""

from __future__ import annotations

import argparse
import json
import os
import sys

GOAL = {"gpt2-small-bf16": 1.2}  # at most this many times torch eager


def cost_gpu(name: str) -> str:
    """The cost model's key for an nvidia-smi name (h200 when unknown)."""
    for key in ("h200", "h100", "a100"):
        if key in name.lower():
            return key
    return "h200"


def _ms(x):
    return f"{x:.3f}" if x is not None else "-"


def _ratio(a, b):
    return f"{a / b:.2f}x" if a is not None and b else "-"


def load_status(path: str) -> dict:
    out = {}
    if path and os.path.exists(path):
        with open(path) as f:
            for line in f:
                parts = line.rstrip("\n").split("\t")
                if len(parts) >= 3:
                    name, result, detail = parts[:3]
                    report = parts[3] if len(parts) > 3 else ""
                    out[name] = {"result": result, "detail": detail, "report": report}
    return out


def _report(st: dict | None) -> dict | None:
    if not st or st["result"] != "ok" or not st["report"]:
        return None
    try:
        with open(st["report"]) as f:
            return json.load(f)
    except (OSError, json.JSONDecodeError):
        return None


def table(pack: dict, status: dict, torch: dict, gpu: str = "") -> list[str]:
    rows = torch.get("rows", {})
    steps = {s["name"]: s for s in pack["steps"]}
    model_gpu = cost_gpu(gpu)
    header = ["step", "kind", "ranks", "dtype", "result", "step ms", f"model ms ({model_gpu})",
              "x model", "eager ms", "compile ms",
              "x eager", "x compile", "exposed ms", "pair delta ms", "comm/step",
              "note"]  # fmt: skip
    lines = []
    notes = []
    for s in pack["steps"]:
        st = status.get(
            s["name"], {"result": "skipped", "detail": "not run", "report": ""}
        )
        rep = _report(st)
        step_ms = rep["median_step_s"] * 1e3 if rep else None
        eager = compile_ = None
        t = s.get("torch")
        torch_note = ""
        if t:
            row = rows.get(f"{t['model']}|{t.get('autocast') or 'none'}", {})
            e, c = row.get("eager", {}), row.get("compile", {})
            eager, compile_ = e.get("median_ms"), c.get("median_ms")
            if eager is None and e.get("skipped"):
                torch_note = f"torch: {e['skipped']}"
            if c.get("first_call_s") is not None:
                torch_note = f"compile {c['first_call_s']:.0f} s"
        exposed = delta = "-"
        if rep and rep.get("step_exposed_comm_s") and (rep.get("world") or 1) > 1:
            e = sorted(rep["step_exposed_comm_s"])
            exposed = _ms(e[len(e) // 2] * 1e3)
        pair = s.get("pair")
        if pair and rep:
            prep = _report(status.get(pair))
            if prep:
                delta = _ms(step_ms - prep["median_step_s"] * 1e3)
                if rep.get("gpus", 0) and rep["gpus"] < rep["world"]:
                    delta += "*"
                    notes.append(
                        f"* {s['name']}: {rep['world']} ranks on {rep['gpus']} GPU(s); they "
                        "share the GPU, so the difference also holds their compute's contention"
                    )
        comm = "-"
        if rep and rep.get("comm_per_step"):
            c = rep["comm_per_step"]
            comm = f"{c['calls']:.0f} / {c['bytes_sent'] / 1e6:.2f} MB"
        model = s.get("cost_model", {}).get(model_gpu, {}).get("estimate_ms")
        note = st["detail"] if st["result"] != "ok" else torch_note
        goal = GOAL.get(s["name"])
        if goal and step_ms is not None and eager:
            met = "met" if step_ms <= goal * eager else "NOT met"
            note = f"goal <= {goal}x eager: {met}" + (f"; {note}" if note else "")
        lines.append(
            [s["name"], s["kind"], str(s.get("world") or "-"), s.get("dtype", "f32"), st["result"],
             _ms(step_ms), _ms(model), _ratio(step_ms, model), _ms(eager), _ms(compile_), _ratio(step_ms, eager),
             _ratio(step_ms, compile_), exposed, delta, comm, note]
        )  # fmt: skip
    # A step that did not run keeps its torch times (they are measured anyway).
    widths = [max(len(r[i]) for r in [header] + lines) for i in range(len(header) - 1)]
    out = []
    for r in [header] + lines:
        out.append("  ".join(c.ljust(w) for c, w in zip(r, widths)) + "  " + r[-1])
        if r is header:
            out.append("  ".join("-" * w for w in widths) + "  " + "-" * 4)
    built = pack.get("built")
    if built:
        out.insert(
            0, f"pack built {built.get('date', '?')} from {built.get('commit', '?')}"
        )
    missing = [n for n in status if n not in steps]
    if missing:
        out.append(f"(status for steps not in the pack: {', '.join(missing)})")
    return out + notes


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--pack", required=True)
    ap.add_argument("--status", required=True)
    ap.add_argument("--torch", default="")
    ap.add_argument(
        "--gpu",
        default="",
        help="the GPU's name (nvidia-smi), for the cost model's column",
    )
    a = ap.parse_args(argv)
    with open(a.pack) as f:
        pack = json.load(f)
    torch = {}
    if a.torch and os.path.exists(a.torch):
        with open(a.torch) as f:
            torch = json.load(f)
    print("\n".join(table(pack, load_status(a.status), torch, a.gpu)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
