"""vLLM's mm_hash of one image part, built here independently of the service (Python, with
Debian's `b3sum` for blake3 and hashlib for sha256/sha512).

The byte stream is the one vLLM's `MultiModalHasher.hash_kwargs(image=..., model_id=...)`
feeds its hasher (vllm/multimodal/hasher.py with the MediaWithBytes item of
vllm/multimodal/media/image.py, as read at vllm-project/vllm 2f41c894): keys in sorted
order, each key's name, then its value. For an image PIL opens as RGB: b"image", then the
item: b"image" + the file's bytes. For a converted one (RGBA, P, L, ...): b"image", then
b"image.io_config.image_mode" b"RGB", b"image.io_config.rgba_background_color.<i>" +
int64 little-endian 255 for i in 0..2, b"image.data" + the bytes. Then b"model_id" + the
model string. Integers are serialised as numpy does (np.array(255).tobytes(): int64 LE).

usage: vllm_mm_hash.py FILE MODEL_ID ALGORITHM converted|plain
"""
import hashlib
import struct
import subprocess
import sys


def stream(data, model_id, converted):
    out = [b"image"]
    if converted:
        out += [b"image.io_config.image_mode", b"RGB"]
        for i in range(3):
            out += [f"image.io_config.rgba_background_color.{i}".encode(), struct.pack("<q", 255)]
        out += [b"image.data", data]
    else:
        out += [b"image", data]
    out += [b"model_id", model_id.encode("utf-8")]
    return b"".join(out)


def main():
    path, model_id, algorithm, mode = sys.argv[1:5]
    with open(path, "rb") as f:
        data = f.read()
    raw = stream(data, model_id, mode == "converted")
    if algorithm == "blake3":
        digest = subprocess.run(["b3sum", "--no-names"], input=raw, capture_output=True, check=True)
        print(digest.stdout.decode().strip())
    else:
        print(hashlib.new(algorithm, raw).hexdigest())


if __name__ == "__main__":
    main()
