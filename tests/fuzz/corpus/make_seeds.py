#!/usr/bin/env python3
"""Writes the seed corpora of convoy's fuzz targets (tests/fuzz/corpus/<target>/).

Each seed is a small, valid (or deliberately near-valid) input written by hand here, so the fuzzers
start from the shapes the real peers send. Standard library only: protobuf and msgpack are encoded by
the few lines below. Run it from anywhere; it rewrites the seed files in place.
"""
import os
import struct

HERE = os.path.dirname(os.path.abspath(__file__))


# --- protobuf wire format (only what GradientChunk needs) ---
def varint(n):
    out = bytearray()
    while True:
        b = n & 0x7F
        n >>= 7
        out.append(b | (0x80 if n else 0))
        if not n:
            return bytes(out)


def field_varint(number, value):
    return varint(number << 3) + varint(value)


def field_bytes(number, value):
    if isinstance(value, str):
        value = value.encode()
    return varint(number << 3 | 2) + varint(len(value)) + value


FP32, BF16 = 1, 2


def chunk(offset, data, encoding=FP32, total=4, agent="agent-0", base_version=7, minibatches=1,
          fingerprint="fuzz-model", header=True):
    """A convoy.v1.GradientChunk; header=False leaves out the fields later chunks may omit."""
    out = b""
    if header:
        out += field_bytes(1, agent) + field_varint(2, base_version) + field_varint(3, encoding)
    if offset:
        out += field_varint(4, offset)
    out += field_bytes(5, data)
    if header:
        out += field_varint(6, minibatches) + field_bytes(7, fingerprint) + field_varint(8, total)
    return out


def push(parameter_count, *chunks):
    """fuzz_push_assembler's input: the model-size byte, then length-prefixed chunks."""
    out = bytes([parameter_count - 1])
    for c in chunks:
        out += struct.pack("<H", len(c)) + c
    return out


def fp32(*values):
    return struct.pack("<%df" % len(values), *values)


def bf16(*values):
    return b"".join(struct.pack("<f", v)[2:] for v in values)


# --- msgpack (only what the AirSim requests need) ---
def mp(v):
    if v is None:
        return b"\xc0"
    if v is True:
        return b"\xc3"
    if v is False:
        return b"\xc2"
    if isinstance(v, int):
        if 0 <= v < 128:
            return bytes([v])
        if 0 <= v < 1 << 32:
            return b"\xce" + struct.pack(">I", v)
        raise ValueError(v)
    if isinstance(v, float):
        return b"\xcb" + struct.pack(">d", v)
    if isinstance(v, str):
        b = v.encode()
        assert len(b) < 32
        return bytes([0xA0 | len(b)]) + b
    if isinstance(v, bytes):
        return b"\xc4" + bytes([len(v)]) + v
    if isinstance(v, list):
        assert len(v) < 16
        return bytes([0x90 | len(v)]) + b"".join(mp(x) for x in v)
    if isinstance(v, dict):
        assert len(v) < 16
        return bytes([0x80 | len(v)]) + b"".join(mp(k) + mp(x) for k, x in v.items())
    raise TypeError(v)


def request(msgid, method, *args):
    return mp([0, msgid, method, list(args)])


def notification(method, *args):
    return mp([2, method, list(args)])


VEC = lambda x, y, z: {"x_val": x, "y_val": y, "z_val": z}
QUAT = {"w_val": 1.0, "x_val": 0.0, "y_val": 0.0, "z_val": 0.0}
CONTROLS = {"throttle": 0.5, "steering": -0.25, "brake": 0.0, "handbrake": False,
            "is_manual_gear": False, "manual_gear": 0, "gear_immediate": True}


def write(target, name, data):
    d = os.path.join(HERE, target)
    os.makedirs(d, exist_ok=True)
    with open(os.path.join(d, name), "wb") as f:
        f.write(data)


def main():
    t = "fuzz_push_assembler"
    write(t, "fp32_one_chunk", push(4, chunk(0, fp32(0.5, -1.0, 2.0, 0.0))))
    write(t, "bf16_two_chunks", push(8, chunk(0, bf16(1.0, 2.0, 3.0, 4.0), BF16, total=8),
                                     chunk(4, bf16(-1.0, 0.5, 0.25, 8.0), BF16, total=8, header=False)))
    write(t, "fp32_repeated_header", push(4, chunk(0, fp32(1.0, 2.0)), chunk(2, fp32(3.0, 4.0))))
    write(t, "fp32_gap", push(4, chunk(0, fp32(1.0)), chunk(2, fp32(3.0, 4.0), header=False)))
    write(t, "fp32_nan", push(2, chunk(0, fp32(1.0, float("nan")), total=2)))
    write(t, "wrong_fingerprint", push(1, chunk(0, fp32(1.0), total=1, fingerprint="other")))

    t = "fuzz_airsim_rpc"
    write(t, "handshake", request(0, "ping") + request(1, "getServerVersion") +
          request(2, "enableApiControl", True, "") + request(3, "isApiControlEnabled", "Car2"))
    write(t, "drive_lockstep", request(1, "enableApiControl", True, "PhysXCar") +
          request(2, "setCarControls", CONTROLS, "PhysXCar") +
          request(3, "simContinueForFrames", 3) + request(4, "simContinueForTime", 0.1) +
          request(5, "getCarState", "") + request(6, "simGetCollisionInfo", ""))
    write(t, "images", request(7, "simGetImages",
                               [{"camera_name": "0", "image_type": 0, "pixels_as_float": False,
                                 "compress": False},
                                {"camera_name": "front_center", "image_type": 0,
                                 "pixels_as_float": False, "compress": True}], "", False) +
          request(8, "simGetImage", "0", 0, "", False))
    write(t, "pose", request(9, "simGetVehiclePose", "") +
          request(10, "simSetVehiclePose", {"position": VEC(1.0, 2.0, 0.0), "orientation": QUAT},
                  True, "Car2") + request(11, "simGetGroundTruthKinematics", "Car2"))
    write(t, "errors_keep_connection", request(12, "noSuchMethod", 1) + request(13, "ping", 1) +
          request(14, "getCarState", 5) + notification("simPause", True) +
          request(15, "simIsPaused") + request(16, "reset") + request(17, "listVehicles"))
    write(t, "positional_struct", request(18, "setCarControls", [1.0, 0.0, 0.0, False, False, 0, True],
                                          "") + request(19, "getCarControls", ""))
    write(t, "closes_connection", request(20, "ping") + mp([5, 1, "ping", []]) + request(21, "ping"))

    t = "fuzz_checkpoint_manifest"
    files = "".join('files {\n  name: "%s"\n  size: %d\n  sha256: "%s"\n}\n' % (n, s, "ab" * 32)
                    for n, s in (("weights.pt", 1234), ("target.pt", 1234), ("optimizer.pt", 99)))
    full = ('format_version: 1\nversion: 42\nmodel_name: "compact"\nmodel_fingerprint: "c0ffee"\n'
            'parameter_count: 305\noptimizer: "adam"\n'
            'hyperparameters {\n  key: "lr"\n  value: "0.0001"\n}\n'
            'target_version: 40\nupdates_applied: 42\napplied_minibatches: 84\n'
            'minibatches_at_target: 80\nepsilon: 0.05\n'
            'rejections {\n  key: "STALE"\n  value: 3\n}\ncreated_unix_ms: 1790000000000\n') + files
    write(t, "full", full.encode())
    write(t, "minimal", ("format_version: 1\n" + files).encode())
    write(t, "bad_name", ("format_version: 1\n" + files + 'files { name: "../escape" }\n').encode())
    write(t, "old_format", ("format_version: 2\n" + files).encode())


    # fuzz_tensor_chunk: a selector byte (even: GradientChunk, odd: WeightChunk; also the slicing seed),
    # then one message.
    t = "fuzz_tensor_chunk"
    write(t, "gradient_first_chunk", bytes([2]) + chunk(0, fp32(0.5, -1.0, 2.0, 0.0)))
    write(t, "gradient_later_chunk", bytes([4]) + chunk(2, bf16(1.0, 2.0), BF16, header=False))
    weight = (field_varint(1, 12) + field_varint(2, 256) + field_bytes(3, fp32(1.0, 2.0, 3.0)) +
              field_varint(4, 1000) + field_varint(5, FP32) + field_varint(6, 1) + field_varint(8, 3))
    write(t, "weight_chunk", bytes([1]) + weight)
    write(t, "weight_not_newer", bytes([3]) + field_varint(1, 12) + field_varint(7, 1))
    # data before the other fields, twice (the last wins), and an unknown field and group.
    write(t, "weight_reordered", bytes([5]) + field_bytes(3, fp32(9.0)) + field_varint(1, 5) +
          field_varint(9, 77) + varint(9 << 3 | 3) + field_varint(1, 1) + varint(9 << 3 | 4) +
          field_bytes(3, fp32(1.0, 2.0)))


if __name__ == "__main__":
    main()
