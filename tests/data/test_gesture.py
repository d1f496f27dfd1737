import numpy as np
import pytest

from plif.data.events.gesture import cut_events, read_gesture_labels, read_trials
from plif.data.events.types import make_events


def test_real_labels_csv(shared_data):
    rows = read_gesture_labels(shared_data("dvs128_gesture") / "user01_natural_labels.csv")
    assert len(rows) == 12
    assert tuple(rows[0]) == (1, 53036986, 59508469)
    assert tuple(rows[-1]) == (11, 171367247, 177991967)
    assert rows["cls"].tolist() == [1, 2, 3, 5, 4, 6, 7, 8, 8, 9, 10, 11]  # class 8 twice
    assert np.all(rows["start"] < rows["end"])


def test_crlf_bom_and_blank_lines(tmp_path):
    p = tmp_path / "u_labels.csv"
    p.write_bytes(b"\xef\xbb\xbfclass,startTime_usec,endTime_usec\r\n3,10,20\r\n\r\n11,20,30\r\n")
    rows = read_gesture_labels(p)
    assert rows["cls"].tolist() == [3, 11] and rows["end"].tolist() == [20, 30]


@pytest.mark.parametrize("body, err", [
    ("class,start,end\n1,2,3\n", r"x_labels.csv:1: expected header"),
    ("class,startTime_usec,endTime_usec\n1,2,3\n4,5\n", r"x_labels.csv:3: expected 3 comma-separated fields"),
    ("class,startTime_usec,endTime_usec\n1,2,3\n\n4,5,x\n", r"x_labels.csv:4: non-integer field"),
    ("class,startTime_usec,endTime_usec\n12,2,3\n", r"x_labels.csv:2: class 12 outside 1..11"),
    ("class,startTime_usec,endTime_usec\n0,2,3\n", r"x_labels.csv:2: class 0"),
    ("class,startTime_usec,endTime_usec\n1,9,3\n", r"x_labels.csv:2: need 0 <= startTime < endTime"),
    ("\n\n", r"x_labels.csv: empty label file"),
])
def test_bad_label_files_name_file_and_line(tmp_path, body, err):
    p = tmp_path / "x_labels.csv"
    p.write_text(body)
    with pytest.raises(ValueError, match=err):
        read_gesture_labels(p)


def test_trials(tmp_path):
    p = tmp_path / "trials_to_train.txt"
    p.write_text("user01_fluorescent.aedat\nuser01_natural.aedat\n\n")
    assert read_trials(p) == ["user01_fluorescent.aedat", "user01_natural.aedat"]
    p.write_text("user01_fluorescent.aedat\n../etc/passwd\n")
    with pytest.raises(ValueError, match="entry 2"):
        read_trials(p)


def test_cut_events_sorted_and_unsorted():
    t = np.array([0, 5, 10, 10, 15, 20, 25])
    ev = make_events(t, np.arange(7), np.zeros(7), np.ones(7))
    assert cut_events(ev, 10, 20)["x"].tolist() == [2, 3, 4]  # start inclusive, end exclusive
    assert len(cut_events(ev, 30, 40)) == 0
    shuffled = ev[[3, 0, 6, 1, 4, 2, 5]]
    assert cut_events(shuffled, 10, 20)["x"].tolist() == [3, 4, 2]  # file order kept
