"""Models from other SNN libraries moved to plif: :func:`from_spikingjelly`."""
from .spikingjelly import ConversionError, from_spikingjelly

__all__ = ["from_spikingjelly", "ConversionError"]
