"""A real HTTP server on 127.0.0.1 (a thread) serving in-memory files, for download tests.

It honours ``Range: bytes=N-`` (206 Partial Content), can cut the connection after sending part
of a file (``cut[path] = byte count``, once per entry) and records every request's Range header.
"""
from __future__ import annotations

import re
import threading
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer


class _Handler(BaseHTTPRequestHandler):
    def log_message(self, *a):  # keep test output quiet
        pass

    def do_GET(self):
        srv = self.server
        srv.requests.append((self.path, self.headers.get("Range")))
        data = srv.files.get(self.path)
        if data is None:
            self.send_error(404)
            return
        start = 0
        m = re.fullmatch(r"bytes=(\d+)-", self.headers.get("Range") or "")
        if m and srv.ranges:
            start = 0 if srv.wrong_range else int(m.group(1))
            if start >= len(data):
                self.send_response(416)
                self.send_header("Content-Range", f"bytes */{len(data)}")
                self.end_headers()
                return
            self.send_response(206)
            self.send_header("Content-Range", f"bytes {start}-{len(data) - 1}/{len(data)}")
        else:
            self.send_response(200)
        body = data[start:]
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        cut = srv.cut.pop(self.path, None)
        self.wfile.write(body if cut is None else body[:cut])
        self.wfile.flush()
        if cut is not None:
            self.close_connection = True


@contextmanager
def serve(files: dict[str, bytes], cut: dict[str, int] | None = None, ranges: bool = True,
          wrong_range: bool = False):
    """``with serve({"/a.bin": b"..."}) as (base_url, server):`` -- ``server.requests`` logs ``(path, Range)``.

    ``ranges=False``: ignore Range (always 200, whole file); ``wrong_range``: answer 206 from byte 0.
    """
    srv = ThreadingHTTPServer(("127.0.0.1", 0), _Handler)
    srv.files, srv.cut, srv.ranges, srv.requests = dict(files), dict(cut or {}), ranges, []
    srv.wrong_range = wrong_range
    t = threading.Thread(target=srv.serve_forever, kwargs={"poll_interval": 0.02}, daemon=True)  # quick shutdown
    t.start()
    try:
        yield f"http://127.0.0.1:{srv.server_address[1]}", srv
    finally:
        srv.shutdown()
        srv.server_close()
        t.join()
