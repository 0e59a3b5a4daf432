"""Qwen2-VL's image preprocessing as transformers' slow `Qwen2VLImageProcessor` does it,
a port written from `image_processing_qwen2_vl.py` and `image_transforms.py` as they stand
at huggingface/transformers commit cb0fc56f (numpy + Pillow, no transformers install): load (EXIF transpose, convert to RGB), smart_resize, Pillow
BICUBIC resize, rescale 1/255, normalise with the CLIP mean/std, then the patch layout
(temporal duplication, 2x2 merge order, channel-major 1176-wide rows).

usage: qwen2vl_reference.py [--config preprocessor_config.json] OURS.npy MIN_PIXELS MAX_PIXELS IMAGE...
Compares the reference patches with OURS.npy (float32 [rows, patch dim]) and prints one
JSON line: grid per image, and max / mean / 99.9th-percentile |diff|.

--config: a checkpoint's preprocessor_config.json, read as the processor's constructor
reads it (patch_size, merge_size, temporal_patch_size, image_mean, image_std): Qwen3-VL's
checkpoints configure this same processor with 16-pixel patches and mean/std 0.5 (the
smart_resize factor is patch_size * merge_size, as in the processor). Without it:
Qwen2-VL's values.

Deliberate differences, documented in docs/encoding.md: an image with a side under 28 px is
refused by the reference and upsized by us (those cases are not compared), and 16-bit
images are scaled to 8 bits (v >> 8) rather than clipped.
"""
import json
import math
import sys

import numpy as np
from PIL import Image, ImageOps

PATCH = 14
MERGE = 2
TEMPORAL = 2
MEAN = np.array([0.48145466, 0.4578275, 0.40821073])
STD = np.array([0.26862954, 0.26130258, 0.27577711])


def configure(path):
    """The processor's values from a preprocessor_config.json (those it states)."""
    global PATCH, MERGE, TEMPORAL, MEAN, STD
    with open(path) as f:
        cfg = json.load(f)
    PATCH = cfg.get("patch_size", PATCH)
    MERGE = cfg.get("merge_size", MERGE)
    TEMPORAL = cfg.get("temporal_patch_size", TEMPORAL)
    MEAN = np.array(cfg.get("image_mean", MEAN))
    STD = np.array(cfg.get("image_std", STD))


def smart_resize(height, width, min_pixels, max_pixels, factor=None):
    factor = factor or PATCH * MERGE
    if height < factor or width < factor:
        raise ValueError(f"height:{height} or width:{width} must be larger than factor:{factor}")
    if max(height, width) / min(height, width) > 200:
        raise ValueError("absolute aspect ratio must be smaller than 200")
    h_bar = round(height / factor) * factor
    w_bar = round(width / factor) * factor
    if h_bar * w_bar > max_pixels:
        beta = math.sqrt((height * width) / max_pixels)
        h_bar = max(factor, math.floor(height / beta / factor) * factor)
        w_bar = max(factor, math.floor(width / beta / factor) * factor)
    elif h_bar * w_bar < min_pixels:
        beta = math.sqrt(min_pixels / (height * width))
        h_bar = math.ceil(height * beta / factor) * factor
        w_bar = math.ceil(width * beta / factor) * factor
    return h_bar, w_bar


def load_rgb(path):
    image = ImageOps.exif_transpose(Image.open(path))
    if image.mode in ("I;16", "I;16B", "I;16L", "I"):
        image = Image.fromarray((np.asarray(image, dtype=np.uint32) >> 8).astype(np.uint8))
    return image.convert("RGB")  # alpha ignored: the stored colour is kept


def to_pil(array):
    """image_transforms.to_pil_image for a uint8 channels-last array."""
    return Image.fromarray(array.astype(np.uint8))


def preprocess(path, min_pixels, max_pixels):
    """Qwen2VLImageProcessor._preprocess + preprocess, step for step, with its dtypes and copies:
    every step below is one transformers takes, so the timing in bench/encode-cost is theirs too."""
    image = load_rgb(path)  # convert_to_rgb
    image = np.array(image)  # to_numpy_array (channels last)
    height, width = image.shape[:2]
    h, w = smart_resize(height, width, min_pixels, max_pixels)
    # image_transforms.resize: through PIL and back, even at the same size.
    image = np.array(to_pil(image).resize((w, h), resample=Image.BICUBIC))
    # rescale: upcast to float64, scale, downcast to float32.
    image = (image.astype(np.float64) * (1 / 255)).astype(np.float32)
    # normalize: in the image's dtype (float32), channels last.
    image = (image - MEAN.astype(np.float32)) / STD.astype(np.float32)
    image = image.transpose(2, 0, 1)  # to_channel_dimension_format(FIRST)
    patches = np.array([image])  # one image: (1, C, H, W)
    patches = np.tile(patches, (TEMPORAL, 1, 1, 1))  # a still image: the frame twice
    c = patches.shape[1]
    gt, gh, gw = patches.shape[0] // TEMPORAL, h // PATCH, w // PATCH
    patches = patches.reshape(gt, TEMPORAL, c, gh // MERGE, MERGE, PATCH, gw // MERGE, MERGE, PATCH)
    patches = patches.transpose(0, 3, 6, 4, 7, 2, 1, 5, 8)
    flat = patches.reshape(gt * gh * gw, c * TEMPORAL * PATCH * PATCH)
    rows = []
    rows.extend(flat)  # preprocess(): pixel_values.extend(patches), then np.array
    return np.array(rows), [gt, gh, gw]


def diff_stats(ours, ref):
    """Both sides' row counts and, when the shapes agree, max / mean / 99.9th-percentile |diff|."""
    out = {"rows": [int(ours.shape[0]), int(ref.shape[0])]}
    if ours.shape == ref.shape:
        d = np.abs(ours.astype(np.float64) - ref.astype(np.float64))
        out.update(max=float(d.max()), mean=float(d.mean()), p999=float(np.quantile(d, 0.999)))
    return out


def main():
    args = sys.argv[1:]
    if args[0] == "--config":
        configure(args[1])
        args = args[2:]
    ours = np.load(args[0])
    min_pixels, max_pixels = int(args[1]), int(args[2])
    refs, grids = [], []
    for path in args[3:]:
        p, g = preprocess(path, min_pixels, max_pixels)
        refs.append(p)
        grids.append(g)
    ref = np.concatenate(refs)
    print(json.dumps({"grids": grids, **diff_stats(ours, ref)}))


if __name__ == "__main__":
    main()
