"""An SGLang-side receiver for the interop tests: binds a ZMQ PULL socket (as a scheduler
rank or the tokenizer does), receives and reassembles one request's parts with SGLang's
receiver logic (sglang_stub/), and prints one JSON line describing what it got.

usage: receive.py --rid RID [--expect-npy FILE] [--timeout S]
SGLANG_MODALITY_ENUM=legacy reads the Modality enum of SGLang releases before 2026-04.
Prints {"port": N} first (the port it bound), then the result.
With --expect-npy, the reassembled embedding is compared with the float32 reference
converted independently (numpy): exactly for float32 and float16, bit for bit after
round-to-nearest-even for bfloat16.
"""
import argparse
import json
import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "sglang_stub"))

import numpy as np  # noqa: E402
import torch  # noqa: E402  (the stub)
import zmq  # noqa: E402
from sglang.srt.disaggregation.encoder.receiver import WaitingRequest  # noqa: E402


def to_bfloat16_bits(values):
    bits = values.astype(np.float32).view(np.uint32).astype(np.uint64)
    rounded = (bits + 0x7FFF + ((bits >> 16) & 1)) >> 16
    return rounded.astype(np.uint16)


def compare(emb, expected):
    if emb.dtype is torch.bfloat16:
        want = to_bfloat16_bits(expected)
    elif emb.dtype is torch.float16:
        want = expected.astype(np.float16)
    else:
        want = expected.astype(np.float32)
    got = emb.array
    if got.shape != want.shape:
        return False, f"shape {got.shape} != {want.shape}"
    diff = int(np.count_nonzero(got.view(np.uint8) != want.view(np.uint8)))
    return diff == 0, f"{diff} differing bytes"


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--rid", required=True)
    ap.add_argument("--expect-npy")
    ap.add_argument("--timeout", type=float, default=60)
    args = ap.parse_args()

    ctx = zmq.Context()
    sock = ctx.socket(zmq.PULL)
    port = sock.bind_to_random_port("tcp://127.0.0.1")
    print(json.dumps({"port": port}), flush=True)

    req = WaitingRequest(args.rid)
    poller = zmq.Poller()
    poller.register(sock, zmq.POLLIN)
    messages = 0
    while req.status == "pending":
        if not poller.poll(args.timeout * 1000):
            req.status = "timeout"
            break
        req.consume_parts(sock.recv_multipart())
        messages += 1

    out = {"status": req.status, "messages": messages, "dropped": req.dropped}
    if req.status == "fail":
        out.update(error_msg=req.error_msg, error_code=req.error_code)
    if req.status == "success":
        data = req.data
        embeddings = data.get_embedding()
        out["modalities"] = sorted(m.name for m in embeddings)
        out["dtype"] = data.dtype.name
        out["shapes"] = {m.name: list(e.shape) for m, e in embeddings.items()}
        out["grids"] = {k: (v.tolist() if hasattr(v, "tolist") else v)
                        for k, v in data.get_mm_extra_meta().items()}
        if args.expect_npy:
            expected = np.load(args.expect_npy)
            (emb,) = embeddings.values()
            ok, detail = compare(emb, expected)
            out["matches_reference"] = ok
            out["match_detail"] = detail
    print(json.dumps(out), flush=True)
    sock.close(linger=0)
    ctx.term()


if __name__ == "__main__":
    main()
