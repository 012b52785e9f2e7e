#!/usr/bin/env python3
"""The raw transfer with a cycle's direction mix: bare TCP doing what a push+pull cycle does.

bench_ps_cluster.sh measures convoy's cycles against two raw transfers over the same links. iperf3
keeps every flow busy both ways at once; this keeps the cycles' pattern instead, with no gRPC, no
HTTP/2 and no apply: each client has one TCP connection per shard, and a cycle sends that shard's
share of a push up and reads the same bytes back down (the pull), all shards at once, the cycle
ending when every shard's half has. What TCP moves in that pattern is the limit no protocol on top
of it can pass.

  tcp_cycles.py serve --bind=ADDR --port=P --bytes=B
  tcp_cycles.py cycles --servers=ADDR:P,... --clients=N --bytes=B --measure_at=UNIX --seconds=S

`cycles` prints `RESULT cycles_per_s=...` for the window [measure_at, measure_at + seconds].
"""
import argparse
import random
import socket
import sys
import threading
import time

CHUNK = 1 << 20


def recv_exactly(sock, view, n):
    got = 0
    while got < n:
        r = sock.recv_into(view[got:n])
        if r == 0:
            return False
        got += r
    return True


def serve(args):
    listener = socket.create_server((args.bind, args.port), backlog=256)
    if args.congestion:
        listener.setsockopt(socket.IPPROTO_TCP, socket.TCP_CONGESTION, args.congestion.encode())

    def one(conn):
        buf = bytearray(args.bytes)
        view = memoryview(buf)
        with conn:
            while recv_exactly(conn, view, args.bytes):  # The push.
                conn.sendall(view)  # The pull.

    while True:
        conn, _ = listener.accept()
        conn.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        threading.Thread(target=one, args=(conn,), daemon=True).start()


def cycles(args):
    servers = [s.rsplit(":", 1) for s in args.servers.split(",")]
    per_shard = args.bytes // len(servers)
    end = args.measure_at + args.seconds
    counts = [0] * args.clients
    errors = []

    def client(index):
        try:
            socks = []
            for h, p in servers:
                s = socket.socket()
                if args.congestion:
                    s.setsockopt(socket.IPPROTO_TCP, socket.TCP_CONGESTION, args.congestion.encode())
                s.settimeout(30)
                # The servers may still be starting: retry a refused connection for up to 20 s.
                deadline = time.time() + 20
                while True:
                    try:
                        s.connect((h, int(p)))
                        break
                    except ConnectionRefusedError:
                        if time.time() > deadline:
                            raise
                        time.sleep(0.1)
                s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
                socks.append(s)
            # Clients start apart, as convoy's do after their joins and the server's serial applies.
            time.sleep(random.uniform(0, args.stagger))
            barrier = threading.Barrier(len(socks) + 1)
            stop = threading.Event()

            def half(sock):
                buf = bytearray(per_shard)
                view = memoryview(buf)
                while True:
                    barrier.wait()
                    if stop.is_set():
                        return
                    sock.sendall(view)
                    if not recv_exactly(sock, view, per_shard):
                        raise ConnectionError("server closed")
                    barrier.wait()

            halves = [threading.Thread(target=half, args=(s,), daemon=True) for s in socks]
            for h in halves:
                h.start()
            while True:
                barrier.wait()  # Start a cycle on every shard.
                barrier.wait()  # Every shard's half is done.
                now = time.time()
                if now > end:
                    break
                if now >= args.measure_at:
                    counts[index] += 1
            stop.set()
            barrier.wait()
            for s in socks:
                s.close()
        except Exception as e:  # Reported, and the run fails.
            errors.append(f"client {index}: {e}")

    threads = [threading.Thread(target=client, args=(i,), daemon=True) for i in range(args.clients)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=max(0, end - time.time()) + 60)
    if errors:
        sys.exit("tcp_cycles: " + "; ".join(errors[:3]))
    print(f"RESULT cycles_per_s={sum(counts) / args.seconds:.4f}")


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="command", required=True)
    s = sub.add_parser("serve")
    s.add_argument("--bind", required=True)
    s.add_argument("--port", type=int, required=True)
    s.add_argument("--bytes", type=int, required=True, help="bytes per push, per shard")
    s.add_argument("--congestion", default="", help="TCP congestion control (default: the system's)")
    c = sub.add_parser("cycles")
    c.add_argument("--servers", required=True)
    c.add_argument("--clients", type=int, required=True)
    c.add_argument("--bytes", type=int, required=True, help="bytes per push, all shards together")
    c.add_argument("--measure_at", type=float, required=True)
    c.add_argument("--seconds", type=float, required=True)
    c.add_argument("--stagger", type=float, default=0, help="start each client after up to this many s")
    c.add_argument("--congestion", default="", help="TCP congestion control (default: the system's)")
    args = parser.parse_args()
    serve(args) if args.command == "serve" else cycles(args)


if __name__ == "__main__":
    main()
