"""The slice of torch that SGLang's encoder receiver touches, over numpy (no torch in CI).

Only what unpickling an EmbeddingData and reassembling its parts needs: the dtypes (as
module attributes, so the pickle's GLOBAL torch.bfloat16 resolves), tensor/as_tensor,
frombuffer, cat, and the Tensor methods the receiver calls. bfloat16 has no numpy type:
its tensors keep the raw uint16 bits and convert to float32 on request.
"""
import numpy as np


class dtype:
    def __init__(self, name, np_dtype, itemsize):
        self.name = name
        self.np_dtype = np_dtype
        self.itemsize = itemsize

    def __repr__(self):
        return f"torch.{self.name}"

    def __reduce__(self):
        return self.name


float32 = dtype("float32", np.float32, 4)
float16 = dtype("float16", np.float16, 2)
bfloat16 = dtype("bfloat16", np.uint16, 2)
int64 = dtype("int64", np.int64, 8)


class Tensor:
    def __init__(self, array, dtype_):
        self.array = array
        self.dtype = dtype_

    @property
    def ndim(self):
        return self.array.ndim

    @property
    def shape(self):
        return tuple(self.array.shape)

    @property
    def nbytes(self):
        return self.array.nbytes

    def reshape(self, shape):
        return Tensor(self.array.reshape(shape), self.dtype)

    def clone(self):
        return Tensor(self.array.copy(), self.dtype)

    def flatten(self):
        return Tensor(self.array.reshape(-1), self.dtype)

    def unsqueeze(self, dim):
        return Tensor(np.expand_dims(self.array, dim), self.dtype)

    def tolist(self):
        return self.array.tolist()

    def float_values(self):
        """float32 values (bfloat16 bits widened exactly)."""
        if self.dtype is bfloat16:
            return (self.array.astype(np.uint32) << 16).view(np.float32)
        return self.array.astype(np.float32)


def tensor(data):
    return Tensor(np.asarray(data, dtype=np.int64), int64)


def as_tensor(data):
    return data if isinstance(data, Tensor) else tensor(data)


def frombuffer(buffer, dtype):
    return Tensor(np.frombuffer(buffer, dtype=dtype.np_dtype), dtype)


def cat(tensors, dim=0):
    return Tensor(np.concatenate([t.array for t in tensors], axis=dim), tensors[0].dtype)
