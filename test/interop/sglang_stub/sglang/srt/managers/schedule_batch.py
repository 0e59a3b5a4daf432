"""SGLang's Modality enum, with the same members and auto() values.

SGLANG_MODALITY_ENUM picks the release: "current" (the default) is the enum since
sgl-project/sglang#21899 (2026-04-03), which removed MULTI_IMAGES: IMAGE=1, VIDEO=2,
AUDIO=3. "legacy" is the enum before it: IMAGE=1, MULTI_IMAGES=2, VIDEO=3, AUDIO=4.
"""
import os
from enum import Enum, auto

if os.environ.get("SGLANG_MODALITY_ENUM", "current") == "legacy":

    class Modality(Enum):
        IMAGE = auto()
        MULTI_IMAGES = auto()
        VIDEO = auto()
        AUDIO = auto()

else:

    class Modality(Enum):
        IMAGE = auto()
        VIDEO = auto()
        AUDIO = auto()
