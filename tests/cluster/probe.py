#!/usr/bin/env python3
"""A TCP probe for the cluster harness's tests: does a transfer get through a link, and how does it fail?

  probe.py listen ADDR PORT         accept connections; for each, read to EOF and answer the byte count
  probe.py send ADDR PORT BYTES T   connect, send BYTES, read the answer, all within T seconds; prints one
                                    JSON line: {"delivered": n, "error": "...", "seconds": s}
"""
import json
import socket
import sys
import time


def listen(addr, port):
    server = socket.create_server((addr, port), reuse_port=False)
    while True:
        conn, _ = server.accept()
        with conn:
            total = 0
            while True:
                chunk = conn.recv(1 << 16)
                if not chunk:
                    break
                total += len(chunk)
            conn.sendall(str(total).encode())


def send(addr, port, size, timeout):
    start = time.monotonic()
    result = {"delivered": 0, "error": "", "seconds": 0.0}
    try:
        with socket.create_connection((addr, port), timeout=timeout) as conn:
            conn.settimeout(max(0.1, timeout - (time.monotonic() - start)))
            conn.sendall(b"x" * size)
            conn.shutdown(socket.SHUT_WR)
            answer = b""
            while True:
                chunk = conn.recv(64)
                if not chunk:
                    break
                answer += chunk
            result["delivered"] = int(answer or b"0")
    except socket.timeout:
        result["error"] = "timed out"
    except OSError as e:
        result["error"] = e.strerror or str(e)
    result["seconds"] = round(time.monotonic() - start, 3)
    print(json.dumps(result))


if __name__ == "__main__":
    if len(sys.argv) == 4 and sys.argv[1] == "listen":
        listen(sys.argv[2], int(sys.argv[3]))
    elif len(sys.argv) == 6 and sys.argv[1] == "send":
        send(sys.argv[2], int(sys.argv[3]), int(sys.argv[4]), float(sys.argv[5]))
    else:
        sys.exit(__doc__)
