"""The GPU script's summary table: one line per stage with its key numbers, then each stage's rows
(the numbers a reader of ``summary.txt`` needs without opening the tarball)."""
from __future__ import annotations


def _f(v, fmt: str, dash: str = "-") -> str:
    return dash if v is None else format(v, fmt)


NETS = ("cifar10", "dvs128-gesture", "cifar10-dvs")  # the per-network stages of the second plan


def _key(name: str, res: dict) -> str:
    if name == "grid":
        return (f"{res['cases'] - len(res['failed'])}/{res['cases']} cases ok, {res['not_run']} not run "
                f"({res['backend']}, {','.join(res['dtypes'])})")
    if name == "compile":
        return f"{res['backend']}: " + ", ".join(f"B{r['batch']} spikes {r['spike_mismatch']:.1e} differ, grads "
                                                   f"{r['grad_rel_err']:.1e} rel ({r['seconds']:.0f}s)" for r in res["rows"])
    if name == "sync":
        pairs = [(k, res[k]) for k in ("graph_vs_eager", "compile_graph_vs_compile") if k in res]
        return f"{res.get('sync_free', 'not reached')}; " + "; ".join(
            f"{k.replace('_', ' ')}: loss {g['max_rel_loss_err']:.1e} rel, params {g['max_abs_param_err']:.1e} abs"
            for k, g in pairs)
    if name == "spikingjelly":
        return f"spikingjelly {res['version']}, its PLIF neuron: {res['plif_neuron']}"
    if name.startswith("protocol"):
        ep = res.get("epochs", [])
        return (f"{len(ep)} epochs ({res.get('attempt')}: {res.get('ran')}): " +
                ", ".join(f"{e['epoch_time_s']:.1f}s/{e['test_acc']:.2%}" for e in ep)) if ep else "no epoch"
    if name == "memory":
        return ", ".join(f"{k} {v:.2f}" for k, v in res.get("vs_naive", {}).items()) + " of naive's peak"
    if name == "block":
        check, cases = res.get("check", []), res.get("cases", [])
        return res.get("note") or (f"check {sum(r['ok'] for r in check)}/{len(check)} cases ok, "
                                   f"{sum('rows' in c for c in cases)}/{len(cases)} shapes measured")
    if name == "bound":
        return "; ".join(f"{net} " + ", ".join(f"{r['precision']} step/bound {_f(r['over_bound'], '.2f')} x SJ "
                                               f"{_f(r['over_spikingjelly'], '.2f')}" for r in v.get("rows", []))
                         for net, v in res.get("networks", {}).items())
    if name in ("neuron", "train", *NETS):
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
    lines = ["", title, f"{'variant':30s} {'memory':6s} {'prec':4s} {'batch':>5s} {'ms':>8s} {'samples/s':>10s} "
             f"{'peak MB':>8s} {'kernels':>8s} {'dev ms':>8s} {'% bound':>7s} {'x SJ':>6s}"]
    for r in res["rows"]:
        if r["ms_per_step"] is None:  # not measured: the note says why
            lines.append(f"{r['variant']:30s} {r.get('memory', ''):6s} {'':4s} {r['batch']:5d} {r.get('note', '')}")
            continue
        lines.append(f"{r['variant']:30s} {r.get('memory', ''):6s} {r.get('precision', ''):4s} {r['batch']:5d} "
                     f"{r['ms_per_step']:8.2f} {r['samples_per_s']:10.0f} {_f(r.get('peak_mem_mb'), '8.0f'):>8s} "
                     f"{_f(r.get('kernels'), '8.0f'):>8s} {_f(r.get('kernel_ms'), '8.2f'):>8s} "
                     f"{_f(r.get('pct_of_bound'), '7.1f'):>7s} {_f(r.get('ratio_to_spikingjelly'), '6.2f'):>6s}")
    notes = {r["note"] for r in res["rows"] if r["ms_per_step"] is not None and r.get("note")}
    return lines + sorted(notes) + [f"{v}: {e[:200]}" for v, e in res.get("errors", {}).items()]


def _memory(res: dict) -> list[str]:
    lines = ["", f"memory, {res.get('network', 'dvs128-gesture')} T={res['T']} B={res['batch']} ({res['what']}):"]
    for r in res["rows"]:
        ratio = res["vs_naive"].get(r["config"])
        of_naive = "" if ratio is None else f"  {ratio:.2f} of naive"
        lines.append(f"{r['config']:14s} " + (f"{r['peak_mb']:9.0f} MB{of_naive}  step {r['step_s']:.3f} s"
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
              **{n: (lambda r, n=n: _train(f"train step, {n} T={r.get('T') or 'paper'} ({r.get('input', '')}); "
                                            f"% bound: FLOPs at the dense peak or activation bytes at HBM "
                                            f"bandwidth, whichever is slower:", r)) for n in NETS},
              "memory": _memory}
    for name, table in tables.items():
        res = (recs.get(name) or {}).get("result") or {}
        if res.get("rows"):
            try:
                lines += table(res)
            except (KeyError, TypeError) as e:
                lines.append(f"({name}: partial rows, {type(e).__name__} {e})")
    return lines
