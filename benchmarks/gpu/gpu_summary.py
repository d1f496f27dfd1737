"""The GPU script's summary table: one line per stage with its key numbers, then each stage's rows
(the numbers a reader of ``summary.txt`` needs without opening the tarball)."""
from __future__ import annotations


def _f(v, fmt: str, dash: str = "-") -> str:
    return dash if v is None else format(v, fmt)


def _key(name: str, res: dict) -> str:
    if name == "grid":
        return (f"{res['cases'] - len(res['failed'])}/{res['cases']} cases ok, {res['not_run']} not run "
                f"({res['backend']}, {','.join(res['dtypes'])}); compile: {'ok' if res['compile'].get('ok') else 'FAILED'}")
    if name == "sync":
        g = res["graph_vs_eager"]
        return f"{res['sync_free']}; graph vs eager: loss {g['max_rel_loss_err']:.1e} rel, params {g['max_abs_param_err']:.1e} abs"
    if name == "spikingjelly":
        return f"spikingjelly {res['version']}, its PLIF neuron: {res['plif_neuron']}"
    if name.startswith("protocol"):
        ep = res.get("epochs", [])
        return (f"{len(ep)} epochs (cuda_graph={res.get('cuda_graph')}): " +
                ", ".join(f"{e['epoch_time_s']:.1f}s/{e['test_acc']:.2%}" for e in ep)) if ep else "no epoch"
    if name == "memory":
        return ", ".join(f"{k} {v:.2f}" for k, v in res.get("vs_naive", {}).items()) + " of naive's peak"
    if name in ("neuron", "train", "dvs"):
        return f"{sum(r.get('time_ms', r.get('ms_per_step')) is not None for r in res.get('rows', []))} rows measured"
    return ""


def _neuron(res: dict) -> list[str]:
    lines = ["", "neuron (fwd+bwd): eager call and the kernels' device time against the copy bound",
             f"{'case':24s} {'backend':14s} {'call ms':>8s} {'% bound':>8s} {'dev ms':>8s} {'% dev':>7s} {'kernels':>7s}"]
    for r in res["rows"]:
        if r["pass_"] != "fwd+bwd":
            continue
        if r["time_ms"] is None:
            lines.append(f"{r['case']:24s} {r['backend']:14s} {r['note']}")
            continue
        lines.append(f"{r['case']:24s} {r['backend']:14s} {r['time_ms']:8.3f} {_f(r['pct_copy_bound'], '8.1f'):>8s} "
                     f"{_f(r.get('device_ms'), '8.3f'):>8s} {_f(r.get('pct_device_bound'), '7.1f'):>7s} "
                     f"{_f(r.get('kernels'), '7.0f'):>7s}" + (" noise" if r["note"] else ""))
    paths = {r["extra"].get("spikingjelly_path") for r in res["rows"]} - {None}
    return lines + [f"SpikingJelly's neuron: {p}" for p in sorted(paths)]


def _train(title: str, res: dict) -> list[str]:
    lines = ["", title, f"{'variant':18s} {'batch':>5s} {'ms':>8s} {'samples/s':>10s} {'peak MB':>8s} {'kernels':>8s} "
             f"{'x SJ':>6s}"]
    for r in res["rows"]:
        if r["ms_per_step"] is None:  # not measured: the note says why
            lines.append(f"{r['variant']:18s} {r['batch']:5d} {r.get('note', '')}")
            continue
        lines.append(f"{r['variant']:18s} {r['batch']:5d} {r['ms_per_step']:8.2f} {r['samples_per_s']:10.0f} "
                     f"{_f(r.get('peak_mem_mb'), '8.0f'):>8s} {_f(r.get('kernels'), '8.0f'):>8s} "
                     f"{_f(r.get('ratio_to_spikingjelly'), '6.2f'):>6s}")
    notes = {r["note"] for r in res["rows"] if r["ms_per_step"] is not None and r.get("note")}
    return lines + sorted(notes) + [f"{v}: {e[:200]}" for v, e in res.get("errors", {}).items()]


def _memory(res: dict) -> list[str]:
    lines = ["", f"memory, {res.get('network', 'dvs128-gesture')} T={res['T']} B={res['batch']} ({res['what']}):"]
    for r in res["rows"]:
        ratio = res["vs_naive"].get(r["config"])
        lines.append(f"{r['config']:14s} " + (f"{r['peak_mb']:9.0f} MB  {ratio:.2f} of naive  step {r['step_s']:.3f} s"
                                              if r["error"] is None else r["error"]))
    return lines


def summary_lines(header: str, recs: dict) -> list[str]:
    lines = [header, "", f"{'stage':14s} {'ok':4s} {'s':>6s} {'budget':>6s}  key numbers"]
    for name, rec in recs.items():
        res = rec.get("result") or {}
        try:
            key = rec.get("error") or _key(name, res)
        except (KeyError, TypeError) as e:  # a partial result after a time-out
            key = f"(partial: {type(e).__name__} {e})"
        lines.append(f"{name:14s} {'yes' if rec['ok'] else 'NO':4s} {rec['seconds']:6.1f} {rec['budget_s']:6.0f}  {key}")
    tables = {"neuron": _neuron, "train": lambda r: _train("train step, fashion-mnist (paper network):", r),
              "dvs": lambda r: _train(f"train step, dvs128-gesture T={r.get('T')}, synthetic event frames:", r),
              "memory": _memory}
    for name, table in tables.items():
        res = (recs.get(name) or {}).get("result") or {}
        if res.get("rows"):
            try:
                lines += table(res)
            except (KeyError, TypeError) as e:
                lines.append(f"({name}: partial rows, {type(e).__name__} {e})")
    return lines
