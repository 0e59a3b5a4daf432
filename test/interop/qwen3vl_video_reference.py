"""Qwen3-VL's video preprocessing as transformers' `Qwen3VLVideoProcessor` does it, for frames
already sampled (the receivers sample; this encoder takes the frames it is sent): a port
written from `video_processing_qwen3_vl.py` as it stands at huggingface/transformers commit
04e7e5e6 (smart_resize with the frame count, the processor's `size` bounds and
`cap_pixels_per_frame`; patchify with the last frame repeated to a whole temporal patch),
with numpy and Pillow: no transformers or torch install. The resize is Pillow's BICUBIC, as
in test/interop/qwen2vl_reference.py; the video processor's own is torchvision's (the
grids are the same; see docs/models.md).

usage: qwen3vl_video_reference.py VIDEO_CONFIG OURS.npy FRAME...
VIDEO_CONFIG: the checkpoint's video_preprocessor_config.json. Prints one JSON line: the
grid, the rows of each side, and max / mean / 99.9th-percentile |diff| when the shapes agree;
or {"error": ...} where the processor raises.
"""
import json
import math
import os
import sys

import numpy as np
from PIL import Image

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from qwen2vl_reference import diff_stats, load_rgb  # noqa: E402


def round_half_even(x):
    return round(x)  # Python's round() is half to even, as transformers relies on


def smart_resize(num_frames, height, width, temporal_factor, factor, min_pixels, max_pixels):
    if num_frames < temporal_factor:
        raise ValueError(f"t:{num_frames} must be larger than temporal_factor:{temporal_factor}")
    if height < factor or width < factor:
        scale = max(factor / height, factor / width)
        height = int(height * scale)
        width = int(width * scale)
    if max(height, width) / min(height, width) > 200:
        raise ValueError("absolute aspect ratio must be smaller than 200")
    h_bar = round_half_even(height / factor) * factor
    w_bar = round_half_even(width / factor) * factor
    t_bar = round_half_even(num_frames / temporal_factor) * temporal_factor
    if t_bar * h_bar * w_bar > max_pixels:
        beta = math.sqrt((num_frames * height * width) / max_pixels)
        h_bar = max(factor, math.floor(height / beta / factor) * factor)
        w_bar = max(factor, math.floor(width / beta / factor) * factor)
    elif t_bar * h_bar * w_bar < min_pixels:
        beta = math.sqrt(min_pixels / (num_frames * height * width))
        h_bar = math.ceil(height * beta / factor) * factor
        w_bar = math.ceil(width * beta / factor) * factor
    return h_bar, w_bar


def main():
    config_path, ours_path, *frames = sys.argv[1:]
    with open(config_path) as f:
        cfg = json.load(f)
    patch = cfg.get("patch_size", 16)
    merge = cfg.get("merge_size", 2)
    temporal = cfg.get("temporal_patch_size", 2)
    mean = np.array(cfg["image_mean"], dtype=np.float32)
    std = np.array(cfg["image_std"], dtype=np.float32)
    size = cfg["size"]
    factor = patch * merge
    images = [np.array(load_rgb(p)) for p in frames]
    n = len(images)
    height, width = images[0].shape[:2]
    max_pixels = size["longest_edge"]
    if cfg.get("cap_pixels_per_frame"):
        per_frame = max(min(768 * factor * factor, size["longest_edge"] // n), int(size["shortest_edge"] * 1.05))
        max_pixels = per_frame * n
    try:
        h, w = smart_resize(n, height, width, temporal, factor, size["shortest_edge"], max_pixels)
    except ValueError as e:
        print(json.dumps({"error": str(e)}))
        return
    video = []
    for image in images:
        image = np.array(Image.fromarray(image).resize((w, h), resample=Image.BICUBIC))
        image = (image.astype(np.float64) * (1 / 255)).astype(np.float32)
        image = (image - mean) / std
        video.append(image.transpose(2, 0, 1))
    video = np.array(video)  # (T, C, H, W)
    pad = -len(video) % temporal
    if pad:
        video = np.concatenate([video, np.repeat(video[-1:], pad, axis=0)])
    c = video.shape[1]
    gt, gh, gw = video.shape[0] // temporal, h // patch, w // patch
    patches = video.reshape(gt, temporal, c, gh // merge, merge, patch, gw // merge, merge, patch)
    patches = patches.transpose(0, 3, 6, 4, 7, 2, 1, 5, 8)
    ref = patches.reshape(gt * gh * gw, c * temporal * patch * patch)
    print(json.dumps({"grid": [gt, gh, gw], **diff_stats(np.load(ours_path), ref)}))


if __name__ == "__main__":
    main()
