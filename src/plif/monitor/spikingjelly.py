"""SpikingJelly's monitor names that plif spells otherwise: each a callable that refuses in one line
naming plif's spelling (``OutputMonitor``, ``InputMonitor`` and ``GradOutputMonitor`` are plif's own:
:mod:`plif.monitor.records`)."""
from __future__ import annotations

__all__ = ["REFUSED", "AttributeMonitor", "GradInputMonitor"]

REFUSED: dict[str, str] = {
    "AttributeMonitor": "plif's neurons keep no state attributes: the membrane potential over every step is "
                        "plif.monitor.PotentialMonitor(model) (SpikingJelly's 'v_seq'; a record's [-1] is 'v'); "
                        "PLIF's tau is the module's .tau",
    "GradInputMonitor": "plif records output gradients: plif.monitor.GradOutputMonitor(model, layers=[names]) on "
                        "the layer before gives the gradient a layer's input receives",
}
"""SpikingJelly monitor class -> what plif has instead."""


class _Refused:
    def __init__(self, name: str):
        self.__name__ = self.__qualname__ = name
        self.__doc__ = f"SpikingJelly's {name}, refused when called: {REFUSED[name]}."

    def __call__(self, *args, **kwargs):
        raise TypeError(f"{self.__name__} is SpikingJelly's; {REFUSED[self.__name__]}")


AttributeMonitor = _Refused("AttributeMonitor")
GradInputMonitor = _Refused("GradInputMonitor")
