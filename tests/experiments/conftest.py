from plif_testing import write_run_folder


def write_run(path, *, dataset="fashion-mnist", neuron="plif", tau0=2.0, pool=None, epochs=4, rows=(),
              network="{c128k3s1-BN-PLIF-MPk2s2}*2-DP-FC2048-PLIF-DP-FC100-PLIF-APk10s10", T=8, summary=True,
              **extra):
    """A run folder as training writes it (plif.runs): config.json, metrics.jsonl and (optionally) summary.json."""
    config = {"dataset": dataset, "neuron": neuron, "tau0": tau0, "pool": pool, "epochs": epochs,
              "network": network, "T": T, "seed": 0, **extra}
    best = max(rows, key=lambda m: m["test_acc"]) if rows else None
    return write_run_folder(path, config, list(rows), summary={
        "finished": len(rows) == epochs, "epochs_run": len(rows),
        "accuracy_A": {"test_acc": best["test_acc"], "epoch": best["epoch"]}} if summary and rows else None)


def rows(test_accs, taus=None, val_accs=None, epoch_time=10.0):
    out = []
    for i, acc in enumerate(test_accs):
        r = {"epoch": i + 1, "test_acc": acc, "train_acc": acc, "epoch_time_s": epoch_time,
             "taus": taus[i] if taus else []}
        if val_accs:
            r["val_acc"] = val_accs[i]
        out.append(r)
    return out
