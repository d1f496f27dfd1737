"""Event streams: raw-format readers (N-MNIST, AEDAT 2.0 / 3.1 / 4.0, ASL-DVS's .mat, DVS-Lip's .npy, one
sample of SHD / SSC's HDF5 spike files) returning one structured array of :data:`EVENT_DTYPE` (t int64 us,
x, y uint16, p int8), and format detection by content."""
from ..._lazy import lazy_names
from .aedat2 import read_aedat2
from .aedat3 import read_aedat31
from .aedat4 import read_aedat4
from .detect import FORMATS, detect_format, event_info, read_events
from .mat import read_mat_events
from .nmnist import read_nmnist_bin
from .npy_events import read_npy_events
from .spike_h5 import SpikeFileError, read_spike_labels, read_spike_sample
from .types import EVENT_DTYPE, EventFormatError, make_events

__all__ = ["EVENT_DTYPE", "EventFormatError", "make_events", "read_events", "detect_format", "event_info", "load_event_frames",
           "FORMATS", "read_nmnist_bin", "read_aedat2", "read_aedat31", "read_aedat4", "read_mat_events",
           "read_npy_events", "read_spike_sample", "read_spike_labels", "SpikeFileError"]


# load_event_frames sits above the readers (datasets, cache); imported on first use so that
# reading one file does not pay for the dataset machinery
__getattr__, __dir__ = lazy_names(__name__, {"load_event_frames": ".load"}, globals())
