"""One writer per folder, and files with the user's umask."""
import json
import os
import subprocess
import sys

import pytest

from hydra_dense.runtime.atomic_file import atomic_write_text
from hydra_dense.runtime.folder_lock import FolderBusy, folder_lock, holder_of

HOLD = """
import sys, time
from hydra_dense.runtime.folder_lock import folder_lock
with folder_lock(sys.argv[1], "a test"):
    print("held", flush=True)
    time.sleep(30)
"""


def test_a_second_writer_is_refused_naming_the_holder_and_a_killed_holder_frees_the_folder(tmp_path):
    holder = subprocess.Popen([sys.executable, "-c", HOLD, str(tmp_path)], stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout.readline().strip() == "held"
        assert holder_of(tmp_path).startswith(f"pid {holder.pid} since")
        with pytest.raises(FolderBusy, match=rf"{tmp_path} is being written by me right now \(pid {holder.pid}"):
            with folder_lock(tmp_path, "me"):
                pass
    finally:
        holder.kill()
        holder.wait()
    with folder_lock(tmp_path, "me"):  # the kernel dropped the killed process's lock
        assert holder_of(tmp_path) is None or str(os.getpid()) in holder_of(tmp_path)


def test_atomic_files_take_the_users_umask(tmp_path):
    old = os.umask(0o027)
    try:
        path = atomic_write_text(tmp_path / "result.json", json.dumps({"a": 1}))
    finally:
        os.umask(old)
    assert path.stat().st_mode & 0o777 == 0o640
