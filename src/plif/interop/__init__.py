"""Models from other SNN libraries moved to plif, :func:`from_spikingjelly`, and back, :func:`to_spikingjelly`."""
from .spikingjelly import ConversionError, from_spikingjelly
from .to_spikingjelly import to_spikingjelly

__all__ = ["from_spikingjelly", "to_spikingjelly", "ConversionError"]
