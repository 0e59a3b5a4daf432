"""InternVL's image preprocessing as transformers runs it: InternVLProcessor (whose image
defaults set crop_to_patches=True) calling the slow `GotOcr2ImageProcessor`, a port written
from `image_processing_got_ocr2.py` (get_all_supported_aspect_ratios,
get_optimal_tiled_canvas, crop_image_to_patches, preprocess) and `processing_internvl.py`
as they stand at huggingface/transformers commit 0b97ca8d (numpy + Pillow, no transformers
install): load (EXIF transpose, convert to RGB), the tile arrangement closest to the image's
aspect ratio, Pillow BICUBIC resize to it, tiles cut row by row, the thumbnail (the whole
image resized to one tile) when there is more than one tile, each tile resized to the tile
size again (a no-op), rescale 1/255, normalise, channels first.

usage: internvl_reference.py --config preprocessor_config.json OURS.npy IMAGE...
       internvl_reference.py --video video_preprocessor_config.json OURS.npy FRAME...
With --video: InternVLVideoProcessor's frames, each resized to one tile (no tiling, no
thumbnail), normalised with that file's mean and std; its resize is torchvision's, this
port's Pillow's (as the image port's).
Compares the reference tiles with OURS.npy (float32 [tiles, 3 * size * size]) and prints
one JSON line: tiles per image, the arrangement (columns, rows) per image, and
max / mean / 99.9th-percentile |diff|.

--config: the checkpoint's preprocessor_config.json, read as the processor's constructor
reads it (size, min_patches, max_patches, image_mean, image_std; crop_to_patches is the
processor's True whatever the file says).
"""
import json
import os
import sys

import numpy as np
from PIL import Image

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from qwen2vl_reference import diff_stats, load_rgb  # noqa: E402

SIZE = 448
MIN_PATCHES = 1
MAX_PATCHES = 12
MEAN = np.array([0.485, 0.456, 0.406])
STD = np.array([0.229, 0.224, 0.225])


def configure(path):
    global SIZE, MIN_PATCHES, MAX_PATCHES, MEAN, STD
    with open(path) as f:
        cfg = json.load(f)
    size = cfg.get("size", {"height": SIZE, "width": SIZE})
    assert size["height"] == size["width"], "square tiles"
    SIZE = size["height"]
    MIN_PATCHES = cfg.get("min_patches", MIN_PATCHES)
    MAX_PATCHES = cfg.get("max_patches", MAX_PATCHES)
    MEAN = np.array(cfg.get("image_mean", MEAN))
    STD = np.array(cfg.get("image_std", STD))


def supported_aspect_ratios(min_tiles, max_tiles):
    ratios = []
    for width in range(1, max_tiles + 1):
        for height in range(1, max_tiles + 1):
            if min_tiles <= width * height <= max_tiles:
                ratios.append((width, height))
    return sorted(ratios, key=lambda x: x[0] * x[1])


def optimal_tiled_canvas(height, width, tile, min_tiles, max_tiles):
    aspect = width / height
    area = width * height
    best_diff = float("inf")
    best = (1, 1)
    for grid in supported_aspect_ratios(min_tiles, max_tiles):
        diff = abs(aspect - grid[0] / grid[1])
        if diff < best_diff:
            best_diff = diff
            best = grid
        elif diff == best_diff:
            if area > 0.5 * tile * tile * grid[0] * grid[1]:
                best = grid
    return best


def resize(array, height, width):
    """image_transforms.resize of a uint8 channels-last array: through PIL and back."""
    return np.array(Image.fromarray(array.astype(np.uint8)).resize((width, height), resample=Image.BICUBIC))


def preprocess(path):
    image = np.array(load_rgb(path))  # convert_to_rgb, to_numpy_array (channels last)
    height, width = image.shape[:2]
    cols, rows = optimal_tiled_canvas(height, width, SIZE, MIN_PATCHES, MAX_PATCHES)
    tiles = []
    if MAX_PATCHES > 1:  # crop_to_patches and max_patches > 1
        canvas = resize(image, SIZE * rows, SIZE * cols)
        for i in range(cols * rows):
            c, r = i % cols, i // cols
            tiles.append(canvas[r * SIZE : (r + 1) * SIZE, c * SIZE : (c + 1) * SIZE])
        if len(tiles) != 1:
            tiles.append(resize(image, SIZE, SIZE))  # the thumbnail
    else:
        tiles.append(image)
    out = []
    for t in tiles:
        t = resize(t, SIZE, SIZE)  # do_resize: the tile size again
        t = (t.astype(np.float64) * (1 / 255)).astype(np.float32)  # rescale
        t = (t - MEAN.astype(np.float32)) / STD.astype(np.float32)  # normalize
        out.append(t.transpose(2, 0, 1).reshape(-1))  # channels first
    return np.array(out), [cols, rows]


def video(config_path, ours_path, frames):
    configure(config_path)
    tiles = []
    for path in frames:
        t = resize(np.array(load_rgb(path)), SIZE, SIZE)
        t = (t.astype(np.float64) * (1 / 255)).astype(np.float32)
        t = (t - MEAN.astype(np.float32)) / STD.astype(np.float32)
        tiles.append(t.transpose(2, 0, 1).reshape(-1))
    print(json.dumps({"tiles": [len(tiles)], **diff_stats(np.load(ours_path), np.array(tiles))}))


def main():
    args = sys.argv[1:]
    if args[0] == "--video":
        video(args[1], args[2], args[3:])
        return
    if args[0] == "--config":
        configure(args[1])
        args = args[2:]
    ours = np.load(args[0])
    refs, counts, canvases = [], [], []
    for path in args[1:]:
        p, canvas = preprocess(path)
        refs.append(p)
        counts.append(int(p.shape[0]))
        canvases.append(canvas)
    ref = np.concatenate(refs)
    print(json.dumps({"tiles": counts, "canvases": canvases, **diff_stats(ours, ref)}))


if __name__ == "__main__":
    main()
