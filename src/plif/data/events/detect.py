"""Format detection by content (version line / magic bytes), never by file extension."""
from __future__ import annotations

from pathlib import Path

import numpy as np

from ...catalog import ATIS_SENSOR
from . import aedat2, aedat3, aedat4, mat, nmnist, npy_events
from .types import EventFormatError, read_file_bytes

__all__ = ["detect_format", "read_events", "read_with_sensor", "read_for_sensor", "event_info", "time_warnings",
           "FORMATS"]

FORMATS = ("nmnist", "aedat2", "aedat3.1", "aedat4", "mat", "npy")
"""The event file formats :func:`read_events` reads, as :func:`detect_format` names them."""


def _format_of(head: bytes, path: str | Path, atis: bool = False) -> str:
    """``atis``: the caller expects a headerless ATIS ``.bin`` (it gave the sensor size), whose first
    byte may be ``#`` (x = 35 on N-Caltech101's sensor): only the AEDAT magic lines count then."""
    if head.startswith(aedat4.MAGIC):
        return "aedat4"
    if head.startswith(mat.MAGIC):  # ASL-DVS's MATLAB 5 recordings
        return "mat"
    if head.startswith(npy_events.MAGIC):  # DVS-Lip's structured .npy arrays
        return "npy"
    if head.startswith(aedat3.MAGIC):
        return "aedat3.1"
    if head.startswith(aedat2.MAGIC):
        return "aedat2"
    if head.startswith(b"\x89HDF\r\n\x1a\n"):  # spike_h5.HDF5_MAGIC: many samples in one file
        raise EventFormatError(path, 0, "an HDF5 file: SHD / SSC's spike files hold a whole split, read as a dataset "
                                        "(plif data prepare shd / ssc), not as one recording")
    if head.startswith(b"#!AER-DAT"):
        version = head.split(b"\n", 1)[0].strip().decode("latin-1", "replace")
        raise EventFormatError(path, 0, f"unsupported AEDAT version line {version!r} "
                                        "(supported: 2.0, 3.1, 4.0)")
    if head.startswith(b"#") and not atis:
        raise EventFormatError(path, 0, "text header without an '#!AER-DAT<version>' line: not a known event format")
    return "nmnist"  # the one supported format without a header


def detect_format(path: str | Path) -> str:
    """One of :data:`FORMATS`.  A file without ``#`` header is N-MNIST ``.bin`` only if its events
    fit the 34x34 sensor; anything else is an :class:`EventFormatError` naming the file."""
    data = read_file_bytes(path)
    fmt = _format_of(data[:64], path)
    if fmt == "nmnist":
        nmnist.parse_nmnist(data, path)  # strict: refuses what is not N-MNIST
    elif fmt in _HEADERLESS:
        _HEADERLESS[fmt](path)
    return fmt


def read_events(path: str | Path, flip_x: bool = True, sensor_size: tuple[int, int] | None = None) -> np.ndarray:
    """Read any supported event file -> structured events ``[N]`` (fields t, x, y, p).

    ``flip_x`` applies to AEDAT 2.0 only (jAER's mirrored DVS128 x axis, see :mod:`.aedat2`);
    ``sensor_size`` ``(H, W)`` to headerless ATIS ``.bin`` only, whose events must fit it
    (default N-MNIST's 34 x 34; N-Caltech101 passes its 180 x 240).

    Example: the format is found from the content, not the name:

    >>> import tempfile
    >>> from pathlib import Path
    >>> from plif.data.events import detect_format, read_events
    >>> path = Path(tempfile.mkdtemp()) / "sample"
    >>> _ = path.write_bytes(bytes([3, 5, 0x80, 0, 10]))    # one N-MNIST event
    >>> detect_format(path), read_events(path).tolist()
    ('nmnist', [(10, 3, 5, 1)])
    """
    data = read_file_bytes(path)
    fmt = _format_of(data[:64], path, atis=sensor_size is not None)
    if fmt in _HEADERLESS:
        return _HEADERLESS[fmt](path)
    if fmt == "aedat4":
        return aedat4.read_aedat4(path)
    if fmt == "aedat3.1":
        return aedat3.parse_aedat31(data, path)[0]
    if fmt == "aedat2":
        return aedat2.parse_aedat2(data, path, flip_x)[0]
    return nmnist.parse_nmnist(data, path, sensor_size)


# formats whose files state no sensor size: format -> reader (path -> events)
_HEADERLESS = {"mat": mat.read_mat_events, "npy": npy_events.read_npy_events}


def _sensor_from_header(lines: list[str]) -> tuple[int, int] | None:
    text = " ".join(lines).lower()
    if "davis346" in text:
        return (260, 346)
    if "dvs128" in text or "davis128" in text:
        return (128, 128)
    if "davis240" in text:
        return (180, 240)
    return None


def read_with_sensor(path: str | Path, flip_x: bool = True, atis_sensor: tuple[int, int] | None = None
                     ) -> tuple[np.ndarray, tuple[int, int] | None, str, int]:
    """``(events, sensor_size, format, file bytes)`` of one file, read once: the sensor ``(H, W)``
    the format or header states (N-MNIST 34x34, AEDAT 2 / 3.1 from the header or DVS128, AEDAT 4
    from its stream description).  ``atis_sensor``: a headerless ATIS ``.bin`` is read up to this
    size (as :func:`read_events`' ``sensor_size``) and reported with it."""
    data = read_file_bytes(path)
    fmt = _format_of(data[:64], path, atis=atis_sensor is not None)
    if fmt in _HEADERLESS:  # the file states no sensor
        return _HEADERLESS[fmt](path), None, fmt, len(data)
    if fmt == "aedat4":
        ev, sensor = aedat4.read_aedat4(path, with_sensor=True)
    elif fmt == "aedat3.1":
        ev, lines = aedat3.parse_aedat31(data, path)
        sensor = _sensor_from_header(lines) or aedat2.DVS128_SENSOR
    elif fmt == "aedat2":
        ev, lines = aedat2.parse_aedat2(data, path, flip_x)
        sensor = _sensor_from_header(lines) or aedat2.DVS128_SENSOR
    else:
        ev, sensor = nmnist.parse_nmnist(data, path, atis_sensor), atis_sensor or nmnist.NMNIST_SENSOR
    return ev, sensor, fmt, len(data)


def read_for_sensor(path: str | Path, flip_x: bool = True, sensor_size: tuple[int, int] | None = None
                    ) -> tuple[np.ndarray, tuple[int, int] | None, str, int]:
    """The one sensor rule of ``plif data info / frames / show``: ``(events, sensor, format, file bytes)``.

    ``sensor_size`` (``--sensor``) replaces the size the format or header states, for every format: a
    header-less ATIS ``.bin`` is then read up to the whole ATIS sensor (or the given size, if larger)
    instead of N-MNIST's 34 x 34.  Events outside the sensor are a ``ValueError`` naming the file; a
    header-less file that does not fit N-MNIST says which option reads it.  The sensor is None only
    when neither the file nor ``sensor_size`` gives one (nothing is then checked).
    """
    from ..frames import check_coordinates

    atis = None if sensor_size is None else tuple(max(a, s) for a, s in zip(ATIS_SENSOR, sensor_size))
    try:
        events, stated, fmt, nbytes = read_with_sensor(path, flip_x, atis)
    except nmnist.OutsideSensorError as e:
        if sensor_size is not None:
            raise
        raise EventFormatError(e.path, e.offset, f"{e.what}; if it is an ATIS recording of another size, give its "
                                                 f"sensor size: --sensor H,W (N-Caltech101: --sensor "
                                                 f"{ATIS_SENSOR[0]},{ATIS_SENSOR[1]})") from None
    sensor = tuple(sensor_size) if sensor_size is not None else stated
    if sensor is not None:
        try:
            check_coordinates(events, sensor)
        except ValueError as e:
            raise ValueError(f"{path}: {e}") from None
    return events, sensor, fmt, nbytes


def backward_steps(t: np.ndarray) -> int:
    """How many events are earlier than the event before them (0 for a time-ordered stream)."""
    return int(np.count_nonzero(t[1:] < t[:-1])) if len(t) > 1 else 0


def time_warnings(events: np.ndarray) -> list[str]:
    """What a user should hear about a stream's timestamps: going backwards (cameras can write a
    few such events; ``count`` slicing then follows file order, ``time`` slicing the timestamps)."""
    back = backward_steps(events["t"])
    if not back:
        return []
    i = int(np.argmax(events["t"][1:] < events["t"][:-1])) + 1
    return [f"timestamps go backwards at {back} event(s), first at event {i} ({int(events['t'][i])} us after "
            f"{int(events['t'][i - 1])} us); --split count follows file order, --split time the timestamps"]


def event_info(path: str | Path, sensor_size: tuple[int, int] | None = None) -> dict:
    """Summary of one file: format, event count, first/last time and duration (us), sensor size
    ``(H, W)`` the format or header states (or ``sensor_size`` when given), and the extent
    actually observed.  Events outside the sensor are an error, by the same rule as for frames
    (:func:`read_for_sensor`).  A header-less ATIS file is ``"atis-bin"`` (N-MNIST and N-Caltech101
    share the layout), with ``geometry`` saying which dataset's extent its events have."""
    ev, sensor, fmt, nbytes = read_for_sensor(path, sensor_size=sensor_size)
    n = len(ev)
    warnings = [] if n else ["no events: an empty recording (datasets refuse it unless allow_empty=True)"]
    observed = (int(ev["y"].max()) + 1, int(ev["x"].max()) + 1) if n else None
    info = {"path": str(path), "format": nmnist.ATIS_BIN if fmt == "nmnist" else fmt, "events": n, "bytes": nbytes,
            "sensor_size": sensor, "t_first_us": int(ev["t"][0]) if n else None,
            "t_last_us": int(ev["t"][-1]) if n else None,
            "duration_us": int(ev["t"].max() - ev["t"].min()) if n else 0,
            "observed_size": observed,
            "on_fraction": float(ev["p"].mean()) if n else None,
            "backward_steps": backward_steps(ev["t"]),
            "warnings": warnings + time_warnings(ev)}
    if fmt == "nmnist":
        info["geometry"] = nmnist.atis_geometry(observed)
    return info
