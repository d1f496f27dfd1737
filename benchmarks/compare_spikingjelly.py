"""Check plif's PLIF against SpikingJelly's ParametricLIFNode on the same input (not a test:
SpikingJelly is a comparison point, never a dependency).  pip install spikingjelly==2.0.0 --no-deps && pip install loguru

    python benchmarks/compare_spikingjelly.py
"""
import torch

from plif import PLIF


def main():
    from plif.bench.spikingjelly import INSTALL_HINT, spikingjelly_unavailable

    missing = spikingjelly_unavailable()
    if missing:
        raise SystemExit(f"SpikingJelly unavailable: {missing} ({INSTALL_HINT})")
    from spikingjelly.activation_based import neuron, surrogate

    torch.manual_seed(0)
    x = (torch.randn(8, 16, 128, 7, 7, dtype=torch.float64) * 1.5 + 0.8)
    for tau0, detach in ((2.0, True), (16.0, True), (2.0, False), (16.0, False)):  # the four cases docs/usage.md states
        sj = neuron.ParametricLIFNode(init_tau=tau0, detach_reset=detach, surrogate_function=surrogate.ATan(),
                                      step_mode="m").double()
        ours = PLIF(tau0=tau0, detach_reset=detach).double()
        xs, xo = x.clone().requires_grad_(), x.clone().requires_grad_()
        s_sj, s_o = sj(xs), ours(xo)
        g = torch.randn_like(s_sj)
        (s_sj * g).sum().backward()
        (s_o * g).sum().backward()
        print(f"tau0={tau0:4} detach_reset={detach!s:5}  spikes equal: {torch.equal(s_sj, s_o)}  "
              f"max |dx| diff: {(xs.grad - xo.grad).abs().max():.2e}  "
              f"dw: sj {sj.w.grad.item():.10f} ours {ours.w.grad.item():.10f}")


if __name__ == "__main__":
    main()
