import os

import pytest

from plif.filelock import FileLock


def test_two_holders_exclude_each_other_and_the_second_names_the_first(tmp_path):
    a, b = FileLock(tmp_path / ".lock"), FileLock(tmp_path / ".lock")
    assert a.try_acquire() and a.created
    assert not b.try_acquire() and b.holder() == str(os.getpid())
    a.release()
    assert b.try_acquire() and not b.created  # the file stayed: b did not make it
    b.release()


def test_a_removed_lock_file_is_never_held_twice(tmp_path):
    """A process that opened the file just before its holder removed it must not end up holding a
    lock on the removed file while a third holds the new one."""
    path = tmp_path / ".lock"
    holder, late, third = FileLock(path), FileLock(path), FileLock(path)
    assert holder.try_acquire()
    opens = [late._open()]  # late opens the file ...
    holder.release(remove=True)  # ... its holder removes it and lets go ...
    assert third.try_acquire()  # ... and a third process makes and locks a new one
    real_open = late._open
    late._open = lambda: opens.pop() if opens else real_open()
    assert not late.try_acquire() and late.holder() == str(os.getpid())
    third.release()
    assert late.try_acquire() and path.exists()
    late.release()


def test_a_link_in_place_of_the_lock_is_refused(tmp_path):
    target = tmp_path / "elsewhere"
    target.write_text("keep")
    (tmp_path / ".lock").symlink_to(target)
    with pytest.raises(OSError) as e:
        FileLock(tmp_path / ".lock").try_acquire()
    assert e.value.errno == 40 and target.read_text() == "keep"  # ELOOP
