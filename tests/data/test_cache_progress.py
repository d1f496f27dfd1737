"""Off a terminal, a frame-cache build writes plain progress lines, never tqdm's ``\\r`` redraws."""
import io

from plif.data.events.cache import build_frames_cache
from plif.data.events.datasets import EventSample
from plif.progress import work_bar


def test_work_bar_prints_a_line_per_tenth_off_a_terminal():
    out = io.StringIO()
    bar = work_bar(40, "frames x", file=out)
    for _ in range(40):
        bar.update(1)
    bar.close()
    lines = out.getvalue().splitlines()
    assert "\r" not in out.getvalue() and len(lines) == 10
    assert lines[0] == "frames x: 10% (4/40 samples)" and lines[-1] == "frames x: 100% (40/40 samples)"
    out = io.StringIO()
    bar = work_bar(40, "resumed", initial=30, file=out)
    bar.update(10)
    assert out.getvalue() == "resumed: 100% (40/40 samples)\n"
    out = io.StringIO()
    work_bar(40, "off", enabled=False, file=out).update(40)
    assert out.getvalue() == ""


def test_cache_build_logs_plain_lines(tmp_path, capsys):
    samples = []
    for d in range(3):
        f = tmp_path / "nm" / str(d) / "0.bin"
        f.parent.mkdir(parents=True)
        f.write_bytes(bytes([1, 2, 0x80, 0, 5]) * 3)
        samples.append(EventSample(str(f), d))
    build_frames_cache(samples, tmp_path / "c", 2, "count", (34, 34), workers=0, chunk_size=1, progress=True)
    err = capsys.readouterr().err  # pytest's stderr is not a terminal
    assert "\r" not in err and err.strip().splitlines()[-1].endswith(": 100% (3/3 samples)")
