#!/usr/bin/env python3
"""A client that knows only the .proto talks to convoy_ps: Python's grpcio with protoc's generated messages.

convoy_ps serialises pulls from its snapshots and parses pushes in place (common/wire/tensor_chunk.h); the bytes
on the wire must stay protobuf's, so this client must work unchanged. It starts a real convoy_ps (tiny model,
SGD with lr 2^-4), then:
  - GetStatus and Join with the server's fingerprint;
  - pulls the weights in fp32 and in bf16, checking offsets, totals and that bf16 is fp32 rounded;
  - pushes a gradient of +-2^-10 in three chunks (header on the first only) and pulls again: every weight
    must be exactly w - 2^-4 * g, rounded to float32 once;
  - sends a chunk whose data is cut short and expects INVALID_ARGUMENT naming a malformed chunk, with
    nothing applied.

  python_client_test.py CONVOY_PS_BINARY PROTO_DIR
Exit 77 (CTest: skipped) when grpcio or protobuf for Python is missing.
"""
import array
import os
import subprocess
import sys
import tempfile
import time

try:
    import grpc
    import google.protobuf  # noqa: F401
except ImportError as e:
    print(f"SKIPPED: {e}; install python3-grpcio and python3-protobuf")
    sys.exit(77)

SERVICE = "/convoy.v1.ParameterServer/"


def fail(message):
    print(f"FAIL: {message}")
    sys.exit(1)


def main():
    ps_binary, proto_dir = sys.argv[1], sys.argv[2]
    work = tempfile.mkdtemp(prefix="convoy-python-client-")
    subprocess.run(["protoc", f"--proto_path={proto_dir}", f"--python_out={work}",
                    "convoy/v1/shard.proto", "convoy/v1/parameter_server.proto"], check=True)
    sys.path.insert(0, work)
    from convoy.v1 import parameter_server_pb2 as pb

    port_file = os.path.join(work, "port")
    log = open(os.path.join(work, "convoy_ps.log"), "w")
    ps = subprocess.Popen([ps_binary, "--model=tiny", "--insecure", "--bind=127.0.0.1", "--port=0",
                           f"--port_file={port_file}", "--optimizer=sgd", "--learning_rate=0.0625",
                           "--momentum=0", "--weight_decay=0"], stdout=log, stderr=subprocess.STDOUT)
    try:
        deadline = time.time() + 30
        while not (os.path.exists(port_file) and open(port_file).read().strip()):
            if ps.poll() is not None or time.time() > deadline:
                fail(f"convoy_ps did not start; its log: {open(log.name).read()[-2000:]}")
            time.sleep(0.05)
        run(pb, f"127.0.0.1:{open(port_file).read().strip()}")
    finally:
        ps.terminate()
        ps.wait(timeout=30)
    print("PASS")


def run(pb, address):
    channel = grpc.insecure_channel(address)
    grpc.channel_ready_future(channel).result(timeout=30)
    get_status = channel.unary_unary(SERVICE + "GetStatus", pb.StatusRequest.SerializeToString,
                                     pb.StatusResponse.FromString)
    join = channel.unary_unary(SERVICE + "Join", pb.JoinRequest.SerializeToString,
                               pb.JoinResponse.FromString)
    pull = channel.unary_stream(SERVICE + "PullWeights", pb.PullRequest.SerializeToString,
                                pb.WeightChunk.FromString)
    push = channel.stream_unary(SERVICE + "PushGradients", pb.GradientChunk.SerializeToString,
                                pb.PushResponse.FromString)
    push_raw = channel.stream_unary(SERVICE + "PushGradients", lambda b: b, pb.PushResponse.FromString)

    status = get_status(pb.StatusRequest(), timeout=10)
    n = status.parameter_count
    joined = join(pb.JoinRequest(agent_id="python", hostname="test",
                                 model_fingerprint=status.model_fingerprint), timeout=10)

    def pulled(encoding, have_version=0):
        chunks = list(pull(pb.PullRequest(agent_id="python", encoding=encoding,
                                          have_version=have_version,
                                          have_incarnation=joined.incarnation if have_version else 0),
                           timeout=30))
        data = b""
        width = 2 if encoding == pb.ENCODING_BF16 else 4
        for c in chunks:
            if c.offset * width != len(data) or c.total_elements != n or c.encoding != encoding:
                fail(f"chunk at offset {c.offset}: {len(data)} bytes before it, total {c.total_elements}")
            data += c.data
        if len(data) != n * width:
            fail(f"pulled {len(data)} bytes for {n} elements")
        return chunks[0].version, data

    version, fp32 = pulled(pb.ENCODING_FP32)
    weights = array.array("f", fp32)
    _, bf16 = pulled(pb.ENCODING_BF16)
    halves = array.array("H", bf16)
    for i in range(0, n, max(1, n // 500)):
        bits = array.array("I", weights[i:i + 1].tobytes())[0]
        rounded = (bits + 0x7FFF + ((bits >> 16) & 1)) >> 16  # Round to nearest even (no NaNs here).
        if halves[i] != rounded:
            fail(f"bf16 element {i} is {halves[i]:#06x}, fp32 {bits:#010x} rounds to {rounded:#06x}")

    gradient = array.array("f", [(2.0 ** -10) * (1 if i % 3 else -1) for i in range(n)])
    third = (n + 2) // 3
    chunks = [pb.GradientChunk(agent_id="python", base_version=version, encoding=pb.ENCODING_FP32,
                               minibatch_count=1, model_fingerprint=status.model_fingerprint,
                               total_elements=n, offset=0, data=gradient[:third].tobytes())]
    for start in range(third, n, third):
        chunks.append(pb.GradientChunk(offset=start, data=gradient[start:start + third].tobytes()))
    answer = push(iter(chunks), timeout=30)
    if not answer.accepted or answer.version != version + 1:
        fail(f"push not applied: {answer}")
    new_version, new_fp32 = pulled(pb.ENCODING_FP32, have_version=version)
    if new_version != version + 1:
        fail(f"pulled version {new_version} after the push, expected {version + 1}")
    expected = array.array("f", [w - 0.0625 * g for w, g in zip(weights, gradient)])
    if new_fp32 != expected.tobytes():
        got = array.array("f", new_fp32)
        bad = next(i for i in range(n) if got[i] != expected[i])
        fail(f"weight {bad} is {got[bad]!r} after SGD, expected {expected[bad]!r}")

    # A chunk whose data field says 64 bytes and carries 8: refused, nothing applied.
    truncated = pb.GradientChunk(agent_id="python", base_version=new_version,
                                 encoding=pb.ENCODING_FP32, minibatch_count=1,
                                 model_fingerprint=status.model_fingerprint, total_elements=n,
                                 data=b"\0" * 64).SerializeToString()
    cut = truncated.index(b"\0" * 64) + 8
    try:
        push_raw(iter([truncated[:cut]]), timeout=30)
        fail("a malformed chunk was accepted")
    except grpc.RpcError as e:
        if e.code() != grpc.StatusCode.INVALID_ARGUMENT or "malformed chunk" not in e.details():
            fail(f"a malformed chunk got {e.code()}: {e.details()}")
        print(f"malformed chunk refused: {e.details()}")
    after = get_status(pb.StatusRequest(), timeout=10)
    if after.version != new_version:
        fail(f"version moved from {new_version} to {after.version} after a refused push")
    print(f"{n} parameters: pulled fp32 and bf16, pushed 3 chunks, SGD exact, version {after.version}")


if __name__ == "__main__":
    main()
