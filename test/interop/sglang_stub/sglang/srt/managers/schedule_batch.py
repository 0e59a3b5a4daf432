"""SGLang's Modality enum, with the same members and auto() values."""
from enum import Enum, auto


class Modality(Enum):
    IMAGE = auto()
    MULTI_IMAGES = auto()
    VIDEO = auto()
    AUDIO = auto()
