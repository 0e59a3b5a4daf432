"""The receiving half of SGLang's encoder wire, as its scheduler/tokenizer runs it.

A port, written in this repository from SGLang's
`python/sglang/srt/disaggregation/encoder/receiver.py` (first at sgl-project/sglang
20b5ba6e; brought up to the stricter receiver of 0b9c3848 / 1901ddec, 2026-08/09): the
EmbeddingData class that the encoder pickles (same module path, same attributes), the
per-part checks of `consume_parts` in their order (an error frame fails the request; a
part whose req_id is not this request's is dropped with a warning, so an error frame
labelled with the wrong id is never seen; the part's metadata types are checked; a part
that arrives twice fails the request), and the aggregation of parts
(`MultiModalEmbeddingData`) into one embedding per modality plus its grid metadata and,
for video parts, the video meta attributes later receivers keep (`video_timestamps`,
`second_per_grid_ts`: per part a list, one entry per video, chained across parts into
`get_mm_extra_meta()`, as SGLang's `_GENERAL_VIDEO_META_ATTRS`). The
Modality enum is the stub's (SGLANG_MODALITY_ENUM: current or legacy). torch is the numpy
stub next to this package; nothing else is stubbed.
"""
import itertools
from collections import defaultdict

import torch
from sglang.srt.managers.schedule_batch import Modality
from sglang.srt.utils.common import safe_pickle_loads


class EmbeddingData:
    def __init__(self, req_id, num_parts, part_idx, grid_dim, modality, embedding=None,
                 embedding_shape=None, error_msg=None, error_code=None, **kwargs):
        self.req_id = req_id
        self.num_parts = num_parts
        self.part_idx = part_idx
        self.grid_dim = grid_dim
        self.modality = modality
        self.embedding = embedding
        self.send_time = None
        self.dtype = embedding.dtype if embedding is not None else None
        self.shape = embedding_shape if embedding_shape is not None else (
            list(embedding.shape) if embedding is not None else None)
        self._mr_ptr = None
        self.error_msg = error_msg
        self.error_code = int(error_code) if error_code is not None else None
        for key, value in kwargs.items():
            setattr(self, key, value)

    def get_grid(self):
        return self.grid_dim


# Modality -> (grid attribute, whether the grid is flattened), as in SGLang.
GRID_ATTRS = {
    Modality.IMAGE: ("img_grid_thw", False),
    Modality.VIDEO: ("video_grid_thw", False),
    Modality.AUDIO: ("audio_feature_lens", True),
}


# Per-part video metadata, chained as lists across parts (SGLang's _GENERAL_VIDEO_META_ATTRS).
VIDEO_META_ATTRS = ("video_timestamps", "second_per_grid_ts")


def extract_original_req_id(part_req_id):
    if "_local_part_" in part_req_id:
        return part_req_id.rsplit("_local_part_", 1)[0]
    return part_req_id


def cat_grid(dims, flatten_items=False):
    valid = []
    for g in dims:
        if g is None:
            continue
        t = torch.as_tensor(g)
        if flatten_items:
            t = t.flatten()
        elif t.ndim == 0:
            t = t.unsqueeze(0)
        valid.append(t)
    return torch.cat(valid, dim=0) if valid else None


class MultiModalEmbeddingData:
    """Parts of one request, filled as they arrive (any order), ready when all have."""

    def __init__(self, first):
        n = first.num_parts
        self.req_id = first.req_id
        self.num_parts = n
        self.ready_list = [False] * n
        self.modality_list = [None] * n
        self.embedding_list = [None] * n
        self.img_grid_thw = [None] * n
        self.video_grid_thw = [None] * n
        self.audio_feature_lens = [None] * n
        for attr in VIDEO_META_ATTRS:
            setattr(self, attr, [None] * n)
        self.dtype = first.dtype
        self.add(first)

    def add(self, part):
        if part.req_id != self.req_id:
            return False  # SGLang logs "Dropping embedding data with mismatched req_id"
        assert not self.ready_list[part.part_idx], f"part {part.part_idx} arrived twice"
        pid = part.part_idx
        self.ready_list[pid] = True
        self.modality_list[pid] = part.modality
        self.embedding_list[pid] = part.embedding
        spec = GRID_ATTRS.get(part.modality)
        if spec is None:
            raise ValueError(f"Invalid modality: {part.modality}")
        attr, flatten = spec
        grid = part.get_grid()
        getattr(self, attr)[pid] = grid.flatten() if flatten else grid
        if part.modality == Modality.VIDEO:
            for meta in VIDEO_META_ATTRS:
                val = getattr(part, meta, None)
                if val is not None:
                    getattr(self, meta)[pid] = val
        return True

    @property
    def ready(self):
        return sum(self.ready_list) == self.num_parts

    def get_embedding(self):
        groups = defaultdict(list)
        for i, e in enumerate(self.embedding_list):
            if e is not None:
                groups[self.modality_list[i]].append(e)
        return {mod: torch.cat(ts, dim=0) for mod, ts in groups.items()}

    def get_mm_extra_meta(self):
        kwargs = {
            "img_grid_thw": cat_grid(self.img_grid_thw),
            "video_grid_thw": cat_grid(self.video_grid_thw),
            "audio_feature_lens": cat_grid(self.audio_feature_lens, flatten_items=True),
        }
        for attr in VIDEO_META_ATTRS:
            valid = [a for a in getattr(self, attr) if a is not None]
            if valid:
                kwargs[attr] = list(itertools.chain(*valid))
        return kwargs


class WaitingRequest:
    """One rid waiting for its parts on a PULL socket (SGLang's WaitingMMRequest)."""

    def __init__(self, rid):
        self.rid = rid
        self.data = None
        self.status = "pending"
        self.error_msg = None
        self.error_code = None
        self.dropped = 0

    def consume_parts(self, parts):
        if self.status != "pending":
            return
        try:
            obj = safe_pickle_loads(parts[0])
            if getattr(obj, "error_msg", None) is not None:
                self.status, self.error_msg, self.error_code = "fail", obj.error_msg, obj.error_code
                return
            if extract_original_req_id(obj.req_id) != self.rid:
                self.dropped += 1  # a stale payload (port reuse): dropped, as SGLang does
                return
            obj.req_id = self.rid
            check_part_types(obj)
            obj.embedding = torch.frombuffer(parts[1], dtype=obj.dtype).reshape(obj.shape).clone()
            if self.data is None:
                self.data = MultiModalEmbeddingData(obj)
            else:
                self.data.add(obj)
        except Exception as e:  # a malformed message fails this request only
            self.status, self.error_msg = "fail", f"Failed to decode embedding message: {e!r}"
            return
        if self.data.ready:
            self.status = "success"


def check_part_types(obj):
    """The metadata types the stricter receiver relies on, checked before use."""
    if not isinstance(obj.modality, Modality):
        raise TypeError(f"modality is {type(obj.modality).__name__}, not Modality")
    for name in ("num_parts", "part_idx"):
        value = getattr(obj, name)
        if not isinstance(value, int) or isinstance(value, bool):
            raise TypeError(f"{name} is {type(value).__name__}, not int")
    if not 0 <= obj.part_idx < obj.num_parts:
        raise ValueError(f"part_idx {obj.part_idx} out of range for num_parts {obj.num_parts}")
    if not isinstance(obj.dtype, torch.dtype):
        raise TypeError(f"dtype is {type(obj.dtype).__name__}, not torch.dtype")
    if not isinstance(obj.shape, list) or not all(isinstance(d, int) for d in obj.shape):
        raise TypeError("shape is not a list of int")
